package live

import (
	"encoding/json"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// wireChange is an inbox.Change as published on Redis (JSON). Origin names the publishing
// broker, which skips its own messages (it delivered them locally already).
type wireChange struct {
	Origin       string            `json:"origin,omitempty"`
	Tenant       string            `json:"tenant"`
	User         string            `json:"user"`
	Count        int               `json:"count"`
	Version      int64             `json:"version"`
	Notification *wireNotification `json:"notification,omitempty"`
	// SentAt is the publisher's clock at the publish, in Unix nanoseconds (publish lag).
	SentAt int64 `json:"sentAt,omitempty"`
	// Kind is the change's inbox.EventKind ("" for a badge refresh or a re-read hint).
	Kind string `json:"kind,omitempty"`
	// IDs are the ULIDs of the notifications the change concerns.
	IDs []string `json:"ids,omitempty"`
	// Badge is the whole badge as of Version (absent when the publisher has none).
	Badge *wireBadge `json:"badge,omitempty"`
}

// wireBadge is an inbox.Badge on the wire.
type wireBadge struct {
	Unread     int                 `json:"unread"`
	Unseen     int                 `json:"unseen"`
	Categories []wireCategoryCount `json:"categories,omitempty"`
	Version    int64               `json:"version"`
	// Marks are the user's announcement marks and watermarks (the badge streams compose
	// the tenant's announcements with them).
	Marks *inbox.AnnouncementMarks `json:"marks,omitempty"`
}

// wireCategoryCount is an inbox.CategoryCount on the wire.
type wireCategoryCount struct {
	Category string `json:"category"`
	Unread   int    `json:"unread,omitempty"`
	Unseen   int    `json:"unseen,omitempty"`
}

// encodeEvent sets the event part of w (kind, ids, badge) from c.
func encodeEvent(w *wireChange, c inbox.Change) {
	w.Kind = string(c.Kind)
	w.IDs = c.IDs
	if b := c.Badge; b.Version != 0 {
		wb := &wireBadge{Unread: b.Unread, Unseen: b.Unseen, Version: b.Version, Marks: b.Marks}
		for _, cc := range b.Categories {
			wb.Categories = append(wb.Categories, wireCategoryCount(cc))
		}
		w.Badge = wb
	}
}

// decodeEvent sets the event part of c (Kind, IDs, Badge) from w.
func decodeEvent(c *inbox.Change, w *wireChange) {
	c.Kind = inbox.EventKind(w.Kind)
	c.IDs = w.IDs
	if wb := w.Badge; wb != nil {
		c.Badge = inbox.Badge{Unread: wb.Unread, Unseen: wb.Unseen, Version: wb.Version, Marks: wb.Marks}
		for _, cc := range wb.Categories {
			c.Badge.Categories = append(c.Badge.Categories, inbox.CategoryCount(cc))
		}
	}
}

// wireNotification is an inbox.Notification on the wire.
type wireNotification struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Category   string          `json:"category,omitempty"`
	Title      string          `json:"title,omitempty"`
	Body       string          `json:"body,omitempty"`
	Read       bool            `json:"read,omitempty"`
	ReadAt     *time.Time      `json:"readAt,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	ActorID    string          `json:"actorId,omitempty"`
	TargetKind string          `json:"targetKind,omitempty"`
	TargetID   string          `json:"targetId,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`

	Seen         bool         `json:"seen,omitempty"`
	SeenAt       *time.Time   `json:"seenAt,omitempty"`
	Archived     bool         `json:"archived,omitempty"`
	ArchivedAt   *time.Time   `json:"archivedAt,omitempty"`
	SnoozedUntil *time.Time   `json:"snoozedUntil,omitempty"`
	ExpiresAt    *time.Time   `json:"expiresAt,omitempty"`
	GroupKey     string       `json:"groupKey,omitempty"`
	Actions      []wireAction `json:"actions,omitempty"`
	// ActivityCount and Activities are a batched notification's (inbox.Notification).
	ActivityCount int            `json:"activityCount,omitempty"`
	Activities    []wireActivity `json:"activities,omitempty"`
	// Kind and Embedded are an announcement's (inbox.KindAnnouncement: its actor and
	// target kept on it); a personal notification has neither.
	Kind     string          `json:"kind,omitempty"`
	Embedded *inbox.Embedded `json:"embedded,omitempty"`
}

