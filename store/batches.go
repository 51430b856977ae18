package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// entityBatch is the entity type of a recipient's batch pointer (AP28).
const entityBatch = "BatchPointer"

// batchPK is the partition of a recipient's batch pointers (AP28): one item per batch
// reference (routing.BatchRef of type and batch key), kept apart from the inbox's
// partition so that no inbox Query meets one.
func batchPK(v inbox.Viewer) string {
	return "T#" + v.TenantID + "#BATCH#" + v.UserID
}

// batchItem is a recipient's batch pointer: the batch open for (type, key), or the last
// one closed. Sends join it with a conditional update inside their guard's transaction;
// the close freezes it (state closing) and marks it closed in the notification's
// transaction.
type batchItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	// ID is the batch's notification id, assigned at open.
	ID string `dynamodbav:"id"`
	// State is routing.BatchOpen, BatchClosing or BatchClosed.
	State string `dynamodbav:"st"`
	// N is how many sends joined; Acts the first inbox.MaxBatchActivities of them.
	N    int            `dynamodbav:"n"`
	Acts []activityItem `dynamodbav:"acts"`
	// MaxItems closes the batch at once when reached; CloseAt (Unix ms) is its window's end.
	MaxItems int   `dynamodbav:"maxItems"`
	CloseAt  int64 `dynamodbav:"closeAt"`
	// Doc is the first send's document for the close (the service's, opaque here).
	Doc []byte `dynamodbav:"doc"`
	// TTL lets a closed pointer go a day after its window (epoch seconds).
	TTL int64 `dynamodbav:"expiresAt"`
}

// activityItem is one joined send of a batch, as a batch pointer and a batched
// notification keep it.
type activityItem struct {
	ActorID   string `dynamodbav:"a,omitempty"`
	ActorName string `dynamodbav:"an,omitempty"`
	Data      string `dynamodbav:"d,omitempty"`
	// CreatedAt is in Unix milliseconds.
	CreatedAt int64 `dynamodbav:"t"`
}

func toActivityItem(a inbox.Activity) activityItem {
	return activityItem{ActorID: a.ActorID, ActorName: a.ActorName, Data: string(a.Data), CreatedAt: a.CreatedAt.UnixMilli()}
}

func (a activityItem) activity() inbox.Activity {
	out := inbox.Activity{ActorID: a.ActorID, ActorName: a.ActorName, CreatedAt: time.UnixMilli(a.CreatedAt).UTC()}
	if a.Data != "" {
		out.Data = inbox.JSON(a.Data)
	}
	return out
}

// maxBatchDoc bounds a batch's document (inbox.BatchJoin.Doc).
const maxBatchDoc = 4 * inbox.MaxPayloadBytes

