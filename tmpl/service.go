package tmpl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Store is what the templates service needs of the store (*store.Store has it).
type Store interface {
	PutTemplate(ctx context.Context, tenantID, id string, in inbox.TemplateInput) (int, error)
	GetTemplate(ctx context.Context, tenantID, id, locale string, version int) (inbox.Template, error)
	GetTemplateHead(ctx context.Context, tenantID, id string) (inbox.TemplateHead, error)
	GetTemplateLocale(ctx context.Context, tenantID, id, locale string, version int) (inbox.Template, error)
}

// DefaultCacheSize is the number of parsed template versions a Service keeps by default.
const DefaultCacheSize = 512

// resolutionsPerVersion is how many entries of the resolution caches (HEADs, and which
// version each stored locale has at a pinned version) a Service keeps per parsed version
// it keeps: they are a few dozen bytes each, and one template has up to
// inbox.MaxTemplateLocales stored locales.
const resolutionsPerVersion = 16

// Service puts, reads, pins and renders templates. It is safe for concurrent use.
//
// A locale asked for is resolved to the stored content that serves it (a stored locale
// and its version) before anything is parsed or rendered, in memory: the template's HEAD
// is cached (heads) and so is, per stored locale and pinned version, which version of it
// serves (versions); the BCP 47 fallback is routing.LocaleCandidates. Parsed content
// is cached per stored (tenant, id, locale, version) (parsed). So however many distinct
// tags recipients choose (en-x-aaaa, en-x-aaab, ...), a template is read and parsed at
// most once per stored locale, and no cache holds an entry per tag asked for.
type Service struct {
	st       Store
	en       *engine
	heads    *lru.Cache[headKey, inbox.TemplateHead]
	versions *lru.Cache[versionKey, int]
	parsed   *lru.Cache[parsedKey, *parsed]
	// loads makes concurrent misses of one stored version read and parse it once.
	loads singleflight.Group
	// parses and renders count the work done (Stats).
	parses, renders atomic.Int64
}

// Option configures a Service.
type Option func(*config)

type config struct{ cacheSize int }

// WithCacheSize sets how many parsed template versions are kept (LRU; default
// DefaultCacheSize; at least 1). The resolution caches keep 16 times as many entries
// (a few dozen bytes each).
func WithCacheSize(n int) Option { return func(c *config) { c.cacheSize = max(n, 1) } }

// New returns a Service over st.
func New(st Store, opts ...Option) *Service {
	c := config{cacheSize: DefaultCacheSize}
	for _, o := range opts {
		o(&c)
	}
	return &Service{st: st, en: newEngine(),
		heads:    newLRU[headKey, inbox.TemplateHead](c.cacheSize * resolutionsPerVersion),
		versions: newLRU[versionKey, int](c.cacheSize * resolutionsPerVersion),
		parsed:   newLRU[parsedKey, *parsed](c.cacheSize)}
}

// newLRU returns an LRU cache of size entries (at least 1).
func newLRU[K comparable, V any](size int) *lru.Cache[K, V] {
	c, err := lru.New[K, V](size)
	if err != nil {
		panic(fmt.Sprintf("tmpl: cache: %v", err)) // only for a size below 1, excluded by WithCacheSize
	}
	return c
}

// Stats counts what a Service did since New.
type Stats struct {
	// Parses are the stored versions parsed to be pinned or rendered (one per cache
	// miss; Put's checks are not counted).
	Parses int64
	// Renders are the renders of a whole template (all of its parts) run, Pin's included.
	Renders int64
}

// Stats returns what s did since New: what the tests and the bench read to see the
// caches and the sends' renders at work.
func (s *Service) Stats() Stats {
	return Stats{Parses: s.parses.Load(), Renders: s.renders.Load()}
}