// wireActivity is an inbox.Activity on the wire.
type wireActivity struct {
	ActorID   string          `json:"actorId,omitempty"`
	ActorName string          `json:"actorName,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	Via       string          `json:"via,omitempty"`
	Actor     *inbox.Actor    `json:"actor,omitempty"`
}

// wireAction is an inbox.Action on the wire.
type wireAction struct {
	Label string `json:"label"`
	URL   string `json:"url"`
}

func encodeChange(origin string, c inbox.Change) ([]byte, error) {
	w := wireChange{Origin: origin, Tenant: c.Viewer.TenantID, User: c.Viewer.UserID, Count: c.UnreadCount, Version: c.Version,
		SentAt: time.Now().UnixNano()}
	encodeEvent(&w, c)
	if n := c.Notification; n != nil {
		w.Notification = &wireNotification{ID: n.ID, Type: n.Type, Category: n.Category, Title: n.Title, Body: n.Body,
			Read: n.Read, ReadAt: n.ReadAt, CreatedAt: n.CreatedAt, ActorID: n.ActorID, TargetKind: n.TargetKind,
			TargetID: n.TargetID, Payload: json.RawMessage(n.Payload), Seen: n.Seen, SeenAt: n.SeenAt, Archived: n.Archived,
			ArchivedAt: n.ArchivedAt, SnoozedUntil: n.SnoozedUntil, ExpiresAt: n.ExpiresAt, GroupKey: n.GroupKey,
			Kind: n.Kind, Embedded: n.Embedded}
		for _, a := range n.Actions {
			w.Notification.Actions = append(w.Notification.Actions, wireAction{Label: a.Label, URL: a.URL})
		}
		w.Notification.ActivityCount = n.ActivityCount
		for _, a := range n.Activities {
			w.Notification.Activities = append(w.Notification.Activities, wireActivity{ActorID: a.ActorID, ActorName: a.ActorName,
				Data: json.RawMessage(a.Data), CreatedAt: a.CreatedAt, Via: a.Via, Actor: a.Actor})
		}
	}
	return json.Marshal(w)
}

// decodeChange returns a change, its publisher (origin) and when it was published (zero
// when the publisher did not say).
func decodeChange(b []byte) (origin string, sent time.Time, c inbox.Change, err error) {
	var w wireChange
	if err := json.Unmarshal(b, &w); err != nil {
		return "", time.Time{}, inbox.Change{}, err
	}
	if w.SentAt > 0 {
		sent = time.Unix(0, w.SentAt)
	}
	c = inbox.Change{Viewer: inbox.Viewer{TenantID: w.Tenant, UserID: w.User}, UnreadCount: w.Count, Version: w.Version}
	decodeEvent(&c, &w)
	if n := w.Notification; n != nil {
		c.Notification = &inbox.Notification{ID: n.ID, Type: n.Type, Category: n.Category, Title: n.Title, Body: n.Body,
			Read: n.Read, ReadAt: n.ReadAt, CreatedAt: n.CreatedAt, ActorID: n.ActorID, TargetKind: n.TargetKind,
			TargetID: n.TargetID, Payload: inbox.JSON(n.Payload), Seen: n.Seen, SeenAt: n.SeenAt, Archived: n.Archived,
			ArchivedAt: n.ArchivedAt, SnoozedUntil: n.SnoozedUntil, ExpiresAt: n.ExpiresAt, GroupKey: n.GroupKey, Kind: n.Kind, Embedded: n.Embedded,
			Actions: make([]inbox.Action, len(n.Actions))}
		for i, a := range n.Actions {
			c.Notification.Actions[i] = inbox.Action{Label: a.Label, URL: a.URL}
		}
		c.Notification.ActivityCount = n.ActivityCount
		for _, a := range n.Activities {
			c.Notification.Activities = append(c.Notification.Activities, inbox.Activity{ActorID: a.ActorID, ActorName: a.ActorName,
				Data: inbox.JSON(a.Data), CreatedAt: a.CreatedAt, Via: a.Via, Actor: a.Actor})
		}
	}
	return w.Origin, sent, c, nil
}
