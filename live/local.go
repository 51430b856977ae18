// Package live carries inbox changes to subscriptions: the broker interface's in-process
// implementation, per-subscriber coalescing of badge changes and bounded buffers of new
// notifications.
package live

import (
	"context"
	"sync"

	"github.com/inboxgw/gateway/inbox"
)

// NotificationBuffer is how many undelivered notificationAdded events one subscriber may
// hold; past it the subscription ends with ErrOverflow.
const NotificationBuffer = 64

// Local is the in-process broker: a Publisher whose changes reach the subscriptions of
// this process. It is safe for concurrent use; Publish never blocks on a subscriber.
type Local struct {
	mu   sync.RWMutex
	subs map[inbox.Viewer]map[*Subscription]struct{}
}

// NewLocal returns an empty in-process broker.
func NewLocal() *Local {
	return &Local{subs: make(map[inbox.Viewer]map[*Subscription]struct{})}
}

// Publish hands c to every subscription of c.Viewer: a badge change replaces the pending
// one (coalescing), a new notification is queued (bounded).
func (b *Local) Publish(_ context.Context, c inbox.Change) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs[c.Viewer] {
		s.deliver(c)
	}
}

// Subscribe registers a subscription to v's changes. Close it when done.
func (b *Local) Subscribe(v inbox.Viewer) *Subscription {
	s := &Subscription{
		badge:   make(chan struct{}, 1),
		added:   make(chan *inbox.Notification, NotificationBuffer),
		dropped: make(chan struct{}),
	}
	s.close = func() {
		b.mu.Lock()
		if m := b.subs[v]; m != nil {
			delete(m, s)
			if len(m) == 0 {
				delete(b.subs, v)
			}
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	m := b.subs[v]
	if m == nil {
		m = make(map[*Subscription]struct{})
		b.subs[v] = m
	}
	m[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Subscribers returns how many subscriptions are registered (for tests and metrics).
func (b *Local) Subscribers() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	for _, m := range b.subs {
		n += len(m)
	}
	return n
}

// Subscription is one subscriber's view of an inbox's changes.
type Subscription struct {
	mu        sync.Mutex
	latest    inbox.Change
	badge     chan struct{}
	added     chan *inbox.Notification
	dropped   chan struct{}
	overflow  bool
	close     func()
	closeOnce sync.Once
}

func (s *Subscription) deliver(c inbox.Change) {
	s.mu.Lock()
	if c.Version == 0 || c.Version > s.latest.Version || s.latest.Version == 0 {
		// Keep the newest known state; an unversioned hint asks the reader to re-read.
		if c.Version == 0 {
			s.latest.Version = 0
		} else {
			s.latest = inbox.Change{Viewer: c.Viewer, UnreadCount: c.UnreadCount, Version: c.Version}
		}
	}
	s.mu.Unlock()
	select {
	case s.badge <- struct{}{}:
	default: // a signal is already pending: the reader will see the latest state
	}
	if c.Notification != nil {
		select {
		case s.added <- c.Notification:
		default:
			s.mu.Lock()
			if !s.overflow {
				s.overflow = true
				close(s.dropped)
			}
			s.mu.Unlock()
		}
	}
}

// BadgeChanged fires (coalesced) when the badge may have changed; then call Latest.
func (s *Subscription) BadgeChanged() <-chan struct{} { return s.badge }

// Latest returns the newest badge state seen: Version 0 means "changed, count unknown:
// read it from the store".
func (s *Subscription) Latest() inbox.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Added delivers new notifications of the inbox, in commit order per writer.
func (s *Subscription) Added() <-chan *inbox.Notification { return s.added }

// Overflowed is closed when the subscriber fell more than NotificationBuffer events behind;
// its notificationAdded stream must then end with an error.
func (s *Subscription) Overflowed() <-chan struct{} { return s.dropped }

// Close unregisters the subscription. It is idempotent.
func (s *Subscription) Close() { s.closeOnce.Do(s.close) }
