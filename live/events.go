package live

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Event is one inbox event as a stream delivers it (Subscription.inboxEvents).
type Event struct {
	Kind inbox.EventKind
	// IDs are the ULIDs of the notifications the event concerns (empty for ALL_READ and
	// ALL_SEEN); an announcement's is "@<ULID>" (inbox.AnnouncementRef), its global id's key.
	IDs []string
	// Notification is the notification added (ADDED only).
	Notification *inbox.Notification
	// Badge is the badge right after the change: as the writer read it back, or, when the
	// change did not carry it, as read from the store when the event was delivered (then
	// it may already count later changes, never fewer).
	Badge inbox.Badge
}

// errEventsSlow ends an inboxEvents subscriber that fell behind.
var errEventsSlow = inbox.Errorf(inbox.CodeSlowConsumer,
	"inboxEvents: the subscriber fell more than %d events behind and was ended; subscribe again and refetch the inbox", EventBuffer)

// OpenEvents streams v's inbox events, one per committed change of kind != EventNone, in
// the order they reach this process, de-duplicated (see dedup.go), each as conv presents
// it. Events are not coalesced (a tab needs each one), so they are bounded instead: a
// subscriber more than EventBuffer events behind (in the subscription or in the stream) is
// ended with a SLOW_CONSUMER error (the channel closes; the transport reports
// StreamHook.Err) and must subscribe again and refetch. An event whose change carries no
// complete badge (Version 0: a send, the stream relay) gets one read from the store; such
// reads are retried with backoff and keep the events' order (later events wait). The
// channel closes when ctx ends.
//
// The tenant's announcements (st.Ann) are events too: one created while the stream runs
// is ADDED (its notification as the user first sees it: unread, unseen), one that leaves
// every inbox is DELETED when withdrawn and EXPIRED when its time ran out, each with the
// id "@<ULID>". They come from the tenant's watch (Announced), whose one read of the set
// per instance serves every stream; their badge composes the user's own badge as the
// stream last knew it (from the changes it carried), so an announcement costs a stream no
// read unless the stream has not yet learnt the user's badge or a change since left it
// unknown (a re-read hint): then one read, in order like any other.
func OpenEvents[T any](ctx context.Context, st Streams, v inbox.Viewer, conv func(Event) T) (<-chan T, error) {
	sub := st.Broker.Subscribe(v, WithEvents())
	f := &eventFeed[T]{st: st, v: v, ctx: ctx, sub: sub, conv: conv, log: st.log(), sig: signalOf(ctx),
		out: make(chan T, EventBuffer), since: time.Now().Add(-addedSkew)}
	f.sig.bind()
	var leave func()
	if st.Ann != nil {
		if st.Ann.cold(v.TenantID) {
			// An instance that has not read the tenant's set (fresh, or it was evicted): the
			// stream must know the announcements active as it begins, or their withdrawal
			// or expiry would be news to it. One read per tenant and instance.
			st.Ann.warm(ctx, v.TenantID)
		}
		f.known = st.Ann.activeIDs(v.TenantID)
		st.Ann.join(v.TenantID, f)
		leave = func() { st.Ann.leave(v.TenantID, f) }
	}
	endWith(ctx, &f.mu, &f.done, f.out, sub, f.sig, leave)
	if st.Ann != nil {
		// A refresh of the watch between the set taken above and the join recomposed the
		// streams joined, not this one: compare once with the set now cached.
		f.recompose()
	}
	sub.OnChange(f.onChange)
	return f.out, nil
}

