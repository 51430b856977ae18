package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	// gsi2Name is the type index (AP5): a multi-attribute key built from attributes every
	// notification already has, partition (pk, type) and sort id (its ULID), projection
	// ALL. It holds exactly the notifications: META has no type and groups no id, and
	// DynamoDB leaves out of an index an item that lacks any of its key attributes. So one
	// type of one inbox is one item collection in time order, and a page filtered by type
	// reads the notifications it returns (store/page.go typedItems).
	gsi2Name = "GSI2"

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
	// skGroupPrefix + groupKey is the sort key of one of the user's notification groups
	// (AP15); "G#" sorts outside [N#, N~META], so inbox pages never meet a group.
	skGroupPrefix = "G#"

	entityNotification = "Notification"
	entityMeta         = "InboxMeta"
	entityPrefs        = "Preferences"
	entityGuard        = "IdempotencyGuard"
	entityActor        = "Actor"
	entityTarget       = "Target"
	entityGroup        = "NotificationGroup"

	// skUserProfile is the sort key of a user's channel profile (AP24) in the user's
	// partition; "PROFILE" sorts outside [N#, N~META].
	skUserProfile = "PROFILE"
	// skStatusSummary and skDeliveryPrefix + key are the sort keys of a notification's
	// status summary and its delivery records under notifStatusPK (AP22): key is
	// inbox.DeliveryKey, the channel or "PUSH#{deviceId}" (one record per device).
	skStatusSummary  = "S"
	skDeliveryPrefix = "D#"
	// skSettings is the sort key of a tenant's settings item (AP23).
	skSettings = "SETTINGS"

	entityUserProfile    = "UserProfile"
	entityStatusSummary  = "NotificationStatus"
	entityDelivery       = "DeliveryRecord"
	entityTenantSettings = "TenantSettings"
	entityRequest        = "SendRequest"
	entityThrottle       = "ThrottleCounter"

	// skRequest is the sort key of a send request (AP25).
	skRequest = "REQ"

	// skDeviceOwner is the sort key of a push token's ownership item (AP24, deviceOwnerPK).
	skDeviceOwner   = "OWNER"
	entityDevOwner  = "DeviceOwner"
	devOwnerPKInfix = "#DEVTOKEN#"
)

// deviceOwnerPK is the partition of the ownership item of push token on platform in
// tenantID (AP24): which one user of the tenant holds the device, so registering the
// token for another user moves it, in one transaction with both users' PROFILE items.
// The token (any bytes, up to inbox.MaxDeviceTokenBytes) never reaches the key: it is
// the hex SHA-256 of "{platform}:{token}", the whole digest of which the device id
// (inbox.DeviceID) is the first 16 digits, so two tokens never share an owner item.
func deviceOwnerPK(tenantID, platform, token string) string {
	sum := sha256.Sum256([]byte(platform + ":" + token))
	return "T#" + tenantID + devOwnerPKInfix + hex.EncodeToString(sum[:])
}

// notifStatusPK is the partition of one notification's status: its summary (sk "S") and
// one delivery record per channel and push device (sk "D#{CHANNEL}", "D#PUSH#{deviceId}"),
// so ONE Query reads them all (AP22).
// Notification ids are ULIDs (or pre-assigned ids that passed inbox.CheckID).
func notifStatusPK(tenantID, notificationID string) string {
	return "T#" + tenantID + "#NOTIF#" + notificationID
}

// deliverySK is the sort key of the delivery record with key (inbox.DeliveryKey: a
// channel, or "PUSH#{deviceId}"; checked by inbox.ParseDeliveryKey before it gets here).
func deliverySK(key string) string { return skDeliveryPrefix + key }

// settingsPK is the partition of a tenant's settings item (AP23).
func settingsPK(tenantID string) string { return "T#" + tenantID + "#SETTINGS" }

// userPK is the partition key of a user's item collection: notifications, META, PREFS
// (AP1-AP8, AP10). One user's inbox is one partition key, so users spread over partitions.
func userPK(v inbox.Viewer) string {
	return "T#" + v.TenantID + "#U#" + v.UserID
}

// unreadPK is the GSI1 partition key of a user's possibly-unread notifications (AP4).
func unreadPK(v inbox.Viewer) string {
	return userPK(v) + "#UNREAD"
}

