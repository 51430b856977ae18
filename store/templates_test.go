package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

func putTemplate(t *testing.T, f *fixture, id string, in inbox.TemplateInput) int {
	t.Helper()
	v, err := f.s.PutTemplate(context.Background(), f.tenant, id, in)
	if err != nil {
		t.Fatalf("put template %s %+v: %v", id, in, err)
	}
	return v
}

func getTemplate(t *testing.T, f *fixture, id, locale string, version int) inbox.Template {
	t.Helper()
	tp, err := f.s.GetTemplate(context.Background(), f.tenant, id, locale, version)
	if err != nil {
		t.Fatalf("get template %s %q v%d: %v", id, locale, version, err)
	}
	return tp
}

func TestTemplateVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if v := putTemplate(t, f, "welcome", inbox.TemplateInput{Title: "Hi {{ name }}", Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "Welcome", HTML: "<p>{{ name }}</p>"}}}); v != 1 {
		t.Fatalf("first version = %d, want 1", v)
	}
	if v := putTemplate(t, f, "welcome", inbox.TemplateInput{Locale: "de", Title: "Hallo {{ name }}"}); v != 2 {
		t.Fatalf("second version = %d, want 2", v)
	}
	if v := putTemplate(t, f, "welcome", inbox.TemplateInput{Locale: "en", Title: "Hello {{ name }}", Parts: map[string]inbox.Content{inbox.ChannelSMS: {Text: "hello"}}}); v != 3 {
		t.Fatalf("third version = %d, want 3", v)
	}

	head, err := f.s.GetTemplateHead(ctx, f.tenant, "welcome")
	if err != nil || head.Version != 3 || head.DefaultLocale != "en" || !slices.Equal(head.Locales, []string{"de", "en"}) {
		t.Fatalf("head = %+v, %v; want version 3, default en, locales de en", head, err)
	}
	for _, c := range []struct {
		locale      string
		version     int
		wantTitle   string
		wantVersion int
		wantLocale  string
	}{
		{"", 0, "Hello {{ name }}", 3, "en"},
		{"en", 1, "Hi {{ name }}", 1, "en"},       // pinned: the old content after newer PUTs
		{"en-US", 2, "Hi {{ name }}", 1, "en"},    // base language, newest at or below 2
		{"de", 1, "Hi {{ name }}", 1, "en"},       // de has nothing at v1: the default
		{"de", 2, "Hallo {{ name }}", 2, "de"},    // de's own
		{"de-AT", 3, "Hallo {{ name }}", 2, "de"}, // base language at a later pin
		{"fr", 3, "Hello {{ name }}", 3, "en"},    // no such locale: the default
		{"EN", 0, "Hello {{ name }}", 3, "en"},    // canonical form
	} {
		tp := getTemplate(t, f, "welcome", c.locale, c.version)
		if tp.Title != c.wantTitle || tp.Version != c.wantVersion || tp.Locale != c.wantLocale || tp.Latest != 3 {
			t.Errorf("get(%q, %d) = %q v%d %s (latest %d); want %q v%d %s", c.locale, c.version, tp.Title, tp.Version, tp.Locale, tp.Latest, c.wantTitle, c.wantVersion, c.wantLocale)
		}
	}
	if tp := getTemplate(t, f, "welcome", "", 1); len(tp.Parts) != 1 || tp.Parts[inbox.ChannelEmail].HTML != "<p>{{ name }}</p>" {
		t.Errorf("v1 parts = %+v; want the email, no sms", tp.Parts)
	}
	if tp := getTemplate(t, f, "welcome", "", 3); len(tp.Parts) != 1 || tp.Parts[inbox.ChannelSMS].Text != "hello" {
		t.Errorf("v3 parts = %+v; want the sms, no email", tp.Parts)
	}

	for _, c := range []struct {
		id, locale string
		version    int
		code       string
	}{
		{"nope", "", 0, inbox.CodeNotFound},
		{"welcome", "", 4, inbox.CodeNotFound},
		{"welcome", "", -1, inbox.CodeBadUserInput},
		{"a#b", "", 0, inbox.CodeBadUserInput},
		{"welcome", "not a locale!", 0, inbox.CodeBadUserInput},
	} {
		if _, err := f.s.GetTemplate(ctx, f.tenant, c.id, c.locale, c.version); inbox.ErrorCode(err) != c.code {
			t.Errorf("get(%q, %q, %d): %v; want %s", c.id, c.locale, c.version, err, c.code)
		}
	}
	// GetTemplateLocale: exactly one stored locale, newest at or below the version, no
	// fallback, one Query and no HEAD read.
	before := len(f.rec.Ops())
	for _, c := range []struct {
		locale      string
		version     int
		wantVersion int // 0: NOT_FOUND
	}{
		{"en", 1, 1}, {"en", 2, 1}, {"en", 3, 3}, {"EN", 3, 3},
		{"de", 1, 0}, {"de", 2, 2}, {"de", 3, 2}, {"de-AT", 3, 0}, {"fr", 3, 0},
	} {
		tp, err := f.s.GetTemplateLocale(ctx, f.tenant, "welcome", c.locale, c.version)
		switch {
		case c.wantVersion == 0 && inbox.ErrorCode(err) != inbox.CodeNotFound:
			t.Errorf("locale(%q, %d) = v%d, %v; want NOT_FOUND", c.locale, c.version, tp.Version, err)
		case c.wantVersion != 0 && (err != nil || tp.Version != c.wantVersion || tp.Locale != strings.ToLower(c.locale)):
			t.Errorf("locale(%q, %d) = %s v%d, %v; want v%d", c.locale, c.version, tp.Locale, tp.Version, err, c.wantVersion)
		}
	}
	if ops := f.rec.Ops()[before:]; slices.ContainsFunc(ops, func(op string) bool { return op != "Query" }) || len(ops) != 9 {
		t.Errorf("GetTemplateLocale sent %v; want one Query each", ops)
	}
	for _, c := range []struct {
		id, locale string
		version    int
	}{{"welcome", "en", 0}, {"welcome", "en", -1}, {"welcome", "", 1}, {"welcome", "not a locale!", 1}, {"a#b", "en", 1}} {
		if _, err := f.s.GetTemplateLocale(ctx, f.tenant, c.id, c.locale, c.version); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("locale(%q, %q, %d): %v; want BAD_USER_INPUT", c.id, c.locale, c.version, err)
		}
	}

	// Every read was a GetItem or a Query.
	for _, op := range f.rec.Ops() {
		if op != "GetItem" && op != "Query" && op != "TransactWriteItems" {
			t.Errorf("unexpected operation %s", op)
		}
	}
}

func TestTemplatePutRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	big := strings.Repeat("x", inbox.MaxTemplatePartBytes+1)
	part := strings.Repeat("x", inbox.MaxTemplatePartBytes)
	for _, c := range []struct {
		name string
		id   string
		in   inbox.TemplateInput
	}{
		{"no title", "t", inbox.TemplateInput{Body: "b"}},
		{"bad id", "a#b", inbox.TemplateInput{Title: "t"}},
		{"bad locale", "t", inbox.TemplateInput{Locale: "xx-!!", Title: "t"}},
		{"part too big", "t", inbox.TemplateInput{Title: big}},
		{"version too big", "t", inbox.TemplateInput{Title: part, Body: part, Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "s", HTML: part, Text: part}}}},
		{"email without subject", "t", inbox.TemplateInput{Title: "t", Parts: map[string]inbox.Content{inbox.ChannelEmail: {HTML: "h"}}}},
		{"email without content", "t", inbox.TemplateInput{Title: "t", Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "s"}}}},
		{"empty sms", "t", inbox.TemplateInput{Title: "t", Parts: map[string]inbox.Content{inbox.ChannelSMS: {}}}},
		{"empty push", "t", inbox.TemplateInput{Title: "t", Parts: map[string]inbox.Content{inbox.ChannelPush: {}}}},
	} {
		if _, err := f.s.PutTemplate(context.Background(), f.tenant, c.id, c.in); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v; want BAD_USER_INPUT", c.name, err)
		}
	}
	if _, err := f.s.GetTemplateHead(context.Background(), f.tenant, "t"); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Errorf("a refused PUT wrote something: head err = %v", err)
	}
}

func TestTemplateConcurrentPutsGetDistinctVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n = 12
	versions := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v, err := f.s.PutTemplate(context.Background(), f.tenant, "race", inbox.TemplateInput{
				Locale: []string{"en", "de", "fr"}[i%3], Title: fmt.Sprintf("put %d", i),
			})
			if err != nil {
				t.Errorf("put %d: %v", i, err)
			}
			versions[i] = v
		})
	}
	wg.Wait()
	got := slices.Sorted(slices.Values(versions))
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("versions = %v; want 1..%d, each once", got, n)
		}
	}
	head, err := f.s.GetTemplateHead(context.Background(), f.tenant, "race")
	if err != nil || head.Version != n || len(head.Locales) != 3 {
		t.Fatalf("head = %+v, %v; want version %d and 3 locales", head, err, n)
	}
	// Each version holds what its PUT wrote.
	for i, v := range versions {
		locale := []string{"en", "de", "fr"}[i%3]
		if tp := getTemplate(t, f, "race", locale, v); tp.Version != v || tp.Title != fmt.Sprintf("put %d", i) {
			t.Errorf("version %d = %q v%d; want %q", v, tp.Title, tp.Version, fmt.Sprintf("put %d", i))
		}
	}
}