// JoinBatch adds one recipient's send to their batch j.Ref (AP28) and writes the send's
// guard, in one transaction: the batch's pointer read (strongly consistent), then either
// an open (a new id, its close task at now + window, a status summary `batching` under
// the id) or a join (n + 1; the activity appended while fewer than
// inbox.MaxBatchActivities are kept; on condition that the batch is still the one read,
// open and not full; the last slot only for a join that read the count before it, so the
// join that fills the batch knows it). A pointer changed in between is read again. When
// the guard is there (a replay) nothing is written and its id answered with Duplicate set
// (and Full when that batch is still open and full: its close at maxItems may have been
// lost). Errors:
// *inbox.BatchClosing when the batch is full or its close began (close it, then join
// again); BAD_USER_INPUT for ids that could break their keys or a document over 64 KiB.
func (s *Store) JoinBatch(ctx context.Context, j inbox.BatchJoin) (inbox.BatchJoined, error) {
	if err := inbox.CheckID("tenant", j.TenantID); err != nil {
		return inbox.BatchJoined{}, err
	}
	if err := inbox.CheckID("recipient", j.UserID); err != nil {
		return inbox.BatchJoined{}, err
	}
	if err := routing.CheckBatch(j.Batch); err != nil {
		return inbox.BatchJoined{}, err
	}
	if len(j.Doc) > maxBatchDoc {
		return inbox.BatchJoined{}, inbox.Errorf(inbox.CodeBadUserInput, "a batched send's document must be at most %d bytes", maxBatchDoc)
	}
	v := inbox.Viewer{TenantID: j.TenantID, UserID: j.UserID}
	key := itemKey{batchPK(v), j.Ref}
	return retryConflicts(ctx, func() (inbox.BatchJoined, error) {
		cur, err := s.readBatch(ctx, key)
		if err != nil {
			return inbox.BatchJoined{}, err
		}
		st := routing.BatchState{}
		if cur != nil {
			st = routing.BatchState{Exists: true, State: cur.State, Count: cur.N, MaxItems: cur.MaxItems}
		}
		now := s.now()
		out := inbox.BatchJoined{}
		t := &txn{}
		guard := guardItem{PK: guardPK(j.TenantID, j.IdempotencyKey), SK: guardSK(j.UserID), EntityType: entityGuard,
			UserID: j.UserID, InputHash: j.InputHash, ExpiresAt: now.Add(s.idemTTL).Unix()}
		switch routing.NextBatchStep(st) {
		case routing.StepCloseFirst:
			return inbox.BatchJoined{}, &inbox.BatchClosing{Ref: j.Ref, ID: cur.ID}
		case routing.StepOpen:
			closeAt := now.Add(j.Batch.Window)
			out.ID, out.Opened, out.Count = s.batchID(closeAt), true, 1
			guard.NotificationID = out.ID
			if err := s.addGuard(t, &guard); err != nil {
				return inbox.BatchJoined{}, err
			}
			it := batchItem{PK: key.pk, SK: key.sk, EntityType: entityBatch, ID: out.ID, State: routing.BatchOpen, N: 1,
				Acts: []activityItem{toActivityItem(j.Activity)}, MaxItems: j.Batch.MaxItems, CloseAt: closeAt.UnixMilli(),
				Doc: j.Doc, TTL: closeAt.Add(24 * time.Hour).Unix()}
			av, err := attributevalue.MarshalMap(it)
			if err != nil {
				return inbox.BatchJoined{}, fmt.Errorf("encode batch: %w", err)
			}
			cond := itemAbsent()
			if cur != nil {
				// Replaces the closed batch read, and only it.
				cond = expression.Name("id").Equal(expression.Value(cur.ID)).And(expression.Name("st").Equal(expression.Value(routing.BatchClosed)))
			}
			p, err := condPut(s.table, av, cond)
			if err != nil {
				return inbox.BatchJoined{}, err
			}
			t.add(key, types.TransactWriteItem{Put: p})
			tk, ta := s.taskAction(inbox.TaskBatch, v, j.Ref, closeAt, out.ID)
			t.add(tk, ta)
			sum := statusItem{PK: notifStatusPK(j.TenantID, out.ID), SK: skStatusSummary, EntityType: entityStatusSummary,
				UserID: j.UserID, Status: inbox.NotificationBatching, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
				TTL: closeAt.Add(s.statusTTL).Unix()}
			sv, err := attributevalue.MarshalMap(sum)
			if err != nil {
				return inbox.BatchJoined{}, fmt.Errorf("encode status: %w", err)
			}
			t.add(itemKey{sum.PK, sum.SK}, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: sv}})
		case routing.StepJoin:
			out.ID, out.Count = cur.ID, cur.N+1
			out.Full = out.Count >= cur.MaxItems
			guard.NotificationID = out.ID
			if err := s.addGuard(t, &guard); err != nil {
				return inbox.BatchJoined{}, err
			}
			n := expression.Name("n")
			up := expression.Add(n, expression.Value(1))
			conds := []expression.ConditionBuilder{
				expression.Name("id").Equal(expression.Value(cur.ID)),
				expression.Name("st").Equal(expression.Value(routing.BatchOpen)),
				n.LessThan(expression.Name("maxItems")),
			}
			if out.Full {
				// The last slot is taken only by a join that knows it fills the batch (it
				// closes it): another, reading an older count, meets the condition below
				// and reads the batch again.
				conds = append(conds, n.Equal(expression.Value(cur.N)))
			} else {
				conds = append(conds, n.LessThan(expression.Value(cur.MaxItems-1)))
			}
			if routing.KeepsActivity(cur.N) {
				a, err := attributevalue.Marshal([]activityItem{toActivityItem(j.Activity)})
				if err != nil {
					return inbox.BatchJoined{}, fmt.Errorf("encode activity: %w", err)
				}
				up = up.Set(expression.Name("acts"), expression.ListAppend(expression.Name("acts"), expression.Value(a)))
				// Appended in join order: the count read is still the count.
				conds = append(conds, n.Equal(expression.Value(cur.N)))
			}
			x, err := buildUpdate(up, conds, nil)
			if err != nil {
				return inbox.BatchJoined{}, fmt.Errorf("store: build batch join: %w", err)
			}
			t.add(key, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: key.av(),
				UpdateExpression: x.Update(), ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names(),
				ExpressionAttributeValues: x.Values()}})
		}
		_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
		if t.conditionFailed(err, itemKey{guard.PK, guard.SK}) {
			g, gerr := s.guard(ctx, j.TenantID, j.IdempotencyKey, j.UserID)
			if gerr != nil {
				return inbox.BatchJoined{}, gerr
			}
			if g.InputHash != j.InputHash {
				// The key's request record expired and the key came back with other content.
				return inbox.BatchJoined{}, inbox.Errorf(inbox.CodeBadUserInput,
					"idempotencyKey was already used for a different notification")
			}
			// A replay of a join whose answer (or whose close at maxItems) was lost: the
			// batch read is still that one, open and full, so the caller closes it.
			full := cur != nil && cur.ID == g.NotificationID && cur.State != routing.BatchClosed && cur.N >= cur.MaxItems
			return inbox.BatchJoined{ID: g.NotificationID, Duplicate: true, Full: full}, nil
		}
		if err != nil {
			// A pointer changed since it was read (a join, an open, the close) is a
			// cancelled transaction: retryConflicts reads it again.
			return inbox.BatchJoined{}, err
		}
		return out, nil
	})
}

