package sched_test

import (
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// The store implements what the scheduler needs (the scheduler itself imports no store).
var _ sched.InboxStore = (*store.Store)(nil)