// eventFeed is one inboxEvents stream's state.
type eventFeed[T any] struct {
	st    Streams
	v     inbox.Viewer
	ctx   context.Context
	sub   *Subscription
	conv  func(Event) T
	log   *slog.Logger
	sig   streamSignal
	out   chan T
	since time.Time

	mu      sync.Mutex     // orders the moves from sub to pending to out
	pending []pendingEvent // taken from sub (or the tenant's watch), not yet on out
	reading bool           // a goroutine is reading a badge for pending[0]
	done    bool

	// known are the ids of the tenant's announcements active when the stream began or
	// streamed since (bounded by the set: at most MaxActiveAnnouncements and the ones
	// leaving). own is the user's own badge as of ownVer (0: not known), taken from the
	// changes and reads the stream saw; hints counts the changes that left it unknown, so
	// that a read begun before one does not make it known again. seen is the newest
	// version the stream saw (known or not, ownVer at most): a hint makes the badge
	// unknown, not older, so a change not newer than seen (the relay's late copy of an
	// earlier write) never becomes it again.
	known  map[string]struct{}
	own    inbox.Badge
	ownVer int64
	hints  uint64
	seen   int64
}

// pendingEvent is a change waiting for its turn; ann marks an announcement's event, whose
// badge is the stream's own badge at its turn, composed.
type pendingEvent struct {
	c   inbox.Change
	ann bool
}

// onChange moves the subscription's events to the stream.
func (f *eventFeed[T]) onChange() {
	f.mu.Lock()
	defer f.mu.Unlock()
	// A badge signal brings no event (every event brings its own badge), but it tells
	// what the user's own badge is now, for the announcements' events.
	select {
	case <-f.sub.BadgeChanged():
		f.learnLocked(f.sub.Latest())
	default:
	}
	for !f.done {
		select {
		case c := <-f.sub.Events():
			if c.Notification != nil && c.Notification.CreatedAt.Before(f.since) {
				continue // an old notification replayed by a lagging relay
			}
			if len(f.pending) >= EventBuffer {
				f.overflowLocked()
				return
			}
			f.pending = append(f.pending, pendingEvent{c: c})
			if c.Kind == inbox.EventDeleted {
				// The user deleted announcements from their inbox (for good): their
				// withdrawal or expiry later removes nothing more, no second DELETED.
				for _, id := range c.IDs {
					if ann, ok := strings.CutPrefix(id, inbox.AnnouncementRef); ok {
						delete(f.known, ann)
					}
				}
			}
			continue
		default:
		}
		select {
		case <-f.sub.Overflowed():
			f.overflowLocked()
			return
		default:
		}
		break
	}
	f.flushLocked()
}

// learnLocked takes the user's own badge from change c when c carries it whole and newer
// than the one known; a change that does not (a re-read hint, a count alone) makes it
// unknown. f.mu is held.
func (f *eventFeed[T]) learnLocked(c inbox.Change) {
	b, complete := BadgeOf(c)
	// A badge without the user's announcement marks cannot be composed with announcements.
	complete = complete && (ownOf(b).Marks != nil || !f.st.Ann.active(f.v.TenantID))
	switch {
	case complete && c.Version > f.seen:
		f.own, f.ownVer = ownOf(b), c.Version
	case !complete:
		f.ownVer = 0
		f.hints++
	}
	f.seen = max(f.seen, c.Version)
}

// recompose takes the tenant's announcement set as it changed: an announcement active
// and new to the stream (created after it began) is ADDED, one known that is no longer
// active is DELETED (withdrawn) or EXPIRED. Called by the tenant's watch.
func (f *eventFeed[T]) recompose() {
	ann := f.st.Ann
	set := ann.sets.Cached(f.v.TenantID)
	if set == nil {
		return
	}
	now := ann.now()
	active := set.Active(now)
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.known {
		if slices.ContainsFunc(active, func(a *inbox.Announcement) bool { return a.ID == id }) {
			continue
		}
		delete(f.known, id)
		kind := inbox.EventDeleted
		if i := slices.IndexFunc(set.Items, func(a *inbox.Announcement) bool { return a.ID == id }); i >= 0 &&
			set.Items[i].WithdrawnAt == nil && !now.Before(set.Items[i].ExpiresAt) {
			kind = inbox.EventExpired
		}
		if !f.queueLocked(pendingEvent{c: inbox.Change{Viewer: f.v, Kind: kind, IDs: []string{inbox.AnnouncementRef + id}}, ann: true}) {
			return
		}
	}
	for _, a := range slices.Backward(active) { // oldest first
		if _, ok := f.known[a.ID]; ok {
			continue
		}
		f.known[a.ID] = struct{}{}
		if a.CreatedAt.Before(f.since) {
			continue
		}
		n := inbox.AnnouncementNotification(a, nil)
		if !f.queueLocked(pendingEvent{c: inbox.Change{Viewer: f.v, Kind: inbox.EventAdded,
			IDs: []string{inbox.AnnouncementRef + a.ID}, Notification: n}, ann: true}) {
			return
		}
	}
	f.flushLocked()
}

