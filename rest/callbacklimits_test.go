package rest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/providerhook"
	"github.com/inboxgw/gateway/rest"
)

// countingHook is a provider hook whose Events only counts its calls (it would check the
// signature) and the bytes it was handed.
type countingHook struct {
	limits providerhook.Limits
	calls  atomic.Int64
}

func (h *countingHook) Name() string                { return "counted" }
func (h *countingHook) Limits() providerhook.Limits { return h.limits }
func (h *countingHook) Events(*http.Request, []byte) ([]inbox.ProviderEvent, error) {
	h.calls.Add(1)
	return nil, inbox.Errorf(inbox.CodeUnauthenticated, "the callback's signature does not verify")
}

// noAuth refuses every token (no callback carries one).
type noAuth struct{}

func (noAuth) FromHeader(string) (auth.Claims, error) {
	return auth.Claims{}, inbox.Errorf(inbox.CodeUnauthenticated, "no tokens here")
}

// countingReader is a body that counts the bytes read from it.
type countingReader struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// The guard of POST /v1/webhooks/provider/{name} holds a callback to its provider's
// limits before the hook (the signature check) is reached: a query string over them is
// refused before a byte of the body is read, a declared length over them too, a body
// that turns out longer (no Content-Length) once the limit's bytes are read. Within the
// limits the hook is asked.
func TestCallbackGuardRefusesOverTheProvidersLimitsBeforeTheHook(t *testing.T) {
	t.Parallel()
	lim := providerhook.Limits{BodyBytes: 16 << 10, QueryBytes: 2 << 10, Fields: 64}
	hook := &countingHook{limits: lim}
	h, err := rest.NewHandler(rest.Options{Backend: struct{ rest.Backend }{}, Auth: noAuth{}, Providers: []rest.ProviderHook{hook}})
	if err != nil {
		t.Fatal(err)
	}
	const path = "/v1/webhooks/provider/counted"
	for _, c := range []struct {
		name       string
		query      string
		body       int
		chunked    bool
		status     int
		code       string
		hookCalled bool
		maxRead    int64
	}{
		{"query one byte over", strings.Repeat("q", lim.QueryBytes+1), 100, false, 400, inbox.CodeBadRequest, false, 0},
		{"query 512 KiB, body 1 MiB", strings.Repeat("q", 512<<10), 1 << 20, false, 400, inbox.CodeBadRequest, false, 0},
		{"declared one byte over", "", int(lim.BodyBytes) + 1, false, 413, rest.CodePayloadTooLarge, false, 0},
		{"declared 1 MiB", "", 1 << 20, false, 413, rest.CodePayloadTooLarge, false, 0},
		{"chunked one byte over", "", int(lim.BodyBytes) + 1, true, 413, rest.CodePayloadTooLarge, false, lim.BodyBytes + 1},
		{"chunked 1 MiB", "", 1 << 20, true, 413, rest.CodePayloadTooLarge, false, lim.BodyBytes + 1},
		{"at the limits", strings.Repeat("q", lim.QueryBytes), int(lim.BodyBytes), false, 401, inbox.CodeUnauthenticated, true, lim.BodyBytes},
		{"at the limits, chunked", strings.Repeat("q", lim.QueryBytes), int(lim.BodyBytes), true, 401, inbox.CodeUnauthenticated, true, lim.BodyBytes},
	} {
		body := &countingReader{r: strings.NewReader(strings.Repeat("a", c.body))}
		r := httptest.NewRequest(http.MethodPost, path+"?"+c.query, body)
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.ContentLength = int64(c.body) // declared (httptest does not know the reader)
		if c.chunked {
			r.ContentLength = -1
		}
		before := hook.calls.Load()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var p rest.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != c.status || string(p.Code) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, w.Code, w.Body, c.status, c.code)
		}
		if called := hook.calls.Load() > before; called != c.hookCalled {
			t.Errorf("%s: hook called %v, want %v", c.name, called, c.hookCalled)
		}
		if n := body.read.Load(); n > c.maxRead {
			t.Errorf("%s: %d body bytes read, want at most %d", c.name, n, c.maxRead)
		}
	}
}
