package sched_test

import (
	"context"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// A snooze and its wake-up commit together; the wake-up handler checks the task's token
// against the notification's current snoozedUntil, so a stale wake-up (the user
// unsnoozed or snoozed again) does nothing.
func Example() {
	var db *dynamodb.Client // the gateway's client
	st := store.New(db, "inbox", store.WithSchedShards(16))

	until := time.Now().Add(2 * time.Hour)
	wake := inbox.Task{ID: "wake-01J0000000000000000000000", Kind: "snooze.wake", Due: until,
		Viewer: inbox.Viewer{TenantID: "acme", UserID: "ann"}, Ref: "01J0000000000000000000000", Token: until.UTC().Format(time.RFC3339Nano)}
	snoozeWrites := []types.TransactWriteItem{ /* the notification and META updates */ }
	_ = append(snoozeWrites, st.ScheduleAction(wake)) // one TransactWriteItems

	s := sched.New(st, sched.Options{DB: db}) // Bus: the gateway's broker, with many instances
	st.NotifyDue(s.Notify)                    // every task written arms the holder's timer
	s.Register("snooze.wake", sched.HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		// Idempotent: wake t.Ref of t.Viewer only if its snoozedUntil still equals t.Token.
		return nil
	}))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		if err := s.Run(ctx); err != nil {
			log.Print(err)
		}
	}()
	// On shutdown: stop(), wait for Run to return, then s.Release(context) hands the
	// shards over at once.
}