// Put parses every part of in (Liquid syntax, no includes, sizes: see the package doc)
// and stores it as a new version of template id; it returns the version. Errors:
// BAD_USER_INPUT for a part that does not parse (naming it and the line) or anything
// store.PutTemplate refuses; nothing is written then.
func (s *Service) Put(ctx context.Context, tenantID, id string, in inbox.TemplateInput) (int, error) {
	if _, err := s.parse(in); err != nil {
		return 0, err
	}
	return s.st.PutTemplate(ctx, tenantID, id, in)
}

// Get returns the stored sources of template id for locale at version (store.GetTemplate:
// version 0 = the latest, locale "" = the default, fallback to the default locale).
func (s *Service) Get(ctx context.Context, tenantID, id, locale string, version int) (inbox.Template, error) {
	return s.st.GetTemplate(ctx, tenantID, id, locale, version)
}

// Pin checks that template id exists and that every locale of its latest version renders
// with data in strict mode, and returns that version: what a send pins, so each recipient
// is rendered later (Render) at the version the send was accepted with. locale, when not
// "", must be a BCP 47 tag (the recipients' locales pick theirs at render time). Errors:
// BAD_USER_INPUT "unknown template", or naming the locale, the part and the undefined
// variable (or the budget exceeded); data that is not a JSON object is BAD_USER_INPUT.
func (s *Service) Pin(ctx context.Context, tenantID, id, locale string, data inbox.JSON) (int, error) {
	if locale != "" {
		if _, err := inbox.CanonicalLocale(locale); err != nil {
			return 0, err
		}
	}
	vars, err := decodeData(data)
	if err != nil {
		return 0, err
	}
	head, err := s.latestHead(ctx, tenantID, id)
	if err != nil {
		return 0, unknownAsBadInput(err, id)
	}
	// The budget counts rendering only: the loads are DynamoDB reads, which a busy engine
	// may slow without the template costing anything more (a wall-clock budget over both
	// refused a one-variable template in a loaded CI run).
	var spent time.Duration
	for _, l := range head.Locales {
		p, err := s.resolve(ctx, tenantID, id, l, head.Version)
		if err != nil {
			return 0, unknownAsBadInput(err, id)
		}
		start := time.Now()
		deadline := start.Add(min(RenderTimeout, max(PinTimeout-spent, 0)))
		_, err = s.render(p, vars, deadline)
		spent += time.Since(start)
		if err != nil {
			return 0, inbox.Errorf(inbox.CodeBadUserInput, "template %q locale %s: %s", id, p.locale, inbox.ErrorMessage(err))
		}
	}
	return head.Version, nil
}

// unknownAsBadInput turns the store's NOT_FOUND of a template into BAD_USER_INPUT (a send
// naming a template that does not exist is bad input).
func unknownAsBadInput(err error, id string) error {
	if inbox.ErrorCode(err) == inbox.CodeNotFound {
		return inbox.Errorf(inbox.CodeBadUserInput, "unknown template %q", id)
	}
	return err
}

// Render renders template id at version (a pinned version; 0 = the latest) for locale
// (fallback as store.GetTemplate) with data, in strict mode. The locale is resolved to
// the stored content that serves it first (Resolve), and parsed content comes from a
// bounded LRU cache per stored version: a pinned version's content never changes, so it
// is never stale. Errors: BAD_USER_INPUT for a locale that is not a BCP 47 tag, naming
// the part and the undefined variable (or the budget exceeded), or for data that is not
// an object; NOT_FOUND for an unknown template or version.
func (s *Service) Render(ctx context.Context, tenantID, id string, version int, locale string, data inbox.JSON) (inbox.Rendered, error) {
	vars, err := decodeData(data)
	if err != nil {
		return inbox.Rendered{}, err
	}
	p, head, err := s.resolveIn(ctx, tenantID, id, locale, version)
	if err != nil {
		return inbox.Rendered{}, err
	}
	r, err := s.render(p, vars, time.Now().Add(RenderTimeout))
	if err != nil {
		return inbox.Rendered{}, inbox.Errorf(inbox.CodeBadUserInput, "template %q locale %s: %s", id, p.locale, inbox.ErrorMessage(err))
	}
	if version == 0 {
		version = head.Version
	}
	if r.Channels, err = s.channels(ctx, tenantID, id, head, version); err != nil {
		return inbox.Rendered{}, err
	}
	return r, nil
}

