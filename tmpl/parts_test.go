package tmpl

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
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
			if f.Escape != nil {
				who = f.Escape.Func(who)
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

// A template's channels are the union of its locales' parts at the version, whatever
// locale is rendered: a recipient whose locale has no Slack part still gets SLACK (with the
// title and body), so a recipient's channels do not depend on who else is in the send (a
// new user's finding: a de recipient got Slack only when sent together with an en one).
// A version pinned before a locale gained a part keeps the channels it had.
func TestChannelsAreTheTemplatesWhateverTheLocale(t *testing.T) {
	ctx := context.Background()
	st := newLocaleStore()
	s := New(st)
	put := func(in inbox.TemplateInput) int {
		v, err := s.Put(ctx, "t", "multi", in)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	put(inbox.TemplateInput{Locale: "en", Title: "Hi", Parts: map[string]inbox.Content{inbox.ChannelSlack: {Text: "*hi*"}}})
	v2 := put(inbox.TemplateInput{Locale: "de", Title: "Hallo", Body: "Welt"})
	for _, l := range []string{"en", "de", "de-AT", "fr"} {
		r, err := s.Render(ctx, "t", "multi", v2, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Channels, []string{inbox.ChannelInApp, inbox.ChannelSlack}) {
			t.Errorf("%s: channels %v", l, r.Channels)
		}
	}
	r, _ := s.Render(ctx, "t", "multi", v2, "de", nil)
	if _, ok := r.Parts[inbox.ChannelSlack]; ok || r.Content(inbox.ChannelSlack).Text != "Hallo\nWelt" {
		t.Errorf("de's slack content: %+v", r.Content(inbox.ChannelSlack))
	}
	v3 := put(inbox.TemplateInput{Locale: "de", Title: "Hallo", Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "s", Text: "t"}}})
	if r, _ := s.Render(ctx, "t", "multi", v3, "en", nil); !slices.Equal(r.Channels, []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelSlack}) {
		t.Errorf("v3 from en: %v", r.Channels)
	}
	if r, _ := s.Render(ctx, "t", "multi", v2, "en", nil); !slices.Equal(r.Channels, []string{inbox.ChannelInApp, inbox.ChannelSlack}) {
		t.Errorf("pinned v2 after v3: %v", r.Channels)
	}
}

// localeStore is a template store in memory keeping every PUT's content, by locale.
type localeStore struct {
	mu       sync.Mutex
	def      string
	latest   int
	versions map[string][]inbox.Template
}

func newLocaleStore() *localeStore { return &localeStore{versions: map[string][]inbox.Template{}} }

func (m *localeStore) PutTemplate(_ context.Context, _, id string, in inbox.TemplateInput) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.def == "" {
		m.def = in.Locale
	}
	m.latest++
	m.versions[in.Locale] = append(m.versions[in.Locale], inbox.Template{ID: id, Version: m.latest, Locale: in.Locale, TemplateInput: in})
	return m.latest, nil
}

func (m *localeStore) GetTemplate(context.Context, string, string, string, int) (inbox.Template, error) {
	return inbox.Template{}, errors.New("not used")
}

func (m *localeStore) GetTemplateHead(_ context.Context, _, id string) (inbox.TemplateHead, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.latest == 0 {
		return inbox.TemplateHead{}, inbox.Errorf(inbox.CodeNotFound, "unknown template %q", id)
	}
	return inbox.TemplateHead{Version: m.latest, DefaultLocale: m.def, Locales: slices.Sorted(maps.Keys(m.versions))}, nil
}

func (m *localeStore) GetTemplateLocale(_ context.Context, _, _, locale string, version int) (inbox.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range slices.Backward(m.versions[locale]) {
		if t.Version <= version {
			return t, nil
		}
	}
	return inbox.Template{}, inbox.Errorf(inbox.CodeNotFound, "no version")
}
