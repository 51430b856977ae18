package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/providerhook"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/telemetry"
)

// Scopes of service tokens (README "Service API (REST /v1)").
const (
	// ScopeSend grants sends, broadcasts, status and feeds.
	ScopeSend = auth.ScopeSend
	// ScopeAdmin grants templates, segments, users, preferences and tenant settings.
	ScopeAdmin = "notifications:admin"
)

// Body limits of the operations that take a body, in bytes.
const (
	// MaxSendBytes bounds a send or a broadcast (1,000 recipients of 256-byte ids fit,
	// next to a 16 KiB data document).
	MaxSendBytes = 512 << 10
	// MaxSegmentChangeBytes bounds a segment change (1,000 ids of 256 bytes, quoted).
	MaxSegmentChangeBytes = 512 << 10
	// MaxTemplateBytes bounds a template version.
	MaxTemplateBytes = 256 << 10
	// MaxUserBytes bounds a user's channel profile.
	MaxUserBytes = 16 << 10
	// MaxSettingsBytes bounds preferences and tenant settings.
	MaxSettingsBytes = 64 << 10
	// MaxDeviceBytes bounds a device registration (a token of at most 4,096 bytes).
	MaxDeviceBytes = 8 << 10
	// MaxCallbackBytes bounds any provider callback (a SendGrid batch of events); each
	// provider's ProviderHook.Limits bound its own callbacks within it (a Twilio status
	// callback: 16 KiB).
	MaxCallbackBytes = providerhook.MaxBodyBytes
)

// Authenticator verifies an Authorization header value ("Bearer <JWT>"); *auth.Verifier
// implements it. Errors are *inbox.Error with code UNAUTHENTICATED.
type Authenticator interface {
	FromHeader(value string) (auth.Claims, error)
}

// Options are the dependencies of NewHandler.
type Options struct {
	// Backend does the work of every operation.
	Backend Backend
	// Auth verifies bearer tokens.
	Auth Authenticator
	// Log receives the errors answered as INTERNAL_SERVER_ERROR (nil: slog.Default()).
	Log *slog.Logger
	// Now is the clock that sendAt and expiresAt are checked against (nil: time.Now).
	Now func() time.Time
	// Providers authenticate the callbacks of POST /v1/webhooks/provider/{name}, by
	// Name; a provider not among them is answered 404 (not configured).
	Providers []ProviderHook
}

// ProviderHook authenticates and parses one provider's callbacks (providerhook.Twilio
// and providerhook.SendGrid implement it).
type ProviderHook interface {
	// Name is the {name} of the callback's path.
	Name() string
	// Limits bound the provider's callbacks: one over them is refused before its body is
	// read (query string, Content-Length) or before its signature is checked.
	Limits() providerhook.Limits
	// Events authenticates r, whose whole body is body, and returns its delivery events.
	// Errors are *inbox.Error: BAD_REQUEST or PAYLOAD_TOO_LARGE for a callback over
	// Limits, UNAUTHENTICATED for a missing, wrong or expired signature, BAD_USER_INPUT
	// for a signed body that cannot be read.
	Events(r *http.Request, body []byte) ([]inbox.ProviderEvent, error)
}

// route is what the handler enforces for one operation before the generated code runs.
type route struct {
	// scope is the scope the token needs; "" for a public operation (no token needed).
	scope string
	// self lets a user token (one without a service scope) through when the path's {id}
	// is its own sub.
	self bool
	// maxBody is the body limit in bytes; 0 for an operation without a body.
	maxBody int64
	// newBody returns a pointer to the body's generated type, for the strict decode.
	newBody func() any
	// callback marks a provider callback: no token; the provider's signature (checked by
	// Options.Providers) authenticates it, over the raw body of at most maxBody bytes.
	callback bool
}

