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
	// conflicts as Accept). The handler has checked that sendAt is at most a year ahead,
	// not that it is in the future: a replay may come after the first request's sendAt
	// and still answers the first 202, so the Backend refuses a past sendAt
	// (BAD_USER_INPUT "sendAt is in the past") only for a request that is not a replay.
	StartBroadcast(ctx context.Context, tenant, key string, req gen.BroadcastRequest) (res gen.BroadcastAccepted, replayed bool, err error)
	// GetBroadcast reads a broadcast's progress; CancelBroadcast cancels it (recipients
	// written stay written) and returns it after. NOT_FOUND when there is none.
	GetBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error)
	CancelBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error)
	// CreateAnnouncement stores a tenant-wide announcement under the tenant's idempotency
	// key (service.Announcements.Create: at most three writes whatever the tenant's size);
	// replays and conflicts as Accept. BAD_USER_INPUT past inbox.MaxActiveAnnouncements.
	CreateAnnouncement(ctx context.Context, tenant, key string, req gen.AnnouncementRequest) (res gen.AnnouncementAccepted, replayed bool, err error)
	// GetAnnouncement reads an announcement and its status; WithdrawAnnouncement withdraws
	// it (it leaves every inbox and badge) and answers it after. NOT_FOUND when none.
	GetAnnouncement(ctx context.Context, tenant, id string) (gen.Announcement, error)
	WithdrawAnnouncement(ctx context.Context, tenant, id string) (gen.Announcement, error)
	// UpdateSegment adds and removes members (at most 1,000 ids together).
	UpdateSegment(ctx context.Context, tenant, id string, add, remove []string) (gen.SegmentMembersChanged, error)
	// GetSegment reads the member count and a page of at most limit members after cursor
	// ("" for the first page); NOT_FOUND for a segment without members (as a broadcast
	// refuses it: a segment exists while it has members).
	GetSegment(ctx context.Context, tenant, id string, limit int, cursor string) (gen.Segment, error)
	// GetUser reads the user's channel profile (empty when none is stored).
	GetUser(ctx context.Context, tenant, id string) (gen.UserProfile, error)
	// GetTenantSettings reads the tenant's stored settings (without the webhook secret).
	GetTenantSettings(ctx context.Context, tenant string) (gen.TenantSettings, error)
	// ListSuppressions reads a page of at most limit entries of the tenant's suppression
	// list after cursor, of channel ("" every channel; "EMAIL", "SMS").
	ListSuppressions(ctx context.Context, tenant, channel, cursor string, limit int) (gen.SuppressionPage, error)
	// DeleteSuppression takes channel's address off the list; false when it was not on it.
	DeleteSuppression(ctx context.Context, tenant, channel, address string) (bool, error)
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
	// RegisterDevice registers a push device of v (idempotent for a token v already has;
	// an eleventh device evicts the oldest) and answers it, as store.Store.RegisterDevice.
	// The handler has checked token and platform (inbox.CheckDevice).
	RegisterDevice(ctx context.Context, v inbox.Viewer, token, platform string) (inbox.Device, error)
	// UnregisterDevice removes v's device with this token or device id; false when v has
	// none such (the handler answers NOT_FOUND).
	UnregisterDevice(ctx context.Context, v inbox.Viewer, tokenOrID string) (bool, error)
	// ApplyProviderEvents applies a provider callback's verified events to their delivery
	// records (store.Store.ApplyProviderEvent: forward only, provider-guarded) and
	// answers how many changed a record; an event that matches no record changes nothing
	// and is no error.
	ApplyProviderEvents(ctx context.Context, events []inbox.ProviderEvent) (applied int, err error)
}

// InboxStore is what a Backend reads and writes of a user's inbox pages and preferences
// (implemented by *store.Store).
type InboxStore interface {
	Inbox(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error)
	Preferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error)
	UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error)
}
