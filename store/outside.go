package store

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Writes of a service outside the gateway: the items it puts straight into the table
// with plain SDK calls, which the store reads and the stream relay carries to subscribers
// like its own. Tests and cmd/bench write raw items only through these, so that the item
// shape (a new field) lives in one place: the store's item structs.

// OutsideNotificationItem returns the raw item of notification n, unread, in v's inbox
// (on GSI1's unread list, AP4, and GSI2's list of its type, AP5), as the store's send
// writes it. n.ID must be a ULID and n.Type 1..inbox.MaxIDBytes bytes (as a send's: type
// is a key attribute of GSI2, and DynamoDB refuses an item whose index key attribute is
// an empty string); n.Read and n.ReadAt are ignored; a zero n.CreatedAt is stored as 0.
// Errors: BAD_USER_INPUT for an invalid viewer or type.
func OutsideNotificationItem(v inbox.Viewer, n inbox.Notification) (map[string]types.AttributeValue, error) {
	if err := checkOutside(v, n); err != nil {
		return nil, err
	}
	it := outsideItem(v, n)
	m, err := attributevalue.MarshalMap(&it)
	if err != nil {
		return nil, fmt.Errorf("encode notification: %w", err)
	}
	return m, nil
}

// checkOutside checks what the store's send checks of the viewer and the type of a
// notification written from outside.
func checkOutside(v inbox.Viewer, n inbox.Notification) error {
	if err := inbox.CheckViewer(v); err != nil {
		return err
	}
	if n.Type == "" || len(n.Type) > inbox.MaxIDBytes {
		return inbox.Errorf(inbox.CodeBadUserInput, "type must be 1..%d bytes", inbox.MaxIDBytes)
	}
	return nil
}

// outsideItem is the item of unread notification n in v's inbox.
func outsideItem(v inbox.Viewer, n inbox.Notification) notificationItem {
	it := notificationItem{PK: userPK(v), SK: notifSK(n.ID), GSI1PK: unreadPK(v), GSI1SK: notifSK(n.ID),
		EntityType: entityNotification, ID: n.ID, Type: n.Type, Category: n.Category, Title: n.Title, Body: n.Body,
		ActorID: n.ActorID, TargetKind: n.TargetKind, TargetID: n.TargetID, Payload: string(n.Payload), Counted: countersV2}
	if !n.CreatedAt.IsZero() {
		it.CreatedAt = n.CreatedAt.UnixMilli()
	}
	return it
}

// OutsideSendInput is the one transaction that adds unread notification n to v's inbox
// in table and counts it in META, shaped as the store's send without its idempotency
// guard: a Put of the item (only if absent) and META's update (ADD unreadCount 1 and
// version 1, SET clock to n.ID, under the store's condition that n.ID is above the clock
// and the markAllRead watermark: a cancelled transaction means take a newer ULID).
func OutsideSendInput(table string, v inbox.Viewer, n inbox.Notification) (*dynamodb.TransactWriteItemsInput, error) {
	if err := checkOutside(v, n); err != nil {
		return nil, err
	}
	it := outsideItem(v, n)
	t, err := (&Store{table: table}).sendTxn(v, &guardItem{}, &it, nil, nil)
	if err != nil {
		return nil, err
	}
	// sendTxn's order: guard, notification, META; an outside writer has no guard.
	return &dynamodb.TransactWriteItemsInput{TransactItems: t.acts[1:]}, nil
}

// OutsideMetaItem returns the raw META item of v's inbox when it holds exactly the unread,
// unseen notifications ns (as OutsideNotificationItem writes them) and nothing else: the
// unread and unseen counts, those of each category, the clock at the greatest id and the
// version at len(ns). A bulk load (BatchWriteItem of the items, then this PutItem) leaves
// the inbox as len(ns) sends would, counters exact. Every n.ID must be a ULID.
func OutsideMetaItem(v inbox.Viewer, ns []inbox.Notification) (map[string]types.AttributeValue, error) {
	if err := inbox.CheckViewer(v); err != nil {
		return nil, err
	}
	m := metaItem{PK: userPK(v), SK: skMeta, GSI1PK: unreadPK(v), GSI1SK: skMeta, EntityType: entityMeta,
		UnreadCount: len(ns), UnseenCount: len(ns), Version: int64(len(ns))}
	cats := map[string]int{}
	for _, n := range ns {
		if !ValidNotificationID(n.ID) {
			return nil, fmt.Errorf("notification id %q is not a ULID", n.ID)
		}
		m.Clock = max(m.Clock, n.ID)
		if n.Category != "" {
			cats[n.Category]++
		}
	}
	raw, err := attributevalue.MarshalMap(&m)
	if err != nil {
		return nil, fmt.Errorf("encode meta: %w", err)
	}
	for c, k := range cats {
		n := &types.AttributeValueMemberN{Value: strconv.Itoa(k)}
		raw[catUnread+c], raw[catUnseen+c] = n, n
	}
	return raw, nil
}
