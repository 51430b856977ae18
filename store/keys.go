package store

import (
	"strings"

	"github.com/inboxgw/gateway/inbox"
)

// Key formats of the single table. Every key is built here, from ids that passed
// inbox.CheckID (no '#', no control characters, at most 256 bytes), so no input can reach
// another item collection. AP numbers are the access patterns of README.md's Key design table.
const (
	attrPK     = "pk"
	attrSK     = "sk"
	attrGSI1PK = "gsi1pk"
	attrGSI1SK = "gsi1sk"

	// gsi1Name is the sparse GSI: notifications that may be unread (AP4), plus META.
	gsi1Name = "GSI1"

	// skNotifPrefix starts every notification sort key: "N#" + ULID (AP1, AP2: newest first by
	// ScanIndexForward=false).
	skNotifPrefix = "N#"
	// skMeta is the inbox META item's sort key. '~' sorts after every ULID character, so
	// a descending Query over [skNotifPrefix, skMeta] returns META first and then the
	// newest notifications: badge and first page in one call (AP1). META carries the
	// same value as gsi1sk so the unread list's Query returns it too (AP4).
	skMeta = "N~META"
	// skPrefs is the preferences item's sort key; it sorts outside [N#, N~META].
	skPrefs = "PREFS"
	// skProfile is the sort key of actor and target profile items (AP9).
	skProfile = "PROFILE"
	// skGuardPrefix + recipient is the sort key of one recipient's idempotency guard (AP8).
	skGuardPrefix = "R#"
	// skLease is the sort key of a lease item (used by background workers).
	skLease = "LEASE"

	entityNotification = "Notification"
	entityMeta         = "InboxMeta"
	entityPrefs        = "Preferences"
	entityGuard        = "IdempotencyGuard"
	entityActor        = "Actor"
	entityTarget       = "Target"
)

// userPK is the partition key of a user's item collection: notifications, META, PREFS
// (AP1-AP8, AP10). One user's inbox is one partition key, so users spread over partitions.
func userPK(v inbox.Viewer) string {
	return "T#" + v.TenantID + "#U#" + v.UserID
}

// unreadPK is the GSI1 partition key of a user's possibly-unread notifications (AP4).
func unreadPK(v inbox.Viewer) string {
	return userPK(v) + "#UNREAD"
}

// notifSK is the sort key (and GSI1 sort key) of a notification.
func notifSK(id string) string { return skNotifPrefix + id }

// idFromNotifSK returns the ULID of a notification sort key and whether sk is one.
func idFromNotifSK(sk string) (string, bool) {
	return strings.CutPrefix(sk, skNotifPrefix)
}

// guardPK is the partition key of an idempotency key's guards: one item per recipient
// (AP8), so a fan-out's guards form one small item collection per key.
func guardPK(tenantID, key string) string {
	return "T#" + tenantID + "#IDEM#" + key
}

// guardSK is the sort key of one recipient's guard under guardPK.
func guardSK(userID string) string { return skGuardPrefix + userID }

// actorPK is the partition key of an actor profile (AP9).
func actorPK(tenantID, actorID string) string {
	return "T#" + tenantID + "#ACTOR#" + actorID
}

// targetPK is the partition key of a target profile (AP9); target ids are unique per kind.
func targetPK(tenantID, kind, targetID string) string {
	return "T#" + tenantID + "#TARGET#" + kind + "#" + targetID
}

// profilePK is actorPK or targetPK for ref.
func profilePK(tenantID string, ref inbox.ProfileRef) string {
	if ref.TargetKind == "" {
		return actorPK(tenantID, ref.ID)
	}
	return targetPK(tenantID, ref.TargetKind, ref.ID)
}
