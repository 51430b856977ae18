package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/cenkalti/backoff/v5"

	"github.com/inboxgw/gateway/inbox"
)

// MaxMarkIDs is the most distinct ids one markRead or markUnread takes: a transaction holds
// at most 100 actions and one of them is the META update (TransactWriteItems limits).
const MaxMarkIDs = 99

// Notifications returns v's notifications with the given ULIDs, aligned with ids; nil where
// v has no such notification (another user's id is indistinguishable from a missing one).
// One BatchGetItem reads them together with META (for the watermark).
func (s *Store) Notifications(ctx context.Context, v inbox.Viewer, ids []string) ([]*inbox.Notification, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	out := make([]*inbox.Notification, len(ids))
	keys := []itemKey{{userPK(v), skMeta}}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if ValidNotificationID(id) && !seen[id] {
			seen[id] = true
			keys = append(keys, itemKey{userPK(v), notifSK(id)})
		}
	}
	if len(keys) == 1 {
		return out, nil
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{})
	if err != nil {
		return nil, err
	}
	meta, items, err := decodeMarkSnapshot(got, v)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if it, ok := items[id]; ok {
			out[i] = toNotification(it, meta.ReadAllBefore)
		}
	}
	return out, nil
}

func decodeMarkSnapshot(got map[itemKey]map[string]types.AttributeValue, v inbox.Viewer) (metaItem, map[string]*notificationItem, error) {
	var meta metaItem
	items := make(map[string]*notificationItem, len(got))
	for k, raw := range got {
		if k.pk != userPK(v) {
			continue
		}
		if k.sk == skMeta {
			if err := decodeMeta(raw, &meta); err != nil {
				return meta, nil, fmt.Errorf("decode meta: %w", err)
			}
			continue
		}
		it := new(notificationItem)
		if err := decodeNotification(raw, it); err != nil {
			return meta, nil, fmt.Errorf("decode notification: %w", err)
		}
		items[it.ID] = it
	}
	return meta, items, nil
}

// Mark sets the explicit read state of v's notifications ids (read or unread), keeping the
// badge exact (AP6).
//
// Each attempt reads META and the notifications with one strongly consistent BatchGetItem,
// works out which ids are not yet in the requested state, and writes those in one
// TransactWriteItems: one conditional Update per changed notification (condition: its
// markedAt is still the one read) and one Update of META (ADD unreadCount -k or +k,
// condition: the watermark is still the one read). Ids already in the requested state are
// not written, so marking twice changes nothing. When a concurrent write cancels the
// transaction (the cancellation reasons name the items whose state moved), the attempt is
// repeated from the read, with backoff; a concurrent send does not conflict (its ADD
// commutes). Ids repeated in one call count once.
//
// On success it publishes v's badge as read back (versioned), even when nothing changed:
// an earlier attempt whose answer was lost may have committed unpublished. When it fails
// after sending a transaction, it publishes a re-read hint (a Change of Version 0).
//
// Errors: BAD_USER_INPUT for no ids or more than MaxMarkIDs distinct ids; NOT_FOUND when any
// id is not one of v's notifications (nothing is written then); THROTTLED or UNAVAILABLE
// when DynamoDB stayed throttled or failing for the retry budget (the mark may have
// committed; repeating it is safe).
func (s *Store) Mark(ctx context.Context, v inbox.Viewer, ids []string, read bool) (inbox.MarkResult, error) {
	if err := checkViewer(v); err != nil {
		return inbox.MarkResult{}, err
	}
	distinct := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			distinct = append(distinct, id)
		}
	}
	switch {
	case len(distinct) == 0:
		return inbox.MarkResult{}, inbox.Errorf(inbox.CodeBadUserInput, "ids must not be empty")
	case len(distinct) > MaxMarkIDs:
		return inbox.MarkResult{}, inbox.Errorf(inbox.CodeBadUserInput, "at most %d ids per call", MaxMarkIDs)
	}
	for _, id := range distinct {
		if !ValidNotificationID(id) {
			return inbox.MarkResult{}, inbox.Errorf(inbox.CodeNotFound, "notification not found")
		}
	}
	wrote := false
	res, err := retryConflicts(ctx, func() (markResult, error) { return s.markOnce(ctx, v, distinct, read, &wrote) })
	if err != nil {
		if wrote {
			// A transaction was sent: it may have committed (its answer lost, or the META
			// read after it failed). Subscribers re-read the badge rather than miss it.
			s.publish(ctx, inbox.Change{Viewer: v})
		}
		return inbox.MarkResult{}, err
	}
	// Published even when nothing changed: an earlier attempt (this call's, whose answer
	// was lost, or the client's previous call that errored) may have committed without
	// being published. The change is versioned, so it never moves a badge back.
	s.publish(ctx, inbox.Change{Viewer: v, UnreadCount: res.UnreadCount, Version: res.version})
	return res.MarkResult, nil
}

