package sched

import (
	"context"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// NewInbox returns a Scheduler over st's tasks (New with o) with the inbox's handlers
// registered: a snooze's wake-up (store.TaskWake, Store.Wake) and an expiry
// (store.TaskExpire, Store.Expire), each idempotent and checking the task's token. It is
// what the gateway's serve and worker commands run, and what cmd/bench measures; register
// further kinds before Run.
func NewInbox(st *store.Store, o Options) *Scheduler {
	s := New(st, o)
	s.Register(store.TaskWake, HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		return st.Wake(ctx, t.Viewer, t.Ref, t.Token)
	}))
	s.Register(store.TaskExpire, HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		return st.Expire(ctx, t.Viewer, t.Ref, t.Token)
	}))
	return s
}
