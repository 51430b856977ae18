// Package resolvers implements the GraphQL schema: thin resolvers that read the viewer from
// the verified token, call the store, and map errors to the codes of inbox.Error. The
// Resolver root holds every dependency; it is built once in server.go.
package resolvers

import (
	"context"
	"log/slog"

	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/graph"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/service"
)

// Store is what the resolvers need of the storage layer (implemented by *store.Store).
type Store interface {
	// ProfileTag is the tag a target's global id carries for a viewer (store.ProfileTag):
	// one id per viewer and target, which node() checks.
	ProfileTag(v inbox.Viewer, ref inbox.ProfileRef) string
	Inbox(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error)
	// Badge reads v's badge (one GetItem of META).
	Badge(ctx context.Context, v inbox.Viewer) (inbox.Badge, error)
	// ApplyState applies a state change (read, unread, seen, archive, unarchive, snooze,
	// unsnooze) to up to inbox.MaxStateIDs notifications; ids not found are listed.
	ApplyState(ctx context.Context, v inbox.Viewer, ch inbox.StateChange) (inbox.MarkResult, error)
	// Delete deletes up to inbox.MaxStateIDs notifications; ids not found are listed.
	Delete(ctx context.Context, v inbox.Viewer, ids []string) (inbox.DeleteResult, error)
	// MarkAll marks every notification read, or those of categories when given.
	MarkAll(ctx context.Context, v inbox.Viewer, categories []string) (inbox.MarkAllResult, error)
	// MarkAllSeen marks every notification seen.
	MarkAllSeen(ctx context.Context, v inbox.Viewer) (inbox.Badge, error)
	Profiles(ctx context.Context, tenantID string, refs []inbox.ProfileRef) ([]*inbox.Profile, error)
	// Nodes resolves what global ids name for v (notifications, and profiles anchored on
	// a notification of v's that names them), aligned with refs, in one BatchGetItem.
	Nodes(ctx context.Context, v inbox.Viewer, refs []inbox.NodeRef) ([]inbox.NodeResult, error)
	// Groups reads a page of v's notification groups (one Query plus one BatchGetItem);
	// GroupMembers the active members of v's groups by key (absent: no such group);
	// Group one group (nil when it has no active member).
	Groups(ctx context.Context, v inbox.Viewer, q inbox.GroupQuery) (*inbox.GroupPage, error)
	GroupMembers(ctx context.Context, v inbox.Viewer, keys []string) (map[string][]string, error)
	Group(ctx context.Context, v inbox.Viewer, key string) (*inbox.NotificationGroup, error)
	// Preferences returns v's effective preferences (the tenant's defaults overlaid by
	// v's own); UpdatePreferences changes v's own and returns the effective ones after.
	Preferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error)
	UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error)
	// Status reads a notification's status and delivery records (one Query; NOT_FOUND
	// when it has none). It is keyed by tenant and notification only: the caller checks
	// that the status's UserID is the viewer's.
	Status(ctx context.Context, tenantID, notificationID string) (inbox.NotificationStatus, error)
}

// Sender is the send service (implemented by *service.Service): sendNotification calls
// it, as REST's POST /v1/notifications does.
type Sender interface {
	Send(ctx context.Context, tenant string, r service.SendRequest) (service.Sent, error)
}

// Announcer is the announcement service (implemented by *service.Announcements).
type Announcer interface {
	Create(ctx context.Context, tenant string, r service.CreateRequest) (*inbox.Announcement, bool, error)
	Withdraw(ctx context.Context, tenant, id string) (*inbox.Announcement, error)
}

// Broker hands out subscriptions to inbox changes (implemented by *live.Local).
type Broker interface {
	Subscribe(v inbox.Viewer, opts ...live.SubscribeOption) *live.Subscription
}

// Resolver is the root resolver: the dependency container of every resolver.
type Resolver struct {
	Store  Store
	Sender Sender
	Broker Broker
	// Announcements serves sendAnnouncement and withdrawAnnouncement (nil: UNAVAILABLE);
	// Announced composes live badges with the tenants' announcements (nil: none).
	Announcements Announcer
	Announced     *live.Announced
	Log           *slog.Logger
	// Clock is the clock a subscription's end at its token's expiry is timed on: the
	// verifier's (auth.Verifier.Clock), whose time a token's ValidUntil is in. Nil means
	// the wall clock.
	Clock clockwork.Clock
}

// claims returns the verified token's claims of ctx, or UNAUTHENTICATED.
func claims(ctx context.Context) (auth.Claims, error) {
	c, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Claims{}, inbox.Errorf(inbox.CodeUnauthenticated, "a valid bearer token is required")
	}
	return c, nil
}

// viewer returns the user named by ctx's verified token: UNAUTHENTICATED without one,
// FORBIDDEN for a service token (it has no user, so no inbox, preferences or live
// streams of its own).
func viewer(ctx context.Context) (inbox.Viewer, error) {
	c, err := claims(ctx)
	if err != nil {
		return inbox.Viewer{}, err
	}
	return c.User()
}

// Root returns r as a graph.ResolverRoot whose object resolvers are built once: the
// generated executor asks the root for an object's resolver at every field it resolves
// (40 times for a page of 20 notifications), and Resolver's own accessors, which gqlgen
// regenerates, allocate a new one each time.
func (r *Resolver) Root() graph.ResolverRoot {
	return &root{
		announcement: r.Announcement(),
		activity:     r.Activity(),
		mutation:     r.Mutation(),
		notification: r.Notification(),
		group:        r.NotificationGroup(),
		preferences:  r.Preferences(),
		category:     r.CategoryPreference(),
		query:        r.Query(),
		subscription: r.Subscription(),
		viewer:       r.Viewer(),
	}
}

type root struct {
	announcement graph.AnnouncementResolver
	activity     graph.ActivityResolver
	mutation     graph.MutationResolver
	notification graph.NotificationResolver
	group        graph.NotificationGroupResolver
	preferences  graph.PreferencesResolver
	category     graph.CategoryPreferenceResolver
	query        graph.QueryResolver
	subscription graph.SubscriptionResolver
	viewer       graph.ViewerResolver
}

func (x *root) Activity() graph.ActivityResolver         { return x.activity }
func (x *root) Mutation() graph.MutationResolver         { return x.mutation }
func (x *root) Notification() graph.NotificationResolver { return x.notification }
func (x *root) Preferences() graph.PreferencesResolver   { return x.preferences }
func (x *root) CategoryPreference() graph.CategoryPreferenceResolver {
	return x.category
}
func (x *root) NotificationGroup() graph.NotificationGroupResolver {
	return x.group
}
func (x *root) Query() graph.QueryResolver               { return x.query }
func (x *root) Subscription() graph.SubscriptionResolver { return x.subscription }
func (x *root) Viewer() graph.ViewerResolver             { return x.viewer }

func (r *root) Announcement() graph.AnnouncementResolver { return r.announcement }

// optionalString is s, nil when empty (an optional field of the schema).
func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
