package resolvers

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

// The subscription streams hold no goroutine while they wait: the broker's subscription
// calls them (live.Subscription.OnChange) on the publisher's goroutine, they put the value
// on their channel without blocking and signal the transport (StreamHook). Their end is
// tied to the operation's context with context.AfterFunc, which needs no goroutine either.
// Only a badge change whose count is unknown starts a short-lived goroutine, for the
// store read.

// badgeStream sends the viewer's badge at once and then every change. It subscribes before
// reading the current value, so no change between the two is missed; changes carry META's
// version, so a stale or repeated one is never sent, and a value equal to the last one sent
// is not sent again. A slow client gets the latest value, never a queue: the channel holds
// one value and a newer one replaces it.
func (r *Resolver) badgeStream(ctx context.Context) (<-chan int, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	ctx, stop := untilTokenExpiry(ctx)
	sub := r.Broker.Subscribe(v, live.BadgeOnly())
	b, err := r.Store.Badge(ctx, v)
	count, version := b.Unread, b.Version
	if err != nil {
		stop()
		sub.Close()
		return nil, err
	}
	f := &badgeFeed{r: r, v: v, ctx: ctx, sub: sub, sig: signalOf(ctx), out: make(chan int, 1),
		lastVer: version, lastCount: count}
	f.sig.bind()
	f.out <- count
	f.sig.ready()
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.done = true
		close(f.out)
		f.mu.Unlock()
		sub.Close()
		stop()
		f.sig.ready()
	})
	sub.OnChange(f.onChange)
	return f.out, nil
}

// badgeFeed is one unreadCount subscription's state.
type badgeFeed struct {
	r   *Resolver
	v   inbox.Viewer
	ctx context.Context
	sub *live.Subscription
	sig streamSignal
	out chan int // capacity 1: the value not yet taken

	mu        sync.Mutex
	lastVer   int64
	lastCount int
	reading   bool // a store read is running
	reread    bool // another change came while it ran
	done      bool
}

// onChange takes the subscription's latest badge state.
func (f *badgeFeed) onChange() {
	select {
	case <-f.sub.BadgeChanged():
	default:
		return
	}
	c := f.sub.Latest()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	if c.Version == 0 || c.Version <= f.lastVer {
		// A change without a known count (a send, or a writer outside the gateway that
		// does not bump META's version), or one not newer than what was sent: read the
		// badge as committed.
		if f.reading {
			f.reread = true
			return
		}
		f.reading = true
		go f.read()
		return
	}
	f.lastVer = c.Version
	f.sendLocked(c.UnreadCount)
}

// Backoff of a failed badge re-read: capped exponential with full jitter. A subscriber
// never gives up on a re-read (the change it stands for would be missed until the next
// one); it stops only when the subscription ends.
const (
	rereadBaseDelay = 20 * time.Millisecond
	rereadMaxDelay  = time.Second
)

// read reads the badge with a strongly consistent GetItem (the current state) until no
// change asked for another read while it ran. A failed read is retried with backoff
// (rereadBaseDelay doubling to rereadMaxDelay, full jitter) until it succeeds or the
// subscription ends; the first failure of a run is logged.
func (f *badgeFeed) read() {
	failures := 0
	for {
		b, err := f.r.Store.Badge(f.ctx, f.v)
		n, ver := b.Unread, b.Version
		if err != nil {
			if f.ctx.Err() != nil {
				f.mu.Lock()
				f.reading = false
				f.mu.Unlock()
				return
			}
			if failures == 0 {
				f.r.Log.Warn("unreadCount subscription: read badge; retrying", "err", err)
			}
			failures++
			t := time.NewTimer(rand.N(min(rereadMaxDelay, rereadBaseDelay<<min(failures-1, 20))) + time.Millisecond)
			select {
			case <-f.ctx.Done():
				t.Stop()
			case <-t.C:
			}
			continue
		}
		failures = 0
		f.mu.Lock()
		// A versioned change may have been sent while the read ran: a result older than
		// it is stale. An equal version with another count is a writer that did not bump
		// the version; the read is authoritative.
		if err == nil && !f.done && ver >= f.lastVer {
			f.lastVer = ver
			f.sendLocked(n)
		}
		if !f.reread || f.done {
			f.reading = false
			f.mu.Unlock()
			return
		}
		f.reread = false
		f.mu.Unlock()
	}
}

