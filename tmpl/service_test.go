package tmpl_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/tmpl"
)

const tenant = "acme"

// countingStore counts the store reads of a Service, to see the caches: gets counts
// every template read, heads the HEAD reads, locales the reads of one stored locale.
type countingStore struct {
	*store.Store
	gets, heads, locales atomic.Int64
}

func (c *countingStore) GetTemplate(ctx context.Context, tenantID, id, locale string, version int) (inbox.Template, error) {
	c.gets.Add(1)
	return c.Store.GetTemplate(ctx, tenantID, id, locale, version)
}

func (c *countingStore) GetTemplateHead(ctx context.Context, tenantID, id string) (inbox.TemplateHead, error) {
	c.gets.Add(1)
	c.heads.Add(1)
	return c.Store.GetTemplateHead(ctx, tenantID, id)
}

func (c *countingStore) GetTemplateLocale(ctx context.Context, tenantID, id, locale string, version int) (inbox.Template, error) {
	c.gets.Add(1)
	c.locales.Add(1)
	return c.Store.GetTemplateLocale(ctx, tenantID, id, locale, version)
}

// newService makes a Service over a store on a fresh table of DynamoDB Local.
func newService(t *testing.T) (*tmpl.Service, *countingStore) {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	db := dynlocaltest.Client(t, rec.Option())
	table := dynlocaltest.TableName(t)
	st := store.New(db, table)
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		if slices.Contains(rec.Ops(), "Scan") {
			t.Errorf("a Scan was sent: %v", rec.Ops())
		}
	})
	cs := &countingStore{Store: st}
	return tmpl.New(cs), cs
}

func put(t *testing.T, s *tmpl.Service, id string, in inbox.TemplateInput) int {
	t.Helper()
	v, err := s.Put(context.Background(), tenant, id, in)
	if err != nil {
		t.Fatalf("put %s: %v", id, err)
	}
	return v
}

func TestPinAndRender(t *testing.T) {
	t.Parallel()
	s, cs := newService(t)
	ctx := context.Background()
	v1 := put(t, s, "order", inbox.TemplateInput{
		Title: "Order {{ order.id }} shipped",
		Body:  "Hi {{ name }}",
		Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "Order {{ order.id }}", HTML: "<p>Hi {{ name }}</p>{{ footer | raw }}", Text: "Hi {{ name }}"}, inbox.ChannelSMS: {Text: "Order {{ order.id }} shipped"}},
	})
	data := inbox.JSON(`{"name": "Ada <admin>", "order": {"id": 12345678901}, "footer": "<hr>"}`)
	pinned, err := s.Pin(ctx, tenant, "order", "", data)
	if err != nil || pinned != v1 {
		t.Fatalf("pin = %d, %v; want %d", pinned, err, v1)
	}
	put(t, s, "order", inbox.TemplateInput{Title: "v2 {{ name }}", Parts: map[string]inbox.Content{inbox.ChannelPush: {Title: "{{ name }}"}}})

	r, err := s.Render(ctx, tenant, "order", pinned, "en-GB", data)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	want := inbox.Rendered{
		Title: "Order 12345678901 shipped", Body: "Hi Ada <admin>",
		Parts: map[string]inbox.Content{
			inbox.ChannelEmail: {Subject: "Order 12345678901", HTML: "<p>Hi Ada &lt;admin&gt;</p><hr>", Text: "Hi Ada <admin>"},
			inbox.ChannelSMS:   {Text: "Order 12345678901 shipped"}},
		Channels: []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelSMS},
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("pinned render = %+v; want %+v", r, want)
	}
	latest, err := s.Render(ctx, tenant, "order", 0, "", data)
	if err != nil || latest.Title != "v2 Ada <admin>" || latest.Parts[inbox.ChannelPush].Title != "Ada <admin>" || len(latest.Parts) != 1 ||
		!slices.Equal(latest.Channels, []string{inbox.ChannelInApp, inbox.ChannelPush}) {
		t.Errorf("latest render = %+v, %v", latest, err)
	}

	// The pinned version is cached: rendering it again reads nothing.
	before := cs.gets.Load()
	for range 3 {
		if _, err := s.Render(ctx, tenant, "order", pinned, "en-GB", data); err != nil {
			t.Fatal(err)
		}
	}
	if n := cs.gets.Load() - before; n != 0 {
		t.Errorf("%d store reads for cached renders; want 0", n)
	}
}

func TestPinChecksEveryLocale(t *testing.T) {
	t.Parallel()
	s, _ := newService(t)
	ctx := context.Background()
	put(t, s, "greet", inbox.TemplateInput{Title: "Hello {{ name }}"})
	put(t, s, "greet", inbox.TemplateInput{Locale: "de", Title: "Hallo {{ name }}", Body: "{{ user.city }}"})

	if v, err := s.Pin(ctx, tenant, "greet", "de", inbox.JSON(`{"name": "Ada", "user": {"city": "Bonn"}}`)); err != nil || v != 2 {
		t.Fatalf("pin = %d, %v; want 2", v, err)
	}
	// en renders without user.city, de does not: the pin is refused naming the variable.
	_, err := s.Pin(ctx, tenant, "greet", "", inbox.JSON(`{"name": "Ada"}`))
	if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "user.city") || !strings.Contains(err.Error(), "de") {
		t.Errorf("pin without user.city: %v; want BAD_USER_INPUT naming user.city in de", err)
	}
	for _, c := range []struct {
		name, id string
		data     string
		want     string
	}{
		{"unknown template", "nope", `{}`, "unknown template"},
		{"data not an object", "greet", `[1]`, "object"},
		{"data not JSON", "greet", `{`, "JSON"},
		{"undefined variable", "greet", `{"user": {"city": "x"}}`, "name"},
	} {
		if _, err := s.Pin(ctx, tenant, c.id, "", inbox.JSON(c.data)); inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want BAD_USER_INPUT with %q", c.name, err, c.want)
		}
	}
	// Render is strict too.
	if _, err := s.Render(ctx, tenant, "greet", 2, "de", inbox.JSON(`{"name": "Ada"}`)); inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "user.city") {
		t.Errorf("render without user.city: %v", err)
	}
	if _, err := s.Render(ctx, tenant, "nope", 1, "", nil); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Errorf("render of an unknown template: %v; want NOT_FOUND", err)
	}
}

