package tmpl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// Store is what the templates service needs of the store (*store.Store has it).
type Store interface {
	PutTemplate(ctx context.Context, tenantID, id string, in store.TemplateInput) (int, error)
	GetTemplate(ctx context.Context, tenantID, id, locale string, version int) (store.Template, error)
	GetTemplateHead(ctx context.Context, tenantID, id string) (store.TemplateHead, error)
}

// DefaultCacheSize is the number of parsed template versions a Service keeps by default.
const DefaultCacheSize = 512

// Service puts, reads, pins and renders templates. It is safe for concurrent use.
type Service struct {
	st    Store
	en    *engine
	cache *lru.Cache[cacheKey, *parsed]
}

// Option configures a Service.
type Option func(*config)

type config struct{ cacheSize int }

// WithCacheSize sets how many parsed template versions are kept (LRU; default
// DefaultCacheSize; at least 1).
func WithCacheSize(n int) Option { return func(c *config) { c.cacheSize = max(n, 1) } }

// New returns a Service over st.
func New(st Store, opts ...Option) *Service {
	c := config{cacheSize: DefaultCacheSize}
	for _, o := range opts {
		o(&c)
	}
	cache, err := lru.New[cacheKey, *parsed](c.cacheSize)
	if err != nil {
		panic(fmt.Sprintf("tmpl: cache: %v", err)) // only for a size below 1, excluded above
	}
	return &Service{st: st, en: newEngine(), cache: cache}
}

// Put parses every part of in (Liquid syntax, no includes, sizes: see the package doc)
// and stores it as a new version of template id; it returns the version. Errors:
// BAD_USER_INPUT for a part that does not parse (naming it and the line) or anything
// store.PutTemplate refuses; nothing is written then.
func (s *Service) Put(ctx context.Context, tenantID, id string, in store.TemplateInput) (int, error) {
	if _, err := s.parse(in); err != nil {
		return 0, err
	}
	return s.st.PutTemplate(ctx, tenantID, id, in)
}