// routes are the operations of the document by the pattern the generated code registers;
// NewHandler fails when the generated code registers a pattern not listed here.
var routes = map[string]route{
	"GET /v1/openapi.json":                        {},
	"GET /v1/docs":                                {},
	"GET " + RedocBundlePath:                      {},
	"POST /v1/notifications":                      {scope: ScopeSend, maxBody: MaxSendBytes, newBody: func() any { return new(gen.SendRequest) }},
	"GET /v1/notifications":                       {scope: ScopeSend},
	"GET /v1/notifications/{id}/status":           {scope: ScopeSend},
	"POST /v1/broadcasts":                         {scope: ScopeSend, maxBody: MaxSendBytes, newBody: func() any { return new(gen.BroadcastRequest) }},
	"GET /v1/broadcasts/{id}":                     {scope: ScopeSend},
	"DELETE /v1/broadcasts/{id}":                  {scope: ScopeSend},
	"POST /v1/announcements":                      {scope: ScopeSend, maxBody: MaxSendBytes, newBody: func() any { return new(gen.AnnouncementRequest) }},
	"GET /v1/announcements/{id}":                  {scope: ScopeSend},
	"DELETE /v1/announcements/{id}":               {scope: ScopeSend},
	"PUT /v1/segments/{id}/members":               {scope: ScopeAdmin, maxBody: MaxSegmentChangeBytes, newBody: func() any { return new(gen.SegmentMembersChange) }},
	"GET /v1/segments/{id}":                       {scope: ScopeAdmin},
	"GET /v1/users/{id}":                          {scope: ScopeAdmin},
	"GET /v1/tenant/settings":                     {scope: ScopeAdmin},
	"GET /v1/suppressions":                        {scope: ScopeAdmin},
	"DELETE /v1/suppressions/{channel}/{address}": {scope: ScopeAdmin},
	"PUT /v1/templates/{id}":                      {scope: ScopeAdmin, maxBody: MaxTemplateBytes, newBody: func() any { return new(gen.TemplateInput) }},
	"GET /v1/templates/{id}":                      {scope: ScopeAdmin},
	"PUT /v1/users/{id}":                          {scope: ScopeAdmin, maxBody: MaxUserBytes, newBody: func() any { return new(gen.UserProfileInput) }},
	"GET /v1/users/{id}/preferences":              {scope: ScopeAdmin, self: true},
	"PUT /v1/users/{id}/preferences":              {scope: ScopeAdmin, self: true, maxBody: MaxSettingsBytes, newBody: func() any { return new(gen.PreferencesInput) }},
	"PUT /v1/tenant/settings":                     {scope: ScopeAdmin, maxBody: MaxSettingsBytes, newBody: func() any { return new(gen.TenantSettingsInput) }},
	"POST /v1/users/{id}/devices":                 {scope: ScopeAdmin, self: true, maxBody: MaxDeviceBytes, newBody: func() any { return new(gen.DeviceInput) }},
	"DELETE /v1/users/{id}/devices/{token}":       {scope: ScopeAdmin, self: true},
	"POST /v1/webhooks/provider/{name}":           {callback: true, maxBody: MaxCallbackBytes},
}

// Handler serves /v1. Mount it at "/v1/".
type Handler struct {
	mux *http.ServeMux
	log *slog.Logger
}

// methods are the methods tried to tell a wrong method (405) from an unknown route (404).
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern == "" {
		var allowed []string
		for _, m := range methods {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := h.mux.Handler(probe); p != "" {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeProblem(w, http.StatusMethodNotAllowed, inbox.CodeBadRequest,
				fmt.Sprintf("method %s is not allowed here (allowed: %s)", r.Method, strings.Join(allowed, ", ")))
			return
		}
		writeProblem(w, http.StatusNotFound, inbox.CodeNotFound, "no endpoint "+r.URL.Path+" (see /v1/openapi.json)")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// NewHandler returns the /v1 handler: the generated server over Options.Backend, behind
// authentication, scopes, body limits and problem details.
func NewHandler(o Options) (*Handler, error) {
	if o.Backend == nil || o.Auth == nil {
		return nil, errors.New("rest: a Backend and an Authenticator are required")
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	spec, err := OpenAPIJSON()
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("rest: openapi document: %w", err)
	}
	h := &Handler{mux: http.NewServeMux(), log: log}
	rm := &routeMux{h: h, auth: o.Auth, hooks: map[string]ProviderHook{}}
	for _, p := range o.Providers {
		if _, dup := rm.hooks[p.Name()]; dup {
			return nil, fmt.Errorf("rest: two provider hooks named %q", p.Name())
		}
		rm.hooks[p.Name()] = p
	}
	srv := &server{b: o.Backend, now: now, doc: doc}
	strict := gen.NewStrictHandlerWithOptions(srv, nil, gen.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			if _, over := errors.AsType[*http.MaxBytesError](err); over {
				writeError(log, w, r, err)
				return
			}
			writeProblem(w, http.StatusBadRequest, inbox.CodeBadUserInput, "the body does not match the operation's schema")
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) { writeError(log, w, r, err) },
	})
	gen.HandlerWithOptions(strict, gen.StdHTTPServerOptions{
		BaseRouter:       rm,
		ErrorHandlerFunc: paramError,
	})
	if len(rm.missing) > 0 {
		return nil, fmt.Errorf("rest: generated routes without an entry in routes: %s", strings.Join(rm.missing, ", "))
	}
	return h, nil
}

// paramError answers the generated code's parameter errors (a missing header, a query
// parameter of the wrong type) as BAD_USER_INPUT naming the parameter.
func paramError(w http.ResponseWriter, _ *http.Request, err error) {
	var (
		reqHeader *gen.RequiredHeaderError
		reqParam  *gen.RequiredParamError
		format    *gen.InvalidParamFormatError
		many      *gen.TooManyValuesForParamError
		unmarshal *gen.UnmarshalingParamError
	)
	msg := "a parameter is not valid"
	switch {
	case errors.As(err, &reqHeader):
		msg = "header " + reqHeader.ParamName + " is required"
	case errors.As(err, &reqParam):
		msg = "parameter " + reqParam.ParamName + " is required"
	case errors.As(err, &format):
		msg = "parameter " + format.ParamName + " is not valid"
	case errors.As(err, &many):
		msg = "parameter " + many.ParamName + " is given more than once"
	case errors.As(err, &unmarshal):
		msg = "parameter " + unmarshal.ParamName + " is not valid"
	}
	writeProblem(w, http.StatusBadRequest, inbox.CodeBadUserInput, msg)
}

