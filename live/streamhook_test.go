package live_test

import (
	"context"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/live"
)

// TestStreamHookStops: under a hook whose transport calls Stop (Stops), a badge stream's
// end is tied to Stop, not to its context: the context's cancellation alone leaves it
// running (nothing was registered on the context, which keeps no children), Stop closes
// its channel and releases its broker subscription; its first read of the store does not
// see the context's cancellation.
func TestStreamHookStops(t *testing.T) {
	b := live.NewLocal()
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	hook := &live.StreamHook{Ready: func() {}, Stops: true}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = live.WithStreamHook(ctx, hook)
	var readDone <-chan struct{}
	read := func(rctx context.Context, v inbox.Viewer) (inbox.Badge, error) {
		readDone = rctx.Done()
		return inbox.Badge{Unread: 2, Version: 1}, nil
	}
	ch, err := live.OpenBadge(ctx, live.Streams{Broker: b, Read: read}, v, live.UnreadView)
	if err != nil {
		t.Fatal(err)
	}
	if readDone != nil {
		t.Error("the first read's context is cancellable with the stream's: it derives from it")
	}
	if got := <-ch; got != 2 {
		t.Fatalf("first value %d, want 2", got)
	}
	cancel()
	b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 3, Version: 2, Badge: inbox.Badge{Unread: 3, Version: 2}})
	if got, ok := <-ch; !ok || got != 3 {
		t.Fatalf("after the context's cancellation alone: %d, %v; want 3 (Stop ends the stream)", got, ok)
	}
	hook.Stop()
	testgw.WaitFor(t, 5*time.Second, "the stopped stream's subscription to be released", func() bool { return b.Subscribers() == 0 })
	if _, ok := <-ch; ok {
		t.Fatal("the stopped stream's channel is open")
	}
}
