package store

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Keys of the stream relay's bookkeeping items (package relay): one lease item for the
// table, and per stream a state item and one checkpoint item per shard. They live in the
// inbox table under "RELAY#" partitions, which no user key can produce (user keys start
// with "T#").
const (
	relayLeasePK       = "RELAY#LEASE"
	relayStreamPrefix  = "RELAY#STREAM#"
	relayStateSK       = "STATE"
	relayShardSKPrefix = "SHARD#"
)

// KeyAttributes are the table's partition and sort key attribute names.
const (
	PartitionKeyAttr = attrPK
	SortKeyAttr      = attrSK
)

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pk},
		attrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// RelayLeaseKey is the key of the stream relay's lease item.
func RelayLeaseKey() map[string]types.AttributeValue { return key(relayLeasePK, skLease) }

// RelayStreamPK is the partition holding the relay's state and checkpoints of a stream.
func RelayStreamPK(streamARN string) string { return relayStreamPrefix + streamARN }

// RelayStateKey is the key of the relay's state item of a stream.
func RelayStateKey(streamARN string) map[string]types.AttributeValue {
	return key(RelayStreamPK(streamARN), relayStateSK)
}

// RelayShardKey is the key of the relay's checkpoint item of one shard of a stream.
func RelayShardKey(streamARN, shardID string) map[string]types.AttributeValue {
	return key(RelayStreamPK(streamARN), relayShardSKPrefix+shardID)
}

// RelayShardID returns the shard id of a checkpoint item's sort key, and whether it is one.
func RelayShardID(sk string) (string, bool) { return strings.CutPrefix(sk, relayShardSKPrefix) }

// viewerOfPK returns the viewer of a user partition key (userPK), and whether pk is one.
func viewerOfPK(pk string) (inbox.Viewer, bool) {
	rest, ok := strings.CutPrefix(pk, "T#")
	if !ok {
		return inbox.Viewer{}, false
	}
	t, u, ok := strings.Cut(rest, "#U#")
	if !ok || t == "" || u == "" || strings.Contains(u, "#") {
		return inbox.Viewer{}, false
	}
	return inbox.Viewer{TenantID: t, UserID: u}, true
}

// StreamChange decodes one stream record of the table (eventName INSERT, MODIFY or
// REMOVE; newImage the item after the write) into the inbox.Change it stands for: a
// META write is the badge state (UnreadCount at Version), an inserted notification is a
// new notification (Version 0: the badge comes with META's own record). ok is false for
// every other record (removals, other entities, the relay's own items).
//
// oldImage (nil for an INSERT) tells whether the writer raised META's version: a writer
// outside the gateway that changes the count without raising it yields a re-read hint
// (Version 0) rather than a state subscribers would take for one they already have.
func StreamChange(eventName string, oldImage, newImage map[string]types.AttributeValue) (c inbox.Change, ok bool, err error) {
	if newImage == nil || eventName == "REMOVE" {
		return inbox.Change{}, false, nil
	}
	var head struct {
		PK         string `dynamodbav:"pk"`
		EntityType string `dynamodbav:"entityType"`
	}
	if err := attributevalue.UnmarshalMap(newImage, &head); err != nil {
		return inbox.Change{}, false, fmt.Errorf("stream image: %w", err)
	}
	if head.EntityType == entityAnnouncementSeq {
		// A tenant's announcement created or withdrawn: every instance reads the set again.
		var seq struct {
			Seq int64 `dynamodbav:"seq"`
		}
		tenant, ok := strings.CutSuffix(strings.TrimPrefix(head.PK, "T#"), "#ANN")
		if err := attributevalue.UnmarshalMap(newImage, &seq); err != nil || !ok || seq.Seq == 0 {
			return inbox.Change{}, false, err
		}
		return inbox.Change{Viewer: inbox.Viewer{TenantID: tenant}, Kind: inbox.EventAnnouncements, Version: seq.Seq}, true, nil
	}
	v, isUser := viewerOfPK(head.PK)
	if !isUser {
		return inbox.Change{}, false, nil
	}
	switch head.EntityType {
	case entityMeta:
		var m metaItem
		if err := decodeMeta(newImage, &m); err != nil {
			return inbox.Change{}, false, fmt.Errorf("stream META image: %w", err)
		}
		if m.Version == 0 || !versionRaised(oldImage, m.Version) {
			// A writer that does not keep the version: a hint to re-read the badge.
			return inbox.Change{Viewer: v}, true, nil
		}
		return inbox.Change{Viewer: v, UnreadCount: m.UnreadCount, Version: m.Version, Badge: m.badge()}, true, nil
	case entityNotification:
		if eventName != "INSERT" {
			return inbox.Change{}, false, nil
		}
		var it notificationItem
		if err := attributevalue.UnmarshalMap(newImage, &it); err != nil {
			return inbox.Change{}, false, fmt.Errorf("stream notification image: %w", err)
		}
		if _, isNotif := idFromNotifSK(it.SK); !isNotif || it.ID == "" {
			return inbox.Change{}, false, nil
		}
		return inbox.Change{Viewer: v, Notification: toNotification(&it, nil), Kind: inbox.EventAdded, IDs: []string{it.ID}}, true, nil
	}
	return inbox.Change{}, false, nil
}

// versionRaised reports whether META's version in oldImage is below newVersion (true when
// there is no old image: the item was created).
func versionRaised(oldImage map[string]types.AttributeValue, newVersion int64) bool {
	if oldImage == nil {
		return true
	}
	var old metaItem
	if err := attributevalue.UnmarshalMap(oldImage, &old); err != nil {
		return false
	}
	return old.Version < newVersion
}