// queueLocked appends e to the pending events; false when the stream ended or just
// overflowed. f.mu is held.
func (f *eventFeed[T]) queueLocked(e pendingEvent) bool {
	if f.done {
		return false
	}
	if len(f.pending) >= EventBuffer {
		f.overflowLocked()
		return false
	}
	f.pending = append(f.pending, e)
	return true
}

// flushLocked sends the pending events whose badge is known, in order, up to the first
// that needs a read, for which it starts the reader. f.mu is held.
func (f *eventFeed[T]) flushLocked() {
	for !f.done && !f.reading && len(f.pending) > 0 {
		e := f.pending[0]
		var b inbox.Badge
		complete := false
		if e.ann {
			b, complete = f.own, f.ownVer > 0
		} else {
			b, complete = BadgeOf(e.c)
			// The tenant's set not cached here (a fresh instance; evicted): the change's own
			// badge cannot be composed, the store's read composes it (and caches the set).
			complete = complete && !f.st.Ann.cold(f.v.TenantID)
		}
		if !complete {
			f.reading = true
			go f.read(f.hints)
			return
		}
		f.pending = f.pending[1:]
		f.sendLocked(e.c, b)
	}
}

// read reads the badge for pending[0], sends it and whatever follows it, and repeats
// while the head of the queue needs a read. hints is f.hints when the read began.
func (f *eventFeed[T]) read(hints uint64) {
	b, err := f.st.readUntilOK(f.ctx, f.v, "inboxEvents")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reading = false
	if err != nil || f.done || len(f.pending) == 0 {
		return
	}
	if hints == f.hints && b.Version >= f.ownVer {
		f.own, f.ownVer = ownOf(b), max(b.Version, 1)
	}
	f.seen = max(f.seen, b.Version)
	e := f.pending[0]
	f.pending = f.pending[1:]
	f.sendLocked(e.c, b)
	f.flushLocked()
}

// sendLocked puts c's event with badge b on the channel; a full channel ends the stream.
func (f *eventFeed[T]) sendLocked(c inbox.Change, b inbox.Badge) {
	if b.Version > f.seen && c.Version == b.Version && (ownOf(b).Marks != nil || !f.st.Ann.active(f.v.TenantID)) {
		f.own, f.ownVer = ownOf(b), b.Version
	}
	f.seen = max(f.seen, c.Version)
	e := Event{Kind: c.Kind, IDs: c.IDs, Badge: f.st.Ann.compose(f.v.TenantID, ownOf(b))}
	if b.Own != nil && f.st.Ann.cold(f.v.TenantID) {
		e.Badge = b // composed by the store's read with a set no longer cached here
	}
	if c.Kind == inbox.EventAdded {
		e.Notification = c.Notification
	}
	select {
	case f.out <- f.conv(e):
		f.sig.ready()
	default:
		f.overflowLocked()
	}
}

// overflowLocked ends the stream with errEventsSlow. f.mu is held.
func (f *eventFeed[T]) overflowLocked() {
	if f.done {
		return
	}
	f.log.Info("inboxEvents subscriber fell behind; closing it")
	f.done = true
	f.pending = nil
	f.sig.end(errEventsSlow)
	close(f.out)
	f.sig.ready()
	go f.sub.Close() // not on the publisher's goroutine: it holds the broker's lock
}
