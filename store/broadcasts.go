package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Broadcasts (AP20, AP21; keys in keys.go): a send to a whole segment (or to a list of
// up to 1,000 users), fanned out asynchronously by scheduler tasks, one per shard.
//
// A broadcast is the partition T#{t}#BCAST#{id}: the head item B (status, counters, the
// send request as the service encoded it) and one progress item SH#{nn} per shard
// (page: how many pages are done; cursor: the last member done; done; and, while a page
// is in flight, the page itself: pending, pendingEnd, pendingLast). The shards of a
// segment broadcast are the segment's shards; a list broadcast has one shard per 100
// recipients, each holding its list.
//
// The service (package service) drives a shard page by page: it fixes the next page in
// the progress item (SetBroadcastPending, on condition of the page number it read),
// writes it with the send loop (service.Writer) under a key derived from the broadcast, shard and page
// number, then checkpoints (CheckpointBroadcast): ONE TransactWriteItems moves the
// shard's page and cursor on condition of the page number it started from and ADDs the
// page's written / skipped / failed to B. A page redone after a crash is the same page
// (pending) under the same key: its recipients' guards exist, nobody gets a second
// notification, and its counts are added once, by the one checkpoint that commits.

// BroadcastPageSize is the most recipients of one broadcast page (one send).
const BroadcastPageSize = inbox.MaxRecipients

// WithBroadcastPageSize sets the most recipients of one broadcast page (default and
// most BroadcastPageSize; at least 1): a list broadcast is cut into shards of this many,
// and a segment broadcast reads its shards' members this many at a time. Tests use a
// small page to walk many pages and shards with few recipients.
func WithBroadcastPageSize(n int) Option {
	return func(s *Store) { s.bcPage = min(max(n, 1), BroadcastPageSize) }
}

// BroadcastPage returns the recipients of one broadcast page (WithBroadcastPageSize).
func (s *Store) BroadcastPage() int { return s.bcPage }

// Attribute names of the broadcast items (expressions use them through #names).
const (
	attrStatus     = "status"
	attrWritten    = "written"
	attrSkipped    = "skipped"
	attrFailed     = "failed"
	attrShardsDone = "shardsDone"
	attrShards     = "shards"
	attrStartedAt  = "startedAt"
	attrFinishedAt = "finishedAt"
	attrPage       = "page"
	attrCursor     = "cursor"
	attrDone       = "done"
	attrPending    = "pending"
	attrPendingEnd = "pendingEnd"
	attrPendLast   = "pendingLast"
)

// broadcastItem is a broadcast's head item as stored.
type broadcastItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	ID         string `dynamodbav:"id"`
	Status     string `dynamodbav:"status"`
	Segment    string `dynamodbav:"segment,omitempty"`
	Lane       string `dynamodbav:"lane,omitempty"`
	Hash       string `dynamodbav:"hash"`
	Request    []byte `dynamodbav:"request"`
	Shards     int    `dynamodbav:"shards"`
	ShardsDone int    `dynamodbav:"shardsDone"`
	Recipients int    `dynamodbav:"recipients"`
	Written    int    `dynamodbav:"written"`
	Skipped    int    `dynamodbav:"skipped"`
	Failed     int    `dynamodbav:"failed"`
	CreatedAt  int64  `dynamodbav:"createdAt"`
	StartedAt  int64  `dynamodbav:"startedAt,omitempty"`
	FinishedAt int64  `dynamodbav:"finishedAt,omitempty"`
}

// broadcastShardItem is a broadcast shard's progress item as stored.
type broadcastShardItem struct {
	PK          string   `dynamodbav:"pk"`
	SK          string   `dynamodbav:"sk"`
	EntityType  string   `dynamodbav:"entityType"`
	Page        int      `dynamodbav:"page"`
	Cursor      string   `dynamodbav:"cursor"`
	Done        bool     `dynamodbav:"done"`
	List        []string `dynamodbav:"list,omitempty"`
	Pending     []string `dynamodbav:"pending,omitempty"`
	PendingEnd  string   `dynamodbav:"pendingEnd,omitempty"`
	PendingLast bool     `dynamodbav:"pendingLast,omitempty"`
}

