package live

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// The streams below are what the subscription resolvers return: channels fed without a
// goroutine of their own while they wait. The broker's subscription calls them
// (Subscription.OnChange) on the publisher's goroutine; they put the value on their
// channel without blocking and signal the transport (StreamHook in ctx). Their end is tied
// to ctx with context.AfterFunc, which needs no goroutine either. Only a value that must
// be read from the store (a re-read hint, an event without a badge) starts a short-lived
// goroutine, which retries a failed read with backoff until it succeeds or ctx ends.

// BadgeReader reads an inbox's badge as committed (a strongly consistent read).
type BadgeReader func(ctx context.Context, v inbox.Viewer) (inbox.Badge, error)

// Subscriber hands out subscriptions (every Broker is one).
type Subscriber interface {
	Subscribe(v inbox.Viewer, opts ...SubscribeOption) *Subscription
}

// Streams opens live streams of inboxes: the broker to subscribe to, the store read for
// badges a change does not carry, and where to log a failing re-read.
type Streams struct {
	Broker Subscriber
	Read   BadgeReader
	Log    *slog.Logger
	// Ann composes badges with the tenants' announcements (nil: none).
	Ann *Announced
}

func (st Streams) log() *slog.Logger {
	if st.Log == nil {
		return slog.Default()
	}
	return st.Log
}

// Backoff of a failed badge re-read: capped exponential with full jitter. A stream never
// gives up on a re-read (the change it stands for would be missed until the next one); it
// stops only when the stream ends.
const (
	rereadBaseDelay = 20 * time.Millisecond
	rereadMaxDelay  = time.Second
)

