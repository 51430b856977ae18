package tmpl

import (
	"slices"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// A Slack text's data shows as written: every output escapes Slack's control characters
// (& < >), so data (a comment, a name, anything a send carries from its users) cannot
// post a disguised link (<https://evil|https://bank.example>), a mention (<@U…>,
// <!here>) or an entity from the tenant's bot, while the author's own mrkdwn (a link
// around an output, *bold*) stays. raw is the author's way out; slack_escape written
// by hand is not applied twice; an undefined variable is still an error (strict mode);
// numbers keep their type. Before, a Slack text was rendered as an SMS's: unescaped.
func TestSlackTextEscapesData(t *testing.T) {
	t.Parallel()
	vars := map[string]any{
		"comment": "<https://evil.example/login|https://bank.example/reset>",
		"who":     "<@U024BE7LH> & <!here>",
		"url":     "https://app.example/i?a=1&b=2",
		"n":       3,
		"ok":      true,
		"amp":     "&amp;",
	}
	for _, tc := range []struct{ src, want string }{
		{"{{ comment }}", "&lt;https://evil.example/login|https://bank.example/reset&gt;"},
		{"*{{ who }}* said", "*&lt;@U024BE7LH&gt; &amp; &lt;!here&gt;* said"},
		{"<{{ url }}|View>", "<https://app.example/i?a=1&amp;b=2|View>"},
		{"{{ who | upcase }}", "&lt;@U024BE7LH&gt; &amp; &lt;!HERE&gt;"},
		{"{{ amp }}", "&amp;amp;"},
		{"{{ n | plus: 1 }} {{ ok }}", "4 true"},
		{"{{ comment | slack_escape }}", "&lt;https://evil.example/login|https://bank.example/reset&gt;"},
		{"{{ comment | raw }}", "<https://evil.example/login|https://bank.example/reset>"},
		{"{% if n > 1 %}{{ who }}{% endif %}", "&lt;@U024BE7LH&gt; &amp; &lt;!here&gt;"},
		{"{% for c in (1..2) %}{{ comment | truncate: 8 }}{% endfor %}", "&lt;http...&lt;http..."},
	} {
		c, err := newEngine().parse("slack.text", tc.src, inbox.EscapeSlack)
		if err != nil {
			t.Fatalf("parse %q: %v", tc.src, err)
		}
		got, err := c.render("slack.text", vars)
		if err != nil || got != tc.want {
			t.Errorf("%s\n got  %q, %v\n want %q", tc.src, got, err, tc.want)
		}
	}
	c, err := newEngine().parse("slack.text", "hi {{ nobody }}", inbox.EscapeSlack)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.render("slack.text", vars); err == nil || strings.Contains(err.Error(), "slack_escape") {
		t.Errorf("an undefined variable: %v (an error, showing the output as written)", err)
	}
	// Plain text parts (an SMS) are not escaped.
	c, err = newEngine().parse("sms.text", "{{ who }}", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.render("sms.text", vars); err != nil || got != "<@U024BE7LH> & <!here>" {
		t.Errorf("sms: %q, %v", got, err)
	}
}

// Every output of an escaping part is escaped wherever it stands: inside an if, an
// elsif, an else, an unless, a case, a loop, a capture, and blocks nested in them. An if
// or an unless keeps its own copy of its block when Liquid compiles it, so outputs in
// their bodies were left as parsed: an email's html showed data as HTML there (and a
// Slack text as mrkdwn).
func TestEscapingReachesEveryBlock(t *testing.T) {
	t.Parallel()
	escs := inbox.Escapings()
	if !slices.Contains(escs, inbox.EscapeHTML) || !slices.Contains(escs, inbox.EscapeSlack) {
		t.Fatalf("escapings %v", escs)
	}
	for _, esc := range escs {
		if c, err := newEngine().parse("part", "{{ x | raw }}", esc); err != nil {
			t.Fatal(err)
		} else if got, err := c.render("part", map[string]any{"x": "<b>"}); err != nil || got != "<b>" {
			t.Errorf("%s: raw: %q, %v", esc.Filter, got, err)
		}
		tc := struct {
			esc  *inbox.Escaping
			want string
		}{esc, esc.Func("<b>")}
		if tc.want == "<b>" {
			t.Fatalf("%s does not escape <b>", esc.Filter)
		}
		for _, src := range []string{
			"{% if n > 1 %}{{ x }}{% endif %}",
			"{% if n > 5 %}no{% elsif n > 1 %}{{ x }}{% endif %}",
			"{% if n > 5 %}no{% else %}{{ x }}{% endif %}",
			"{% unless n > 5 %}{{ x }}{% endunless %}",
			"{% case n %}{% when 3 %}{{ x }}{% endcase %}",
			"{% for i in (1..1) %}{{ x }}{% endfor %}",
			"{% for i in (1..1) %}{% if n > 1 %}{{ x }}{% endif %}{% endfor %}",
			"{% if n > 1 %}{% for i in (1..1) %}{{ x }}{% endfor %}{% endif %}",
			"{% if n > 1 %}{% unless n > 5 %}{% if true %}{{ x }}{% endif %}{% endunless %}{% endif %}",
			"{% capture c %}{% if n > 1 %}{{ x | raw }}{% endif %}{% endcapture %}{% if n %}{{ c }}{% endif %}",
			// Written by the author, the escaping's own filter escapes once.
			"{{ x | " + esc.Filter + " }}",
			"{% if n > 1 %}{{ x |" + esc.Filter + "}}{% endif %}",
		} {
			c, err := newEngine().parse("part", src, tc.esc)
			if err != nil {
				t.Fatalf("parse %q: %v", src, err)
			}
			got, err := c.render("part", map[string]any{"x": "<b>", "n": 3})
			if err != nil || got != tc.want {
				t.Errorf("%s %s: %q, %v; want %q", tc.esc.Filter, src, got, err, tc.want)
			}
		}
	}
}
