package live_test

import (
	"context"
	"testing"
	"time"

	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/live/redistest"
)

// wakeSink collects the wake-ups an OnWake function receives.
type wakeSink chan [2]int64

func (w wakeSink) f(shard int, due time.Time) { w <- [2]int64{int64(shard), due.UnixMilli()} }

func (w wakeSink) want(t *testing.T, shard int, due time.Time) {
	t.Helper()
	select {
	case got := <-w:
		if got != [2]int64{int64(shard), due.UnixMilli()} {
			t.Fatalf("wake-up %v, want shard %d due %d", got, shard, due.UnixMilli())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up for shard %d", shard)
	}
}

// The in-process broker hands a wake-up to every OnWake function of the process, and to
// none once it is unregistered.
func TestLocalWakes(t *testing.T) {
	b := live.NewLocal()
	one, two := make(wakeSink, 4), make(wakeSink, 4)
	stop := b.OnWake(one.f)
	defer b.OnWake(two.f)()
	due := time.UnixMilli(1_800_000_000_123)
	b.PublishWake(context.Background(), 3, due)
	one.want(t, 3, due)
	two.want(t, 3, due)
	stop()
	b.PublishWake(context.Background(), 5, due)
	two.want(t, 5, due)
	if len(one) != 0 {
		t.Fatalf("an unregistered function got %v", <-one)
	}
}

// Redis carries a wake-up to the other instances' OnWake functions (and the publisher's
// own, once: not again when its message comes back), to the millisecond.
func TestRedisWakes(t *testing.T) {
	srv := redistest.Server(t)
	a := newRedisBroker(t, srv.URL())
	b := newRedisBroker(t, srv.URL())
	ga, gb := make(wakeSink, 4), make(wakeSink, 4)
	defer a.OnWake(ga.f)()
	defer b.OnWake(gb.f)()
	due := time.UnixMilli(1_800_000_000_456)
	// The subscription to the wake-up channel is asynchronous: publish until b hears.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.PublishWake(context.Background(), 7, due)
		ga.want(t, 7, due)
		select {
		case got := <-gb:
			if got != [2]int64{7, due.UnixMilli()} {
				t.Fatalf("b heard %v", got)
			}
		case <-time.After(200 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("b never heard a's wake-up")
		}
		break
	}
	// b answers: a's subscriber receives the channel's messages in order, so its own
	// last message, had it not been dropped, would come before b's.
	for len(gb) > 0 {
		<-gb // b's earlier tries
	}
	for len(ga) > 0 {
		t.Fatalf("a heard its own wake-up twice: %v", <-ga)
	}
	later := due.Add(time.Second)
	b.PublishWake(context.Background(), 2, later)
	gb.want(t, 2, later)
	ga.want(t, 2, later)
}
