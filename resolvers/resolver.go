// Package resolvers implements the GraphQL schema: thin resolvers that read the viewer from
// the verified token, call the store, and map errors to the codes of inbox.Error. The
// Resolver root holds every dependency; it is built once in server.go.
package resolvers

import (
	"context"
	"log/slog"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

// Store is what the resolvers need of the storage layer (implemented by *store.Store).
type Store interface {
	Inbox(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error)
	Badge(ctx context.Context, v inbox.Viewer) (count int, version int64, err error)
	Notifications(ctx context.Context, v inbox.Viewer, ids []string) ([]*inbox.Notification, error)
	Mark(ctx context.Context, v inbox.Viewer, ids []string, read bool) (inbox.MarkResult, error)
	MarkAll(ctx context.Context, v inbox.Viewer) (inbox.MarkAllResult, error)
	Send(ctx context.Context, tenantID string, in inbox.SendInput) (inbox.SendResult, error)
	Profiles(ctx context.Context, tenantID string, refs []inbox.ProfileRef) ([]*inbox.Profile, error)
}

// Broker hands out subscriptions to inbox changes (implemented by *live.Local).
type Broker interface {
	Subscribe(v inbox.Viewer) *live.Subscription
}

// Resolver is the root resolver: the dependency container of every resolver.
type Resolver struct {
	Store  Store
	Broker Broker
	Log    *slog.Logger
}

// claims returns the verified token's claims of ctx, or UNAUTHENTICATED.
func claims(ctx context.Context) (auth.Claims, error) {
	c, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Claims{}, inbox.Errorf(inbox.CodeUnauthenticated, "a valid bearer token is required")
	}
	return c, nil
}

// viewer returns the caller named by ctx's verified token, or UNAUTHENTICATED.
func viewer(ctx context.Context) (inbox.Viewer, error) {
	c, err := claims(ctx)
	if err != nil {
		return inbox.Viewer{}, err
	}
	return c.Viewer(), nil
}
