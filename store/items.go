package store

import (
	"slices"
	"strings"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Explicit read marks of a notification (attribute mark).
const (
	markRead   = "R"
	markUnread = "U"
)

// Attribute names of notification items that writes name in expressions (the dynamodbav
// tags of notificationItem are the same names).
const (
	attrEntityType   = "entityType"
	attrMark         = "mark"
	attrMarkedAt     = "markedAt"
	attrReadAt       = "readAt"
	attrSeenAt       = "seenAt"
	attrArchivedAt   = "archivedAt"
	attrSnoozedUntil = "snoozedUntil"
	attrExpireAt     = "expireAt"
	attrTTL          = "expiresAt"
	attrRev          = "rev"
	attrCategory     = "category"
	attrType         = "type"
	attrID           = "id"
)

// Attribute names of the META item (see metaItem). Per category c (a string that passed
// checkCategory) META also holds catUnread+c, catUnseen+c (counters) and catReadWM+c,
// catSeenWM+c (watermarks, ULIDs), each present once something set it.
const (
	attrUnread  = "unreadCount"
	attrUnseen  = "unseenCount"
	attrReadWM  = "readAllBefore"
	attrSeenWM  = "seenAllBefore"
	attrClock   = "clock"
	attrVersion = "version"

	catUnread = "cu#"
	catUnseen = "cs#"
	catReadWM = "cr#"
	catSeenWM = "cz#"
)

// ttlGrace is how long after its domain expiry (expireAt) a notification is kept before
// DynamoDB's TTL (expiresAt) removes it: the scheduler's expiry task does the visible
// part; TTL is only the backstop.
const ttlGrace = 7 * 24 * time.Hour

// notificationItem is a notification as stored: pk userPK, sk notifSK(id); gsi1pk/gsi1sk
// are present only while the notification is active and may be unread (the sparse GSI of
// AP4). Times are Unix milliseconds unless said otherwise; 0 means unset.
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
	// SeenAt is when it was explicitly seen (markSeen, markRead); seen never goes back.
	SeenAt int64 `dynamodbav:"seenAt,omitempty"`
	// ArchivedAt is set while archived.
	ArchivedAt int64 `dynamodbav:"archivedAt,omitempty"`
	// SnoozedUntil is set while snoozed: when the wake task is due (also its token).
	SnoozedUntil int64 `dynamodbav:"snoozedUntil,omitempty"`
	// ExpireAt is the domain expiry (the expiry task's due time and token).
	ExpireAt int64 `dynamodbav:"expireAt,omitempty"`
	// TTL is DynamoDB's TTL attribute (epoch seconds): ExpireAt + ttlGrace, a backstop.
	TTL int64 `dynamodbav:"expiresAt,omitempty"`
	// GroupKey is the notification's group (Viewer.groups).
	GroupKey string `dynamodbav:"groupKey,omitempty"`
	// Actions are the call-to-action buttons, in order.
	Actions []actionItem `dynamodbav:"actions,omitempty"`
	// Rev grows by one with every state change of the item: the optimistic-lock
	// condition of every item update (absent = 0).
	Rev int64 `dynamodbav:"rev,omitempty"`
	// Counted is the version of META's counters the notification was counted in: 2 for a
	// notification sent by this version (counted in unread, unseen and its category); 0
	// for one written before (or by an outside writer that only adds to unreadCount),
	// which counts in unreadCount alone: it is seen, and its category's watermarks and
	// counters do not apply to it. So counters stay exact on data written before them.
	Counted int64 `dynamodbav:"cv,omitempty"`
	// ActivityCount is how many sends a batched notification collects (AP28; absent for
	// one not batched); Activities are the first inbox.MaxBatchActivities of them.
	ActivityCount int            `dynamodbav:"ac,omitempty"`
	Activities    []activityItem `dynamodbav:"acts,omitempty"`
}

// countersV2 is notificationItem.Counted of a notification counted in every counter.
const countersV2 = 2

// countedCategory is the category whose counters and watermarks apply to it ("" for a
// notification counted before categories were).
func (it *notificationItem) countedCategory() string {
	if it.Counted < countersV2 {
		return ""
	}
	return it.Category
}

// actionItem is one call-to-action button as stored (a map in the actions list).
type actionItem struct {
	Label string `dynamodbav:"label"`
	URL   string `dynamodbav:"url"`
}

// metaItem is an inbox's META item: pk userPK, sk skMeta, and on GSI1 under unreadPK so
// that the unread list's Query returns it first.
type metaItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	GSI1PK     string `dynamodbav:"gsi1pk"`
	GSI1SK     string `dynamodbav:"gsi1sk"`
	EntityType string `dynamodbav:"entityType"`
	// UnreadCount is the badge: the number of active, effectively unread notifications.
	UnreadCount int `dynamodbav:"unreadCount"`
	// UnseenCount is the number of active notifications not seen.
	UnseenCount int `dynamodbav:"unseenCount,omitempty"`
	// ReadAllBefore is the markAllRead watermark (a ULID), "" before the first markAllRead.
	ReadAllBefore string `dynamodbav:"readAllBefore,omitempty"`
	// SeenAllBefore is the markAllSeen (and markAllRead) seen watermark.
	SeenAllBefore string `dynamodbav:"seenAllBefore,omitempty"`
	// Clock is the newest ULID written into the inbox (notification id, mark time or
	// watermark): every watermark is at or below it, and a write that adds a ULID raises it
	// on condition that it is above it.
	Clock string `dynamodbav:"clock,omitempty"`
	// Version grows by one with every write of META: badge events carry it so that a stale
	// or duplicated event never moves a badge backwards.
	Version int64 `dynamodbav:"version"`
	// Cats are the per-category attributes (cu#, cs#, cr#, cz#), by category; decoded by
	// decodeMeta, never by attributevalue.
	Cats map[string]*catState `dynamodbav:"-"`
	// AnnMarks are the user's marks of their tenant's announcements, by announcement id
	// (attributes "an#{ULID}", store/announcements.go); decoded by decodeMeta.
	AnnMarks map[string]inbox.AnnouncementMark `dynamodbav:"-"`
}

