package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/telemetry"
)

// Scheduled tasks (package sched's durable queue; keys in keys.go, AP11).
//
// A task is one item in partition SCHED#{shard}#{bucket}. Its shard comes from its id,
// so every write of one task (schedule, reschedule, delete) stays in one shard, and a
// shard's worker sees all of them. A task is placed in the bucket of its due time, or of
// the store's now when it is already due: a task written for the past still lands in a
// bucket the workers read, however far their checkpoints moved on.

// DefaultSchedShards is the scheduler's shard count unless WithSchedShards says otherwise.
const DefaultSchedShards = 16

// WithSchedShards sets how many shards the scheduler's tasks are spread over (default
// DefaultSchedShards; at least 1). Every instance must use the same count, and the
// count may grow but never shrink: a task lives in the shard its id hashed to when it
// was written, and a shard above the count is never read again.
func WithSchedShards(n int) Option {
	return func(s *Store) { s.schedShards = max(n, 1) }
}

// SchedShards returns the scheduler's shard count.
func (s *Store) SchedShards() int { return s.schedShards }

// taskItem is a scheduled task as stored.
type taskItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	TaskID     string `dynamodbav:"taskId"`
	Kind       string `dynamodbav:"kind"`
	Due        int64  `dynamodbav:"due"` // Unix ms, as in sk
	Tenant     string `dynamodbav:"tenant,omitempty"`
	User       string `dynamodbav:"user,omitempty"`
	Ref        string `dynamodbav:"ref,omitempty"`
	Token      string `dynamodbav:"token,omitempty"`
	Attempts   int    `dynamodbav:"attempts"`
	// Traceparent is the writer's span (inbox.Task.Traceparent).
	Traceparent string `dynamodbav:"traceparent,omitempty"`
}

// taskPlacement returns the key (pk, sk) of t as the store writes it now.
func (s *Store) taskPlacement(t inbox.Task) (pk, sk string) {
	bucket := t.Due
	if now := s.now(); bucket.Before(now) {
		bucket = now
	}
	return schedPK(SchedShard(t.ID, s.schedShards), bucket), schedSK(t.Due, t.ID)
}

// taskKey returns the key of a stored task (t.Due as read, t.ID) placed by bucket.
func taskKey(shard int, bucket time.Time, t inbox.Task) map[string]types.AttributeValue {
	return key(schedPK(shard, bucket), schedSK(t.Due, t.ID))
}

// taskAttrs marshals t as an item at pk, sk.
func taskAttrs(t inbox.Task, pk, sk string) map[string]types.AttributeValue {
	it := taskItem{PK: pk, SK: sk, EntityType: entityTask, TaskID: t.ID, Kind: t.Kind, Due: max(t.Due.UnixMilli(), 0),
		Tenant: t.Viewer.TenantID, User: t.Viewer.UserID, Ref: t.Ref, Token: t.Token, Attempts: t.Attempts, Traceparent: t.Traceparent}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		// A struct of strings and integers always marshals.
		panic(fmt.Sprintf("store: marshal task: %v", err))
	}
	return av
}

// ScheduleAction returns the Put of task t, to include in another write's
// TransactWriteItems so that the write and its task commit together (a snooze and its
// wake-up). The store's own transactions add the writer's traceparent to the tasks
// they write (txn.input); a caller's own TransactWriteItems sets t.Traceparent itself. The Put is unconditional, so a retried transaction writes the same item
// again (idempotent by id and due). t.ID and t.Kind must be non-empty (they come from
// the caller's code, not from clients: no key can break out of its partition, since only
// the shard number and the bucket are in the partition key). Due is kept to the
// millisecond.
func (s *Store) ScheduleAction(t inbox.Task) types.TransactWriteItem {
	pk, sk := s.taskPlacement(t)
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: taskAttrs(t, pk, sk)}}
}

// Schedule writes task t on its own (see ScheduleAction). Scheduling the same id at the
// same due twice leaves one task (two when the first was written for a time already
// past and the second in a later minute: handlers are idempotent anyway). Errors:
// BAD_USER_INPUT for an empty id or kind, else the DynamoDB failure.
func (s *Store) Schedule(ctx context.Context, t inbox.Task) error {
	if t.ID == "" || t.Kind == "" {
		return inbox.Errorf(inbox.CodeBadUserInput, "a task needs an id and a kind")
	}
	if t.Traceparent == "" {
		t.Traceparent = telemetry.Traceparent(ctx)
	}
	a := s.ScheduleAction(t)
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: a.Put.TableName, Item: a.Put.Item}); err != nil {
		return fmt.Errorf("store: schedule task %s: %w", t.ID, err)
	}
	return nil
}

// CancelAction returns the Delete of the task with id due at due (the time it was
// scheduled for), to include in another write's TransactWriteItems; it succeeds whether
// or not the task exists. The key is time-ordered and there is no index by id, so the due
// time is needed: a caller that does not know it leaves the task to fire and relies on
// the handler's Token check. A task written for a time already past (see
// ScheduleAction) is in another bucket and is not reached.
func (s *Store) CancelAction(id string, due time.Time) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table),
		Key: taskKey(SchedShard(id, s.schedShards), due, inbox.Task{ID: id, Due: due})}}
}