// readUntilOK reads v's badge until a read succeeds (nil error) or ctx ends (ctx's error);
// the first failure is logged as what.
func (st Streams) readUntilOK(ctx context.Context, v inbox.Viewer, what string) (inbox.Badge, error) {
	for failures := 0; ; failures++ {
		b, err := st.Read(ctx, v)
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil {
			return inbox.Badge{}, ctx.Err()
		}
		if failures == 0 {
			st.log().Warn(what+" subscription: read badge; retrying", "err", err)
		}
		t := time.NewTimer(rand.N(min(rereadMaxDelay, rereadBaseDelay<<min(failures, 20))) + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// BadgeView is how a badge stream presents the badge: View turns it into the stream's
// value, Equal tells two values apart (an equal value is not sent again), and Full says
// whether View needs the whole badge (a change carrying only the unread count is then
// re-read from the store).
type BadgeView[T any] struct {
	Name  string // for logs: the subscription field
	View  func(inbox.Badge) T
	Equal func(a, b T) bool
	Full  bool
}

// UnreadView presents the unread count (Subscription.unreadCount).
var UnreadView = BadgeView[int]{Name: "unreadCount", View: func(b inbox.Badge) int { return b.Unread },
	Equal: func(a, b int) bool { return a == b }}

// FullView presents the whole badge (Subscription.badge).
var FullView = BadgeView[*inbox.Badge]{Name: "badge", Full: true,
	View:  func(b inbox.Badge) *inbox.Badge { return &b },
	Equal: func(a, b *inbox.Badge) bool { return SameCounts(*a, *b) }}

// SameCounts reports whether a and b count the same (their versions aside).
func SameCounts(a, b inbox.Badge) bool {
	return a.Unread == b.Unread && a.Unseen == b.Unseen && slices.Equal(a.Categories, b.Categories)
}

// OpenBadge streams v's badge as view presents it: the current value at once, then every
// change. It subscribes before reading the current value, so no change between the two is
// missed; changes carry META's version, so a stale or repeated one is never sent, and a
// value equal to the last one sent is not sent again. A change whose badge is unknown (a
// re-read hint, Version 0) is read from the store, retried with backoff until it succeeds.
// A slow client gets the latest value, never a queue: the channel holds one value and a
// newer one replaces it. The channel closes when ctx ends; the error is the first read's.
func OpenBadge[T any](ctx context.Context, st Streams, v inbox.Viewer, view BadgeView[T]) (<-chan T, error) {
	sub := st.Broker.Subscribe(v, BadgeOnly())
	readCtx := ctx
	if sig := signalOf(ctx); sig.stops() {
		// Not a child of ctx (see StreamHook.Stops): a subscriber that leaves meanwhile
		// waits for the read, which its own deadlines bound.
		readCtx = context.WithoutCancel(ctx)
	}
	b, err := st.Read(readCtx, v)
	if err != nil {
		sub.Close()
		return nil, err
	}
	f := &badgeFeed[T]{st: st, view: view, v: v, ctx: ctx, sub: sub, sig: signalOf(ctx), out: make(chan T, 1),
		lastVer: b.Version, own: ownOf(b)}
	f.last = view.View(st.Ann.compose(v.TenantID, f.own))
	f.sig.bind()
	f.out <- f.last
	f.sig.ready()
	var leave func()
	if st.Ann != nil {
		st.Ann.join(v.TenantID, f)
		leave = func() { st.Ann.leave(v.TenantID, f) }
	}
	endWith(ctx, &f.mu, &f.done, f.out, sub, f.sig, leave)
	sub.OnChange(f.onChange)
	return f.out, nil
}

// ownOf is a badge's own part: the user's counters and marks before announcements were
// added (b itself when it was not composed).
func ownOf(b inbox.Badge) inbox.Badge {
	if b.Own != nil {
		return *b.Own
	}
	return b
}

// recompose sends the badge composed again with the tenant's announcement set (it
// changed, or one of its announcements expired).
func (f *badgeFeed[T]) recompose() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.sendLocked(f.view.View(f.st.Ann.compose(f.v.TenantID, f.own)))
	}
}

// badgeFeed is one badge stream's state.
type badgeFeed[T any] struct {
	st   Streams
	view BadgeView[T]
	v    inbox.Viewer
	ctx  context.Context
	sub  *Subscription
	sig  streamSignal
	out  chan T // capacity 1: the value not yet taken

	mu      sync.Mutex
	lastVer int64
	last    T
	// own is the user's own badge as of lastVer (counters and announcement marks), which
	// each value composes with the tenant's announcements.
	own     inbox.Badge
	reading bool // a store read is running
	reread  bool // another change came while it ran
	done    bool
}

// onChange takes the subscription's latest badge state.
func (f *badgeFeed[T]) onChange() {
	select {
	case <-f.sub.BadgeChanged():
	default:
		return
	}
	c := f.sub.Latest()
	b, complete := BadgeOf(c)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	// A badge without the user's announcement marks cannot be composed with announcements.
	noMarks := b.Marks == nil && f.st.Ann.active(f.v.TenantID)
	if c.Version == 0 || c.Version <= f.lastVer || (f.view.Full && !complete) || noMarks {
		// A change without a known badge (a send, a resync, a writer outside the gateway
		// that does not bump META's version, a publisher that sends the count alone), or
		// one not newer than what was sent: read the badge as committed.
		if f.reading {
			f.reread = true
			return
		}
		f.reading = true
		go f.read()
		return
	}
	f.lastVer = c.Version
	f.own = ownOf(b)
	f.sendLocked(f.view.View(f.st.Ann.compose(f.v.TenantID, f.own)))
}

// read reads the badge until no change asked for another read while it ran.
func (f *badgeFeed[T]) read() {
	for {
		b, err := f.st.readUntilOK(f.ctx, f.v, f.view.Name)
		f.mu.Lock()
		// A versioned change may have been sent while the read ran: a result older than
		// it is stale. An equal version with other counts is a writer that did not bump
		// the version; the read is authoritative.
		if err == nil && !f.done && b.Version >= f.lastVer {
			f.lastVer = b.Version
			f.own = ownOf(b)
			f.sendLocked(f.view.View(f.st.Ann.compose(f.v.TenantID, f.own)))
		}
		if err != nil || !f.reread || f.done {
			f.reading = false
			f.mu.Unlock()
			return
		}
		f.reread = false
		f.mu.Unlock()
	}
}

// sendLocked puts x on the channel unless it equals the value sent last; a value still
// waiting there is replaced. f.mu is held (it orders the sends).
func (f *badgeFeed[T]) sendLocked(x T) {
	if f.view.Equal(x, f.last) {
		return // every change means every new value: an equal one is not sent again
	}
	f.last = x
	select {
	case f.out <- x:
		f.sig.ready()
		return
	default:
	}
	select {
	case <-f.out: // replaced: the Ready of the value taken out stands for this one
		f.out <- x
	default: // taken meanwhile: the channel is empty
		f.out <- x
		f.sig.ready()
	}
}

// addedSkew is how much older than the subscription a new notification may look and still
// be delivered (clock skew between the writer and this instance): a relay that lags (or
// replays after a takeover) may carry older ones.
const addedSkew = 2 * time.Second

// OpenAdded streams each new notification of v once (Subscription.notificationAdded). A
// subscriber that falls more than NotificationBuffer notifications behind is ended with a
// SLOW_CONSUMER error (the channel closes; the transport reports StreamHook.Err), and
// nobody else slows down. The channel closes when ctx ends.
//
// A tenant's announcement created while the stream runs is streamed too, as every user of
// the tenant sees it then (unread, unseen: kind ANNOUNCEMENT), once: the stream joins the
// tenant's watch (Announced), whose one read of the set per instance serves every stream.
func OpenAdded(ctx context.Context, st Streams, v inbox.Viewer) (<-chan *inbox.Notification, error) {
	sub := st.Broker.Subscribe(v)
	f := &addedFeed{sub: sub, log: st.log(), sig: signalOf(ctx), out: make(chan *inbox.Notification, NotificationBuffer),
		since: time.Now().Add(-addedSkew), ann: st.Ann, tenant: v.TenantID}
	f.sig.bind()
	var leave func()
	if st.Ann != nil {
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

// recompose streams the tenant's announcements that are active and new to f (created
// after the stream began), as the user sees a new one: no mark applies to it yet.
func (f *addedFeed) recompose() {
	set := f.ann.sets.Cached(f.tenant)
	if set == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range slices.Backward(set.Active(f.ann.now())) { // oldest first
		if f.done {
			return
		}
		if _, ok := f.known[a.ID]; ok {
			continue
		}
		f.known[a.ID] = struct{}{}
		if a.CreatedAt.Before(f.since) {
			continue
		}
		select {
		case f.out <- inbox.AnnouncementNotification(a, nil):
			f.sig.ready()
		default:
			f.overflowLocked()
		}
	}
	if len(f.known) > len(set.Items) {
		for id := range f.known { // withdrawn or expired: known no longer (bounded by the set)
			if !slices.ContainsFunc(set.Items, func(a *inbox.Announcement) bool { return a.ID == id }) {
				delete(f.known, id)
			}
		}
	}
}

// addedFeed is one notificationAdded stream's state.
type addedFeed struct {
	sub   *Subscription
	log   *slog.Logger
	sig   streamSignal
	out   chan *inbox.Notification // the subscriber's bounded buffer
	since time.Time

	mu   sync.Mutex // held while moving notifications, so they keep their order
	done bool

	// ann and tenant follow the tenant's announcements; known are the ids of those
	// streamed or there when the stream began (guarded by mu).
	ann    *Announced
	tenant string
	known  map[string]struct{}
}

// errAddedSlow ends a notificationAdded subscriber whose buffer overflowed.
var errAddedSlow = inbox.Errorf(inbox.CodeSlowConsumer,
	"notificationAdded: the subscriber fell more than %d notifications behind and was ended; subscribe again and refetch the inbox", NotificationBuffer)

// onChange moves the subscription's new notifications to the channel.
func (f *addedFeed) onChange() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for !f.done {
		select {
		case n := <-f.sub.Added():
			if n.CreatedAt.Before(f.since) {
				continue
			}
			select {
			case f.out <- n:
				f.sig.ready()
			default:
				f.overflowLocked()
			}
			continue
		default:
		}
		select {
		case <-f.sub.Overflowed():
			f.overflowLocked()
		default:
		}
		return
	}
}

// overflowLocked ends the stream with errAddedSlow. f.mu is held.
func (f *addedFeed) overflowLocked() {
	f.log.Info("notificationAdded subscriber fell behind; closing it")
	f.done = true
	f.sig.end(errAddedSlow)
	close(f.out)
	f.sig.ready()
	go f.sub.Close() // not on the publisher's goroutine: it holds the broker's lock
}

// endWith ends a stream when ctx ends: leave (when not nil) runs first (the stream leaves
// its tenant's announcement watch); unless the stream already ended (*done, under mu: a
// stream ends itself on a slow consumer), it marks it done and closes out, then tells the
// transport; the broker subscription is closed either way. It takes no goroutine
// (context.AfterFunc, one for all of it, or the hook's Stop: streamSignal.afterEnd).
func endWith[T any](ctx context.Context, mu *sync.Mutex, done *bool, out chan T, sub *Subscription, sig streamSignal, leave func()) {
	sig.afterEnd(ctx, func() {
		if leave != nil {
			leave()
		}
		mu.Lock()
		ended := *done
		if !ended {
			*done = true
			close(out)
		}
		mu.Unlock()
		sub.Close()
		if !ended {
			sig.ready()
		}
	})
}