// catState is one category's attributes on META; the has* flags say which exist.
type catState struct {
	Unread, Unseen       int
	ReadWM, SeenWM       string
	HasUnread, HasUnseen bool
}

// cat returns category c's state (zero when META has none).
func (m *metaItem) cat(c string) catState {
	if c == "" || m.Cats == nil || m.Cats[c] == nil {
		return catState{}
	}
	return *m.Cats[c]
}

// readWM is the read watermark of a notification of category c: the later of the global
// one and c's.
func (m *metaItem) readWM(c string) string { return max(m.ReadAllBefore, m.cat(c).ReadWM) }

// seenWM is the seen watermark of a notification of category c.
func (m *metaItem) seenWM(c string) string { return max(m.SeenAllBefore, m.cat(c).SeenWM) }

// badge is META's counters as an inbox.Badge (categories with a non-zero count, by name).
func (m *metaItem) badge() inbox.Badge {
	b := inbox.Badge{Unread: m.UnreadCount, Unseen: m.UnseenCount, Version: m.Version, Categories: []inbox.CategoryCount{}, Marks: m.marks()}
	for c, st := range m.Cats {
		if st.Unread != 0 || st.Unseen != 0 {
			b.Categories = append(b.Categories, inbox.CategoryCount{Category: c, Unread: st.Unread, Unseen: st.Unseen})
		}
	}
	slices.SortFunc(b.Categories, func(a, b inbox.CategoryCount) int { return strings.Compare(a.Category, b.Category) })
	return b
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
	// The user's global channel switches are top-level BOOL attributes named by the
	// channels' inbox.ChannelSpec.Switch ("inApp", "email", "push", "sms", "slack");
	// decodePrefs reads them.
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
	// StatusID is the id whose status records (AP22) hold the decisions of a recipient
	// without a notification (in-app skipped); "" otherwise.
	StatusID string `dynamodbav:"statusId,omitempty"`
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

// state is what a notification contributes to META's counters, and why.
type state struct {
	read, seen, active bool
}

// stateOf is it's state under m's watermarks.
func stateOf(it *notificationItem, m *metaItem) state {
	cat := it.countedCategory()
	return state{
		read:   effectiveRead(it, m.readWM(cat)),
		seen:   it.Counted < countersV2 || it.SeenAt != 0 || (it.ID <= m.seenWM(cat) && m.seenWM(cat) != ""),
		active: it.ArchivedAt == 0 && it.SnoozedUntil == 0,
	}
}

// unread and unseen are the state's contributions to the counters (0 or 1).
func (st state) unread() int { return b2i(st.active && !st.read) }
func (st state) unseen() int { return b2i(st.active && !st.seen) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// msTime converts Unix milliseconds to a *time.Time, nil for 0.
func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// toNotification converts a stored item to the domain type under m's watermarks (nil m:
// no watermarks, as for a notification just written).
func toNotification(it *notificationItem, m *metaItem) *inbox.Notification {
	if m == nil {
		m = &metaItem{}
	}
	st := stateOf(it, m)
	n := &inbox.Notification{
		ID:           it.ID,
		Type:         it.Type,
		Category:     it.Category,
		Title:        it.Title,
		Body:         it.Body,
		CreatedAt:    time.UnixMilli(it.CreatedAt).UTC(),
		ActorID:      it.ActorID,
		TargetKind:   it.TargetKind,
		TargetID:     it.TargetID,
		Read:         st.read,
		Seen:         st.seen,
		Archived:     it.ArchivedAt != 0,
		ArchivedAt:   msTime(it.ArchivedAt),
		SnoozedUntil: msTime(it.SnoozedUntil),
		ExpiresAt:    msTime(it.ExpireAt),
		GroupKey:     it.GroupKey,
		Actions:      make([]inbox.Action, len(it.Actions)),
	}
	for i, a := range it.Actions {
		n.Actions[i] = inbox.Action{Label: a.Label, URL: a.URL}
	}
	n.ActivityCount = it.ActivityCount
	for _, a := range it.Activities {
		n.Activities = append(n.Activities, a.activity())
	}
	if it.Payload != "" {
		n.Payload = inbox.JSON(it.Payload)
	}
	wm := m.readWM(it.countedCategory())
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
	if n.Seen {
		n.SeenAt = msTime(it.SeenAt)
		if n.SeenAt == nil {
			if at := ulidTime(m.seenWM(it.countedCategory())); !at.IsZero() {
				n.SeenAt = &at
			}
		}
	}
	return n
}
