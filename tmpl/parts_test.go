package tmpl

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// Every registered channel's part is parsed and rendered by its fields (inbox.ChannelSpec),
// each output escaped as the field's escaping says (HTML for an email's html, Slack's
// mrkdwn for a Slack text, nothing for plain text), and a template with every part
// renders every one, in registration order.
func TestEveryRegisteredPartRenders(t *testing.T) {
	ctx := context.Background()
	st := &oneTemplateStore{}
	s := New(st)
	in := inbox.TemplateInput{Title: "{{ who }} replied", Body: "b", Parts: map[string]inbox.Content{}}
	for _, c := range inbox.PartChannels {
		spec, _ := inbox.Spec(c)
		var content inbox.Content
		for _, f := range spec.Fields {
			content.SetField(f.Name, spec.Part+"."+f.Name+" {{ who }}")
		}
		in.Parts[c] = content
	}
	if _, err := s.Put(ctx, "t", "every", in); err != nil {
		t.Fatal(err)
	}
	r, err := s.Render(ctx, "t", "every", 0, "en", inbox.JSON(`{"who": "<Ada>"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := inbox.Rendered{Title: "<Ada> replied", Body: "b", Channels: append([]string{inbox.ChannelInApp}, inbox.PartChannels...),
		Parts: map[string]inbox.Content{}}
	for _, c := range inbox.PartChannels {
		spec, _ := inbox.Spec(c)
		var content inbox.Content
		for _, f := range spec.Fields {
			who := "<Ada>"
			if f.Escape != inbox.NoEscaping {
				who = "&lt;Ada&gt;"
			}
			content.SetField(f.Name, spec.Part+"."+f.Name+" "+who)
		}
		want.Parts[c] = content
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("render\n got  %+v\n want %+v", r, want)
	}
	if got := r.Parts[inbox.ChannelSlack].Text; got != "slack.text &lt;Ada&gt;" {
		t.Errorf("slack part: %q", got)
	}
	// A part naming an unknown variable fails with the part's name (strict mode).
	bad := inbox.TemplateInput{Title: "t", Parts: map[string]inbox.Content{inbox.ChannelSlack: {Text: "{{ nope }}"}}}
	if _, err := s.Put(ctx, "t", "every", bad); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Render(ctx, "t", "every", 0, "en", nil); inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(inbox.ErrorMessage(err), "slack.text") {
		t.Errorf("unknown variable in the slack part: %v", err)
	}
	// Shape: a blank Slack text, or a part for a channel without one, is refused at PUT.
	for name, in := range map[string]inbox.TemplateInput{
		"blank slack":  {Title: "t", Parts: map[string]inbox.Content{inbox.ChannelSlack: {Text: " "}}},
		"webhook part": {Title: "t", Parts: map[string]inbox.Content{inbox.ChannelWebhook: {Text: "x"}}},
		"unknown":      {Title: "t", Parts: map[string]inbox.Content{"FAX": {Text: "x"}}},
	} {
		if err := in.Check(); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v", name, err)
		}
	}
}
