package rest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/inboxgw/gateway/inbox"
)

// callbackEventsKey is the context key of a provider callback's verified events.
type callbackEventsKey struct{}

// callbackEvents returns the events the route's guard verified (ok false when the guard
// did not run: a callback never reaches the Backend unverified).
func callbackEvents(ctx context.Context) ([]inbox.ProviderEvent, bool) {
	evs, ok := ctx.Value(callbackEventsKey{}).([]inbox.ProviderEvent)
	return evs, ok
}

// callback authenticates a provider callback before the generated code reads anything:
// the provider named in the path must be configured (else 404); the query string and the
// declared length must be within the provider's Limits (else 400 BAD_REQUEST, 413
// PAYLOAD_TOO_LARGE) before the body is read, and the body is read within them (else
// 413); then the provider's hook checks the form's field count (400) and, only then, the
// signature over the raw body (401 UNAUTHENTICATED when it does not hold, nothing
// changed). An unauthenticated callback thus costs time linear in a small input. The
// verified events go to the handler in the request's context; the body is handed on for
// the generated decode.
func (m *routeMux) callback(w http.ResponseWriter, r *http.Request, rt route, next http.Handler) {
	hook, ok := m.hooks[r.PathValue("name")]
	if !ok {
		writeProblem(w, http.StatusNotFound, inbox.CodeNotFound, "no callbacks of provider "+r.PathValue("name")+" are configured on this gateway")
		return
	}
	lim := hook.Limits()
	if err := lim.CheckRequest(r); err != nil {
		writeError(m.h.log, w, r, err)
		return
	}
	maxBody := min(rt.maxBody, lim.BodyBytes)
	if r.ContentLength > maxBody {
		writeProblem(w, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "request body over this operation's limit")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if _, over := errors.AsType[*http.MaxBytesError](err); over {
		writeProblem(w, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "request body over this operation's limit")
		return
	}
	if err != nil {
		writeProblem(w, http.StatusBadRequest, inbox.CodeBadUserInput, "the request body could not be read")
		return
	}
	events, err := hook.Events(r, body)
	if err != nil {
		var ie *inbox.Error
		if errors.As(err, &ie) && ie.Code == inbox.CodeUnauthenticated {
			// Not a bearer challenge: the provider's signature is what is missing.
			w.Header().Set("WWW-Authenticate", `Signature realm="provider callback"`)
		}
		writeError(m.h.log, w, r, err)
		return
	}
	if events == nil {
		events = []inbox.ProviderEvent{}
	}
	r = r.WithContext(context.WithValue(r.Context(), callbackEventsKey{}, events))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	next.ServeHTTP(w, r)
}
