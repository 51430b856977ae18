package channel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
)

// counting is a Channel that counts its sends.
type counting struct{ n atomic.Int64 }

func (c *counting) Provider() string { return "count" }
func (c *counting) Send(context.Context, channel.Message) (channel.Result, error) {
	c.n.Add(1)
	return channel.Result{Provider: "count"}, nil
}

func TestLimitPacesSends(t *testing.T) {
	t.Parallel()
	inner := &counting{}
	ch := channel.Limit(inner, 20, 2)
	if ch.Provider() != "count" {
		t.Fatalf("provider %q", ch.Provider())
	}
	start := time.Now()
	for range 6 { // 2 from the burst, then 4 at 20/s: about 200ms
		if _, err := ch.Send(context.Background(), channel.Message{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Fatalf("6 sends at 20/s burst 2 took %v, want about 200ms", d)
	}
	if inner.n.Load() != 6 {
		t.Fatalf("%d sends", inner.n.Load())
	}
}

func TestLimitGivesUpWithinCtx(t *testing.T) {
	t.Parallel()
	inner := &counting{}
	ch := channel.Limit(inner, 1, 1)
	if _, err := ch.Send(context.Background(), channel.Message{}); err != nil {
		t.Fatal(err)
	}
	// the next token is a second away: a 50ms deadline cannot wait for it
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ch.Send(ctx, channel.Message{})
	e := wantErr(t, err, channel.Transient, 0, "rate_limited")
	if e.Provider != "count" {
		t.Fatalf("provider %q", e.Provider)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("waited %v", d)
	}
	if inner.n.Load() != 1 {
		t.Fatalf("inner called %d times", inner.n.Load())
	}
}

func TestLimitZeroIsUnlimited(t *testing.T) {
	t.Parallel()
	inner := &counting{}
	if ch := channel.Limit(inner, 0, 10); ch != channel.Channel(inner) {
		t.Fatalf("Limit(ch, 0) = %T, want ch itself", ch)
	}
}