// markResult is a MarkResult with the META version its UnreadCount was read at.
type markResult struct {
	inbox.MarkResult
	version int64
}

// markOnce is one attempt of Mark; it sets *wrote when it sent a transaction.
func (s *Store) markOnce(ctx context.Context, v inbox.Viewer, ids []string, read bool, wrote *bool) (markResult, error) {
	keys := make([]itemKey, 0, len(ids)+1)
	keys = append(keys, itemKey{userPK(v), skMeta})
	for _, id := range ids {
		keys = append(keys, itemKey{userPK(v), notifSK(id)})
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{consistent: true})
	if err != nil {
		return markResult{}, err
	}
	meta, items, err := decodeMarkSnapshot(got, v)
	if err != nil {
		return markResult{}, err
	}
	wm := meta.ReadAllBefore
	var change []*notificationItem
	for _, id := range ids {
		it, ok := items[id]
		if !ok {
			return markResult{}, inbox.Errorf(inbox.CodeNotFound, "notification not found")
		}
		if effectiveRead(it, wm) != read {
			change = append(change, it)
		}
	}
	res := markResult{MarkResult: inbox.MarkResult{Changed: len(change), UnreadCount: meta.UnreadCount}, version: meta.Version}
	if len(change) > 0 {
		markedAt := s.newID(max(wm, meta.Clock))
		now := s.now()
		acts := make([]types.TransactWriteItem, 0, len(change)+1)
		for _, it := range change {
			acts = append(acts, s.markAction(v, it, read, markedAt, now))
			it.Mark, it.MarkedAt = markUnread, markedAt
			it.ReadAt = 0
			if read {
				it.Mark, it.ReadAt = markRead, now.UnixMilli()
			}
		}
		delta := len(change)
		if read {
			delta = -delta
		}
		acts = append(acts, s.metaDeltaAction(v, delta, wm, markedAt))
		*wrote = true
		if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: acts}); err != nil {
			return markResult{}, fmt.Errorf("mark transaction: %w", err)
		}
		// The transaction returns no values; read the badge as committed (concurrent sends
		// may have moved it too).
		m, err := s.getMeta(ctx, v, true)
		if err != nil {
			return markResult{}, err
		}
		res.UnreadCount, res.version = m.UnreadCount, m.Version
		wm = m.ReadAllBefore
	}
	for _, id := range ids {
		res.Notifications = append(res.Notifications, toNotification(items[id], wm))
	}
	return res, nil
}

// markAction is the conditional Update of one notification in a mark transaction: it sets
// the explicit mark and joins or leaves GSI1, provided its markedAt is still the one read.
func (s *Store) markAction(v inbox.Viewer, it *notificationItem, read bool, markedAt string, now interface{ UnixMilli() int64 }) types.TransactWriteItem {
	names := map[string]string{"#pk": attrPK, "#mark": "mark", "#markedAt": "markedAt", "#readAt": "readAt", "#g1pk": attrGSI1PK, "#g1sk": attrGSI1SK}
	values := map[string]types.AttributeValue{
		":markedAt": &types.AttributeValueMemberS{Value: markedAt},
	}
	var update string
	if read {
		values[":mark"] = &types.AttributeValueMemberS{Value: markRead}
		values[":readAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)}
		update = "SET #mark = :mark, #markedAt = :markedAt, #readAt = :readAt REMOVE #g1pk, #g1sk"
	} else {
		values[":mark"] = &types.AttributeValueMemberS{Value: markUnread}
		values[":g1pk"] = &types.AttributeValueMemberS{Value: unreadPK(v)}
		values[":g1sk"] = &types.AttributeValueMemberS{Value: notifSK(it.ID)}
		update = "SET #mark = :mark, #markedAt = :markedAt, #g1pk = :g1pk, #g1sk = :g1sk REMOVE #readAt"
	}
	cond := "attribute_exists(#pk) AND attribute_not_exists(#markedAt)"
	if it.MarkedAt != "" {
		cond = "attribute_exists(#pk) AND #markedAt = :oldMarkedAt"
		values[":oldMarkedAt"] = &types.AttributeValueMemberS{Value: it.MarkedAt}
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{userPK(v), notifSK(it.ID)}.av(),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}}
}

