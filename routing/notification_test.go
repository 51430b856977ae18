package routing_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// A send's channel lists name known channels only, at most 4×len(inbox.Channels) of
// them each; the error is BAD_USER_INPUT naming the list.
func TestCheckChannels(t *testing.T) {
	t.Parallel()
	tooMany := slices.Repeat([]string{email}, 4*len(inbox.Channels)+1)
	for _, c := range []struct {
		name     string
		template []string
		hint     []string
		want     string // "" ok, else part of the message
	}{
		{"none", nil, nil, ""},
		{"every channel twice", append(all, all...), all, ""},
		{"empty lists", []string{}, []string{}, ""},
		{"the limit", slices.Repeat([]string{email}, 4*len(inbox.Channels)), nil, ""},
		{"unknown in the template", []string{"FAX"}, nil, `templateChannels: unknown channel "FAX"`},
		{"lower case in the hint", nil, []string{"email"}, `channels: unknown channel "email"`},
		{"empty name", nil, []string{""}, `channels: unknown channel ""`},
		{"too many in the template", tooMany, nil, "templateChannels lists too many channels"},
		{"too many in the hint", nil, tooMany, "channels lists too many channels"},
	} {
		err := routing.CheckChannels(inbox.SendInput{TemplateChannels: c.template, Channels: c.hint})
		var ie *inbox.Error
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.As(err, &ie) || ie.Code != inbox.CodeBadUserInput || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want BAD_USER_INPUT %q", c.name, err, c.want)
		}
	}
}

// The candidates are in inbox.Channels order: in-app always, the template's and the
// hint's channels, and the webhook whenever the tenant has a URL. NeedsProfile is true
// exactly when EMAIL, PUSH or SMS is both in the template and in the hint.
func TestCandidatesAndNeedsProfile(t *testing.T) {
	t.Parallel()
	const url = "https://hooks.example.com"
	for _, c := range []struct {
		name        string
		template    []string
		hint        []string
		url         string
		want        []string
		needProfile bool
	}{
		{"no template", nil, nil, "", []string{inApp}, false},
		{"no template, a webhook", nil, nil, url, []string{inApp, webhook}, false},
		{"template out of order", []string{sms, email}, nil, "", []string{inApp, email, sms}, true},
		{"hint only", nil, []string{push}, "", []string{inApp, push}, false},
		{"template and hint disjoint", []string{email}, []string{sms}, url, []string{inApp, email, sms, webhook}, false},
		{"template and hint share push", []string{email, push}, []string{push}, "", []string{inApp, email, push}, true},
		{"hint names the webhook", nil, []string{webhook}, "", []string{inApp, webhook}, false},
		{"empty template", []string{}, nil, "", []string{inApp}, false},
		{"every channel", all, all, url, all, true},
		{"in-app and webhook only", []string{inApp, webhook}, nil, url, []string{inApp, webhook}, false},
	} {
		in := inbox.SendInput{TemplateChannels: c.template, Channels: c.hint}
		if got := routing.Candidates(in, c.url); !slices.Equal(got, c.want) {
			t.Errorf("%s: candidates %v, want %v", c.name, got, c.want)
		}
		if got := routing.NeedsProfile(in); got != c.needProfile {
			t.Errorf("%s: NeedsProfile %v", c.name, got)
		}
	}
}

// InTemplate: no template is in-app only, an empty one defines nothing, the webhook is
// in every one; InHint: no hint lets everything through, an empty one nothing.
func TestInTemplateAndHint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		list     []string
		template []string // channels InTemplate accepts with list as TemplateChannels
		hint     []string // channels InHint accepts with list as Channels
	}{
		{"nil", nil, []string{inApp, webhook}, all},
		{"empty", []string{}, []string{webhook}, nil},
		{"email", []string{email}, []string{email, webhook}, []string{email}},
		{"all", all, all, all},
	} {
		var tGot, hGot []string
		for _, ch := range all {
			if routing.InTemplate(inbox.SendInput{TemplateChannels: c.list}, ch) {
				tGot = append(tGot, ch)
			}
			if routing.InHint(inbox.SendInput{Channels: c.list}, ch) {
				hGot = append(hGot, ch)
			}
		}
		if !slices.Equal(tGot, c.template) || !slices.Equal(hGot, c.hint) {
			t.Errorf("%s: in template %v (want %v), in hint %v (want %v)", c.name, tGot, c.template, hGot, c.hint)
		}
	}
}

func TestGroupKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   inbox.SendInput
		want string
	}{
		{inbox.SendInput{Type: "comment"}, "comment"},
		{inbox.SendInput{Type: "comment", Target: issue}, "comment|issue:42"},
		{inbox.SendInput{Type: "comment", Target: issue, GroupKey: "thread-42"}, "thread-42"},
		{inbox.SendInput{Type: "comment", GroupKey: "g"}, "g"},
		{inbox.SendInput{Type: "", Target: &inbox.Target{Kind: "pr", TargetID: "a:b"}}, "|pr:a:b"},
	} {
		if got := routing.GroupKey(c.in); got != c.want {
			t.Errorf("GroupKey(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	at := now.Add(72 * time.Hour)
	for _, c := range []struct {
		name      string
		expiresAt time.Time
		retention time.Duration
		want      time.Time
	}{
		{"neither: never", time.Time{}, 0, time.Time{}},
		{"retention", time.Time{}, 24 * time.Hour, now.Add(24 * time.Hour)},
		{"negative retention: never", time.Time{}, -time.Hour, time.Time{}},
		{"the send's over retention", at, 24 * time.Hour, at},
		{"the send's, beyond retention", at, time.Hour, at},
		{"the send's alone", at, 0, at},
	} {
		if got := routing.Expiry(inbox.SendInput{ExpiresAt: c.expiresAt}, now, c.retention); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A recipient's locale: their preferences', else their profile's, else the send's, else
// the tenant's; "" when none is set.
func TestLocale(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		own, profile, send, tenant, want string
	}{
		{"fr", "de", "es", "it", "fr"},
		{"", "de", "es", "it", "de"},
		{"", "", "es", "it", "es"},
		{"", "", "", "it", "it"},
		{"", "", "", "", ""},
		{"fr", "", "", "it", "fr"},
		{"", "de", "", "it", "de"},
	} {
		if got := routing.Locale(c.own, c.profile, c.send, c.tenant); got != c.want {
			t.Errorf("Locale(%q, %q, %q, %q) = %q, want %q", c.own, c.profile, c.send, c.tenant, got, c.want)
		}
	}
}

// A template's locale for want: want when stored, its base language when stored, then
// the default; only stored locales (and the default) are ever tried.
func TestLocaleCandidates(t *testing.T) {
	t.Parallel()
	stored := []string{"en", "de", "de-AT", "pt-BR", "zh-Hant"}
	for _, c := range []struct {
		want string
		def  string
		out  []string
	}{
		{"", "en", []string{"en"}},
		{"de-AT", "en", []string{"de-AT", "de", "en"}},
		{"de-CH", "en", []string{"de", "en"}},
		{"de-CH-x-abc", "en", []string{"de", "en"}},
		{"de", "en", []string{"de", "en"}},
		{"en", "en", []string{"en"}},
		{"en-GB", "en", []string{"en"}},
		{"pt-BR", "en", []string{"pt-BR", "en"}},
		{"pt-PT", "en", []string{"en"}},
		{"zh-Hant-TW", "en", []string{"en"}},
		{"fr", "de", []string{"de"}},
		{"fr-CA", "en", []string{"en"}},
		{"not a tag", "en", []string{"en"}},
		{"de-AT", "de", []string{"de-AT", "de"}},
	} {
		if got := routing.LocaleCandidates(c.want, stored, c.def); !slices.Equal(got, c.out) {
			t.Errorf("LocaleCandidates(%q, default %q) = %v, want %v", c.want, c.def, got, c.out)
		}
	}
}

// A template's channels are the union of what the renderings for its recipients define,
// in a fixed order, and never nil (an empty list is a template without channels).
func TestTemplateChannels(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		rendered map[string]inbox.Rendered
		want     []string
	}{
		{"nothing rendered", nil, []string{}},
		{"no channels", map[string]inbox.Rendered{"a": {}}, []string{}},
		{"one", map[string]inbox.Rendered{"a": {Channels: []string{inApp, email}}}, []string{inApp, email}},
		{"a union, first seen first, keys sorted", map[string]inbox.Rendered{
			"b": {Channels: []string{sms, inApp}}, "a": {Channels: []string{inApp, email}}, "c": {Channels: []string{email}},
		}, []string{inApp, email, sms}},
	} {
		for range 5 { // map order must not show
			got := routing.TemplateChannels(c.rendered)
			if got == nil || !slices.Equal(got, c.want) {
				t.Errorf("%s: %#v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}
