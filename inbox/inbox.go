package inbox

import (
	"context"
	"encoding/json"
	"time"
)

// Viewer is the caller an operation acts for: a user of a tenant. Both ids come from the
// verified token, never from client input, and every store call takes the Viewer explicitly
// so that every key visibly belongs to the caller.
type Viewer struct {
	TenantID string
	UserID   string
}

// Notification is one entry of a user's inbox.
//
// ID is a ULID (26 characters, Crockford base32): its order is creation order, so the
// inbox is newest-first by ID. Read is the effective read state: read explicitly, or created
// at or before the inbox's markAllRead watermark and not marked unread since.
type Notification struct {
	ID string
	// Kind is KindAnnouncement for a tenant's announcement shown in the user's inbox
	// (ID is then the announcement's), "" (KindPersonal) for the user's own.
	Kind      string
	Type      string
	Category  string
	Title     string
	Body      string
	Read      bool
	ReadAt    *time.Time
	CreatedAt time.Time
	// ActorID names the actor profile, empty when the notification has none.
	ActorID string
	// TargetKind and TargetID name the target profile, both empty when it has none.
	TargetKind string
	TargetID   string
	// Payload is the sender's JSON document, nil when none was given.
	Payload JSON
	// Seen is the effective seen state: seen explicitly (markSeen, markRead), or created at or
	// before a markAllSeen or markAllRead watermark. It never goes back to false.
	Seen bool
	// SeenAt is when it was seen (for a watermark, the time of that call); nil while unseen.
	SeenAt *time.Time
	// Archived is true while the notification is archived, since ArchivedAt.
	Archived   bool
	ArchivedAt *time.Time
	// SnoozedUntil is when a snoozed notification comes back; nil unless snoozed and not
	// yet woken.
	SnoozedUntil *time.Time
	// ExpiresAt is when the notification leaves the inbox; nil when it never expires.
	ExpiresAt *time.Time
	// GroupKey is the key of the notification's group (Viewer.groups).
	GroupKey string
	// Actions are the call-to-action buttons given at send, in order.
	Actions []Action
	// ActivityCount is how many sends a batched notification collects (0 for an
	// unbatched one, which the API shows as 1); Activities are the first
	// MaxBatchActivities of them.
	ActivityCount int
	Activities    []Activity
	// Embedded, on an announcement, holds its actor and target as the announcement keeps
	// them (no profile item is read for them); nil otherwise.
	Embedded *Embedded
}

// Embedded is the actor and target an announcement carries itself.
type Embedded struct {
	Actor  *Actor
	Target *Target
}

// Action is a call-to-action button of a notification.
type Action struct {
	Label string
	URL   string
}

// Actor is who caused a notification: a profile shared by a tenant's notifications.
type Actor struct {
	ActorID   string
	Name      string
	AvatarURL string
	URL       string
	// Via is the ULID of the viewer's notification this actor was reached through; the
	// actor's global id is anchored on it (see GlobalID), so node(id) answers the profile
	// only to a viewer that has that notification. Empty for a profile not reached
	// through a notification (its id then resolves to nothing).
	Via string
}

// Target is what a notification is about (an issue, a pull request, a comment...).
// TargetID is unique within its Kind.
type Target struct {
	TargetID string
	Kind     string
	Title    string
	URL      string
	// Via anchors the target's global id: the viewer's tag for the target (the store's
	// ProfileTag: one id per viewer and target, wherever the viewer meets it, in any
	// notification, group or muted target), or, in a target the store resolved through a
	// notification (Store.Nodes), that notification's ULID.
	Via string
}

// ProfileRef names an actor (TargetKind empty) or a target (TargetKind set) of a tenant.
// It is comparable, so it serves as a dataloader key.
type ProfileRef struct {
	TargetKind string
	ID         string
}

// NodeRef is what one global id may name, as the store looks it up for a viewer: a
// notification (Profile.ID empty), or a profile anchored on the notification it was
// reached through (Notification is that notification's ULID). It is comparable, so it
// serves as a dataloader key.
type NodeRef struct {
	Notification string
	Profile      ProfileRef
}

// NodeResult is what a NodeRef resolved to: at most one field is set (none when the
// viewer has no such notification, or it does not name the profile, or the profile does
// not exist). A resolved Actor or Target carries Via = the anchoring notification's ULID.
type NodeResult struct {
	Notification *Notification
	Actor        *Actor
	Target       *Target
}

// Profile is a loaded actor or target; exactly one of the two is set.
type Profile struct {
	Actor  *Actor
	Target *Target
}