// sendLocked puts n on the channel unless it is the value sent last; a value still waiting
// there is replaced. f.mu is held (it orders the sends).
func (f *badgeFeed) sendLocked(n int) {
	if n == f.lastCount {
		return // every change means every new value: an equal one is not sent again
	}
	f.lastCount = n
	select {
	case f.out <- n:
		f.sig.ready()
		return
	default:
	}
	select {
	case <-f.out: // replaced: the Ready of the value taken out stands for this one
		f.out <- n
	default: // taken meanwhile: the channel is empty
		f.out <- n
		f.sig.ready()
	}
}

// addedSkew is how much older than the subscription a new notification may look and still
// be delivered (clock skew between the writer and this instance).
const addedSkew = 2 * time.Second

// addedStream sends each new notification of the viewer once. A subscriber that falls
// more than live.NotificationBuffer notifications behind is ended with a SLOW_CONSUMER
// error (the channel closes; on the WebSocket transport the operation gets an error
// message), and nobody else slows down.
func (r *Resolver) addedStream(ctx context.Context) (<-chan *inbox.Notification, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	ctx, stop := untilTokenExpiry(ctx)
	sub := r.Broker.Subscribe(v)
	f := &addedFeed{r: r, sub: sub, sig: signalOf(ctx), out: make(chan *inbox.Notification, live.NotificationBuffer),
		// Only notifications created from now on: a relay that lags (or replays after a
		// takeover) may carry older ones. The margin absorbs clock skew between instances.
		since: time.Now().Add(-addedSkew)}
	f.sig.bind()
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		ended := f.done
		if !ended {
			f.done = true
			close(f.out)
		}
		f.mu.Unlock()
		sub.Close()
		stop()
		if !ended {
			f.sig.ready()
		}
	})
	sub.OnChange(f.onChange)
	return f.out, nil
}

// addedFeed is one notificationAdded subscription's state.
type addedFeed struct {
	r     *Resolver
	sub   *live.Subscription
	sig   streamSignal
	out   chan *inbox.Notification // the subscriber's bounded buffer
	since time.Time

	mu   sync.Mutex // held while moving notifications, so they keep their order
	done bool
}

// errSlowConsumer ends a notificationAdded subscriber whose buffer overflowed.
var errSlowConsumer = inbox.Errorf(inbox.CodeSlowConsumer,
	"notificationAdded: the subscriber fell more than %d notifications behind and was ended; subscribe again and refetch the inbox", live.NotificationBuffer)

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

// overflowLocked ends the stream with errSlowConsumer. f.mu is held.
func (f *addedFeed) overflowLocked() {
	f.r.Log.Info("notificationAdded subscriber fell behind; closing it")
	f.done = true
	f.sig.end(errSlowConsumer)
	close(f.out)
	f.sig.ready()
	go f.sub.Close() // not on the publisher's goroutine: it holds the broker's lock
}

// untilTokenExpiry returns ctx ending when the caller's token has expired (its exp plus
// the verifier's leeway: auth.Claims.ValidUntil), so a subscription
// on any transport (SSE included) ends instead of outliving its credentials. WebSocket
// connections are closed at expiry with 4403 and a reason by the transport itself
// (httpapi), which ends their operations: under a StreamHook, ctx is returned as it is (a
// timer and a context less for each of thousands of subscribers). Elsewhere the second of
// grace lets the transport's clear close come first.
func untilTokenExpiry(ctx context.Context) (context.Context, context.CancelFunc) {
	if signalOf(ctx).h != nil {
		return ctx, func() {}
	}
	if c, ok := auth.FromContext(ctx); ok && !c.ValidUntil.IsZero() {
		return context.WithDeadline(ctx, c.ValidUntil.Add(time.Second))
	}
	return context.WithCancel(ctx)
}
