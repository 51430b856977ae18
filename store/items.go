package store

import (
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Explicit read marks of a notification (attribute mark).
const (
	markRead   = "R"
	markUnread = "U"
)

// notificationItem is a notification as stored: pk userPK, sk notifSK(id); gsi1pk/gsi1sk
// are present only while the notification may be unread (the sparse GSI of AP4).
type notificationItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	GSI1PK     string `dynamodbav:"gsi1pk,omitempty"`
	GSI1SK     string `dynamodbav:"gsi1sk,omitempty"`
	EntityType string `dynamodbav:"entityType"`
	ID         string `dynamodbav:"id"`
	Type       string `dynamodbav:"type"`
	Category   string `dynamodbav:"category,omitempty"`
	Title      string `dynamodbav:"title,omitempty"`
	Body       string `dynamodbav:"body,omitempty"`
	ActorID    string `dynamodbav:"actorId,omitempty"`
	TargetKind string `dynamodbav:"targetKind,omitempty"`
	TargetID   string `dynamodbav:"targetId,omitempty"`
	// Payload is the JSON document as a string.
	Payload string `dynamodbav:"payload,omitempty"`
	// CreatedAt is in Unix milliseconds.
	CreatedAt int64 `dynamodbav:"createdAt"`
	// Mark is the last explicit mark ("R" or "U"), MarkedAt the ULID of when it was made.
	Mark     string `dynamodbav:"mark,omitempty"`
	MarkedAt string `dynamodbav:"markedAt,omitempty"`
	// ReadAt is in Unix milliseconds, set by an explicit mark read.
	ReadAt int64 `dynamodbav:"readAt,omitempty"`
}

// metaItem is an inbox's META item: pk userPK, sk skMeta, and on GSI1 under unreadPK so
// that the unread list's Query returns it first.
type metaItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	GSI1PK     string `dynamodbav:"gsi1pk"`
	GSI1SK     string `dynamodbav:"gsi1sk"`
	EntityType string `dynamodbav:"entityType"`
	// UnreadCount is the badge: the number of effectively unread notifications.
	UnreadCount int `dynamodbav:"unreadCount"`
	// ReadAllBefore is the markAllRead watermark (a ULID), "" before the first markAllRead.
	ReadAllBefore string `dynamodbav:"readAllBefore,omitempty"`
	// Clock is the newest ULID written into the inbox (notification id or mark time);
	// markAllRead only sets a watermark above it.
	Clock string `dynamodbav:"clock,omitempty"`
	// Version grows by one with every write of META: badge events carry it so that a stale
	// or duplicated event never moves a badge backwards.
	Version int64 `dynamodbav:"version"`
}

// prefsItem is a user's preferences: pk userPK, sk skPrefs. Every attribute is what the
// user set; one that is absent takes the tenant's default (see store/prefs.go). The
// per-category switches are top-level BOOL attributes named "cat#<category>#<channel>"
// (prefsAttrCategorySwitch), not a nested map, so that an update sets any of them in one
// UpdateItem without reading the item first; decodePrefs collects them.
type prefsItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	// Muted are the categories opted out of with the v1 API (SetMutedCategories): in-app
	// off for them unless the category's own in-app switch says otherwise.
	Muted []string `dynamodbav:"mutedCategories,stringset,omitempty"`
	// InApp, Email, Push and SMS are the user's global channel switches.
	InApp *bool `dynamodbav:"inApp,omitempty"`
	Email *bool `dynamodbav:"email,omitempty"`
	Push  *bool `dynamodbav:"push,omitempty"`
	SMS   *bool `dynamodbav:"sms,omitempty"`
	// MutedTargets are the muted targets, each "<kind>#<target id>" (both ids, which
	// never contain '#').
	MutedTargets []string        `dynamodbav:"mutedTargets,stringset,omitempty"`
	QuietHours   *quietHoursAttr `dynamodbav:"quietHours,omitempty"`
	Timezone     string          `dynamodbav:"timezone,omitempty"`
	Locale       string          `dynamodbav:"locale,omitempty"`
}

// quietHoursAttr is the quietHours map of prefsItem: "HH:MM" both.
type quietHoursAttr struct {
	Start string `dynamodbav:"start"`
	End   string `dynamodbav:"end"`
}

// guardItem is one recipient's idempotency guard: pk guardPK, sk guardSK(recipient).
type guardItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	UserID     string `dynamodbav:"userId"`
	// NotificationID is the id written for the recipient, "" when they had muted the category.
	NotificationID string `dynamodbav:"notificationId,omitempty"`
	// InputHash identifies the send's content: a key reused for other content is refused.
	InputHash string `dynamodbav:"inputHash"`
	// ExpiresAt is the TTL, in Unix seconds.
	ExpiresAt int64 `dynamodbav:"expiresAt"`
}

// profileItem is an actor or target profile: pk actorPK/targetPK, sk skProfile.
type profileItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	ActorID    string `dynamodbav:"actorId,omitempty"`
	TargetID   string `dynamodbav:"targetId,omitempty"`
	Kind       string `dynamodbav:"kind,omitempty"`
	Name       string `dynamodbav:"name,omitempty"`
	AvatarURL  string `dynamodbav:"avatarUrl,omitempty"`
	URL        string `dynamodbav:"url,omitempty"`
	Title      string `dynamodbav:"title,omitempty"`
}

// effectiveRead is the read state of it under watermark wm (see the package doc): the
// latest of the explicit mark and the watermark wins.
func effectiveRead(it *notificationItem, wm string) bool {
	if it.Mark != "" && it.MarkedAt > wm {
		return it.Mark == markRead
	}
	return it.Mark == markRead || (wm != "" && it.ID <= wm)
}

// toNotification converts a stored item to the domain type under watermark wm.
func toNotification(it *notificationItem, wm string) *inbox.Notification {
	n := &inbox.Notification{
		ID:         it.ID,
		Type:       it.Type,
		Category:   it.Category,
		Title:      it.Title,
		Body:       it.Body,
		CreatedAt:  time.UnixMilli(it.CreatedAt).UTC(),
		ActorID:    it.ActorID,
		TargetKind: it.TargetKind,
		TargetID:   it.TargetID,
		Read:       effectiveRead(it, wm),
	}
	if it.Payload != "" {
		n.Payload = inbox.JSON(it.Payload)
	}
	if n.Read {
		// The time it became read: its explicit mark, or else the markAllRead that covered it.
		at := ulidTime(wm)
		if it.Mark == markRead && it.ReadAt != 0 {
			at = time.UnixMilli(it.ReadAt).UTC()
		}
		if !at.IsZero() {
			n.ReadAt = &at
		}
	}
	return n
}
