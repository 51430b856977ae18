package relay_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/relay"
)

// brokenIterators is a Streams client whose GetShardIterator always fails (a Streams
// endpoint that lists shards but cannot serve them); it counts the calls.
type brokenIterators struct {
	*dynamodbstreams.Client
	calls atomic.Int64
}

func (b *brokenIterators) GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	b.calls.Add(1)
	return nil, errors.New("injected: shard iterator unavailable")
}

// Issue 8, item 7: a shard reader that keeps failing is restarted with backoff, not at
// once in a loop (it used to be restarted as fast as DescribeStream answered).
func TestFailingShardIsRestartedWithBackoff(t *testing.T) {
	e := setup(t)
	e.outsideWrite(t, inbox.Viewer{TenantID: "acme", UserID: "alice"}, 1) // the stream gets a shard
	b := &brokenIterators{Client: e.streams}
	r := relay.New(relay.Options{DB: e.db, Streams: b, Table: e.table, Publisher: e.broker, Owner: "budget",
		Lease: 5 * time.Second, MaxPoll: 100 * time.Millisecond, Discover: 20 * time.Millisecond, Logger: e.log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()
	// Wait for the first attempt, then give the relay 3 s: with backoff from 1 s (then
	// 2 s) that is at most 2 more attempts for the shard.
	for i := 0; i < 3000 && b.calls.Load() == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	first := b.calls.Load()
	if first == 0 {
		t.Fatal("the relay never asked for a shard iterator")
	}
	time.Sleep(3 * time.Second)
	cancel()
	<-done
	if n := b.calls.Load(); n > first+3 {
		t.Fatalf("%d GetShardIterator calls in 3 s after the first failure; a failing shard must back off (at most a few)", n)
	}
}