// channels returns the channels template id defines at version: in-app and every
// channel that some stored locale's content at version (its newest version at or below
// it) has a part for, in inbox.Channels order. They are the template's, not one locale's:
// a send reaches the same channels whichever locales its recipients read (a locale
// without a channel's part shows the title and body there, inbox.Rendered.Content), so a
// recipient's channels never depend on who else is in the send. The stored contents
// come from the caches (Resolve's, and what Pin parsed) after their first read.
func (s *Service) channels(ctx context.Context, tenantID, id string, head inbox.TemplateHead, version int) ([]string, error) {
	has := map[string]bool{inbox.ChannelInApp: true}
	for _, l := range head.Locales {
		p, err := s.stored(ctx, tenantID, id, l, version)
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		for _, part := range p.parts {
			has[part.channel] = true
		}
	}
	var out []string
	for _, c := range inbox.Channels {
		if has[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Resolve returns the stored content that serves locale at version of template id (0 =
// the latest): its stored locale (the fallback of store.GetTemplate: the locale itself,
// its base language, the template's default) and that locale's version (its newest at or
// below version). Every locale with the same answer renders the same with the same data,
// so a send renders once per answer rather than once per locale asked for. It is cheap
// and bounded: the HEAD and the versions of the stored locales are cached, a pinned
// version's answer never changes, and the BCP 47 matching runs in memory, so a locale
// never asked for before costs no store read once its template's stored locales are
// known. Errors: as Render's (but for data).
func (s *Service) Resolve(ctx context.Context, tenantID, id string, version int, locale string) (storedLocale string, storedVersion int, err error) {
	p, err := s.resolve(ctx, tenantID, id, locale, version)
	if err != nil {
		return "", 0, err
	}
	return p.locale, p.version, nil
}

// headKey names a template.
type headKey struct{ tenant, id string }

// versionKey names what serves stored locale at a pinned version: the newest version of
// that locale at or below it (or none), which never changes once the version exists
// (later PUTs only add versions above every version already pinned).
type versionKey struct {
	tenant, id, locale string
	version            int
}

// parsedKey names one stored version of one stored locale.
type parsedKey struct {
	tenant, id, locale string
	version            int
}

// parsed is one stored version of one locale, parsed.
type parsed struct {
	locale      string
	version     int
	title, body *compiled
	// parts are the channels' parts (inbox.PartChannels order), each field compiled.
	parts []parsedPart
}

// parsedPart is one channel's part of a template, parsed.
type parsedPart struct {
	channel string
	fields  []parsedField
}

// parsedField is one field of a part: its inbox.Content field name, its source's name
// ("email.subject") and its compiled source.
type parsedField struct {
	field, name string
	c           *compiled
}

// resolve returns the parsed content that serves locale at version (0 = the latest) of
// template id (Resolve): the candidates of routing.LocaleCandidates, in turn, until
// one has a version at or below version.
func (s *Service) resolve(ctx context.Context, tenantID, id, locale string, version int) (*parsed, error) {
	p, _, err := s.resolveIn(ctx, tenantID, id, locale, version)
	return p, err
}

// resolveIn is resolve, also returning the HEAD it resolved in.
func (s *Service) resolveIn(ctx context.Context, tenantID, id, locale string, version int) (*parsed, inbox.TemplateHead, error) {
	if version < 0 || version > inbox.MaxTemplateVersion {
		return nil, inbox.TemplateHead{}, inbox.Errorf(inbox.CodeBadUserInput, "version must be between 0 and %d", inbox.MaxTemplateVersion)
	}
	want := ""
	if locale != "" {
		l, err := inbox.CanonicalLocale(locale)
		if err != nil {
			return nil, inbox.TemplateHead{}, err
		}
		want = l
	}
	head, err := s.head(ctx, tenantID, id, version)
	if err != nil {
		return nil, head, err
	}
	if version == 0 {
		version = head.Version
	}
	if version > head.Version {
		return nil, head, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
	}
	for _, l := range routing.LocaleCandidates(want, head.Locales, head.DefaultLocale) {
		p, err := s.stored(ctx, tenantID, id, l, version)
		if err != nil {
			return nil, head, err
		}
		if p != nil {
			return p, head, nil
		}
	}
	return nil, head, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
}

// head returns template id's HEAD as far as version (0 = the latest) needs it: a cached
// HEAD whose version is at or above version serves, as the locales and versions at or
// below it never change (the default locale never does; a locale added later has no
// version at or below it). Else, and for version 0, it reads HEAD (latestHead).
func (s *Service) head(ctx context.Context, tenantID, id string, version int) (inbox.TemplateHead, error) {
	if version > 0 {
		if h, ok := s.heads.Get(headKey{tenantID, id}); ok && h.Version >= version {
			return h, nil
		}
	}
	return s.latestHead(ctx, tenantID, id)
}

// latestHead reads template id's HEAD (one consistent GetItem) and keeps it unless a
// newer one is kept already.
func (s *Service) latestHead(ctx context.Context, tenantID, id string) (inbox.TemplateHead, error) {
	h, err := s.st.GetTemplateHead(ctx, tenantID, id)
	if err != nil {
		return inbox.TemplateHead{}, err
	}
	k := headKey{tenantID, id}
	if old, ok := s.heads.Peek(k); !ok || old.Version < h.Version {
		s.heads.Add(k, h)
	}
	return h, nil
}

// stored returns the parsed content of stored locale at version: its newest version at
// or below version, nil when it has none. Both what serves (versions) and the parsed
// content (parsed) come from the caches when they can; else one read (one Query) and,
// unless that version is parsed already, one parse, shared by concurrent callers.
func (s *Service) stored(ctx context.Context, tenantID, id, locale string, version int) (*parsed, error) {
	vk := versionKey{tenantID, id, locale, version}
	if v, ok := s.versions.Get(vk); ok {
		if v == 0 {
			return nil, nil
		}
		if p, ok := s.parsed.Get(parsedKey{tenantID, id, locale, v}); ok {
			return p, nil
		}
	}
	// Ids and locales hold no control characters (inbox.CheckID): NUL separates them.
	flight := tenantID + "\x00" + id + "\x00" + locale + "\x00" + strconv.Itoa(version)
	p, err, _ := s.loads.Do(flight, func() (any, error) {
		t, err := s.st.GetTemplateLocale(ctx, tenantID, id, locale, version)
		if inbox.ErrorCode(err) == inbox.CodeNotFound {
			s.versions.Add(vk, 0)
			return (*parsed)(nil), nil
		}
		if err != nil {
			return nil, err
		}
		s.versions.Add(vk, t.Version)
		pk := parsedKey{tenantID, id, t.Locale, t.Version}
		if p, ok := s.parsed.Get(pk); ok {
			return p, nil
		}
		p, err := s.parse(t.TemplateInput)
		if err != nil {
			return nil, err
		}
		s.parses.Add(1)
		p.locale, p.version = t.Locale, t.Version
		s.parsed.Add(pk, p)
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return p.(*parsed), nil
}

// render renders p (render) and counts it.
func (s *Service) render(p *parsed, vars map[string]any, deadline time.Time) (inbox.Rendered, error) {
	s.renders.Add(1)
	return p.render(vars, deadline)
}

// parse parses every part of in.
func (s *Service) parse(in inbox.TemplateInput) (*parsed, error) {
	p := &parsed{locale: in.Locale}
	var err error
	if p.title, err = s.en.parse("title", in.Title, nil); err != nil {
		return nil, err
	}
	if p.body, err = s.en.parse("body", in.Body, nil); err != nil {
		return nil, err
	}
	for _, c := range inbox.PartChannels {
		content, ok := in.Parts[c]
		if !ok {
			continue
		}
		spec, _ := inbox.Spec(c)
		part := parsedPart{channel: c}
		for _, f := range spec.Fields {
			name := spec.Part + "." + f.Name
			cf, err := s.en.parse(name, content.Field(f.Name), f.Escape)
			if err != nil {
				return nil, err
			}
			part.fields = append(part.fields, parsedField{field: f.Name, name: name, c: cf})
		}
		p.parts = append(p.parts, part)
	}
	return p, nil
}

// render renders every part of p with vars, all of them within one budget that ends at
// deadline (RenderTimeout from now for one render; Pin's budget may end sooner). The
// result's Channels are in-app, then the channels of the parts present.
func (p *parsed) render(vars map[string]any, deadline time.Time) (inbox.Rendered, error) {
	var err error
	b := p.title.en.budgetUntil(deadline)
	one := func(c *compiled, part string) string {
		if err != nil {
			return ""
		}
		var out string
		out, err = c.renderWithin(part, vars, b)
		return out
	}
	r := inbox.Rendered{Title: one(p.title, "title"), Body: one(p.body, "body"), Channels: []string{inbox.ChannelInApp}}
	for _, part := range p.parts {
		var content inbox.Content
		for _, f := range part.fields {
			content.SetField(f.field, one(f.c, f.name))
		}
		if r.Parts == nil {
			r.Parts = make(map[string]inbox.Content, len(p.parts))
		}
		r.Parts[part.channel] = content
		r.Channels = append(r.Channels, part.channel)
	}
	if err != nil {
		return inbox.Rendered{}, err
	}
	return r, nil
}

// decodeData decodes a send's data (a JSON object; nil, empty or null = no variables)
// into Liquid bindings. Whole numbers become int (see numbers), others float64. An array
// or an object of more than MaxArrayItems items is BAD_USER_INPUT, and so is a variable
// (a key of data) holding more than MaxValueBytes bytes of strings or MaxArrayItems items
// in all (checkValue: a send's payload is far smaller, but no variable may hold more,
// whatever the transport).
func decodeData(data inbox.JSON) (map[string]any, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "data is not valid JSON")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "data must be a JSON object")
	}
	if tooBig(m) {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "data has an array or an object of more than %d items", MaxArrayItems)
	}
	vars := numbers(m).(map[string]any)
	for k, v := range vars {
		if checkValue(v) != nil {
			return nil, inbox.Errorf(inbox.CodeBadUserInput, "data.%.40s holds more than %d bytes of strings or %d items in all", k, MaxValueBytes, MaxArrayItems)
		}
	}
	return vars, nil
}

// tooBig reports whether v has an array or an object of more than MaxArrayItems items: a
// comparison or a filter costs up to the size of its operands (see MaxComparisons).
func tooBig(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if len(v) > MaxArrayItems {
			return true
		}
		for _, e := range v {
			if tooBig(e) {
				return true
			}
		}
	case []any:
		if len(v) > MaxArrayItems {
			return true
		}
		for _, e := range v {
			if tooBig(e) {
				return true
			}
		}
	}
	return false
}

// numbers replaces every json.Number in v with an int when it is a whole number within
// int64 (written 12345678901, 4.0 or 1e18: so it prints as an integer and is a range
// bound, a loop's limit or offset, where Liquid takes an int only, not an int64 nor a
// float64), else a float64.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
		return v
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 0); err == nil {
			return int(n)
		}
		f, _ := v.Float64()
		if f == math.Trunc(f) && f >= math.MinInt64 && f < -math.MinInt64 {
			return int(f)
		}
		return f
	}
	return v
}
