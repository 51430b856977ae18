package rest

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
)

// Codes the service API answers with their own status (inbox's codes, named here for the
// handlers): a reused idempotency key with another body (409), and a body over its
// operation's limit (413, which the provider hooks answer too).
const (
	CodeConflict        = inbox.CodeConflict
	CodePayloadTooLarge = inbox.CodePayloadTooLarge
)

// ProblemType is the RFC 9457 problem type of every problem: "about:blank" (section
// 4.2.1), so the title is the status's reason phrase; the client reads `code` to tell
// problems apart.
const ProblemType = "about:blank"

// ProblemContentType is the media type of problem details.
const ProblemContentType = "application/problem+json"

// statusOf is the HTTP status of each error code; a code not listed is 500.
var statusOf = map[string]int{
	inbox.CodeBadUserInput:    http.StatusBadRequest,
	inbox.CodeBadRequest:      http.StatusBadRequest,
	inbox.CodeUnauthenticated: http.StatusUnauthorized,
	inbox.CodeForbidden:       http.StatusForbidden,
	inbox.CodeNotFound:        http.StatusNotFound,
	CodeConflict:              http.StatusConflict,
	CodePayloadTooLarge:       http.StatusRequestEntityTooLarge,
	inbox.CodeThrottled:       http.StatusTooManyRequests,
	inbox.CodeUnavailable:     http.StatusServiceUnavailable,
	inbox.CodeInternal:        http.StatusInternalServerError,
}

// StatusOf returns the HTTP status that answers an error of code (500 for an unknown code).
func StatusOf(code string) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// writeProblem answers status with a problem of code whose detail is detail.
func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	p := gen.Problem{Type: ProblemType, Title: http.StatusText(status), Status: status, Code: gen.ProblemCode(code)}
	if detail != "" {
		p.Detail = &detail
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen for this type; answer without a body rather than panic
		body = nil
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers err as a problem: an *inbox.Error with its code and message, a body
// cut off by its limit as PAYLOAD_TOO_LARGE, anything else as INTERNAL_SERVER_ERROR with
// a generic message (logged here, where it is handled).
func writeError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	if _, over := errors.AsType[*http.MaxBytesError](err); over {
		writeProblem(w, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "request body over this operation's limit")
		return
	}
	var ie *inbox.Error
	if errors.As(err, &ie) {
		writeProblem(w, StatusOf(ie.Code), ie.Code, ie.Message)
		return
	}
	if r.Context().Err() != nil {
		log.DebugContext(r.Context(), "rest request cancelled by the client", "path", r.URL.Path, "err", err)
	} else {
		log.ErrorContext(r.Context(), "rest request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeProblem(w, http.StatusInternalServerError, inbox.CodeInternal, "internal server error")
}

// Problem is an RFC 9457 problem details document as the API answers it.
type Problem = gen.Problem