// groupsPK is the GSI1 partition key of a user's groups that have an active member,
// ordered by gsi1sk = notifSK(newest member) (AP15: Viewer.groups, newest first).
func groupsPK(v inbox.Viewer) string {
	return userPK(v) + "#GROUPS"
}

// groupSK is the sort key of the group groupKey (a key that passed inbox.CheckID: no '#').
func groupSK(groupKey string) string { return skGroupPrefix + groupKey }

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

// throttlePK is the partition of a recipient's throttle counters: one item per (key,
// window), sk throttleSK (AP26). Its own partition, not the user's item collection, so
// no read of an inbox ever meets one.
func throttlePK(v inbox.Viewer) string {
	return "T#" + v.TenantID + "#THR#" + v.UserID
}

// throttleSK is the sort key of the counter of throttle key (inbox.CheckID: no '#') in
// the window starting at start: "{key}#{start Unix ms}".
func throttleSK(key string, start time.Time) string {
	return key + "#" + strconv.FormatInt(start.UnixMilli(), 10)
}

// requestPK is the partition key of a send request accepted under an idempotency key
// (AP25: the send service's accept, replay and recovery read it with one GetItem).
func requestPK(tenantID, key string) string {
	return "T#" + tenantID + "#REQ#" + key
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

// Keys of the durable scheduler (package sched; AP11 and AP12 of README.md). A scheduled
// task lives in a write-sharded, time-bucketed partition, SCHED#{shard}#{bucket}, where
// shard = FNV-1a(task id) mod the shard count and bucket is the task's due minute (UTC,
// "2006-01-02T15:04Z"); its sort key is the due time in Unix milliseconds, zero-padded to
// 13 digits, then '#' and the task id, so one Query of a partition with sk below a bound
// returns exactly the tasks due by then, oldest first (AP11). The shards' leases and the
// instances' membership leases share one partition, SCHED#LEASES, read by one Query
// (AP12). None of these can collide with a user key (those start with "T#").
const (
	schedPKPrefix       = "SCHED#"
	schedLeasePK        = "SCHED#LEASES"
	schedShardSKPrefix  = "SHARD#"
	schedMemberSKPrefix = "MEMBER#"
	schedRosterSK       = "ROSTER"
	schedBucketLayout   = "2006-01-02T15:04Z"
	entityTask          = "ScheduledTask"
)

// schedPK is the partition of one shard's tasks due within the minute of bucket.
func schedPK(shard int, bucket time.Time) string {
	return schedPKPrefix + strconv.Itoa(shard) + "#" + SchedBucket(bucket).Format(schedBucketLayout)
}

// schedSK is the sort key of a task due at due (to the millisecond) with id.
func schedSK(due time.Time, id string) string {
	return fmt.Sprintf("%013d#%s", max(due.UnixMilli(), 0), id)
}

// parseSchedSK returns the due time and task id of a task's sort key.
func parseSchedSK(sk string) (time.Time, string, bool) {
	ms, id, ok := strings.Cut(sk, "#")
	if !ok || len(ms) != 13 {
		return time.Time{}, "", false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMilli(n).UTC(), id, true
}

// SchedBucket is the time bucket of t: t truncated to the minute, in UTC.
func SchedBucket(t time.Time) time.Time { return t.UTC().Truncate(time.Minute) }

// SchedShard is the shard of task id among shards (FNV-1a of the id, modulo shards).
func SchedShard(id string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(max(shards, 1)))
}

// SchedLeasePK is the partition holding the scheduler's shard and membership leases
// (AP12: one Query reads them all).
func SchedLeasePK() string { return schedLeasePK }

// SchedShardLeaseKey is the key of the lease on one shard of the scheduler's tasks.
func SchedShardLeaseKey(shard int) map[string]types.AttributeValue {
	return key(schedLeasePK, schedShardSKPrefix+strconv.Itoa(shard))
}

// SchedMemberLeaseKey is the key of a scheduler instance's membership lease.
func SchedMemberLeaseKey(owner string) map[string]types.AttributeValue {
	return key(schedLeasePK, schedMemberSKPrefix+owner)
}

// SchedRosterKey is the key of the scheduler's roster: the one item holding every
// instance's membership and every shard's holder and checkpoint (package sched).
func SchedRosterKey() map[string]types.AttributeValue {
	return key(schedLeasePK, schedRosterSK)
}

// schedShardOf returns the shard of a task partition's key (SCHED#{shard}#{minute}).
func schedShardOf(pk string) (int, bool) {
	rest, ok := strings.CutPrefix(pk, schedPKPrefix)
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "#")
	if !ok {
		return 0, false
	}
	shard, err := strconv.Atoi(n)
	return shard, err == nil && shard >= 0
}

