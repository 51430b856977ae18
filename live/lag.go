package live

import (
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Paths of a change to this process's subscriptions, as LagObserver reports them.
const (
	LagLocal = "local" // published in this process: from Publish to the hand-off to every subscription
	LagRedis = "redis" // published by another process: from its Redis publish (its clock) to the hand-off here
)

// LagObserver receives the publish lag of each change delivered to this process's
// subscriptions: the path (LagLocal, LagRedis) and the time from the publish to the
// hand-off. It runs on the delivering goroutine and must not block (metrics.Registry's
// ObservePublishLag fits).
type LagObserver func(path string, d time.Duration)

// LocalOption configures NewLocal.
type LocalOption func(*Local)

// WithLagObserver reports the publish lag of every change to f.
func WithLagObserver(f LagObserver) LocalOption { return func(b *Local) { b.h.lag = f } }

// deliverSince delivers c and reports its lag since t on path, when an observer is set.
func (h *hub) deliverSince(c inbox.Change, t time.Time, path string) {
	h.deliver(c)
	if h.lag != nil && !t.IsZero() {
		h.lag(path, time.Since(t))
	}
}