// CreateBroadcast writes broadcast nb of tenantID in ONE TransactWriteItems (AP20): the
// head item B (status queued; condition: it does not exist), a progress item per shard
// and one scheduler task per shard, due now. So it is durable whole once this returns.
// When the head exists already, it returns that broadcast with created false if its
// Hash is nb's (a replay), else an error with code CONFLICT.
func (s *Store) CreateBroadcast(ctx context.Context, tenantID string, nb inbox.NewBroadcast) (inbox.Broadcast, bool, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.Broadcast{}, false, err
	}
	if err := inbox.CheckID("broadcast id", nb.ID); err != nil {
		return inbox.Broadcast{}, false, err
	}
	var lists [][]string
	switch {
	case (nb.Segment == "") == (len(nb.List) == 0):
		return inbox.Broadcast{}, false, inbox.Errorf(inbox.CodeBadUserInput, "a broadcast goes to a segment or to a list of recipients")
	case nb.Segment != "":
		if err := inbox.CheckID("segment", nb.Segment); err != nil {
			return inbox.Broadcast{}, false, err
		}
		lists = make([][]string, s.segShards)
	default:
		if len(nb.List) > inbox.MaxSegmentChange {
			return inbox.Broadcast{}, false, inbox.Errorf(inbox.CodeBadUserInput, "at most %d recipients per broadcast list", inbox.MaxSegmentChange)
		}
		for i := 0; i < len(nb.List); i += s.bcPage {
			lists = append(lists, nb.List[i:min(len(nb.List), i+s.bcPage)])
		}
	}
	now := s.now()
	due := now
	if nb.Due.After(now) {
		due = nb.Due
	}
	pk := broadcastPK(tenantID, nb.ID)
	head := broadcastItem{PK: pk, SK: skBroadcast, EntityType: entityBroadcast, ID: nb.ID, Status: inbox.BroadcastQueued,
		Segment: nb.Segment, Lane: nb.Lane, Hash: nb.Hash, Request: nb.Request, Shards: len(lists),
		Recipients: nb.Recipients, CreatedAt: now.UnixMilli()}
	av, err := attributevalue.MarshalMap(head)
	if err != nil {
		return inbox.Broadcast{}, false, fmt.Errorf("store: encode broadcast: %w", err)
	}
	t := &txn{}
	hk := itemKey{pk, skBroadcast}
	t.add(hk, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: av,
		ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": attrPK}}})
	for n, list := range lists {
		sh, err := attributevalue.MarshalMap(broadcastShardItem{PK: pk, SK: broadcastShardSK(n), EntityType: entityBroadcastShard, List: list})
		if err != nil {
			return inbox.Broadcast{}, false, fmt.Errorf("store: encode broadcast shard: %w", err)
		}
		t.add(itemKey{pk, broadcastShardSK(n)}, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: sh}})
		task := inbox.BroadcastTask(tenantID, nb.ID, n, 0, due)
		tpk, tsk := s.taskPlacement(task)
		t.add(itemKey{tpk, tsk}, s.ScheduleAction(task))
	}
	_, err = s.db.TransactWriteItems(ctx, t.input())
	switch {
	case err == nil:
		return toBroadcast(head), true, nil
	case t.conditionFailed(err, hk):
		b, gerr := s.GetBroadcast(ctx, tenantID, nb.ID)
		if gerr != nil {
			return inbox.Broadcast{}, false, gerr
		}
		if b.Hash != nb.Hash {
			return inbox.Broadcast{}, false, inbox.Errorf(inbox.CodeConflict, "this idempotency key was already used for a different broadcast (a retry must repeat the same body; new content needs a new key)")
		}
		return b, false, nil
	}
	return inbox.Broadcast{}, false, fmt.Errorf("store: create broadcast: %w", err)
}

// GetBroadcast reads broadcast id's head with one consistent GetItem (AP21). Errors:
// NOT_FOUND when there is none.
func (s *Store) GetBroadcast(ctx context.Context, tenantID, id string) (inbox.Broadcast, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.Broadcast{}, err
	}
	if err := inbox.CheckID("broadcast id", id); err != nil {
		return inbox.Broadcast{}, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table),
		Key: itemKey{broadcastPK(tenantID, id), skBroadcast}.av(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return inbox.Broadcast{}, fmt.Errorf("store: get broadcast: %w", err)
	}
	if out.Item == nil {
		return inbox.Broadcast{}, inbox.Errorf(inbox.CodeNotFound, "no broadcast %q", id)
	}
	return decodeBroadcast(out.Item)
}

func decodeBroadcast(av map[string]types.AttributeValue) (inbox.Broadcast, error) {
	var it broadcastItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return inbox.Broadcast{}, fmt.Errorf("store: decode broadcast: %w", err)
	}
	return toBroadcast(it), nil
}