// MaxPageSize is the largest first or last a connection accepts (Relay cursor connections).
const MaxPageSize = 100

// MaxFilterTypes is how many types a page's filter.types may name (a typed inbox page is
// one GSI2 Query per distinct type).
const MaxFilterTypes = 20

// DefaultPageSize is the page size when neither first nor last is given.
const DefaultPageSize = 20

// PageQuery asks for one page of an inbox. At most one of First and Last is set (validated
// by Validate). After and Before are opaque cursors produced by the store.
type PageQuery struct {
	First  *int
	After  string
	Last   *int
	Before string
	// UnreadOnly keeps only effectively unread notifications.
	UnreadOnly bool
	// Types, when non-empty, keeps only notifications whose Type is one of them.
	Types []string
	// Categories, when non-empty, keeps only notifications of one of these categories.
	Categories []string
	// Archived says how archived notifications are treated (default ArchivedExclude).
	Archived ArchivedFilter
	// Profiles asks for the actor and target profiles of the page's notifications with
	// the page (in Page.Profiles), read in the page's BatchGetItem.
	Profiles bool
	// ActivityProfiles, with Profiles, adds the actors of batched notifications' kept
	// activities (at most MaxBatchActivities each) to that read.
	ActivityProfiles bool
}

// ArchivedFilter says how a page treats archived notifications.
type ArchivedFilter string

// The archived filters (the ArchivedFilter enum of the schema).
const (
	ArchivedExclude ArchivedFilter = "EXCLUDE"
	ArchivedInclude ArchivedFilter = "INCLUDE"
	ArchivedOnly    ArchivedFilter = "ONLY"
)

// Edge is one notification of a page with its opaque cursor.
type Edge struct {
	Cursor string
	Node   *Notification
}

// PageInfo is Relay's page info for a page.
type PageInfo struct {
	HasNextPage     bool
	HasPreviousPage bool
	StartCursor     *string
	EndCursor       *string
}

// Page is one page of an inbox, newest first, with the badge count read alongside it.
type Page struct {
	Edges    []Edge
	PageInfo PageInfo
	// UnreadCount is the badge count; valid only when HasUnreadCount is true (the store
	// reads it with the page when the page's Query passes the inbox's META item).
	UnreadCount    int
	HasUnreadCount bool
	// Profiles are the actors and targets of the page's notifications when the query
	// asked for them (PageQuery.Profiles): nil for a ref with no profile. Refs that could
	// not be keys are absent.
	Profiles map[ProfileRef]*Profile
}

// Nodes returns the page's notifications in edge order.
func (p *Page) Nodes() []*Notification {
	out := make([]*Notification, len(p.Edges))
	for i := range p.Edges {
		out[i] = p.Edges[i].Node
	}
	return out
}

// MarkResult is the outcome of a state change of notifications (read, unread, seen,
// archive, unarchive, snooze, unsnooze).
type MarkResult struct {
	// Notifications are the notifications found, in their new state, in the order of the
	// distinct ids asked.
	Notifications []*Notification
	// Changed is how many of them changed state (the others already were in it).
	Changed int
	// UnreadCount is the badge count right after the write (Badge.Unread).
	UnreadCount int
	// NotFound are the ids asked (as given) that are not the viewer's notifications.
	NotFound []string
	// Badge is the badge right after the write.
	Badge Badge
}

// MarkAllResult is the outcome of marking a whole inbox (or some categories of it) read.
type MarkAllResult struct {
	UnreadCount int
	// ReadAllBefore is the time of the watermark set (zero when nothing was marked).
	ReadAllBefore time.Time
	// Badge is the badge right after the write.
	Badge Badge
}

// DeleteResult is the outcome of deleting notifications.
type DeleteResult struct {
	// DeletedIDs are the ids asked (as given) that were deleted, or already gone by an
	// earlier attempt of the same call.
	DeletedIDs []string
	// NotFound are the ids asked (as given) that are not the viewer's notifications.
	NotFound []string
	Badge    Badge
}

// Badge is an inbox's counters, as of META's Version. Counts cover active notifications
// (not archived, snoozed, deleted or expired); a read notification is also seen.
type Badge struct {
	Unread int
	Unseen int
	// Categories are the categories with a non-zero count, sorted by name.
	Categories []CategoryCount
	// Version is META's version the counts were read at (0: not known).
	Version int64
	// Marks is the user's state of their tenant's announcements, read from META with the
	// counts (nil: not read). The counts above are the user's own until ComposeBadge adds
	// the tenant's active announcements.
	Marks *AnnouncementMarks
	// Own, set by ComposeBadge, is the badge before the announcements were added;
	// AnnouncementSeq the sequence of the announcement set they came from.
	Own             *Badge
	AnnouncementSeq int64
}

