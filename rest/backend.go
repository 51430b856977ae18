package rest

import (
	"context"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
)

// Backend does the work of the service API. The handlers have already checked the token,
// the scope, the body's shape and limits, and every id (inbox.CheckID); the tenant is
// always the token's. Errors are *inbox.Error (their code picks the HTTP status, see
// StatusOf: CONFLICT is 409, NOT_FOUND 404, ...); any other error is answered 500 with a
// generic message.
//
// Where the domain has types (feeds, preferences) the methods take them; the others take
// and return the document's generated types, which the composition root maps onto the
// service layer.
type Backend interface {
	// Accept persists a send under the tenant's idempotency key and answers the 202 body.
	// A replay of the key with the same body returns the first body and replayed = true;
	// the same key with another body is CONFLICT.
	Accept(ctx context.Context, tenant, key string, req gen.SendRequest) (res gen.Accepted, replayed bool, err error)
	// Status reads a notification's status and delivery records (NOT_FOUND when none).
	Status(ctx context.Context, tenant, notificationID string) (gen.NotificationStatus, error)
	// Feed reads one page of a user's inbox (as store.Store.Inbox).
	Feed(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error)
	// StartBroadcast persists a broadcast under the tenant's idempotency key (replays and
	// conflicts as Accept).
	StartBroadcast(ctx context.Context, tenant, key string, req gen.BroadcastRequest) (res gen.BroadcastAccepted, replayed bool, err error)
	// GetBroadcast reads a broadcast's progress; CancelBroadcast cancels it (recipients
	// written stay written) and returns it after. NOT_FOUND when there is none.
	GetBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error)
	CancelBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error)
	// UpdateSegment adds and removes members (at most 1,000 ids together).
	UpdateSegment(ctx context.Context, tenant, id string, add, remove []string) (gen.SegmentMembersChanged, error)
	// GetSegment reads the member count and a page of at most limit members after cursor
	// ("" for the first page); NOT_FOUND for a segment that never had a member.
	GetSegment(ctx context.Context, tenant, id string, limit int, cursor string) (gen.Segment, error)
	// PutTemplate stores a new version of the template for in.Locale (it must parse).
	PutTemplate(ctx context.Context, tenant, id string, in gen.TemplateInput) (gen.TemplateVersion, error)
	// GetTemplate reads a template at version (0: the latest) for locale ("": the
	// template's default locale); NOT_FOUND when there is none.
	GetTemplate(ctx context.Context, tenant, id, locale string, version int64) (gen.Template, error)
	// PutUser replaces a user's channel profile.
	PutUser(ctx context.Context, tenant, id string, in gen.UserProfileInput) (gen.UserProfile, error)
	// GetPreferences and UpdatePreferences read and change a user's preferences (as
	// store.Store.Preferences and UpdatePreferences).
	GetPreferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error)
	UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error)
	// PutTenantSettings replaces the tenant's settings and answers them (without the
	// webhook secret).
	PutTenantSettings(ctx context.Context, tenant string, in gen.TenantSettingsInput) (gen.TenantSettings, error)
}

// InboxStore is what StoreBackend reads and writes: a user's inbox pages and preferences
// (implemented by *store.Store).
type InboxStore interface {
	Inbox(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error)
	Preferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error)
	UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error)
}

// StoreBackend is the Backend of the parts the store has: feeds and preferences. The
// operations of the send pipeline (sends, status, broadcasts, segments, templates, user
// profiles, tenant settings) answer UNAVAILABLE (503) naming the operation until the
// composition root gives a Backend that has them.
type StoreBackend struct {
	Store InboxStore
}

var _ Backend = StoreBackend{}

// unwired is the answer of an operation this backend does not have.
func unwired(op string) error {
	return inbox.Errorf(inbox.CodeUnavailable, "%s is not available on this gateway", op)
}

// Feed reads a page of the user's inbox.
func (b StoreBackend) Feed(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error) {
	return b.Store.Inbox(ctx, v, q)
}

// GetPreferences reads the user's effective preferences.
func (b StoreBackend) GetPreferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error) {
	return b.Store.Preferences(ctx, v)
}

// UpdatePreferences changes the user's own preferences.
func (b StoreBackend) UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error) {
	return b.Store.UpdatePreferences(ctx, v, upd)
}

// Accept answers UNAVAILABLE.
func (StoreBackend) Accept(context.Context, string, string, gen.SendRequest) (gen.Accepted, bool, error) {
	return gen.Accepted{}, false, unwired("sending")
}

// Status answers UNAVAILABLE.
func (StoreBackend) Status(context.Context, string, string) (gen.NotificationStatus, error) {
	return gen.NotificationStatus{}, unwired("notification status")
}

// StartBroadcast answers UNAVAILABLE.
func (StoreBackend) StartBroadcast(context.Context, string, string, gen.BroadcastRequest) (gen.BroadcastAccepted, bool, error) {
	return gen.BroadcastAccepted{}, false, unwired("broadcasting")
}

// GetBroadcast answers UNAVAILABLE.
func (StoreBackend) GetBroadcast(context.Context, string, string) (gen.Broadcast, error) {
	return gen.Broadcast{}, unwired("broadcasting")
}

// CancelBroadcast answers UNAVAILABLE.
func (StoreBackend) CancelBroadcast(context.Context, string, string) (gen.Broadcast, error) {
	return gen.Broadcast{}, unwired("broadcasting")
}

// UpdateSegment answers UNAVAILABLE.
func (StoreBackend) UpdateSegment(context.Context, string, string, []string, []string) (gen.SegmentMembersChanged, error) {
	return gen.SegmentMembersChanged{}, unwired("segments")
}

// GetSegment answers UNAVAILABLE.
func (StoreBackend) GetSegment(context.Context, string, string, int, string) (gen.Segment, error) {
	return gen.Segment{}, unwired("segments")
}

// PutTemplate answers UNAVAILABLE.
func (StoreBackend) PutTemplate(context.Context, string, string, gen.TemplateInput) (gen.TemplateVersion, error) {
	return gen.TemplateVersion{}, unwired("templates")
}

// GetTemplate answers UNAVAILABLE.
func (StoreBackend) GetTemplate(context.Context, string, string, string, int64) (gen.Template, error) {
	return gen.Template{}, unwired("templates")
}

// PutUser answers UNAVAILABLE.
func (StoreBackend) PutUser(context.Context, string, string, gen.UserProfileInput) (gen.UserProfile, error) {
	return gen.UserProfile{}, unwired("user profiles")
}

// PutTenantSettings answers UNAVAILABLE.
func (StoreBackend) PutTenantSettings(context.Context, string, gen.TenantSettingsInput) (gen.TenantSettings, error) {
	return gen.TenantSettings{}, unwired("tenant settings")
}
