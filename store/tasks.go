package store

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

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

// NotifyDue sets f to be called, after a send's transaction commits, with the scheduler
// shard of each delivery task it wrote due at once (not deferred by quiet hours): the
// scheduler (sched.Scheduler.Kick) reads that shard then instead of at its next poll, so
// a transactional email does not wait for INBOX_SCHED_POLL. f must not block; nil turns
// it off. Safe to call while sends run.
func (s *Store) NotifyDue(f func(shard int)) {
	if f == nil {
		s.dueHook.Store(nil)
		return
	}
	s.dueHook.Store(&f)
}

// kickDue calls the NotifyDue function, if any, with each of shards.
func (s *Store) kickDue(shards []int) {
	f := s.dueHook.Load()
	if f == nil {
		return
	}
	for _, n := range shards {
		(*f)(n)
	}
}