// CategoryCount is one category's share of a Badge.
type CategoryCount struct {
	Category string
	Unread   int
	Unseen   int
}

// StateOp is a state change of notifications applied by ids.
type StateOp int

// The state changes. Each is idempotent: applying it to a notification already in the
// state changes nothing.
const (
	OpRead StateOp = iota + 1
	OpUnread
	OpSeen
	OpArchive
	OpUnarchive
	// OpSnooze takes StateChange.Until.
	OpSnooze
	OpUnsnooze
)

// StateChange asks for one StateOp on notifications of a viewer.
type StateChange struct {
	Op StateOp
	// IDs are notification ULIDs, at most MaxStateIDs distinct.
	IDs []string
	// Until is when snoozed notifications wake (OpSnooze only).
	Until time.Time
}

// MaxStateIDs is the most distinct ids one state change or delete takes (a page).
const MaxStateIDs = 100

// MaxSnooze is how far ahead a snooze may wake, and an expiry may lie.
const MaxSnooze = 366 * 24 * time.Hour

// SendInput is one notification to fan out to recipients of one tenant.
type SendInput struct {
	// IdempotencyKey is unique per logical event (1..256 bytes, no control characters).
	IdempotencyKey string
	// Recipients are user ids of the tenant, 1..MaxRecipients; repeats count once.
	Recipients []string
	Type       string
	Category   string
	Title      string
	Body       string
	// Actor and Target, when set, are upserted as profiles (fields left empty keep their
	// stored value).
	Actor   *Actor
	Target  *Target
	Payload JSON
	// ExpiresAt, when set, is when the notifications expire (in the future, at most
	// MaxSnooze ahead); zero: the store's default retention, if any.
	ExpiresAt time.Time
	// GroupKey groups the notifications (Viewer.groups); "" means type + target.
	GroupKey string
	// Actions are call-to-action buttons, at most MaxActions.
	Actions []Action
	// TemplateChannels are the channels the send's template defines (Channels values);
	// nil means in-app only (a send without a template).
	TemplateChannels []string
	// Channels is the send's channels hint: nil puts no restriction; otherwise a channel
	// left out is skipped (ReasonNotInHint). The final channels are the template's, within
	// the hint, within each recipient's preferences and what the recipient has.
	Channels []string
	// NotificationIDs, when set, pre-assigns recipients' notification ids (ULIDs, by
	// recipient): the store writes a recipient's notification under its id unless the
	// recipient's inbox read it away in between (a watermark of markAllRead or markAllSeen
	// at or above it), when it takes a fresh one. Recipients without one get a fresh id.
	NotificationIDs map[string]string
	// Locale is the send's locale (BCP 47): a recipient without a locale of their own
	// gets the content rendered for it.
	Locale string
	// Throttle, when set, keeps at most Throttle.Limit notifications per recipient and
	// Throttle.Key in each window of Throttle.Window; a recipient over it is skipped in
	// every channel with ReasonThrottled.
	Throttle *Throttle
	// LeaveOut, when set, is a user id the send skips in every channel with
	// ReasonActor: the actor of a send to several recipients or to a segment, who is not
	// notified of their own action unless the send asks for it (includeActor). A skipped
	// recipient gets status records, no notification, as an opted-out one.
	LeaveOut string
	// BatchClose, when set, makes this send the close of a batch (the send service's).
	BatchClose *BatchClose
	// RenderKey identifies the template content of a templated send (template, version,
	// data; the send renders it per recipient locale), for the idempotency check: it is
	// part of the content a key is first sent with. "" without a template.
	RenderKey string
}

// Throttle is a send's throttle: at most Limit notifications per (recipient, Key) in
// each window of length Window (windows aligned on the Unix epoch: a 1 h window is a
// clock hour in UTC). Limits: routing.CheckThrottle.
type Throttle struct {
	// Key names what is counted (inbox.CheckID rules; the service defaults it to the
	// send's type).
	Key string `json:"key"`
	// Limit is the most notifications a recipient gets per window, 1..1,000.
	Limit int `json:"limit"`
	// Window is the window's length, 1 s..7 days, whole seconds.
	Window time.Duration `json:"window"`
}

