package live

import (
	"sync"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// NotificationBuffer is how many undelivered notificationAdded events one subscriber may
// hold; past it the subscription ends with ErrOverflow.
const NotificationBuffer = 64

// EventBuffer is how many undelivered inbox events one events subscriber (WithEvents) may
// hold, in the subscription and again in its stream; past either the stream ends with a
// SLOW_CONSUMER error: events are not coalesced (each one tells a tab what to change), so
// a subscriber that cannot keep up must refetch rather than hold unbounded memory.
const EventBuffer = 64

// recentIDs is how many notification ids a subscription remembers to drop duplicates: a
// change published by a gateway and again by the stream relay arrives twice, close in
// time.
const recentIDs = 64

// KindOf returns what c did: c.Kind, except that a change that adds a notification but
// names no kind (a publisher that predates event kinds, e.g. an older gateway on the same
// Redis during a rolling deploy) is ADDED.
func KindOf(c inbox.Change) inbox.EventKind {
	if c.Kind == inbox.EventNone && c.Notification != nil {
		return inbox.EventAdded
	}
	return c.Kind
}

// BadgeOf returns the badge c carries and whether it is complete. A change with Version 0
// carries none (the reader must read the store). A versioned change of a publisher that
// sends only the unread count (Badge.Version != Version) yields that count alone, not
// complete: a consumer of the whole badge reads the store.
func BadgeOf(c inbox.Change) (b inbox.Badge, complete bool) {
	if c.Version == 0 {
		return inbox.Badge{}, false
	}
	if c.Badge.Version == c.Version {
		return c.Badge, true
	}
	return inbox.Badge{Unread: c.UnreadCount, Version: c.Version}, false
}

// Subscription is one subscriber's view of an inbox's changes: a coalesced badge signal
// (BadgeChanged, then Latest), a bounded queue of new notifications (Added) or, with
// WithEvents, a bounded queue of inbox events (Events). Brokers create them; the zero value
// is not usable.
//
// What a change means to it, by its kind (KindOf) and version:
//   - Version > 0: the badge as of META's Version; an older or equal one is ignored.
//   - Version 0 and kind EventNone or ADDED: a re-read hint (the badge changed, or may
//     have: read it from the store).
//   - Version 0 and any other kind: an event the stream relay derived from a notification
//     record; it says nothing about the badge (the META record of the same write does).
type Subscription struct {
	mu        sync.Mutex
	badgeOnly bool // no added queue (BadgeOnly)
	latest    inbox.Change
	badge     chan struct{}
	added     chan *inbox.Notification
	events    chan inbox.Change
	dropped   chan struct{}
	overflow  bool
	// recent holds the last notification ids delivered (a ring; next is the slot to fill),
	// allocated on the first notification.
	recent []string
	next   int
	dedup  *eventDedup // WithEvents only (80 bytes less for every other subscriber)
	now    func() time.Time
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

// WithEvents subscribes to the badge and to every inbox event (kind != EventNone, ADDED
// included) on Events, de-duplicated (see the package's de-duplication rules), instead of
// the Added queue.
func WithEvents() SubscribeOption {
	return func(s *Subscription) { s.events = make(chan inbox.Change, EventBuffer) }
}

func newSubscription(opts []SubscribeOption) *Subscription {
	s := &Subscription{badge: make(chan struct{}, 1), now: time.Now}
	for _, o := range opts {
		o(s)
	}
	switch {
	case s.events != nil:
		s.badgeOnly = false
		s.dropped = make(chan struct{})
		s.dedup = &eventDedup{}
	case !s.badgeOnly:
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
// a change not newer than the one held is ignored), a new notification or an event is
// queued once (bounded; on overflow the subscription is marked dropped). It never blocks.
func (s *Subscription) deliver(c inbox.Change) {
	kind := KindOf(c)
	s.mu.Lock()
	if c.Notification != nil && s.seen(c.Notification.ID) {
		// Delivered already (by another path): neither the notification nor its badge
		// hint is news.
		s.mu.Unlock()
		return
	}
	var event *inbox.Change
	if s.events != nil && kind != inbox.EventNone {
		e := c
		e.Kind = kind
		if kind != inbox.EventAdded {
			ids, ok := s.dedup.filter(c, s.now())
			if !ok {
				s.mu.Unlock()
				return // the writer's own event came already, with its badge
			}
			e.IDs = ids
		} else if len(e.IDs) == 0 {
			e.IDs = []string{c.Notification.ID}
		}
		event = &e
	}
	signal := true
	switch {
	case c.Version == 0 && kind != inbox.EventNone && kind != inbox.EventAdded:
		signal = false // a relay event: its META record brings the badge
	case c.Version == 0:
		// An unversioned hint (or a resync) asks the reader to re-read the store.
		s.latest.Version = 0
	case s.latest.Version == 0 || c.Version > s.latest.Version:
		s.latest = inbox.Change{Viewer: c.Viewer, UnreadCount: c.UnreadCount, Version: c.Version, Badge: c.Badge}
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
	queued := false
	switch {
	case event != nil:
		queued = true
		select {
		case s.events <- *event:
		default:
			s.markOverflow()
		}
	case c.Notification != nil && s.added != nil:
		queued = true
		select {
		case s.added <- c.Notification:
		default:
			s.markOverflow()
		}
	}
	if notify != nil && (signal || queued) {
		notify()
	}
}

// markOverflow closes Overflowed once.
func (s *Subscription) markOverflow() {
	s.mu.Lock()
	if !s.overflow {
		s.overflow = true
		close(s.dropped)
	}
	s.mu.Unlock()
}

// OnChange makes s call f after each delivery that tells the subscriber something (a
// badge signal, a queued notification or event, an overflow, a resync), so a consumer can
// react without a goroutine blocked on the channels: f then reads them without blocking.
// f runs on the publisher's goroutine (a broker's, or a mutation's after its commit),
// possibly on several at once; it must not block. It also runs once before OnChange
// returns, for whatever was delivered before it was set.
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

// Latest returns the newest badge state seen (UnreadCount, Version and, from a publisher
// that sends it, Badge; see BadgeOf): Version 0 means "changed, count unknown: read it from
// the store" (also sent when the broker lost and regained its connection).
func (s *Subscription) Latest() inbox.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Added delivers new notifications of the inbox, each at most once, in commit order per
// writer. It is nil (never delivers) for a BadgeOnly or WithEvents subscription.
func (s *Subscription) Added() <-chan *inbox.Notification { return s.added }

// Events delivers the inbox's events (Kind set, ADDED included; IDs the notifications it
// concerns), de-duplicated, in delivery order. It is nil unless subscribed WithEvents.
func (s *Subscription) Events() <-chan inbox.Change { return s.events }

// Overflowed is closed when the subscriber fell more than NotificationBuffer new
// notifications (EventBuffer events) behind; its stream must then end with an error. It is
// nil (never fires) for a BadgeOnly subscription.
func (s *Subscription) Overflowed() <-chan struct{} { return s.dropped }

// Close unregisters the subscription. It is idempotent.
func (s *Subscription) Close() { s.closeOnce.Do(s.close) }
