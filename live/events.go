package live

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Event is one inbox event as a stream delivers it (Subscription.inboxEvents).
type Event struct {
	Kind inbox.EventKind
	// IDs are the ULIDs of the notifications the event concerns (empty for ALL_READ and
	// ALL_SEEN).
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
func OpenEvents[T any](ctx context.Context, st Streams, v inbox.Viewer, conv func(Event) T) (<-chan T, error) {
	sub := st.Broker.Subscribe(v, WithEvents())
	f := &eventFeed[T]{st: st, v: v, ctx: ctx, sub: sub, conv: conv, log: st.log(), sig: signalOf(ctx),
		out: make(chan T, EventBuffer), since: time.Now().Add(-addedSkew)}
	f.sig.bind()
	endWith(ctx, &f.mu, &f.done, f.out, sub, f.sig, nil)
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
	pending []inbox.Change // taken from sub, not yet on out (waiting behind a read)
	reading bool           // a goroutine is reading a badge for pending[0]
	done    bool
}

// onChange moves the subscription's events to the stream.
func (f *eventFeed[T]) onChange() {
	f.mu.Lock()
	defer f.mu.Unlock()
	// A badge signal means nothing here: every event brings its own badge.
	select {
	case <-f.sub.BadgeChanged():
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
			f.pending = append(f.pending, c)
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

// flushLocked sends the pending events whose badge is known, in order, up to the first
// that needs a read, for which it starts the reader. f.mu is held.
func (f *eventFeed[T]) flushLocked() {
	for !f.done && !f.reading && len(f.pending) > 0 {
		c := f.pending[0]
		b, complete := BadgeOf(c)
		if !complete {
			f.reading = true
			go f.read()
			return
		}
		f.pending = f.pending[1:]
		f.sendLocked(c, b)
	}
}

// read reads the badge for pending[0], sends it and whatever follows it, and repeats
// while the head of the queue needs a read.
func (f *eventFeed[T]) read() {
	b, err := f.st.readUntilOK(f.ctx, f.v, "inboxEvents")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reading = false
	if err != nil || f.done || len(f.pending) == 0 {
		return
	}
	c := f.pending[0]
	f.pending = f.pending[1:]
	f.sendLocked(c, b)
	f.flushLocked()
}

// sendLocked puts c's event with badge b on the channel; a full channel ends the stream.
func (f *eventFeed[T]) sendLocked(c inbox.Change, b inbox.Badge) {
	e := Event{Kind: c.Kind, IDs: c.IDs, Badge: f.st.Ann.compose(f.v.TenantID, ownOf(b))}
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