// metaDeltaAction is the META Update of a mark transaction: ADD delta to the badge and one
// to the version, raise the clock to the mark time, provided the watermark is still wm (a
// markAllRead in between cancels the transaction and the mark is recomputed) and the clock
// is below the mark time.
func (s *Store) metaDeltaAction(v inbox.Viewer, delta int, wm, clock string) types.TransactWriteItem {
	names := map[string]string{"#count": "unreadCount", "#ver": "version", "#wm": "readAllBefore", "#clock": "clock",
		"#g1pk": attrGSI1PK, "#g1sk": attrGSI1SK, "#et": "entityType"}
	values := map[string]types.AttributeValue{
		":d":     &types.AttributeValueMemberN{Value: strconv.Itoa(delta)},
		":one":   &types.AttributeValueMemberN{Value: "1"},
		":clock": &types.AttributeValueMemberS{Value: clock},
		":g1pk":  &types.AttributeValueMemberS{Value: unreadPK(v)},
		":g1sk":  &types.AttributeValueMemberS{Value: skMeta},
		":et":    &types.AttributeValueMemberS{Value: entityMeta},
	}
	// The clock only grows: a mark time below it (another process's clock) is retried.
	cond := "(attribute_not_exists(#clock) OR #clock < :clock) AND attribute_not_exists(#wm)"
	if wm != "" {
		cond = "(attribute_not_exists(#clock) OR #clock < :clock) AND #wm = :wm"
		values[":wm"] = &types.AttributeValueMemberS{Value: wm}
	}
	if delta < 0 {
		cond += " AND #count >= :need"
		values[":need"] = &types.AttributeValueMemberN{Value: strconv.Itoa(-delta)}
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{userPK(v), skMeta}.av(),
		UpdateExpression:          aws.String("ADD #count :d, #ver :one SET #clock = :clock, #g1pk = :g1pk, #g1sk = :g1sk, #et = :et"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}}
}

type markAllResult struct {
	inbox.MarkAllResult
	version int64
}

// MarkAll marks every notification of v read (AP7): one UpdateItem of META sets the
// watermark readAllBefore to a new ULID and the badge to 0. The watermark must lie above
// every id and mark time already written (META.clock, a condition of the update), so
// nothing unread can hide above it; when another instance's clock is ahead, the update is
// retried with a watermark just above META.clock. GSI1 entries below the watermark are
// then removed by the background sweep, which nothing a user sees depends on.
//
// It publishes the new badge (0, versioned); when it fails after sending the update, a
// re-read hint. Errors: THROTTLED or UNAVAILABLE when DynamoDB stayed throttled or
// failing for the retry budget (repeating it is safe).
func (s *Store) MarkAll(ctx context.Context, v inbox.Viewer) (inbox.MarkAllResult, error) {
	if err := checkViewer(v); err != nil {
		return inbox.MarkAllResult{}, err
	}
	floor := ""
	wrote := false
	res, err := retryConflicts(ctx, func() (markAllResult, error) {
		wm := s.newID(floor)
		wrote = true
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:    aws.String(s.table),
			ReturnValues: types.ReturnValueUpdatedNew,
			Key:          itemKey{userPK(v), skMeta}.av(),
			UpdateExpression: aws.String("SET #wm = :wm, #count = :zero, #clock = :wm, #g1pk = :g1pk, #g1sk = :g1sk, #et = :et " +
				"ADD #ver :one"),
			ConditionExpression: aws.String("(attribute_not_exists(#clock) OR #clock < :wm) AND (attribute_not_exists(#wm) OR #wm < :wm)"),
			ExpressionAttributeNames: map[string]string{"#wm": "readAllBefore", "#count": "unreadCount", "#clock": "clock",
				"#ver": "version", "#g1pk": attrGSI1PK, "#g1sk": attrGSI1SK, "#et": "entityType"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":wm":   &types.AttributeValueMemberS{Value: wm},
				":zero": &types.AttributeValueMemberN{Value: "0"},
				":one":  &types.AttributeValueMemberN{Value: "1"},
				":g1pk": &types.AttributeValueMemberS{Value: unreadPK(v)},
				":g1sk": &types.AttributeValueMemberS{Value: skMeta},
				":et":   &types.AttributeValueMemberS{Value: entityMeta},
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err != nil {
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) && ccf.Item != nil {
				var m metaItem
				if derr := attributevalue.UnmarshalMap(ccf.Item, &m); derr == nil {
					floor = max(m.Clock, m.ReadAllBefore)
				}
			}
			return markAllResult{}, err
		}
		var m metaItem
		if err := attributevalue.UnmarshalMap(out.Attributes, &m); err != nil {
			return markAllResult{}, backoff.Permanent(fmt.Errorf("decode meta: %w", err))
		}
		return markAllResult{inbox.MarkAllResult{UnreadCount: 0, ReadAllBefore: ulidTime(wm)}, m.Version}, nil
	})
	if err != nil {
		if wrote {
			// The update may have committed with its answer lost: subscribers re-read.
			s.publish(ctx, inbox.Change{Viewer: v})
		}
		return inbox.MarkAllResult{}, fmt.Errorf("mark all read: %w", err)
	}
	s.sweeper.enqueue(v)
	s.publish(ctx, inbox.Change{Viewer: v, UnreadCount: 0, Version: res.version})
	return res.MarkAllResult, nil
}
