package httpapi

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/rs/cors"
)

// withCORS answers CORS for browser apps on other origins (rs/cors): the same allow-list
// as WebSocket upgrades (Options.AllowedOrigins, INBOX_ALLOWED_ORIGINS), read the same
// way coder/websocket reads OriginPatterns, so HTTP and WebSockets can never disagree
// about an origin. A preflight (OPTIONS with Access-Control-Request-Method) from an
// allowed origin gets 204 with the allowed methods (GET, POST) and headers
// (Authorization, Content-Type, Accept); any other request from it gets
// Access-Control-Allow-Origin. An origin not on the list gets no CORS headers, and the
// browser refuses the answer. Credentials (cookies) are not allowed: tokens travel in the
// Authorization header. With an empty list, no CORS headers are sent (same origin only).
func withCORS(patterns []string, next http.Handler) http.Handler {
	return corsFor(patterns, []string{http.MethodGet, http.MethodPost}, []string{"Authorization", "Content-Type", "Accept"}, nil, next)
}

// withRESTCORS is withCORS for the service API under /v1: its methods (GET, POST, PUT,
// DELETE), the Idempotency-Key request header, and the Idempotent-Replayed response
// header exposed to scripts.
func withRESTCORS(patterns []string, next http.Handler) http.Handler {
	return corsFor(patterns,
		[]string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete},
		[]string{"Authorization", "Content-Type", "Accept", "Idempotency-Key"},
		[]string{"Idempotent-Replayed"}, next)
}

// corsFor answers CORS for patterns with the given methods and headers (see withCORS).
func corsFor(patterns, methods, headers, exposed []string, next http.Handler) http.Handler {
	if len(patterns) == 0 {
		return next
	}
	return cors.New(cors.Options{
		AllowOriginFunc: func(origin string) bool { return originAllowed(origin, patterns) },
		AllowedMethods:  methods,
		AllowedHeaders:  headers,
		ExposedHeaders:  exposed,
		MaxAge:          600,
	}).Handler(next)
}

// originAllowed reports whether an Origin header matches one of patterns: a host pattern
// ("app.example.com", "*.example.com") is matched against the origin's host, a pattern
// with "://" against scheme://host, case-insensitively with path.Match, as coder/websocket
// matches AcceptOptions.OriginPatterns.
func originAllowed(origin string, patterns []string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(target)); err == nil && ok {
			return true
		}
	}
	return false
}
