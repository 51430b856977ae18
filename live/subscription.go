package live

import (
	"sync"

	"github.com/inboxgw/gateway/inbox"
)

// NotificationBuffer is how many undelivered notificationAdded events one subscriber may
// hold; past it the subscription ends with ErrOverflow.
const NotificationBuffer = 64

// recentIDs is how many notification ids a subscription remembers to drop duplicates: a
// change published by a gateway and again by the stream relay arrives twice, close in
// time.
const recentIDs = 64

// Subscription is one subscriber's view of an inbox's changes: a coalesced badge signal
// (BadgeChanged, then Latest) and a bounded queue of new notifications (Added). Brokers
// create them; the zero value is not usable.
type Subscription struct {
	mu        sync.Mutex
	badgeOnly bool // no added queue (BadgeOnly)
	latest    inbox.Change
	badge     chan struct{}
	added     chan *inbox.Notification
	dropped   chan struct{}
	overflow  bool
	// recent holds the last notification ids delivered (a ring; next is the slot to fill),
	// allocated on the first notification.
	recent []string
	next   int
	// notify, when set (OnChange), runs after each delivery that told the subscriber
	// something.
	notify    func()
	close     func()
	closeOnce sync.Once
}

// SubscribeOption adjusts a new subscription.
type SubscribeOption func(*Subscription)

// BadgeOnly subscribes to the badge alone: new notifications are not queued (Added
// delivers nothing and Overflowed never fires), though their badge hints still signal. An
// unreadCount subscriber needs nothing more, and saves the queue (about 0.6 KiB) and the
// notifications it would hold.
func BadgeOnly() SubscribeOption { return func(s *Subscription) { s.badgeOnly = true } }

func newSubscription(opts []SubscribeOption) *Subscription {
	s := &Subscription{badge: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	if !s.badgeOnly {
		s.added = make(chan *inbox.Notification, NotificationBuffer)
		s.dropped = make(chan struct{})
	}
	return s
}

// seen reports whether id was delivered already and otherwise remembers it. s.mu is held.
func (s *Subscription) seen(id string) bool {
	for _, r := range s.recent {
		if r == id {
			return true
		}
	}
	if s.recent == nil {
		s.recent = make([]string, 0, recentIDs)
	}
	if len(s.recent) < recentIDs {
		s.recent = append(s.recent, id)
	} else {
		s.recent[s.next] = id
		s.next = (s.next + 1) % recentIDs
	}
	return false
}

// deliver hands c to the subscriber: a badge change replaces the pending one (coalescing;
// a change not newer than the one held is ignored), a new notification is queued once
// (bounded; on overflow the subscription is marked dropped). It never blocks.
func (s *Subscription) deliver(c inbox.Change) {
	s.mu.Lock()
	if c.Notification != nil && s.seen(c.Notification.ID) {
		// Delivered already (by another path): neither the notification nor its badge
		// hint is news.
		s.mu.Unlock()
		return
	}
	signal := true
	switch {
	case c.Version == 0:
		// An unversioned hint (or a resync) asks the reader to re-read the store.
		s.latest.Version = 0
	case s.latest.Version == 0 || c.Version > s.latest.Version:
		s.latest = inbox.Change{Viewer: c.Viewer, UnreadCount: c.UnreadCount, Version: c.Version}
	default:
		signal = false // stale or duplicate state: nothing to tell
	}
	notify := s.notify
	s.mu.Unlock()
	if signal {
		select {
		case s.badge <- struct{}{}:
		default: // a signal is already pending: the reader will see the latest state
		}
	}
	if c.Notification != nil && !s.badgeOnly {
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
	if notify != nil && (signal || (c.Notification != nil && !s.badgeOnly)) {
		notify()
	}
}

// OnChange makes s call f after each delivery that tells the subscriber something (a
// badge signal, a queued notification, an overflow, a resync), so a consumer can react
// without a goroutine blocked on the channels: f then reads them without blocking. f runs
// on the publisher's goroutine (a broker's, or a mutation's after its commit), possibly
// on several at once; it must not block. It also runs once before OnChange returns, for
// whatever was delivered before it was set.
func (s *Subscription) OnChange(f func()) {
	s.mu.Lock()
	s.notify = f
	s.mu.Unlock()
	f()
}

// resync tells the subscriber that changes may have been missed: the badge must be
// re-read from the store (Latest returns Version 0).
func (s *Subscription) resync() {
	s.deliver(inbox.Change{})
}

// BadgeChanged fires (coalesced) when the badge may have changed; then call Latest.
func (s *Subscription) BadgeChanged() <-chan struct{} { return s.badge }

// Latest returns the newest badge state seen: Version 0 means "changed, count unknown:
// read it from the store" (also sent when the broker lost and regained its connection).
func (s *Subscription) Latest() inbox.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Added delivers new notifications of the inbox, each at most once, in commit order per
// writer. It is nil (never delivers) for a BadgeOnly subscription.
func (s *Subscription) Added() <-chan *inbox.Notification { return s.added }

// Overflowed is closed when the subscriber fell more than NotificationBuffer events behind;
// its notificationAdded stream must then end with an error. It is nil (never fires) for a
// BadgeOnly subscription.
func (s *Subscription) Overflowed() <-chan struct{} { return s.dropped }

// Close unregisters the subscription. It is idempotent.
func (s *Subscription) Close() { s.closeOnce.Do(s.close) }
