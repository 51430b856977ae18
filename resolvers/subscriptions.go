package resolvers

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

// The subscription resolvers are thin: the streams, their coalescing, re-reads and bounds
// live in package live; here the viewer is read, the stream's end tied to the token's
// expiry, and events given their GraphQL shape.

// streams returns the live streams over r's broker and store.
func (r *Resolver) streams() live.Streams {
	return live.Streams{Broker: r.Broker, Read: r.Store.Badge, Log: r.Log, Ann: r.Announced}
}

// openStream opens a stream for the caller: the viewer from the token, ctx ending at the
// token's expiry.
func openStream[T any](ctx context.Context, clock clockwork.Clock, open func(ctx context.Context, v inbox.Viewer) (<-chan T, error)) (<-chan T, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if live.HookFrom(ctx) != nil {
		// The transport ends ctx when the token expires (see untilTokenExpiry): nothing
		// to stop afterwards.
		return open(ctx, v)
	}
	ctx, stop := untilTokenExpiry(ctx, clock)
	ch, err := open(ctx, v)
	if err != nil {
		stop()
		return nil, err
	}
	context.AfterFunc(ctx, stop)
	return ch, nil
}

// unreadCountStream serves Subscription.unreadCount (live.OpenBadge with UnreadView).
func (r *Resolver) unreadCountStream(ctx context.Context) (<-chan int, error) {
	return openStream(ctx, r.Clock, func(ctx context.Context, v inbox.Viewer) (<-chan int, error) {
		return live.OpenBadge(ctx, r.streams(), v, live.UnreadView)
	})
}

// badgeStream serves Subscription.badge (live.OpenBadge with FullView).
func (r *Resolver) badgeStream(ctx context.Context) (<-chan *inbox.Badge, error) {
	return openStream(ctx, r.Clock, func(ctx context.Context, v inbox.Viewer) (<-chan *inbox.Badge, error) {
		return live.OpenBadge(ctx, r.streams(), v, live.FullView)
	})
}

// addedStream serves Subscription.notificationAdded (live.OpenAdded).
func (r *Resolver) addedStream(ctx context.Context) (<-chan *inbox.Notification, error) {
	return openStream(ctx, r.Clock, func(ctx context.Context, v inbox.Viewer) (<-chan *inbox.Notification, error) {
		return live.OpenAdded(ctx, r.streams(), v)
	})
}

// eventsStream serves Subscription.inboxEvents (live.OpenEvents).
func (r *Resolver) eventsStream(ctx context.Context) (<-chan *model.InboxEvent, error) {
	return openStream(ctx, r.Clock, func(ctx context.Context, v inbox.Viewer) (<-chan *model.InboxEvent, error) {
		return live.OpenEvents(ctx, r.streams(), v, inboxEvent)
	})
}

// inboxEvent gives e its GraphQL shape: notification ids become global ids.
func inboxEvent(e live.Event) *model.InboxEvent {
	ids := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		ids[i] = globalID(typeNotification, id)
	}
	b := e.Badge
	return &model.InboxEvent{Kind: model.InboxEventKind(e.Kind), NotificationIds: ids, Notification: e.Notification, Badge: &b}
}

// untilTokenExpiry returns ctx ending when the caller's token has expired (its exp plus
// the verifier's leeway: auth.Claims.ValidUntil), so a subscription
// on any transport (SSE included) ends instead of outliving its credentials. WebSocket
// connections are closed at expiry with 4403 and a reason by the transport itself
// (httpapi), which ends their operations: under a live.StreamHook, ctx is returned as it
// is (a timer and a context less for each of thousands of subscribers). Elsewhere the
// second of grace lets the transport's clear close come first. The end is timed on clock
// (nil: the wall clock), the verifier's, as the token's validity is: a test that advances
// it ends the stream with no wait.
func untilTokenExpiry(ctx context.Context, clock clockwork.Clock) (context.Context, context.CancelFunc) {
	if live.HookFrom(ctx) != nil {
		return ctx, func() {}
	}
	c, ok := auth.FromContext(ctx)
	if !ok || c.ValidUntil.IsZero() {
		return context.WithCancel(ctx)
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	ctx, cancel := context.WithCancel(ctx)
	end := clock.AfterFunc(clock.Until(c.ValidUntil.Add(time.Second)), cancel)
	return ctx, func() {
		end.Stop()
		cancel()
	}
}
