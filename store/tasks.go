package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Scheduled work of the inbox states: a snooze's wake-up and a notification's expiry are
// tasks written in the same transaction as the state they serve, and run by the durable
// scheduler (package sched), whose handlers call Wake or Expire with the task's token.
// This file is the one place that writes them (taskAction, on ScheduleAction).

// taskAction returns the scheduler's Put (ScheduleAction) of the task kind for v's
// notification id, due at due with token, and the key it writes (for txn). The task's id
// is derived from all of these, so a retried transaction writes the same task again, and
// two inboxes' tasks never share an id (notification ids are chosen by writers, and an
// outside writer may reuse one in another inbox).
func (s *Store) taskAction(kind string, v inbox.Viewer, id string, due time.Time, token string) (itemKey, types.TransactWriteItem) {
	t := newTask(kind, v, id, due, token)
	pk, sk := s.taskPlacement(t)
	return itemKey{pk, sk}, s.ScheduleAction(t)
}

// newTask returns the task kind for v's notification id, due at due with token (see
// taskAction for its id).
func newTask(kind string, v inbox.Viewer, id string, due time.Time, token string) inbox.Task {
	h := sha256.New()
	for _, part := range []string{kind, v.TenantID, v.UserID, id, token} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return inbox.Task{ID: kind + ":" + hex.EncodeToString(h.Sum(nil)[:16]), Kind: kind, Due: due,
		Viewer: v, Ref: id, Token: token}
}

// NotifyDue sets f to be called with the scheduler shard and due time of every task a
// write of this store committed: a send's deliveries (due now, or at the end of quiet
// hours), its expiry, a snooze's wake-up, a delivery's retry, a scheduled send, a
// broadcast's shard runs, a rescheduled task. The scheduler (sched.Scheduler.Notify)
// arms a timer for it on the instance holding the shard (through the broker when that
// is another instance), instead of finding it at its slow safety-net poll. f must not
// block; nil turns it off. Safe to call while writes run.
func (s *Store) NotifyDue(f func(shard int, due time.Time)) {
	if f == nil {
		s.dueHook.Store(nil)
		return
	}
	s.dueHook.Store(&f)
}

// notifyingAPI is the store's client with NotifyDue told of each task a PutItem or a
// TransactWriteItems committed (after the store's retries: once per write). Every task
// write of the store goes through one of them, whichever code built it.
type notifyingAPI struct {
	API
	s *Store
}

func (n notifyingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := n.API.PutItem(ctx, in, optFns...)
	if err == nil {
		n.s.notifyTask(in.Item)
	}
	return out, err
}

func (n notifyingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := n.API.TransactWriteItems(ctx, in, optFns...)
	if err == nil {
		for _, a := range in.TransactItems {
			if a.Put != nil {
				n.s.notifyTask(a.Put.Item)
			}
		}
	}
	return out, err
}

// notifyTask calls the NotifyDue function, if any, when item is a scheduled task.
func (s *Store) notifyTask(item map[string]types.AttributeValue) {
	f := s.dueHook.Load()
	if f == nil {
		return
	}
	if et, ok := item[attrEntityType].(*types.AttributeValueMemberS); !ok || et.Value != entityTask {
		return
	}
	pk, _ := item[attrPK].(*types.AttributeValueMemberS)
	due, _ := item["due"].(*types.AttributeValueMemberN)
	if pk == nil || due == nil {
		return
	}
	shard, ok := schedShardOf(pk.Value)
	ms, err := strconv.ParseInt(due.Value, 10, 64)
	if !ok || err != nil {
		return
	}
	(*f)(shard, time.UnixMilli(ms).UTC())
}
