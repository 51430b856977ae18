package tmpl

import (
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

func renderPart(t *testing.T, src string, htmlPart bool, vars map[string]any) (string, error) {
	t.Helper()
	var esc *inbox.Escaping
	if htmlPart {
		esc = inbox.EscapeHTML
	}
	c, err := newEngine().parse("body", src, esc)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	return c.render("body", vars)
}

func TestEngineRenders(t *testing.T) {
	t.Parallel()
	vars := map[string]any{"user": map[string]any{"name": "Ada <3"}, "n": 3.0, "items": []any{"a", "b"}}
	for _, c := range []struct {
		src, want string
		html      bool
	}{
		{"Hi {{ user.name }}", "Hi Ada <3", false},
		{"Hi {{ user.name }}", "Hi Ada &lt;3", true},
		{"<b>{{ user.name | raw }}</b>", "<b>Ada <3</b>", true},
		{"{{ user.name | escape }}", "Ada &lt;3", true},
		{"{{ n }} items", "3 items", true},
		{"{% for i in items %}{{ i }}{% endfor %}", "ab", false},
		{"{% assign x = user.name | upcase %}{{ x }}", "ADA <3", false},
		{"{% capture c %}[{{ n }}]{% endcapture %}{{ c }}", "[3]", false},
		{"{{ missing | default: 'none' }}", "none", true},
		{"{{ items | join: ', ' }}", "a, b", false},
	} {
		got, err := renderPart(t, c.src, c.html, vars)
		if err != nil || got != c.want {
			t.Errorf("%q (html %v) = %q, %v; want %q", c.src, c.html, got, err, c.want)
		}
	}
}

func TestEngineStrictUndefined(t *testing.T) {
	t.Parallel()
	for _, html := range []bool{false, true} {
		_, err := renderPart(t, "Hi\n{{ user.nme }}", html, map[string]any{"user": map[string]any{"name": "Ada"}})
		if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "user.nme") || !strings.Contains(err.Error(), "undefined") {
			t.Errorf("html %v: err = %v; want BAD_USER_INPUT naming user.nme", html, err)
		}
		if err != nil && strings.Contains(err.Error(), "escape") {
			t.Errorf("html %v: %v shows the automatic escape", html, err)
		}
	}
}

func TestEngineRefusesIncludes(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"{% include 'x.liquid' %}", "{% if a %}{% include '/etc/passwd' %}{% endif %}"} {
		_, err := newEngine().parse("body", src, nil)
		if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "include") {
			t.Errorf("%q: err = %v; want BAD_USER_INPUT about include", src, err)
		}
	}
}

func TestEngineParseErrors(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"{% if x %}", "{{ x | }}", "{% assign = 3 %}", "{% nosuchtag %}", strings.Repeat("x", MaxPartBytes+1)} {
		if _, err := newEngine().parse("body", src, nil); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%.40q: err = %v; want BAD_USER_INPUT", src, err)
		}
	}
}

func TestEngineBudgets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, src, want string }{
		// Iterations or time, whichever runs out first (under -race on a busy machine, time).
		{"silent loops", "{% for i in (1..100000) %}{% for j in (1..100000) %}{% endfor %}{% endfor %}", "render budget exceeded"},
		{"output", "{% for i in (1..100000) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}", "output"},
		{"doubling assign", "{% assign s = 'xxxxxxxxxxxxxxxx' %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}", "value"},
		{"doubling capture", "{% assign s = 'xxxxxxxxxxxxxxxx' %}{% for i in (1..40) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}", "output"},
		{"replace blow-up", "{% assign s = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' %}{% for i in (1..10) %}{% assign s = s | replace: 'a', s %}{% endfor %}", "value"},
		{"concat doubling", "{% assign a = '1,2' | split: ',' %}{% for i in (1..40) %}{% assign a = a | concat: a %}{% endfor %}", "array"},
	} {
		start := time.Now()
		_, err := renderPart(t, c.src, false, nil)
		if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v; want BAD_USER_INPUT about %s", c.name, err, c.want)
		}
		// Ends within its budget; the slack is for a loaded machine under -race.
		if d := time.Since(start); d > 10*RenderTimeout {
			t.Errorf("%s: took %v", c.name, d)
		}
	}
}

func TestEngineIterationBudget(t *testing.T) {
	t.Parallel()
	b := &budget{deadline: time.Now().Add(time.Hour)}
	for i := 0; i < MaxIterations; i++ {
		if err := b.tick(); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
	if err := b.tick(); err == nil || !strings.Contains(err.Error(), "iterations") {
		t.Fatalf("tick past MaxIterations: %v", err)
	}
}

func TestEngineConcurrentRenders(t *testing.T) {
	t.Parallel()
	c, err := newEngine().parse("email.html", "{% for i in items %}<li>{{ i }}</li>{% endfor %}{% capture c %}{{ n }}{% endcapture %}{{ c }}", inbox.EscapeHTML)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 8)
	for i := range 8 {
		go func() {
			out, err := c.render("email.html", map[string]any{"items": []any{"<a>", i}, "n": i})
			if err != nil {
				out = err.Error()
			}
			done <- out
		}()
	}
	for range 8 {
		out := <-done
		if !strings.HasPrefix(out, "<li>&lt;a&gt;</li><li>") {
			t.Errorf("render = %q", out)
		}
	}
}