func toBroadcast(it broadcastItem) inbox.Broadcast {
	ms := func(v int64) time.Time {
		if v == 0 {
			return time.Time{}
		}
		return time.UnixMilli(v).UTC()
	}
	return inbox.Broadcast{ID: it.ID, Status: it.Status, Segment: it.Segment, Lane: it.Lane, Hash: it.Hash, Request: it.Request,
		Shards: it.Shards, ShardsDone: it.ShardsDone, Recipients: it.Recipients, Written: it.Written, Skipped: it.Skipped,
		Failed: it.Failed, CreatedAt: ms(it.CreatedAt), StartedAt: ms(it.StartedAt), FinishedAt: ms(it.FinishedAt)}
}

// BroadcastShardState reads shard's progress item with one consistent GetItem.
// Errors: NOT_FOUND when there is none.
func (s *Store) BroadcastShardState(ctx context.Context, tenantID, id string, shard int) (inbox.BroadcastShard, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table),
		Key: itemKey{broadcastPK(tenantID, id), broadcastShardSK(shard)}.av(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return inbox.BroadcastShard{}, fmt.Errorf("store: get broadcast shard: %w", err)
	}
	if out.Item == nil {
		return inbox.BroadcastShard{}, inbox.Errorf(inbox.CodeNotFound, "no shard %d of broadcast %q", shard, id)
	}
	var it broadcastShardItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return inbox.BroadcastShard{}, fmt.Errorf("store: decode broadcast shard: %w", err)
	}
	if _, ok := out.Item[attrPending]; ok && it.Pending == nil {
		it.Pending = []string{} // an empty page is pending: the shard's last, without members
	}
	return inbox.BroadcastShard{Page: it.Page, Cursor: it.Cursor, Done: it.Done, List: it.List,
		Pending: it.Pending, PendingEnd: it.PendingEnd, PendingLast: it.PendingLast}, nil
}

// SetBroadcastPending fixes the next page of shard (pending: its recipients, ending at
// member end; last: the shard is done after it) with one UpdateItem, on condition that
// the shard has done exactly page pages and has no page pending. It reports false when
// the condition failed (another worker moved the shard: read it again).
func (s *Store) SetBroadcastPending(ctx context.Context, tenantID, id string, shard, page int, pending []string, end string, last bool) (bool, error) {
	list, err := attributevalue.Marshal(pending)
	if err != nil {
		return false, fmt.Errorf("store: encode page: %w", err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 itemKey{broadcastPK(tenantID, id), broadcastShardSK(shard)}.av(),
		UpdateExpression:    aws.String("SET #pending = :p, #end = :e, #last = :l"),
		ConditionExpression: aws.String("#page = :page AND attribute_not_exists(#pending)"),
		ExpressionAttributeNames: map[string]string{"#pending": attrPending, "#end": attrPendingEnd,
			"#last": attrPendLast, "#page": attrPage},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p":    list,
			":e":    &types.AttributeValueMemberS{Value: end},
			":l":    &types.AttributeValueMemberBOOL{Value: last},
			":page": &types.AttributeValueMemberN{Value: strconv.Itoa(page)},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	}
	return false, fmt.Errorf("store: set broadcast page: %w", err)
}

// CheckpointBroadcast records that page number page of shard is done, in ONE
// TransactWriteItems (AP20): the progress item moves to page+1 with cursor end (done
// when last) and loses its pending page, on condition that it was at page; the head
// ADDs c (and 1 to shardsDone when last). It reports false when the condition failed:
// another run checkpointed this page already, and nothing was added.
func (s *Store) CheckpointBroadcast(ctx context.Context, tenantID, id string, shard, page int, end string, last bool, c inbox.BroadcastCounts) (bool, error) {
	pk := broadcastPK(tenantID, id)
	sk := itemKey{pk, broadcastShardSK(shard)}
	update := "SET #page = :next, #cursor = :end REMOVE #pending, #end, #last"
	if last {
		update = "SET #page = :next, #cursor = :end, #done = :true REMOVE #pending, #end, #last"
	}
	names, vals := usedOnly(update, map[string]string{"#page": attrPage, "#cursor": attrCursor, "#done": attrDone,
		"#pending": attrPending, "#end": attrPendingEnd, "#last": attrPendLast},
		map[string]types.AttributeValue{
			":next": &types.AttributeValueMemberN{Value: strconv.Itoa(page + 1)},
			":end":  &types.AttributeValueMemberS{Value: end},
			":true": &types.AttributeValueMemberBOOL{Value: true},
		})
	vals[":page"] = &types.AttributeValueMemberN{Value: strconv.Itoa(page)}
	t := &txn{}
	t.add(sk, types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       sk.av(),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#page = :page"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}})
	add := "ADD #w :w, #s :s, #f :f"
	hvals := map[string]types.AttributeValue{
		":w": &types.AttributeValueMemberN{Value: strconv.Itoa(c.Written)},
		":s": &types.AttributeValueMemberN{Value: strconv.Itoa(c.Skipped)},
		":f": &types.AttributeValueMemberN{Value: strconv.Itoa(c.Failed)},
	}
	hnames := map[string]string{"#w": attrWritten, "#s": attrSkipped, "#f": attrFailed, "#pk": attrPK}
	if last {
		add += ", #sd :one"
		hvals[":one"] = &types.AttributeValueMemberN{Value: "1"}
		hnames["#sd"] = attrShardsDone
	}
	hk := itemKey{pk, skBroadcast}
	t.add(hk, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: hk.av(),
		UpdateExpression: aws.String(add), ConditionExpression: aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: hnames, ExpressionAttributeValues: hvals}})
	_, err := s.db.TransactWriteItems(ctx, t.input())
	switch {
	case err == nil:
		return true, nil
	case t.conditionFailed(err, sk):
		return false, nil
	}
	return false, fmt.Errorf("store: checkpoint broadcast: %w", err)
}

