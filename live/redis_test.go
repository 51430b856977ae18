package live_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/live/redistest"
)

func newRedisBroker(t *testing.T, url string) *live.Redis {
	t.Helper()
	b, err := live.NewRedis(context.Background(), live.RedisOptions{URL: url, PollInterval: 200 * time.Millisecond, HealthInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// waitBadge waits for a badge signal and returns Latest.
func waitBadge(t *testing.T, s *live.Subscription, within time.Duration) inbox.Change {
	t.Helper()
	select {
	case <-s.BadgeChanged():
		return s.Latest()
	case <-time.After(within):
		t.Fatalf("no badge signal within %v", within)
		return inbox.Change{}
	}
}

// waitVersion waits until Latest has version want (skipping resync signals).
func waitVersion(t *testing.T, s *live.Subscription, want int64, within time.Duration) inbox.Change {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case <-s.BadgeChanged():
			if c := s.Latest(); c.Version == want {
				return c
			}
		case <-deadline:
			t.Fatalf("badge version %d not seen within %v (latest %+v)", want, within, s.Latest())
		}
	}
}

// waitChannels waits until b is subscribed to n viewers' channels on the server (besides
// the scheduler's wake-up channel, which every broker subscribes to once).
func waitServerChannels(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		chs, err := rdb.PubSubChannels(context.Background(), "inbox:*").Result()
		chs = slices.DeleteFunc(chs, func(ch string) bool { return ch == "inbox:~sched-wake" || ch == "inbox:~tenants" })
		if err == nil && len(chs) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server has channels %v (err %v), want %d", chs, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRedisAcrossInstances(t *testing.T) {
	srv := redistest.Server(t)
	a := newRedisBroker(t, srv.URL())
	b := newRedisBroker(t, srv.URL())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	v := inbox.Viewer{TenantID: "t1", UserID: "alice"}
	other := inbox.Viewer{TenantID: "t1", UserID: "bob"}
	sub := a.Subscribe(v)
	defer sub.Close()
	waitServerChannels(t, rdb, 1)
	// The subscription's confirmation asks for a re-read (changes before it may be lost).
	if c := waitBadge(t, sub, 5*time.Second); c.Version != 0 {
		t.Fatalf("first signal = %+v, want a resync (Version 0)", c)
	}

	n := &inbox.Notification{ID: "01J0000000000000000000000A", Type: "mention", Title: "hi", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	b.Publish(context.Background(), inbox.Change{Viewer: v, Notification: n})
	b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 1, Version: 1})
	b.Publish(context.Background(), inbox.Change{Viewer: other, UnreadCount: 9, Version: 9})
	if c := waitVersion(t, sub, 1, 5*time.Second); c.UnreadCount != 1 {
		t.Fatalf("badge = %+v, want count 1", c)
	}
	select {
	case got := <-sub.Added():
		if got.ID != n.ID || got.Title != "hi" || !got.CreatedAt.Equal(n.CreatedAt) {
			t.Fatalf("added = %+v, want %+v", got, n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("notification not delivered")
	}
	// The same notification again (e.g. from the relay) and a stale badge: nothing new.
	b.Publish(context.Background(), inbox.Change{Viewer: v, Notification: n})
	b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 5, Version: 1})
	b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 2, Version: 2})
	if c := waitVersion(t, sub, 2, 5*time.Second); c.UnreadCount != 2 {
		t.Fatalf("badge = %+v, want count 2", c)
	}
	select {
	case got := <-sub.Added():
		t.Fatalf("duplicate notification delivered: %+v", got)
	default:
	}

	// A publish on A reaches A's own subscriber once (locally), not again via Redis.
	n2 := &inbox.Notification{ID: "01J0000000000000000000000B", Type: "mention"}
	a.Publish(context.Background(), inbox.Change{Viewer: v, Notification: n2})
	if got := <-sub.Added(); got.ID != n2.ID {
		t.Fatalf("added = %s, want %s", got.ID, n2.ID)
	}

	// Unsubscribing the last local subscriber unsubscribes the channel: no traffic.
	sub.Close()
	waitServerChannels(t, rdb, 0)
	if a.Channels() != 0 {
		t.Fatalf("A still holds %d channels", a.Channels())
	}
}

func TestRedisOnlySubscribedChannels(t *testing.T) {
	srv := redistest.Server(t)
	a := newRedisBroker(t, srv.URL())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	var subs []*live.Subscription
	for i := range 50 {
		v := inbox.Viewer{TenantID: "t", UserID: fmt.Sprint("u", i%10)}
		subs = append(subs, a.Subscribe(v))
	}
	waitServerChannels(t, rdb, 10)
	for _, s := range subs[:45] {
		s.Close()
	}
	waitServerChannels(t, rdb, 5)
	for _, s := range subs[45:] {
		s.Close()
	}
	waitServerChannels(t, rdb, 0)
}