// SchedLeaseKind tells what a sort key of SchedLeasePK's partition names: a shard lease
// (shard >= 0, member false), a membership lease (member true), or neither (ok false).
func SchedLeaseKind(sk string) (shard int, member, ok bool) {
	if _, found := strings.CutPrefix(sk, schedMemberSKPrefix); found {
		return -1, true, true
	}
	if rest, found := strings.CutPrefix(sk, schedShardSKPrefix); found {
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
			return n, false, true
		}
	}
	return -1, false, false
}

// LeaseKey is the key of a named lease item for a background worker that needs one lease
// (package lease): pk "LEASE#{name}", sk "LEASE". name is chosen by the code (no '#').
// The relay keeps its own key (RelayLeaseKey) and the scheduler its group (SchedLeasePK).
func LeaseKey(name string) map[string]types.AttributeValue {
	return key("LEASE#"+name, skLease)
}

// Keys of segments and broadcasts (AP18-AP21 of README.md). Segment ids and broadcast
// ids passed inbox.CheckID (a segment id may hold ':', as in followers:{actorId}, but
// never '#').
const (
	// skSegMemberPrefix + userId is a segment member's sort key, in its shard's partition.
	skSegMemberPrefix = "M#"
	// skSegCount is the sort key of a segment shard's member count; '~' sorts after every
	// "M#" key, so a member Query (begins_with M#) never meets it.
	skSegCount = "~COUNT"
	// skBroadcast is the sort key of a broadcast's head item (status, counters, request).
	skBroadcast = "B"
	// skBroadcastShardPrefix + %02d shard is a broadcast shard's progress item.
	skBroadcastShardPrefix = "SH#"

	entitySegMember      = "SegmentMember"
	entitySegCount       = "SegmentCount"
	entityBroadcast      = "inbox.Broadcast"
	entityBroadcastShard = "inbox.BroadcastShard"
)

// segmentPK is the partition of one write shard of segment id (AP18, AP19): members are
// spread over the shards by SegmentShard, so no partition key is hot at any size.
func segmentPK(tenantID, id string, shard int) string {
	return fmt.Sprintf("T#%s#SEG#%s#S#%02d", tenantID, id, shard)
}

// segMemberSK is the sort key of member userID.
func segMemberSK(userID string) string { return skSegMemberPrefix + userID }

// SegmentShard is the write shard of userID among shards (FNV-1a of the id, modulo
// shards): stable, so an add and a later remove of one member meet the same item.
func SegmentShard(userID string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(userID))
	return int(h.Sum32() % uint32(max(shards, 1)))
}

// broadcastPK is the partition of broadcast id: its head item and one item per shard
// (AP20, AP21).
func broadcastPK(tenantID, id string) string { return "T#" + tenantID + "#BCAST#" + id }

// broadcastShardSK is the sort key of a broadcast shard's progress item.
func broadcastShardSK(shard int) string { return fmt.Sprintf("%s%02d", skBroadcastShardPrefix, shard) }

// SchedBucket is the package function SchedBucket, for the scheduler's Store interface.
func (s *Store) SchedBucket(t time.Time) time.Time { return SchedBucket(t) }

// SchedLeasePK is the package function SchedLeasePK, for the scheduler's Store interface.
func (s *Store) SchedLeasePK() string { return SchedLeasePK() }

// SchedShardLeaseKey is the package function SchedShardLeaseKey, for the scheduler's
// Store interface.
func (s *Store) SchedShardLeaseKey(shard int) map[string]types.AttributeValue {
	return SchedShardLeaseKey(shard)
}

// SchedRosterKey is the package function SchedRosterKey, for the scheduler's Store
// interface.
func (s *Store) SchedRosterKey() map[string]types.AttributeValue { return SchedRosterKey() }

// SchedMemberLeaseKey is the package function SchedMemberLeaseKey, for the scheduler's
// Store interface.
func (s *Store) SchedMemberLeaseKey(owner string) map[string]types.AttributeValue {
	return SchedMemberLeaseKey(owner)
}

// SchedLeaseKind is the package function SchedLeaseKind, for the scheduler's Store
// interface.
func (s *Store) SchedLeaseKind(sk string) (shard int, member, ok bool) { return SchedLeaseKind(sk) }
