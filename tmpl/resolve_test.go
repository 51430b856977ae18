package tmpl

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// memStore is a template store in memory: versions[locale] are that locale's versions,
// ascending. It counts its reads.
type memStore struct {
	mu       sync.Mutex
	def      string
	versions map[string][]int
	latest   int
	heads    int
	locales  int
	fallback int
}

// put adds version v (above every other) of locale.
func (m *memStore) put(locale string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.versions == nil {
		m.versions, m.def = map[string][]int{}, locale
	}
	m.latest++
	m.versions[locale] = append(m.versions[locale], m.latest)
	return m.latest
}

func (m *memStore) PutTemplate(context.Context, string, string, inbox.TemplateInput) (int, error) {
	panic("not used")
}

func (m *memStore) GetTemplate(context.Context, string, string, string, int) (inbox.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fallback++
	return inbox.Template{}, fmt.Errorf("the fallback read is not for rendering")
}

func (m *memStore) GetTemplateHead(_ context.Context, _, id string) (inbox.TemplateHead, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heads++
	if m.latest == 0 {
		return inbox.TemplateHead{}, inbox.Errorf(inbox.CodeNotFound, "unknown template %q", id)
	}
	var locales []string
	for l := range m.versions {
		locales = append(locales, l)
	}
	slices.Sort(locales)
	return inbox.TemplateHead{Version: m.latest, DefaultLocale: m.def, Locales: locales}, nil
}

func (m *memStore) GetTemplateLocale(_ context.Context, _, id, locale string, version int) (inbox.Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.locales++
	for _, v := range slices.Backward(m.versions[locale]) {
		if v <= version {
			// The title names what serves: the tests check every recipient's output.
			return inbox.Template{ID: id, Version: v, Locale: locale,
				TemplateInput: inbox.TemplateInput{Locale: locale, Title: fmt.Sprintf("%s@%d {{ name }}", locale, v)}}, nil
		}
	}
	return inbox.Template{}, inbox.Errorf(inbox.CodeNotFound, "no version")
}

func (m *memStore) reads() (heads, locales, fallback int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heads, m.locales, m.fallback
}

// privateUse returns n distinct tags of each kind a recipient may choose, each with the
// stored locale that serves it in a template of locales en (default) and de.
func privateUse(n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("en-x-a%05d", i)] = "en"
		out[fmt.Sprintf("de-CH-x-b%05d", i)] = "de"
		out[fmt.Sprintf("DE_at-x-c%05d", i)] = "de"   // malformed but accepted
		out[fmt.Sprintf("qaa-x-d%05d", i)] = "en"     // a private-use language
		out[fmt.Sprintf("und-x-e%05d", i)] = "en"     // undetermined
		out[fmt.Sprintf("x-f%05d", i)] = "en"         // private use alone
		out[fmt.Sprintf("de-1901-x-g%05d", i)] = "de" // a variant
		out[fmt.Sprintf("tlh-x-h%05d", i)] = "en"     // a language the template lacks
		out[fmt.Sprintf("EN-u-co-x-i%05d", i)] = "en" // an extension, upper case
		out[fmt.Sprintf("jbo-x-j%05d", i)] = "en"
	}
	out["i-klingon"], out["sgn-BE-FR"], out["de_de"] = "en", "en", "de" // grandfathered, malformed
	return out
}

