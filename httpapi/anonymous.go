package httpapi

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
)

// Requests without a token read nothing: every field that reaches the inbox answers
// UNAUTHENTICATED. Their only legitimate uses are GraphiQL's introspection in dev mode and
// a client that forgot its header, so they share a small pool of slots: a flood of them
// (a megabyte document each, read, decoded and lexed before it is refused) waits for a slot
// instead of taking every core from the clients that have a token (issue 8: "eight hostile
// requests at once keep a normal client's p99 within 2× its idle p99"). Waiting also
// slows the flood itself: its next request is not sent before this one is answered.
const (
	// DefaultAnonymousConcurrency is how many requests without a token run at once.
	DefaultAnonymousConcurrency = 2
	// anonymousQueue is how many more may wait for a slot; the next gets 429 at once.
	anonymousQueue = 256
	// anonymousWait is how long one waits before it gets 429.
	anonymousWait = 5 * time.Second
)

// anonymousGate bounds the GraphQL requests without a token that run at once. WebSocket
// upgrades are not counted: they authenticate in connection_init (and wait for it at most
// INBOX_WS_INIT_TIMEOUT). SSE requests are: they carry their token in the header like any
// other, so one without a token is refused at once and cannot hold its slot, and an
// Accept header must not be a way around the bound. A request beyond the bound waits up to anonymousWait behind at most
// anonymousQueue others, then gets 429 THROTTLED with Retry-After: 1.
type anonymousGate struct {
	slots   chan struct{}
	waiting atomic.Int64
}

func newAnonymousGate(n int) *anonymousGate {
	return &anonymousGate{slots: make(chan struct{}, max(n, 1))}
}

func (g *anonymousGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.FromContext(r.Context()); ok || isWebSocketUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case g.slots <- struct{}{}:
		default:
			if !g.await(w, r) {
				return
			}
		}
		defer func() { <-g.slots }()
		next.ServeHTTP(w, r)
	})
}

// await waits for a slot; false when the request was answered (429) or its client left.
func (g *anonymousGate) await(w http.ResponseWriter, r *http.Request) bool {
	defer g.waiting.Add(-1)
	if g.waiting.Add(1) > anonymousQueue {
		tooManyAnonymous(w)
		return false
	}
	t := time.NewTimer(anonymousWait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-t.C:
		tooManyAnonymous(w)
		return false
	case <-r.Context().Done():
		return false
	}
}

func tooManyAnonymous(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeRequestError(w, http.StatusTooManyRequests, inbox.CodeThrottled,
		"too many requests without a token at once; retry later, or send a token")
}