// batchID is a fresh id for a batch closing at closeAt: a ULID of closeAt, so that the
// notification sorts where it appears (at its close), above the sends it collects.
func (s *Store) batchID(closeAt time.Time) string {
	return ulid.MustNew(ulid.Timestamp(closeAt), rand.Reader).String()
}

// addGuard adds the Put of g on condition that it is absent to t.
func (s *Store) addGuard(t *txn, g *guardItem) error {
	av, err := attributevalue.MarshalMap(g)
	if err != nil {
		return fmt.Errorf("encode guard: %w", err)
	}
	p, err := condPut(s.table, av, itemAbsent())
	if err != nil {
		return err
	}
	t.add(itemKey{g.PK, g.SK}, types.TransactWriteItem{Put: p})
	return nil
}

// readBatch reads a batch pointer (strongly consistent GetItem); nil when there is none.
func (s *Store) readBatch(ctx context.Context, k itemKey) (*batchItem, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: k.av(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get batch: %w", err)
	}
	if out.Item == nil {
		return nil, nil
	}
	var b batchItem
	if err := attributevalue.UnmarshalMap(out.Item, &b); err != nil {
		return nil, fmt.Errorf("decode batch: %w", err)
	}
	return &b, nil
}

// FreezeBatch begins the close of v's batch ref with notification id (AP28): one
// UpdateItem sets it closing, on condition that it is that batch and not closed, and
// answers it as frozen: from then on no send joins it (a join meets
// *inbox.BatchClosing and closes it too). False when the batch is closed already, or
// another has replaced it (closed before). Freezing a frozen batch answers it again.
func (s *Store) FreezeBatch(ctx context.Context, v inbox.Viewer, ref, id string) (inbox.FrozenBatch, bool, error) {
	if err := inbox.CheckID("tenant", v.TenantID); err != nil {
		return inbox.FrozenBatch{}, false, err
	}
	if err := inbox.CheckID("recipient", v.UserID); err != nil {
		return inbox.FrozenBatch{}, false, err
	}
	if err := inbox.CheckID("batch", ref); err != nil {
		return inbox.FrozenBatch{}, false, err
	}
	k := itemKey{batchPK(v), ref}
	st := expression.Name("st")
	x, err := buildUpdate(expression.Set(st, expression.Value(routing.BatchClosing)),
		[]expression.ConditionBuilder{expression.Name("id").Equal(expression.Value(id)), st.NotEqual(expression.Value(routing.BatchClosed))}, nil)
	if err != nil {
		return inbox.FrozenBatch{}, false, fmt.Errorf("store: build batch freeze: %w", err)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: k.av(),
		UpdateExpression: x.Update(), ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names(),
		ExpressionAttributeValues: x.Values(), ReturnValues: types.ReturnValueAllNew})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return inbox.FrozenBatch{}, false, nil
	}
	if err != nil {
		return inbox.FrozenBatch{}, false, fmt.Errorf("freeze batch: %w", err)
	}
	var b batchItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &b); err != nil {
		return inbox.FrozenBatch{}, false, fmt.Errorf("decode batch: %w", err)
	}
	fb := inbox.FrozenBatch{Ref: ref, ID: b.ID, Count: b.N, Doc: b.Doc}
	for _, a := range b.Acts {
		fb.Activities = append(fb.Activities, a.activity())
	}
	return fb, true, nil
}