// setBroadcastStatus sets broadcast id's status to to (and the time attribute at to
// now) with one UpdateItem, on condition that cond holds (it may name #status, #sd:
// shardsDone, #shards, :queued and :running); it reports false when it did not.
func (s *Store) setBroadcastStatus(ctx context.Context, tenantID, id, to, at, cond string) (bool, error) {
	update := "SET #status = :to, #at = :now"
	names, vals := usedOnly(update+" "+cond, map[string]string{"#status": attrStatus, "#at": at,
		"#sd": attrShardsDone, "#shards": attrShards}, map[string]types.AttributeValue{
		":to":      &types.AttributeValueMemberS{Value: to},
		":now":     &types.AttributeValueMemberN{Value: strconv.FormatInt(s.now().UnixMilli(), 10)},
		":queued":  &types.AttributeValueMemberS{Value: inbox.BroadcastQueued},
		":running": &types.AttributeValueMemberS{Value: inbox.BroadcastRunning},
	})
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{broadcastPK(tenantID, id), skBroadcast}.av(),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	}
	return false, fmt.Errorf("store: set broadcast status: %w", err)
}

// usedOnly returns the entries of names and vals that expr mentions (DynamoDB refuses
// unused ones). A placeholder must not be a prefix of another one expr uses.
func usedOnly(expr string, names map[string]string, vals map[string]types.AttributeValue) (map[string]string, map[string]types.AttributeValue) {
	for k := range names {
		if !strings.Contains(expr, k) {
			delete(names, k)
		}
	}
	for k := range vals {
		if !strings.Contains(expr, k) {
			delete(vals, k)
		}
	}
	return names, vals
}

// MarkBroadcastRunning moves broadcast id from queued to running with startedAt now
// (one UpdateItem); it reports false when it was not queued.
func (s *Store) MarkBroadcastRunning(ctx context.Context, tenantID, id string) (bool, error) {
	return s.setBroadcastStatus(ctx, tenantID, id, inbox.BroadcastRunning, attrStartedAt,
		"#status = :queued")
}

// FinishBroadcast sets broadcast id's final status (BroadcastDone or BroadcastFailed)
// with finishedAt now (one UpdateItem), on condition that every shard is done and the
// broadcast is queued or running; it reports false when it was not.
func (s *Store) FinishBroadcast(ctx context.Context, tenantID, id, status string) (bool, error) {
	if status != inbox.BroadcastDone && status != inbox.BroadcastFailed {
		return false, fmt.Errorf("store: finish broadcast with status %q", status)
	}
	return s.setBroadcastStatus(ctx, tenantID, id, status, attrFinishedAt,
		"#sd = #shards AND #status IN (:queued, :running)")
}

// CancelBroadcast sets broadcast id to cancelled with finishedAt now, on condition that
// it is queued or running (one UpdateItem), and returns it as it stands afterwards: a
// broadcast already finished or cancelled is returned unchanged. The recipients written
// stay written; the shards' runs stop at their next page. Errors: NOT_FOUND.
func (s *Store) CancelBroadcast(ctx context.Context, tenantID, id string) (inbox.Broadcast, error) {
	if _, err := s.GetBroadcast(ctx, tenantID, id); err != nil {
		return inbox.Broadcast{}, err
	}
	if _, err := s.setBroadcastStatus(ctx, tenantID, id, inbox.BroadcastCancelled, attrFinishedAt,
		"#status IN (:queued, :running)"); err != nil {
		return inbox.Broadcast{}, err
	}
	return s.GetBroadcast(ctx, tenantID, id)
}
