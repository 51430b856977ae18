package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
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
	put, err := condPut(s.table, av, itemAbsent())
	if err != nil {
		return inbox.Broadcast{}, false, err
	}
	t.add(hk, types.TransactWriteItem{Put: put})
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
	_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
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
	pend := expression.Name(attrPending)
	x, err := buildUpdate(expression.Set(pend, expression.Value(list)).
		Set(expression.Name(attrPendingEnd), expression.Value(end)).
		Set(expression.Name(attrPendLast), expression.Value(last)),
		[]expression.ConditionBuilder{expression.Name(attrPage).Equal(expression.Value(page)), pend.AttributeNotExists()}, nil)
	if err != nil {
		return false, fmt.Errorf("store: build broadcast page update: %w", err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{broadcastPK(tenantID, id), broadcastShardSK(shard)}.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
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
	page0 := expression.Name(attrPage)
	up := expression.Set(page0, expression.Value(page+1)).Set(expression.Name(attrCursor), expression.Value(end))
	if last {
		up = up.Set(expression.Name(attrDone), expression.Value(true))
	}
	up = up.Remove(expression.Name(attrPending)).Remove(expression.Name(attrPendingEnd)).Remove(expression.Name(attrPendLast))
	x, err := buildUpdate(up, []expression.ConditionBuilder{page0.Equal(expression.Value(page))}, nil)
	if err != nil {
		return false, fmt.Errorf("store: build checkpoint: %w", err)
	}
	t := &txn{}
	t.add(sk, types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       sk.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}})
	add := expression.Add(expression.Name(attrWritten), expression.Value(c.Written)).
		Add(expression.Name(attrSkipped), expression.Value(c.Skipped)).
		Add(expression.Name(attrFailed), expression.Value(c.Failed))
	if last {
		add = add.Add(expression.Name(attrShardsDone), expression.Value(1))
	}
	hx, err := buildUpdate(add, []expression.ConditionBuilder{itemPresent()}, nil)
	if err != nil {
		return false, fmt.Errorf("store: build checkpoint: %w", err)
	}
	hk := itemKey{pk, skBroadcast}
	t.add(hk, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: hk.av(),
		UpdateExpression: hx.Update(), ConditionExpression: hx.Condition(),
		ExpressionAttributeNames: hx.Names(), ExpressionAttributeValues: hx.Values()}})
	_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
	switch {
	case err == nil:
		return true, nil
	case t.conditionFailed(err, sk):
		return false, nil
	}
	return false, fmt.Errorf("store: checkpoint broadcast: %w", err)
}

// setBroadcastStatus sets broadcast id's status to to (and the time attribute at to
// now) with one UpdateItem, on condition that cond holds; it reports false when it did
// not.
func (s *Store) setBroadcastStatus(ctx context.Context, tenantID, id, to, at string, cond expression.ConditionBuilder) (bool, error) {
	x, err := buildUpdate(expression.Set(expression.Name(attrStatus), expression.Value(to)).
		Set(expression.Name(at), expression.Value(s.now().UnixMilli())), []expression.ConditionBuilder{cond}, nil)
	if err != nil {
		return false, fmt.Errorf("store: build broadcast status update: %w", err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{broadcastPK(tenantID, id), skBroadcast}.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
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

// broadcastLive is the condition that a broadcast is queued or running.
func broadcastLive() expression.ConditionBuilder {
	return expression.Name(attrStatus).In(expression.Value(inbox.BroadcastQueued), expression.Value(inbox.BroadcastRunning))
}

// MarkBroadcastRunning moves broadcast id from queued to running with startedAt now
// (one UpdateItem); it reports false when it was not queued.
func (s *Store) MarkBroadcastRunning(ctx context.Context, tenantID, id string) (bool, error) {
	return s.setBroadcastStatus(ctx, tenantID, id, inbox.BroadcastRunning, attrStartedAt,
		expression.Name(attrStatus).Equal(expression.Value(inbox.BroadcastQueued)))
}

// FinishBroadcast sets broadcast id's final status (BroadcastDone or BroadcastFailed)
// with finishedAt now (one UpdateItem), on condition that every shard is done and the
// broadcast is queued or running; it reports false when it was not.
func (s *Store) FinishBroadcast(ctx context.Context, tenantID, id, status string) (bool, error) {
	if status != inbox.BroadcastDone && status != inbox.BroadcastFailed {
		return false, fmt.Errorf("store: finish broadcast with status %q", status)
	}
	return s.setBroadcastStatus(ctx, tenantID, id, status, attrFinishedAt,
		expression.Name(attrShardsDone).Equal(expression.Name(attrShards)).And(broadcastLive()))
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
		broadcastLive()); err != nil {
		return inbox.Broadcast{}, err
	}
	return s.GetBroadcast(ctx, tenantID, id)
}
