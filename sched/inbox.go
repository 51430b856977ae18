package sched

import (
	"context"

	"github.com/inboxgw/gateway/inbox"
)

// InboxStore is the scheduler's Store with the inbox's wake-up and expiry (*store.Store
// implements it).
type InboxStore interface {
	Store
	// Wake and Expire apply a snooze's wake-up and an expiry of notification id of v,
	// if token still matches (package store: both idempotent).
	Wake(ctx context.Context, v inbox.Viewer, id, token string) error
	Expire(ctx context.Context, v inbox.Viewer, id, token string) error
}

// NewInbox returns a Scheduler over st's tasks (New with o) with the inbox's handlers
// registered: a snooze's wake-up (inbox.TaskWake, Store.Wake) and an expiry
// (inbox.TaskExpire, Store.Expire), each idempotent and checking the task's token. It is
// what the gateway's serve and worker commands run, and what cmd/bench measures; register
// further kinds before Run.
func NewInbox(st InboxStore, o Options) *Scheduler {
	s := New(st, o)
	s.Register(inbox.TaskWake, HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		return st.Wake(ctx, t.Viewer, t.Ref, t.Token)
	}))
	s.Register(inbox.TaskExpire, HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		return st.Expire(ctx, t.Viewer, t.Ref, t.Token)
	}))
	return s
}