// routeMux registers the generated handlers on the handler's ServeMux, each behind its
// route's checks (gen.ServeMux).
type routeMux struct {
	h       *Handler
	auth    Authenticator
	hooks   map[string]ProviderHook
	missing []string
}

// HandleFunc registers next for pattern behind the checks of routes[pattern].
func (m *routeMux) HandleFunc(pattern string, next func(http.ResponseWriter, *http.Request)) {
	rt, ok := routes[pattern]
	if !ok {
		m.missing = append(m.missing, pattern)
		return
	}
	m.h.mux.Handle(pattern, telemetry.Routed(m.guard(rt, http.HandlerFunc(next))))
}

func (m *routeMux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.h.ServeHTTP(w, r) }

// guard checks the token and its scope, then bounds and strictly decodes the body.
func (m *routeMux) guard(rt route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.callback {
			m.callback(w, r, rt, next)
			return
		}
		if rt.scope != "" {
			c, err := m.authenticate(r)
			if err != nil {
				// RFC 6750 section 3.1: a request without a token gets no error code
				// (writeProblem answers plain "Bearer"); a bad one gets invalid_token.
				if !errors.Is(err, errNoToken) {
					w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				}
				writeProblem(w, http.StatusUnauthorized, inbox.CodeUnauthenticated, inbox.ErrorMessage(err))
				return
			}
			if err := authorize(rt, c, r.PathValue("id")); err != nil {
				writeProblem(w, http.StatusForbidden, inbox.CodeForbidden, err.Error())
				return
			}
			r = r.WithContext(auth.WithClaims(r.Context(), c))
		}
		if rt.maxBody > 0 {
			b, code, msg := readBody(w, r, rt)
			if msg != "" {
				writeProblem(w, StatusOf(code), code, msg)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
		}
		next.ServeHTTP(w, r)
	})
}

// errNoToken is the answer to a request without a token.
var errNoToken = inbox.Errorf(inbox.CodeUnauthenticated, "a bearer token is required (Authorization: Bearer <JWT>)")

// authenticate verifies the request's one Authorization header.
func (m *routeMux) authenticate(r *http.Request) (auth.Claims, error) {
	values := r.Header.Values("Authorization")
	switch {
	case len(values) == 0 || (len(values) == 1 && strings.TrimSpace(values[0]) == ""):
		return auth.Claims{}, errNoToken
	case len(values) > 1:
		return auth.Claims{}, inbox.Errorf(inbox.CodeUnauthenticated, "more than one Authorization header")
	}
	return m.auth.FromHeader(values[0])
}

// isUserToken reports whether c is a user's token: one with neither service scope.
func isUserToken(c auth.Claims) bool {
	return !c.HasScope(ScopeSend) && !c.HasScope(ScopeAdmin)
}

// authorize checks that c may call the operation of rt on the path id pathID.
func authorize(rt route, c auth.Claims, pathID string) error {
	if c.HasScope(rt.scope) {
		return nil
	}
	if rt.self && isUserToken(c) {
		if pathID == c.UserID {
			return nil
		}
		return errors.New("a user token reaches only its own user's preferences and devices")
	}
	return fmt.Errorf("this operation needs a token with scope %s", rt.scope)
}

// readBody reads the body within rt's limit and decodes it strictly into rt's type:
// JSON only, one value, no member the document does not name, each named exactly and
// once (exactMembers). It returns the code and a client-safe message of what is wrong, or
// the body.
func readBody(w http.ResponseWriter, r *http.Request, rt route) ([]byte, string, string) {
	tooLarge := fmt.Sprintf("request body over this operation's limit of %d bytes", rt.maxBody)
	if r.ContentLength > rt.maxBody {
		return nil, CodePayloadTooLarge, tooLarge
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, inbox.CodeBadUserInput, "Content-Type must be application/json"
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rt.maxBody))
	if _, over := errors.AsType[*http.MaxBytesError](err); over {
		return nil, CodePayloadTooLarge, tooLarge
	}
	if err != nil {
		return nil, inbox.CodeBadUserInput, "the request body could not be read"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	body := rt.newBody()
	if err := dec.Decode(body); err != nil {
		return nil, inbox.CodeBadUserInput, decodeMessage(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, inbox.CodeBadUserInput, "the request body must be one JSON value"
	}
	if msg := exactMembers(b, reflect.TypeOf(body)); msg != "" {
		return nil, inbox.CodeBadUserInput, msg
	}
	return b, "", ""
}

// decodeMessage describes a JSON decode error without Go's type names.
func decodeMessage(err error) string {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		parse  *time.ParseError
	)
	switch {
	case errors.As(err, &typ):
		if typ.Field == "" {
			return "the request body must be " + jsonKind(typ.Type)
		}
		return typ.Field + " must be " + jsonKind(typ.Type)
	case errors.As(err, &parse):
		return "a date-time must be RFC 3339, e.g. 2030-01-02T15:04:05Z"
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the request body is not valid JSON"
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + name
	}
	return "the request body does not match the operation's schema"
}

// jsonKind names the JSON kind a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "of another type"
}
