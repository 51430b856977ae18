package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// sseWriteTimeout returns how long one write of an SSE stream (an event, a ping, the
// final flush) may take: about two keep-alive intervals, as a WebSocket peer's silence,
// and at most wsWriteTimeout.
func sseWriteTimeout(keepAlive time.Duration) time.Duration {
	return min(wsWriteTimeout, wsPeerDeadlineIntervals*keepAlive)
}

// deadlineWriter is the http.ResponseWriter an SSE stream writes through: each Write and
// Flush gets a write deadline of timeout from now (http.ResponseController.
// SetWriteDeadline), and the first one that fails (a reader that stopped reading fills
// the socket's buffers, and the write times out) cancels the stream's context, which ends
// its subscription. gqlgen's SSE transport ignores write errors, and without a deadline
// such a write blocks for as long as the peer's TCP connection lives: behind a silent
// network, many minutes.
//
// The deadline also replaces the HTTP server's WriteTimeout for the stream, which would
// otherwise end every SSE stream that long after it started.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	cancel  context.CancelFunc

	mu     sync.Mutex // gqlgen writes from the stream's goroutine and its keep-alive's
	failed bool
}

// withWriteDeadlines returns w and r for an SSE stream whose writes each have timeout to
// complete; done must be called when the stream's handler returns. A ResponseWriter
// without deadline support (a test recorder) is returned as it is.
func withWriteDeadlines(w http.ResponseWriter, r *http.Request, timeout time.Duration) (http.ResponseWriter, *http.Request, func()) {
	rc := http.NewResponseController(w)
	if timeout <= 0 || rc.SetWriteDeadline(time.Now().Add(timeout)) != nil {
		return w, r, func() {}
	}
	ctx, cancel := context.WithCancel(r.Context())
	dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: timeout, cancel: cancel}
	return dw, r.WithContext(ctx), func() {
		// gqlgen's keep-alive goroutine may still tick after the stream's handler
		// returned: its write must not reach a response net/http has finished (a flush
		// then panics on the released buffer and takes the process down).
		dw.mu.Lock()
		dw.failed = true
		dw.mu.Unlock()
		cancel()
		// net/http ends the response after the handler returns (the last chunk): that
		// write gets a deadline too.
		_ = rc.SetWriteDeadline(time.Now().Add(timeout))
	}
}

// Write writes b before the deadline, or fails the stream.
func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed {
		return 0, context.Canceled
	}
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	n, err := d.ResponseWriter.Write(b)
	if err != nil {
		d.failLocked()
	}
	return n, err
}

// Flush sends what is buffered before the deadline, or fails the stream.
func (d *deadlineWriter) Flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed {
		return
	}
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	if err := d.rc.Flush(); err != nil {
		d.failLocked()
	}
}

func (d *deadlineWriter) failLocked() {
	d.failed = true
	d.cancel()
}

// Unwrap gives http.ResponseController the underlying writer.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
