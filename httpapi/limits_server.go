package httpapi

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// Timeouts are the HTTP server's connection timeouts (issue 8, item 4: a body sent one
// byte at a time and a connection idle after a request both stayed open past 150 s).
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a request's body, from the end of its headers. It is a body read
	// deadline set per request rather than http.Server.ReadTimeout: that one stays on the
	// connection after the body is read, where the server's background read (which
	// watches for the client going away) hits it and cancels the request's context, which
	// would end SSE streams and long operations after Read.
	Read time.Duration
	// Write bounds writing a response, from the end of its headers. SSE streams and
	// WebSocket upgrades are exempt (their writes are bounded by the keep-alive).
	Write time.Duration
	// Idle bounds how long a keep-alive connection may wait for its next request.
	Idle time.Duration
}

// DefaultTimeouts are the timeouts of NewServer for zero fields.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second}

// NewServer returns the gateway's http.Server for h with timeouts t (zero fields take
// DefaultTimeouts). server.go serves with it; the tests build it the same way.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	def := DefaultTimeouts
	if t.ReadHeader <= 0 {
		t.ReadHeader = def.ReadHeader
	}
	if t.Read <= 0 {
		t.Read = def.Read
	}
	if t.Write <= 0 {
		t.Write = def.Write
	}
	if t.Idle <= 0 {
		t.Idle = def.Idle
	}
	return &http.Server{
		Handler:           connDeadlines(h, t.Read),
		ReadHeaderTimeout: t.ReadHeader,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
}

// isStream reports whether r opens a long-lived stream: an SSE subscription or a
// WebSocket upgrade.
func isStream(r *http.Request) bool {
	return isWebSocketUpgrade(r) || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// connDeadlines sets the connection deadlines of one request: a body must arrive within
// read (the deadline is lifted once the body is read to its end, so it never cancels the
// request later), and a stream's writes have no deadline (http.Server.WriteTimeout would
// end an SSE stream or a hijacked WebSocket connection after Write).
func connDeadlines(next http.Handler, read time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if isStream(r) {
			_ = rc.SetWriteDeadline(time.Time{})
		}
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(read))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline when the body has been read to its
// end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
