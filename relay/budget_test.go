package relay_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/relay"
)

// brokenIterators is a Streams client whose GetShardIterator always fails (a Streams
// endpoint that lists shards but cannot serve them); it counts the calls and closes first
// at the first one.
type brokenIterators struct {
	*dynamodbstreams.Client
	calls atomic.Int64
	once  sync.Once
	first chan struct{}
}

func (b *brokenIterators) GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	b.calls.Add(1)
	b.once.Do(func() { close(b.first) })
	return nil, errors.New("injected: shard iterator unavailable")
}

// Issue 8, item 7: a shard reader that keeps failing is restarted with backoff (1 s, then
// 2 s), not at every shard discovery (here every 100 ms of the relay's clock): it used to
// be restarted as fast as DescribeStream answered.
func TestFailingShardIsRestartedWithBackoff(t *testing.T) {
	e := setup(t)
	e.outsideWrite(t, inbox.Viewer{TenantID: "acme", UserID: "alice"}, 1) // the stream gets a shard
	b := &brokenIterators{Client: e.streams, first: make(chan struct{})}
	o := e.options("budget", e.broker)
	o.Streams, o.Discover = b, 100*time.Millisecond
	r := relay.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-b.first:
	case <-time.After(clocktest.Within):
		t.Fatal("the relay never asked for a shard iterator")
	}
	e.settle(t, r)
	first := b.calls.Load()
	// Three seconds of discoveries, a step each: the backoff allows the restarts at 1 s
	// and at 1 + 2 s, no more.
	for range 30 {
		e.clk.Advance(o.Discover)
		e.settle(t, r)
	}
	if n := b.calls.Load() - first; n < 1 || n > 2 {
		t.Fatalf("%d GetShardIterator calls in 3 s after the first failure, want 1 or 2 (restarts after 1 s and 3 s)", n)
	}
}