// batchCloseAction is the close's update of its batch pointer, in the notification's
// transaction: closed, on condition that it is still that batch (frozen by FreezeBatch).
func (s *Store) batchCloseAction(v inbox.Viewer, c *inbox.BatchClose) (itemKey, types.TransactWriteItem, error) {
	k := itemKey{batchPK(v), c.Ref}
	x, err := buildUpdate(expression.Set(expression.Name("st"), expression.Value(routing.BatchClosed)),
		[]expression.ConditionBuilder{expression.Name("id").Equal(expression.Value(c.ID))}, nil)
	if err != nil {
		return k, types.TransactWriteItem{}, fmt.Errorf("store: build batch close: %w", err)
	}
	return k, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: k.av(),
		UpdateExpression: x.Update(), ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names(),
		ExpressionAttributeValues: x.Values()}}, nil
}

// AbandonBatch closes v's batch ref with notification id without a notification (one
// UpdateItem, on condition that it is still that batch): for a close that can never be
// written (its content became invalid while the batch was open), so that the next send
// opens a new batch instead of meeting this one forever. Its `batching` summary says
// skipped with inbox.ReasonBatchAbandoned. False when the batch was not there (closed
// and replaced).
func (s *Store) AbandonBatch(ctx context.Context, v inbox.Viewer, ref, id string) (bool, error) {
	if err := inbox.CheckID("tenant", v.TenantID); err != nil {
		return false, err
	}
	if err := inbox.CheckID("recipient", v.UserID); err != nil {
		return false, err
	}
	if err := inbox.CheckID("batch", ref); err != nil {
		return false, err
	}
	k, a, err := s.batchCloseAction(v, &inbox.BatchClose{Ref: ref, ID: id})
	if err != nil {
		return false, err
	}
	now := s.now().UnixMilli()
	sum := statusItem{PK: notifStatusPK(v.TenantID, id), SK: skStatusSummary, EntityType: entityStatusSummary, UserID: v.UserID,
		Status: inbox.NotificationSkipped, Reason: inbox.ReasonBatchAbandoned, CreatedAt: now, UpdatedAt: now,
		TTL: s.now().Add(s.statusTTL).Unix()}
	sv, err := attributevalue.MarshalMap(sum)
	if err != nil {
		return false, fmt.Errorf("encode status: %w", err)
	}
	t := &txn{}
	t.add(k, a)
	t.add(itemKey{sum.PK, sum.SK}, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: sv}})
	_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
	if t.conditionFailed(err, k) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("abandon batch: %w", err)
	}
	return true, nil
}