// TestResolveIsBoundedByStoredLocales: the parsed-template cache was keyed by the locale a
// recipient asked for, so every new tag (en-x-aaaa, en-x-aaab, ...) read, parsed and
// cached the template once more. Resolution now goes to the stored version first: however
// many tags are asked for, at any pinned version, reads and parses are per stored
// (locale, version), and no cache holds an entry per tag.
func TestResolveIsBoundedByStoredLocales(t *testing.T) {
	for _, c := range []struct {
		name   string
		tags   int
		cache  int
		pinned int // the version pinned: 1 has en only, 2 de too, 3 a newer en
	}{
		{"few tags, v1 (en only)", 5, DefaultCacheSize, 1},
		{"many tags, v2", 500, DefaultCacheSize, 2},
		{"many tags, v3", 500, DefaultCacheSize, 3},
		{"many tags, smallest cache", 200, 1, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := &memStore{}
			ms.put("en")
			ms.put("de")
			ms.put("en")
			s := New(ms, WithCacheSize(c.cache))
			ctx := context.Background()
			tags := privateUse(c.tags)
			want := map[string]string{"en": "en@1", "de": "de@2"}
			if c.pinned == 1 {
				want["de"] = "en@1" // de did not exist yet
			}
			if c.pinned == 3 {
				want["en"] = "en@3"
			}
			served := map[string]bool{}
			for tag, stored := range tags {
				r, err := s.Render(ctx, "acme", "greet", c.pinned, tag, inbox.JSON(`{"name": "Ada"}`))
				if err != nil {
					t.Fatalf("%s: %v", tag, err)
				}
				if r.Title != want[stored]+" Ada" {
					t.Fatalf("%s rendered %q; want %q", tag, r.Title, want[stored]+" Ada")
				}
				served[want[stored]] = true
			}
			heads, locales, fallback := ms.reads()
			st := s.Stats()
			if c.cache == DefaultCacheSize {
				// One HEAD, one Query per stored locale tried, one parse per version served.
				if heads != 1 || locales > 2 || fallback != 0 || st.Parses != int64(len(served)) {
					t.Errorf("%d tags: %d HEAD reads, %d version reads, %d fallback reads, %d parses; want 1, <= 2, 0, %d",
						len(tags), heads, locales, fallback, st.Parses, len(served))
				}
				if s.heads.Len() != 1 || s.versions.Len() > 2 || s.parsed.Len() != len(served) {
					t.Errorf("cached: %d heads, %d versions, %d parsed; want 1, <= 2, %d", s.heads.Len(), s.versions.Len(), s.parsed.Len(), len(served))
				}
			}
			if s.heads.Len() > max(c.cache*resolutionsPerVersion, 1) || s.parsed.Len() > c.cache {
				t.Errorf("caches past their bounds: %d heads, %d parsed", s.heads.Len(), s.parsed.Len())
			}
			if st.Renders != int64(len(tags)) {
				t.Errorf("%d renders for %d Render calls", st.Renders, len(tags))
			}
			// Resolve names what Render rendered, without reading anything once warm.
			for tag, stored := range tags {
				l, v, err := s.Resolve(ctx, "acme", "greet", c.pinned, tag)
				if err != nil || fmt.Sprintf("%s@%d", l, v) != want[stored] {
					t.Fatalf("resolve %s = %s@%d, %v; want %s", tag, l, v, err, want[stored])
				}
			}
			if c.cache == DefaultCacheSize {
				if h, l, _ := ms.reads(); h != heads || l != locales {
					t.Errorf("warm resolves read the store: %d HEAD and %d version reads", h-heads, l-locales)
				}
			}
		})
	}
}

// TestResolveKeepsTheStoreFallbackErrors: a resolution answers what store.GetTemplate
// answered for the same asks.
func TestResolveKeepsTheStoreFallbackErrors(t *testing.T) {
	ms := &memStore{}
	s := New(ms)
	ctx := context.Background()
	if _, _, err := s.Resolve(ctx, "acme", "greet", 1, "en"); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Errorf("unknown template: %v; want NOT_FOUND", err)
	}
	ms.put("en")
	for _, c := range []struct {
		locale  string
		version int
		code    string
	}{
		{"en", 2, inbox.CodeNotFound},
		{"en", -1, inbox.CodeBadUserInput},
		{"en", inbox.MaxTemplateVersion + 1, inbox.CodeBadUserInput},
		{"not a tag!", 1, inbox.CodeBadUserInput},
		{"zz", 1, inbox.CodeBadUserInput},
	} {
		if _, _, err := s.Resolve(ctx, "acme", "greet", c.version, c.locale); inbox.ErrorCode(err) != c.code {
			t.Errorf("%q at %d: %v; want %s", c.locale, c.version, err, c.code)
		}
	}
	// Version 0 is the latest, read again each time: a new locale serves at once.
	if l, v, err := s.Resolve(ctx, "acme", "greet", 0, "de-CH-x-a"); err != nil || l != "en" || v != 1 {
		t.Errorf("latest before de = %s@%d, %v", l, v, err)
	}
	ms.put("de")
	if l, v, err := s.Resolve(ctx, "acme", "greet", 0, "de-CH-x-a"); err != nil || l != "de" || v != 2 {
		t.Errorf("latest after de = %s@%d, %v", l, v, err)
	}
	// A pinned version above the cached HEAD reads HEAD again.
	ms.put("de")
	if l, v, err := s.Resolve(ctx, "acme", "greet", 3, "de"); err != nil || l != "de" || v != 3 {
		t.Errorf("v3 = %s@%d, %v", l, v, err)
	}
}