func TestRedisRestartResyncs(t *testing.T) {
	srv := redistest.Server(t)
	a := newRedisBroker(t, srv.URL())
	b := newRedisBroker(t, srv.URL())
	v := inbox.Viewer{TenantID: "t1", UserID: "carol"}
	sub := a.Subscribe(v)
	defer sub.Close()
	waitBadge(t, sub, 5*time.Second) // subscription confirmed
	b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 3, Version: 3})
	waitVersion(t, sub, 3, 5*time.Second)

	srv.Stop()
	// Subscribers are told: a resync signal (re-read the store).
	if c := waitBadge(t, sub, 10*time.Second); c.Version != 0 {
		t.Fatalf("after Redis went down: %+v, want a resync", c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("broker A still reports connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Start()
	// Back: another resync, then changes flow again.
	deadline = time.Now().Add(15 * time.Second)
	for !a.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("broker A did not reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := waitBadge(t, sub, 5*time.Second); c.Version != 0 {
		t.Fatalf("after Redis returned: %+v, want a resync", c)
	}
	// B's publishing connection reconnects by itself too; retry until a change lands.
	deadline = time.Now().Add(15 * time.Second)
	for ver := int64(4); ; ver++ {
		b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: int(ver), Version: ver})
		select {
		case <-sub.BadgeChanged():
			if c := sub.Latest(); c.Version >= 4 {
				return
			}
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no change after Redis restart (latest %+v)", sub.Latest())
		}
	}
}

// TestRedisManySubscriptionsNoLeak opens and drops many subscriptions: the broker ends
// with no channel on the server and no goroutine more than it started with.
func TestRedisManySubscriptionsNoLeak(t *testing.T) {
	srv := redistest.Server(t)
	a := newRedisBroker(t, srv.URL())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	base := runtime.NumGoroutine()
	for round := range 5 {
		subs := make([]*live.Subscription, 0, 1000)
		for i := range 1000 {
			subs = append(subs, a.Subscribe(inbox.Viewer{TenantID: "t", UserID: fmt.Sprint("u", round, "-", i%300)}))
		}
		for _, s := range subs {
			s.Close()
		}
	}
	waitServerChannels(t, rdb, 0)
	if n := a.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers left", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d, baseline %d", runtime.NumGoroutine(), base)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisCarriesEvents: an event published on one instance reaches an events
// subscriber of another with its kind, ids and whole badge; the same event again is
// dropped.
func TestRedisCarriesEvents(t *testing.T) {
	srv := redistest.Server(t)
	a := newRedisBroker(t, srv.URL())
	b := newRedisBroker(t, srv.URL())
	v := inbox.Viewer{TenantID: "t1", UserID: "ida"}
	sub := a.Subscribe(v, live.WithEvents())
	defer sub.Close()
	waitBadge(t, sub, 5*time.Second) // subscription confirmed
	bd := inbox.Badge{Unread: 1, Unseen: 2, Version: 4, Categories: []inbox.CategoryCount{{Category: "social", Unread: 1, Unseen: 2}}}
	c := inbox.Change{Viewer: v, Kind: inbox.EventArchived, IDs: []string{"01A", "01B"}, Version: 4, UnreadCount: 1, Badge: bd}
	b.Publish(context.Background(), c)
	b.Publish(context.Background(), c)
	select {
	case got := <-sub.Events():
		if got.Kind != inbox.EventArchived || len(got.IDs) != 2 || got.Badge.Unseen != 2 || len(got.Badge.Categories) != 1 {
			t.Fatalf("event %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("event not delivered")
	}
	select {
	case got := <-sub.Events():
		t.Fatalf("duplicate delivered: %+v", got)
	case <-time.After(200 * time.Millisecond):
	}
	if l := sub.Latest(); l.Version != 4 || l.Badge.Unseen != 2 {
		t.Fatalf("latest %+v", l)
	}
}

// TestRedisTenantChangesReachEveryInstance: a tenant's change (an announcement created or
// withdrawn) published on one instance reaches the OnTenantChange functions of every
// instance, the publisher's included, and the tenant's subscriptions, without any viewer
// of the tenant subscribed there; a user's change does not reach them.
func TestRedisTenantChangesReachEveryInstance(t *testing.T) {
	srv := redistest.Server(t)
	a, b := newRedisBroker(t, srv.URL()), newRedisBroker(t, srv.URL())
	heard := func(br *live.Redis) chan inbox.Change {
		ch := make(chan inbox.Change, 8)
		t.Cleanup(br.OnTenantChange(func(c inbox.Change) { ch <- c }))
		return ch
	}
	onA, onB := heard(a), heard(b)
	watch := b.Subscribe(inbox.Viewer{TenantID: "acme"})
	defer watch.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	// Every broker listens on the tenant channel from the start; a tenant's watch adds no
	// channel of its own.
	waitServerChannels(t, rdb, 0)
	a.Publish(context.Background(), inbox.Change{Viewer: inbox.Viewer{TenantID: "acme", UserID: "alice"}, Version: 3})
	want := inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 7}
	a.Publish(context.Background(), want)
	for name, ch := range map[string]chan inbox.Change{"publisher": onA, "other instance": onB} {
		select {
		case c := <-ch:
			if c.Viewer != want.Viewer || c.Kind != want.Kind || c.Version != want.Version {
				t.Fatalf("%s heard %+v, want %+v", name, c, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the %s never heard the tenant's change", name)
		}
	}
	waitVersion(t, watch, 7, 5*time.Second)
	select {
	case c := <-onB:
		t.Fatalf("heard a second change %+v", c)
	default:
	}
}
