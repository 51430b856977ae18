// Package live is live delivery in one place: it carries inbox changes to subscriptions
// and turns them into the streams the transports serve.
//
//   - Brokers: the Broker interface with an in-process implementation (Local) and a Redis
//     pub/sub one (Redis, for many gateway instances and the stream relay); the Redis wire
//     carries a change's kind, ids and whole badge.
//   - Subscriptions: per subscriber, a coalesced badge that never moves back by META
//     version, and bounded queues of new notifications or of events (WithEvents),
//     de-duplicated across the writer's publish and the relay's (dedup.go).
//   - Streams (OpenBadge, OpenAdded, OpenEvents): what the subscription resolvers return,
//     fed without a goroutine per subscriber while idle, signalling the transport through
//     a StreamHook; re-reads of the badge with backoff; SLOW_CONSUMER for a subscriber that
//     overflows its bound.
//
// What a change means is explicit: inbox.Change.Kind (KindOf) says what the write did,
// inbox.EventNone being a badge refresh or, with Version 0, a re-read hint.
package live

import (
	"context"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Broker carries committed changes (Publish) to the subscriptions of every gateway
// instance that shares it. Publish never blocks on a subscriber.
type Broker interface {
	inbox.Publisher
	// Subscribe registers a subscription to v's changes. Close it when done.
	Subscribe(v inbox.Viewer, opts ...SubscribeOption) *Subscription
	// Close releases the broker's connections; subscriptions get nothing more.
	Close() error
}

// Local is the in-process broker: a Publisher whose changes reach the subscriptions of
// this process. It is safe for concurrent use; Publish never blocks on a subscriber.
type Local struct {
	h     *hub
	wakes wakes
}

var _ Broker = (*Local)(nil)

// NewLocal returns an empty in-process broker.
func NewLocal(opts ...LocalOption) *Local {
	b := &Local{h: newHub()}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Publish hands c to every subscription of c.Viewer: a badge change replaces the pending
// one (coalescing), a new notification is queued (bounded).
func (b *Local) Publish(_ context.Context, c inbox.Change) {
	b.h.deliverSince(c, time.Now(), LagLocal)
}

// Subscribe registers a subscription to v's changes. Close it when done.
func (b *Local) Subscribe(v inbox.Viewer, opts ...SubscribeOption) *Subscription {
	return b.h.subscribe(v, opts)
}

// Subscribers returns how many subscriptions are registered (for tests and metrics).
func (b *Local) Subscribers() int { return b.h.count() }

// Close does nothing: the local broker holds no connection.
func (b *Local) Close() error { return nil }