func TestPutRefusesWhatDoesNotParse(t *testing.T) {
	t.Parallel()
	s, _ := newService(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		in   inbox.TemplateInput
		want string
	}{
		{"unclosed if", inbox.TemplateInput{Title: "{% if x %}hi"}, "title"},
		{"bad html", inbox.TemplateInput{Title: "t", Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "s", HTML: "{{ x | }}"}}}, "email.html"},
		{"include", inbox.TemplateInput{Title: "t", Parts: map[string]inbox.Content{inbox.ChannelSMS: {Text: "{% include 'secrets' %}"}}}, "include"},
		{"oversized", inbox.TemplateInput{Title: "t", Body: strings.Repeat("x", tmpl.MaxPartBytes+1)}, "bytes"},
	} {
		if _, err := s.Put(ctx, tenant, "bad", c.in); inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want BAD_USER_INPUT with %q", c.name, err, c.want)
		}
	}
	if _, err := s.Get(ctx, tenant, "bad", "", 0); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Errorf("a refused PUT was stored: %v", err)
	}
}

// TestResolveAnswersAsTheStoreFallback: resolving a locale in memory (the cached HEAD and
// stored locales' versions, routing.LocaleCandidates) answers what store.GetTemplate
// answers for every kind of tag at every pinned version, while the store is read once per
// stored locale and version and each stored version is parsed once, however many tags.
func TestResolveAnswersAsTheStoreFallback(t *testing.T) {
	t.Parallel()
	s, cs := newService(t)
	ctx := context.Background()
	put(t, s, "greet", inbox.TemplateInput{Title: "en1 {{ name }}"})                  // v1, en the default
	put(t, s, "greet", inbox.TemplateInput{Locale: "de", Title: "de2 {{ name }}"})    // v2
	put(t, s, "greet", inbox.TemplateInput{Title: "en3 {{ name }}"})                  // v3
	put(t, s, "greet", inbox.TemplateInput{Locale: "fr-CA", Title: "fr4 {{ name }}"}) // v4, a regional locale
	tags := []string{"", "en", "de", "fr-CA", "fr", "fr-CA-x-a", "de-CH", "DE_ch", "de-AT-x-abc", "de-1901",
		"EN-x-AAAA", "en-GB-oed", "i-klingon", "qaa-x-abc", "und-x-abc", "x-private", "tlh", "fr-ca", "de-Latn-CH-x-a"}
	for i := range 5 {
		tags = append(tags, fmt.Sprintf("en-x-u%04d", i), fmt.Sprintf("de-CH-x-u%04d", i))
	}
	stored := map[string]bool{}
	data := inbox.JSON(`{"name": "Ada"}`)
	for version := 1; version <= 4; version++ {
		for _, tag := range tags {
			want, err := cs.Store.GetTemplate(ctx, tenant, "greet", tag, version)
			if err != nil {
				t.Fatalf("store %q at %d: %v", tag, version, err)
			}
			l, v, err := s.Resolve(ctx, tenant, "greet", version, tag)
			if err != nil || l != want.Locale || v != want.Version {
				t.Fatalf("resolve %q at %d = %s@%d, %v; the store serves %s@%d", tag, version, l, v, err, want.Locale, want.Version)
			}
			r, err := s.Render(ctx, tenant, "greet", version, tag, data)
			if wantTitle := strings.Replace(want.Title, "{{ name }}", "Ada", 1); err != nil || r.Title != wantTitle {
				t.Fatalf("render %q at %d = %q, %v; want %q", tag, version, r.Title, err, wantTitle)
			}
			stored[fmt.Sprintf("%s@%d", l, v)] = true
		}
	}
	// en1, de2, en3, fr4: one parse each. Reads: HEAD once per pinned version above the
	// one cached (4), one Query per stored locale tried per pinned version (at most 3 × 4).
	if st := s.Stats(); st.Parses != int64(len(stored)) || len(stored) != 4 {
		t.Errorf("%d parses for %d stored versions served (%v); want 4", st.Parses, len(stored), stored)
	}
	if h, l := cs.heads.Load(), cs.locales.Load(); h > 4 || l > 12 {
		t.Errorf("%d tags at 4 versions: %d HEAD reads, %d version reads; want <= 4, <= 12", len(tags), h, l)
	}
	if n := cs.gets.Load() - cs.heads.Load() - cs.locales.Load(); n != 0 {
		t.Errorf("%d fallback reads (GetTemplate) to render; want 0", n)
	}
}
