package inbox

import "time"

// TypeNotificationGroup is the global id type of a NotificationGroup; its key is the
// group's GroupKey.
const TypeNotificationGroup = "NotificationGroup"

// MaxGroupMembers is the most notifications a group counts: when a notification joins a
// full group, the group's oldest member leaves it (the notification stays in the inbox).
// Count and UnreadCount are therefore "of the newest 100".
const MaxGroupMembers = 100

// NotificationGroup is a user's active notifications of one group key ("Alice and 3
// others commented on #42"): Viewer.groups. Only active notifications (not archived,
// snoozed, deleted or expired) are members.
type NotificationGroup struct {
	// GroupKey is the group's key (the send's groupKey, by default "type|kind:targetId").
	GroupKey string
	// Type, TargetKind and TargetID are those of the newest notification sent into the
	// group (TargetKind and TargetID empty when it has no target).
	Type       string
	TargetKind string
	TargetID   string
	// Category is the newest notification's category ("" for none).
	Category string
	// Count is the number of active members; UnreadCount of those that are unread.
	Count       int
	UnreadCount int
	// ActorIDs are the distinct actors of the members, newest first; ActorVia[i] is the
	// newest member by ActorIDs[i] (the notification an actor's global id is anchored on).
	ActorIDs []string
	ActorVia []string
	// Latest is the newest active member.
	Latest *Notification
	// UpdatedAt is when Latest was created.
	UpdatedAt time.Time
}

// GlobalID is the group's global id: type NotificationGroup, key its GroupKey.
func (g *NotificationGroup) GlobalID() string { return GlobalID(TypeNotificationGroup, g.GroupKey) }

// Read reports whether no member is unread.
func (g *NotificationGroup) Read() bool { return g.UnreadCount == 0 }

// ActorCount is the number of distinct actors of the members.
func (g *NotificationGroup) ActorCount() int { return len(g.ActorIDs) }

// GroupEdge is one group of a GroupPage with its cursor.
type GroupEdge struct {
	Cursor string
	Node   *NotificationGroup
}

// GroupPage is one page of a viewer's groups, the group with the newest notification
// first. Profiles are the actor and target profiles read with the page (the first actors
// of each group and the targets), for a loader to be primed with; nil where none exists.
type GroupPage struct {
	Edges    []GroupEdge
	PageInfo PageInfo
	Profiles map[ProfileRef]*Profile
}

// Nodes returns the page's groups in edge order.
func (p *GroupPage) Nodes() []*NotificationGroup {
	out := make([]*NotificationGroup, len(p.Edges))
	for i := range p.Edges {
		out[i] = p.Edges[i].Node
	}
	return out
}

// GroupQuery asks for a page of groups: First (0..MaxPageSize, default DefaultPageSize)
// after the cursor After; Types and Categories narrow by the group's type and category
// (of its newest notification); UnreadOnly keeps groups with an unread member. Actors is
// how many actor profiles per group to read with the page (0: none).
type GroupQuery struct {
	First      *int
	After      string
	Types      []string
	Categories []string
	UnreadOnly bool
	Actors     int
	// KeptLatest says that of each group's Latest only KeptLatestFields are rendered:
	// the store then takes them from the group item and reads no notification for them.
	KeptLatest bool
}

// KeptLatestFields are the fields of a group's newest member that the group item keeps
// (written with the send that makes it the newest), by their GraphQL names: a groups
// page rendering no other field of latest reads no notification. read is derived from
// the member's state and the watermarks, archived is false for every member.
var KeptLatestFields = []string{"__typename", "id", "type", "category", "title", "body", "createdAt", "read", "archived", "groupKey", "actor", "target"}