// Get returns the stored sources of template id for locale at version (store.GetTemplate:
// version 0 = the latest, locale "" = the default, fallback to the default locale).
func (s *Service) Get(ctx context.Context, tenantID, id, locale string, version int) (store.Template, error) {
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
		if _, err := store.CanonicalLocale(locale); err != nil {
			return 0, err
		}
	}
	vars, err := decodeData(data)
	if err != nil {
		return 0, err
	}
	head, err := s.st.GetTemplateHead(ctx, tenantID, id)
	if err != nil {
		return 0, unknownAsBadInput(err, id)
	}
	// The budget counts rendering only: the loads are DynamoDB reads, which a busy engine
	// may slow without the template costing anything more (a wall-clock budget over both
	// refused a one-variable template in a loaded CI run).
	var spent time.Duration
	for _, l := range head.Locales {
		p, err := s.load(ctx, tenantID, id, l, head.Version)
		if err != nil {
			return 0, unknownAsBadInput(err, id)
		}
		start := time.Now()
		deadline := start.Add(min(RenderTimeout, max(PinTimeout-spent, 0)))
		_, err = p.render(vars, deadline)
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

// Rendered is a template rendered for one recipient.
type Rendered struct {
	// Title and Body are the in-app notification's.
	Title, Body string
	// Email, Push and SMS are nil when the template has no such part.
	Email *EmailContent
	Push  *PushContent
	SMS   *SMSContent
	// Channels are the channels the template defines: inbox.ChannelInApp always, then
	// inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS for the parts present.
	Channels []string
}

// EmailContent is a rendered email: HTML with every output escaped (see the package doc).
type EmailContent struct{ Subject, HTML, Text string }

// PushContent is a rendered push notification.
type PushContent struct{ Title, Body string }

// SMSContent is a rendered SMS.
type SMSContent struct{ Text string }

// Render renders template id at version (a pinned version; 0 = the latest) for locale
// (fallback as store.GetTemplate) with data, in strict mode. Parsed versions come from a
// bounded LRU cache: a pinned version's content never changes, so it is never stale.
// Errors: NOT_FOUND for an unknown template or version; BAD_USER_INPUT naming the part
// and the undefined variable (or the budget exceeded), or for data that is not an object.
func (s *Service) Render(ctx context.Context, tenantID, id string, version int, locale string, data inbox.JSON) (Rendered, error) {
	vars, err := decodeData(data)
	if err != nil {
		return Rendered{}, err
	}
	if version == 0 {
		head, err := s.st.GetTemplateHead(ctx, tenantID, id)
		if err != nil {
			return Rendered{}, err
		}
		version = head.Version
	}
	p, err := s.load(ctx, tenantID, id, locale, version)
	if err != nil {
		return Rendered{}, err
	}
	r, err := p.render(vars, time.Now().Add(RenderTimeout))
	if err != nil {
		return Rendered{}, inbox.Errorf(inbox.CodeBadUserInput, "template %q locale %s: %s", id, p.locale, inbox.ErrorMessage(err))
	}
	return r, nil
}

// cacheKey names what a (pinned) version renders for a requested locale. The resolution
// of (locale, version) to a stored version never changes: later PUTs only add versions
// above every version already pinned.
type cacheKey struct {
	tenant, id, locale string
	version            int
}

// parsed is one stored version of one locale, parsed.
type parsed struct {
	locale                             string
	title, body                        *compiled
	emailSubject, emailHTML, emailText *compiled
	pushTitle, pushBody                *compiled
	smsText                            *compiled
}

// load returns the parsed content of (locale, version), from the cache or the store.
func (s *Service) load(ctx context.Context, tenantID, id, locale string, version int) (*parsed, error) {
	k := cacheKey{tenantID, id, locale, version}
	if p, ok := s.cache.Get(k); ok {
		return p, nil
	}
	t, err := s.st.GetTemplate(ctx, tenantID, id, locale, version)
	if err != nil {
		return nil, err
	}
	p, err := s.parse(t.TemplateInput)
	if err != nil {
		return nil, err
	}
	p.locale = t.Locale
	s.cache.Add(k, p)
	return p, nil
}

// parse parses every part of in.
func (s *Service) parse(in store.TemplateInput) (*parsed, error) {
	p := &parsed{locale: in.Locale}
	var err error
	one := func(dst **compiled, part, src string, html bool) {
		if err == nil {
			*dst, err = s.en.parse(part, src, html)
		}
	}
	one(&p.title, "title", in.Title, false)
	one(&p.body, "body", in.Body, false)
	if in.Email != nil {
		one(&p.emailSubject, "email.subject", in.Email.Subject, false)
		one(&p.emailHTML, "email.html", in.Email.HTML, true)
		one(&p.emailText, "email.text", in.Email.Text, false)
	}
	if in.Push != nil {
		one(&p.pushTitle, "push.title", in.Push.Title, false)
		one(&p.pushBody, "push.body", in.Push.Body, false)
	}
	if in.SMS != nil {
		one(&p.smsText, "sms.text", in.SMS.Text, false)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// render renders every part of p with vars, all of them within one budget that ends at
// deadline (RenderTimeout from now for one render; Pin's budget may end sooner).
func (p *parsed) render(vars map[string]any, deadline time.Time) (Rendered, error) {
	var err error
	b := &budget{deadline: deadline}
	one := func(c *compiled, part string) string {
		if err != nil {
			return ""
		}
		var out string
		out, err = c.renderWithin(part, vars, b)
		return out
	}
	r := Rendered{Title: one(p.title, "title"), Body: one(p.body, "body"), Channels: []string{inbox.ChannelInApp}}
	if p.emailSubject != nil {
		r.Email = &EmailContent{Subject: one(p.emailSubject, "email.subject"), HTML: one(p.emailHTML, "email.html"), Text: one(p.emailText, "email.text")}
		r.Channels = append(r.Channels, inbox.ChannelEmail)
	}
	if p.pushTitle != nil {
		r.Push = &PushContent{Title: one(p.pushTitle, "push.title"), Body: one(p.pushBody, "push.body")}
		r.Channels = append(r.Channels, inbox.ChannelPush)
	}
	if p.smsText != nil {
		r.SMS = &SMSContent{Text: one(p.smsText, "sms.text")}
		r.Channels = append(r.Channels, inbox.ChannelSMS)
	}
	if err != nil {
		return Rendered{}, err
	}
	return r, nil
}

// decodeData decodes a send's data (a JSON object; nil, empty or null = no variables)
// into Liquid bindings. Whole numbers become int (see numbers), others float64. An array
// or an object of more than MaxArrayItems items is BAD_USER_INPUT.
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
	return numbers(m).(map[string]any), nil
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
