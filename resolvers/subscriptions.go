package resolvers

import (
	"context"
	"time"

	"github.com/inboxgw/gateway/auth"

	"github.com/inboxgw/gateway/inbox"
)

// badgeStream sends the viewer's badge at once and then every change. It subscribes before
// reading the current value, so no change between the two is missed; changes carry META's
// version, so a stale or repeated one is never sent, and a value equal to the last one sent
// is not sent again. A slow client gets the latest value,
// never a queue: changes coalesce while a send is blocked.
func (r *Resolver) badgeStream(ctx context.Context) (<-chan int, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	ctx, stop := untilTokenExpiry(ctx)
	sub := r.Broker.Subscribe(v)
	count, version, err := r.Store.Badge(ctx, v)
	if err != nil {
		stop()
		sub.Close()
		return nil, err
	}
	out := make(chan int, 1)
	out <- count
	go func() {
		defer close(out)
		defer sub.Close()
		defer stop()
		lastVer, lastCount := version, count
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.BadgeChanged():
			}
			c := sub.Latest()
			if c.Version == 0 || c.Version <= lastVer {
				// A change without a known count (a send, or a writer outside the gateway
				// that does not bump META's version), or one not newer than what was sent:
				// read the badge as committed. A strongly consistent read is the current
				// state, so it is never older than anything sent before.
				n, ver, err := r.Store.Badge(ctx, v)
				if err != nil {
					if ctx.Err() == nil {
						r.Log.Warn("unreadCount subscription: read badge", "err", err)
					}
					continue
				}
				c.UnreadCount, c.Version = n, max(ver, lastVer)
			}
			lastVer = c.Version
			if c.UnreadCount == lastCount {
				continue // every change means every new value: an equal one is not sent again
			}
			lastCount = c.UnreadCount
			select {
			case out <- c.UnreadCount:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// addedSkew is how much older than the subscription a new notification may look and still
// be delivered (clock skew between the writer and this instance).
const addedSkew = 2 * time.Second

// addedStream sends each new notification of the viewer once. A subscriber that falls
// more than live.NotificationBuffer notifications behind is ended (the channel closes),
// and nobody else slows down.
func (r *Resolver) addedStream(ctx context.Context) (<-chan *inbox.Notification, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	ctx, stop := untilTokenExpiry(ctx)
	sub := r.Broker.Subscribe(v)
	// Only notifications created from now on: a relay that lags (or replays after a
	// takeover) may carry older ones. The margin absorbs clock skew between instances.
	since := time.Now().Add(-addedSkew)
	out := make(chan *inbox.Notification)
	go func() {
		defer close(out)
		defer sub.Close()
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.Overflowed():
				r.Log.Info("notificationAdded subscriber fell behind; closing it")
				return
			case n := <-sub.Added():
				if n.CreatedAt.Before(since) {
					continue
				}
				select {
				case out <- n:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// untilTokenExpiry returns ctx ending when the caller's token has expired, so a subscription
// on any transport (SSE included) ends instead of outliving its credentials. WebSocket
// connections are closed at expiry with 4403 and a reason by the transport itself
// (httpapi); the second of grace here lets that clear close come first.
func untilTokenExpiry(ctx context.Context) (context.Context, context.CancelFunc) {
	if c, ok := auth.FromContext(ctx); ok && !c.ExpiresAt.IsZero() {
		return context.WithDeadline(ctx, c.ExpiresAt.Add(time.Second))
	}
	return context.WithCancel(ctx)
}