// Rendered is a template rendered for one locale: what a notification shows, the
// channels' parts of the template, and the channels the template defines (Channel*
// constants).
type Rendered struct {
	Title string
	Body  string
	// Parts are the template's channel parts, by channel (PartChannels); a channel
	// missing has none and shows the title and body (see Content).
	Parts map[string]Content
	// Channels are the channels the template defines at its version: in-app and every
	// channel some locale has a part for, whichever locale this is (a locale without a
	// channel's part shows the title and body there: Content).
	Channels []string
}

// MaxActions is the most actions a notification carries.
const MaxActions = 5

// MaxRecipients is the most recipients one send accepts.
const MaxRecipients = 100

// MaxPayloadBytes is the largest payload a send accepts, encoded as JSON (16 KiB).
const MaxPayloadBytes = 16 << 10

// SendResult is the outcome of a send.
type SendResult struct {
	// NotificationIDs are the ids written, one per accepting recipient, in recipient order.
	NotificationIDs []string
	// Delivered pairs each accepting recipient with its notification, in recipient order.
	Delivered []Delivery
	// Accepted is len(NotificationIDs): recipients who opted out are skipped.
	Accepted int
	// Duplicate is true when the key had already completed: nothing was written.
	Duplicate bool
	// Skipped counts, per channel and reason, the recipients this call wrote with that
	// channel skipped (recipients written by an earlier call of the key are not counted
	// again; their status records hold their decisions). In-app skips are the recipients
	// missing from Accepted.
	Skipped SkipCounts
	// StatusIDs maps each recipient written (by this call or an earlier one of the key) to
	// the id its status is read under (Store.Status): its notification's id, or for a
	// recipient whose in-app was skipped, the id of its status records alone.
	StatusIDs map[string]string
}

// Delivery is one recipient's notification written by a send.
type Delivery struct {
	UserID       string
	Notification *Notification
	// New is false when an earlier call with the same idempotency key wrote it.
	New bool
}

// Sender writes notifications; the send loop (service.Writer) and the send service
// (service.Sender) implement it, and importers use it.
type Sender interface {
	// Send fans in out to its recipients of tenantID, idempotently by in.IdempotencyKey.
	Send(ctx context.Context, tenantID string, in SendInput) (SendResult, error)
}

// JSON is a raw JSON document carried through unchanged (a GraphQL JSON scalar).
type JSON = json.RawMessage

// Change is what one committed write did to one inbox; the store publishes it after the
// write commits, and brokers carry it to subscriptions.
//
// Changes are state, not deltas: when Version > 0, UnreadCount is the badge as of META's
// Version, which grows with every write of META, so a subscriber ignores a Change whose
// Version is not above the last it delivered. When Version == 0 the writer did not read the
// badge back (a send's transaction returns no values); the subscriber reads it itself.
type Change struct {
	Viewer      Viewer
	UnreadCount int
	Version     int64
	// Notification is set when the write added this notification to the inbox.
	Notification *Notification
	// Kind is what the write did (EventNone for a badge refresh or a re-read hint).
	Kind EventKind
	// IDs are the ULIDs of the notifications the write changed (for Kind's event).
	IDs []string
	// Badge is the full badge as of Version (valid when Version > 0).
	Badge Badge
}

// EventKind is what one committed write did to an inbox (Subscription.inboxEvents).
type EventKind string

// The event kinds (the InboxEventKind enum of the schema).
const (
	// EventNone carries no event: a badge refresh or a re-read hint.
	EventNone       EventKind = ""
	EventAdded      EventKind = "ADDED"
	EventRead       EventKind = "READ"
	EventUnread     EventKind = "UNREAD"
	EventSeen       EventKind = "SEEN"
	EventAllRead    EventKind = "ALL_READ"
	EventAllSeen    EventKind = "ALL_SEEN"
	EventArchived   EventKind = "ARCHIVED"
	EventUnarchived EventKind = "UNARCHIVED"
	EventSnoozed    EventKind = "SNOOZED"
	EventWoke       EventKind = "WOKE"
	EventDeleted    EventKind = "DELETED"
	EventExpired    EventKind = "EXPIRED"
	// EventAnnouncements is a tenant's announcement change (created or withdrawn),
	// published for the tenant's pseudo-viewer (no user) with Version the tenant's new
	// announcement sequence: every instance reads the set again and recomposes the badges
	// of the tenant's subscribers. It is not an InboxEventKind of the schema.
	EventAnnouncements EventKind = "ANNOUNCEMENTS"
)

// Publisher receives every Change after its write commits. Publish must not block on slow
// subscribers.
type Publisher interface {
	Publish(ctx context.Context, c Change)
}