// CancelTask deletes the task with id due at due (see CancelAction); it reports whether
// there was one.
func (s *Store) CancelTask(ctx context.Context, id string, due time.Time) (bool, error) {
	return s.deleteTask(ctx, taskKey(SchedShard(id, s.schedShards), due, inbox.Task{ID: id, Due: due}))
}

// deleteTask deletes the task at k on condition that it exists; false when it did not.
func (s *Store) deleteTask(ctx context.Context, k map[string]types.AttributeValue) (bool, error) {
	x, err := expression.NewBuilder().WithCondition(itemPresent()).Build()
	if err != nil {
		return false, fmt.Errorf("store: delete task: %w", err)
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      k,
		ConditionExpression:      x.Condition(),
		ExpressionAttributeNames: x.Names(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	}
	return false, fmt.Errorf("store: delete task: %w", err)
}

// DueTasks returns, oldest first, up to limit (1..1000; default 100) tasks of shard's
// bucket (the minute holding bucket) due at or before upTo, after task after (nil: from
// the start), and reads ahead: when the Query read a task due after upTo, the page's
// Next is its due time (and More is false). One strongly consistent Query (AP11) over the
// whole bucket, so that the scheduler knows when to look again without another; never a
// Scan. An item that does not decode as a task (an attribute of the wrong type) is
// skipped with a warning on the store's logger; the page's Last moves past it.
func (s *Store) DueTasks(ctx context.Context, shard int, bucket, upTo time.Time, after *inbox.Task, limit int) (inbox.TaskPage, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: schedPK(shard, bucket)},
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(int32(limit)),
	}
	if after != nil {
		in.ExclusiveStartKey = taskKey(shard, bucket, *after)
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return inbox.TaskPage{}, fmt.Errorf("store: due tasks of shard %d: %w", shard, err)
	}
	page := inbox.TaskPage{More: len(out.LastEvaluatedKey) > 0}
	for _, av := range out.Items {
		sk, _ := av[attrSK].(*types.AttributeValueMemberS)
		if sk == nil {
			continue
		}
		due, id, ok := parseSchedSK(sk.Value)
		if !ok {
			continue
		}
		if due.After(upTo) {
			page.Next, page.More = due, false
			break
		}
		page.Last = &inbox.Task{ID: id, Due: due}
		var it taskItem
		if err := attributevalue.UnmarshalMap(av, &it); err != nil {
			// A task item some other writer broke (an attribute of the wrong type) is
			// skipped, not an error: an error would stop every pass over its bucket, and
			// the shard's later tasks with it. It stays where it is for an operator; once
			// its bucket holds nothing else due, the scheduler moves past it.
			s.log.Warn("store: skipping a task item that does not decode", "pk", schedPK(shard, bucket), "sk", clip(sk.Value), "err", err)
			continue
		}
		// A negative count (no writer of ours makes one) would put off the task's drop
		// by as many failures: it counts as none.
		t := inbox.Task{ID: id, Kind: it.Kind, Due: due,
			Viewer: inbox.Viewer{TenantID: it.Tenant, UserID: it.User}, Ref: it.Ref, Token: it.Token, Attempts: max(it.Attempts, 0), Traceparent: it.Traceparent}
		page.Tasks = append(page.Tasks, t)
		page.Last = &page.Tasks[len(page.Tasks)-1]
	}
	return page, nil
}

// clip is s cut to 64 bytes (with "…" when cut), for a log line about an item written by
// someone else.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}

// CompleteTask deletes task t, read by DueTasks from shard's bucket, once its handler
// succeeded (or gave up). It reports false when the task was gone already (another
// worker completed or rescheduled it): not an error.
func (s *Store) CompleteTask(ctx context.Context, shard int, bucket time.Time, t inbox.Task) (bool, error) {
	return s.deleteTask(ctx, taskKey(shard, bucket, t))
}

// RescheduleTask moves task t, read by DueTasks from shard's bucket, to due with one
// more attempt: the delete (on condition that it still exists) and the new item commit
// in one transaction. It returns the new task, and false (with no change) when t was
// gone already. due must not be before t.Due.
func (s *Store) RescheduleTask(ctx context.Context, shard int, bucket time.Time, t inbox.Task, due time.Time) (inbox.Task, bool, error) {
	next := t
	next.Due = due.Truncate(time.Millisecond)
	next.Attempts++
	old := itemKey{schedPK(shard, bucket), schedSK(t.Due, t.ID)}
	x, err := expression.NewBuilder().WithCondition(itemPresent()).Build()
	if err != nil {
		return inbox.Task{}, false, fmt.Errorf("store: reschedule task: %w", err)
	}
	tx := &txn{}
	tx.add(old, types.TransactWriteItem{Delete: &types.Delete{
		TableName:                aws.String(s.table),
		Key:                      old.av(),
		ConditionExpression:      x.Condition(),
		ExpressionAttributeNames: x.Names(),
	}})
	pk, sk := s.taskPlacement(next)
	tx.add(itemKey{pk, sk}, s.ScheduleAction(next))
	_, err = s.db.TransactWriteItems(ctx, tx.input(ctx))
	if err == nil {
		return next, true, nil
	}
	if tx.conditionFailed(err, old) {
		return t, false, nil
	}
	return t, false, fmt.Errorf("store: reschedule task %s: %w", t.ID, err)
}
