package auth

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/inboxgw/gateway/inbox"
)

// Middleware verifies the request's Authorization header and stores the Claims in the
// request context (read them with FromContext).
//
// A request without an Authorization header (or with a blank one) passes through without
// Claims: resolvers answer UNAUTHENTICATED for the fields that need a viewer, and
// WebSocket and SSE connections authenticate in connection_init instead. A request with a
// token that does not verify is answered 401 with `WWW-Authenticate: Bearer
// error="invalid_token"` (RFC 6750 section 3.1) and a GraphQL-shaped JSON body whose
// error has extensions.code UNAUTHENTICATED; the body is application/graphql-response+json
// when the request accepts that type, application/json otherwise.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values("Authorization")
		var err error
		switch {
		case len(values) == 0 || (len(values) == 1 && strings.TrimSpace(values[0]) == ""):
			next.ServeHTTP(w, r)
			return
		case len(values) > 1:
			err = unauthenticated("more than one Authorization header")
		default:
			var c Claims
			if c, err = v.FromHeader(values[0]); err == nil {
				next.ServeHTTP(w, r.WithContext(WithClaims(r.Context(), c)))
				return
			}
		}
		writeUnauthorized(w, r, err)
	})
}

// graphQLResponseType is the GraphQL-over-HTTP response media type.
const graphQLResponseType = "application/graphql-response+json"

// writeUnauthorized answers 401 with err as a GraphQL error.
func writeUnauthorized(w http.ResponseWriter, r *http.Request, err error) {
	type extensions struct {
		Code string `json:"code"`
	}
	type gqlError struct {
		Message    string     `json:"message"`
		Extensions extensions `json:"extensions"`
	}
	body, merr := json.Marshal(struct {
		Errors []gqlError `json:"errors"`
	}{[]gqlError{{Message: inbox.ErrorMessage(err), Extensions: extensions{Code: inbox.CodeUnauthenticated}}}})
	if merr != nil {
		// Cannot happen for these types; answer without a body rather than panic.
		body = nil
	}
	contentType := "application/json"
	if acceptsGraphQLResponse(r.Header.Values("Accept")) {
		contentType = graphQLResponseType
	}
	h := w.Header()
	h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	h.Set("Content-Type", contentType+"; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(body)
}

// acceptsGraphQLResponse reports whether an Accept header lists
// application/graphql-response+json with a non-zero quality.
func acceptsGraphQLResponse(accept []string) bool {
	for _, line := range accept {
		for _, part := range strings.Split(line, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != graphQLResponseType {
				continue
			}
			if q, ok := params["q"]; ok && strings.Trim(q, "0.") == "" {
				continue // q=0 means "not acceptable"
			}
			return true
		}
	}
	return false
}
