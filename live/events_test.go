package live_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

// fakeBadges is a BadgeReader over a badge the test sets; it fails the first fail reads.
type fakeBadges struct {
	mu    sync.Mutex
	b     inbox.Badge
	fail  int
	reads int
}

func (f *fakeBadges) read(ctx context.Context, v inbox.Viewer) (inbox.Badge, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail > 0 {
		f.fail--
		return inbox.Badge{}, errors.New("store unavailable")
	}
	return f.b, nil
}

func (f *fakeBadges) set(b inbox.Badge) {
	f.mu.Lock()
	f.b = b
	f.mu.Unlock()
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case x, ok := <-ch:
		if !ok {
			t.Fatal("stream closed")
		}
		return x
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received within 5s")
	}
	panic("unreachable")
}

func none[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case x := <-ch:
		t.Fatalf("unexpected %+v", x)
	case <-time.After(50 * time.Millisecond):
	}
}

func badge(unread, unseen int, ver int64, cats ...inbox.CategoryCount) inbox.Badge {
	return inbox.Badge{Unread: unread, Unseen: unseen, Version: ver, Categories: cats}
}

// TestEventsOneEachDeduplicatedAcrossPaths: every kind arrives once with the writer's
// badge; the relay's copies (Version 0) of the writer's events are dropped id by id, also
// for a read-unread-read sequence of one id; an outside writer's event (no versioned twin)
// is delivered with a badge read from the store; DELETED and EXPIRED match each other.
func TestEventsOneEachDeduplicatedAcrossPaths(t *testing.T) {
	b := live.NewLocal()
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	store := &fakeBadges{b: badge(0, 0, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenEvents(ctx, live.Streams{Broker: b, Read: store.read}, v, func(e live.Event) live.Event { return e })
	if err != nil {
		t.Fatal(err)
	}
	pub := func(c inbox.Change) { c.Viewer = v; b.Publish(ctx, c) }
	n := &inbox.Notification{ID: "N1", CreatedAt: time.Now()}
	pub(inbox.Change{Kind: inbox.EventAdded, IDs: []string{"N1"}, Notification: n, Version: 2, UnreadCount: 1, Badge: badge(1, 1, 2)})
	if e := recv(t, ch); e.Kind != inbox.EventAdded || e.Notification != n || e.Badge.Unread != 1 || e.Badge.Version != 2 {
		t.Fatalf("added: %+v", e)
	}
	for i, k := range []inbox.EventKind{inbox.EventRead, inbox.EventUnread, inbox.EventRead} {
		ver := int64(3 + i)
		pub(inbox.Change{Kind: k, IDs: []string{"N1"}, Version: ver, Badge: badge(0, 0, ver)})
		if e := recv(t, ch); e.Kind != k || len(e.IDs) != 1 || e.IDs[0] != "N1" || e.Badge.Version != ver {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	// The same publish again (a second path carrying the writer's change): dropped.
	pub(inbox.Change{Kind: inbox.EventRead, IDs: []string{"N1"}, Version: 5, Badge: badge(0, 0, 5)})
	// The relay's copies: the insert and the three marks.
	pub(inbox.Change{Kind: inbox.EventAdded, IDs: []string{"N1"}, Notification: &inbox.Notification{ID: "N1", CreatedAt: time.Now()}})
	for _, k := range []inbox.EventKind{inbox.EventRead, inbox.EventUnread, inbox.EventRead} {
		pub(inbox.Change{Kind: k, IDs: []string{"N1"}})
	}
	none(t, ch)
	if store.reads != 0 {
		t.Fatalf("%d store reads for events that carried their badge", store.reads)
	}
	// A batch archived through the gateway, of which the relay reports one id per record.
	pub(inbox.Change{Kind: inbox.EventArchived, IDs: []string{"N1", "N2"}, Version: 6, Badge: badge(0, 0, 6)})
	recv(t, ch)
	pub(inbox.Change{Kind: inbox.EventArchived, IDs: []string{"N2"}})
	pub(inbox.Change{Kind: inbox.EventArchived, IDs: []string{"N1"}})
	// The scheduler expired N3 by deleting it; the stream calls that removal DELETED.
	pub(inbox.Change{Kind: inbox.EventExpired, IDs: []string{"N3"}, Version: 7, Badge: badge(0, 0, 7)})
	if e := recv(t, ch); e.Kind != inbox.EventExpired {
		t.Fatalf("expired: %+v", e)
	}
	pub(inbox.Change{Kind: inbox.EventDeleted, IDs: []string{"N3"}})
	none(t, ch)
	// An outside writer snoozes N4 (only the relay saw it): delivered, badge from the store.
	store.set(badge(0, 0, 8, inbox.CategoryCount{Category: "c", Unread: 1}))
	store.fail = 2 // and the store read fails twice first: retried
	pub(inbox.Change{Kind: inbox.EventSnoozed, IDs: []string{"N4"}})
	pub(inbox.Change{Kind: inbox.EventWoke, IDs: []string{"N4"}, Version: 9, Badge: badge(1, 1, 9)})
	if e := recv(t, ch); e.Kind != inbox.EventSnoozed || e.Badge.Version != 8 || len(e.Badge.Categories) != 1 {
		t.Fatalf("outside snooze: %+v", e)
	}
	// The woke event waited behind the read: order kept.
	if e := recv(t, ch); e.Kind != inbox.EventWoke || e.Badge.Version != 9 {
		t.Fatalf("woke: %+v", e)
	}
	// The relay's copy may come first: then the writer's event is the duplicate.
	pub(inbox.Change{Kind: inbox.EventSeen, IDs: []string{"N5"}})
	if e := recv(t, ch); e.Kind != inbox.EventSeen {
		t.Fatalf("relay first: %+v", e)
	}
	pub(inbox.Change{Kind: inbox.EventSeen, IDs: []string{"N5"}, Version: 10, Badge: badge(1, 0, 10)})
	none(t, ch)
	// An outside READ, then UNREAD and READ through the gateway: the gateway's READ is no
	// copy of the outside one (the state moved on in between).
	pub(inbox.Change{Kind: inbox.EventRead, IDs: []string{"N6"}})
	pub(inbox.Change{Kind: inbox.EventUnread, IDs: []string{"N6"}, Version: 11, Badge: badge(1, 0, 11)})
	pub(inbox.Change{Kind: inbox.EventRead, IDs: []string{"N6"}, Version: 12, Badge: badge(0, 0, 12)})
	for _, k := range []inbox.EventKind{inbox.EventRead, inbox.EventUnread, inbox.EventRead} {
		if e := recv(t, ch); e.Kind != k {
			t.Fatalf("outside then gateway: %+v, want %s", e, k)
		}
	}
	// ALL_READ names no ids: delivered once.
	pub(inbox.Change{Kind: inbox.EventAllRead, Version: 13, Badge: badge(0, 0, 13)})
	pub(inbox.Change{Kind: inbox.EventAllRead, Version: 13, Badge: badge(0, 0, 13)})
	if e := recv(t, ch); e.Kind != inbox.EventAllRead || len(e.IDs) != 0 || e.Badge.Version != 13 {
		t.Fatalf("all read: %+v", e)
	}
	none(t, ch)
	// Badge refreshes and re-read hints are no events.
	pub(inbox.Change{Version: 14, UnreadCount: 3, Badge: badge(3, 3, 14)})
	pub(inbox.Change{})
	none(t, ch)
	cancel()
	for range ch {
	}
}

// TestEventsSlowConsumerEnds: a subscriber that takes nothing is ended with SLOW_CONSUMER
// (reported through the stream hook) after EventBuffer events, and holds no more.
func TestEventsSlowConsumerEnds(t *testing.T) {
	b := live.NewLocal()
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	hook := &live.StreamHook{Ready: func() {}}
	ctx := live.WithStreamHook(context.Background(), hook)
	ch, err := live.OpenEvents(ctx, live.Streams{Broker: b, Read: (&fakeBadges{}).read}, v, func(e live.Event) live.Event { return e })
	if err != nil {
		t.Fatal(err)
	}
	if !hook.Bound() {
		t.Fatal("the events stream did not bind the hook")
	}
	for i := range 3 * live.EventBuffer {
		b.Publish(ctx, inbox.Change{Viewer: v, Kind: inbox.EventRead, IDs: []string{"N"}, Version: int64(i + 1), Badge: badge(0, 0, int64(i+1))})
	}
	got := 0
	for range ch {
		got++
	}
	if got != live.EventBuffer {
		t.Fatalf("received %d events before the end, want %d", got, live.EventBuffer)
	}
	var ie *inbox.Error
	if err := hook.Err(); !errors.As(err, &ie) || ie.Code != inbox.CodeSlowConsumer {
		t.Fatalf("end error %v, want SLOW_CONSUMER", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the ended stream's subscription is still registered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBadgeStreamFullView: the current badge first; a versioned change with the whole
// badge is sent as it is; a change carrying only the count (an older publisher) and a
// re-read hint are read from the store (retried until a read succeeds); a stale version
// and a value equal to the last sent are not sent; the badge never moves back.
func TestBadgeStreamFullView(t *testing.T) {
	b := live.NewLocal()
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	store := &fakeBadges{b: badge(2, 3, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenBadge(ctx, live.Streams{Broker: b, Read: store.read}, v, live.FullView)
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ch); got.Unread != 2 || got.Unseen != 3 {
		t.Fatalf("first: %+v", got)
	}
	cats := []inbox.CategoryCount{{Category: "a", Unread: 1, Unseen: 1}}
	b.Publish(ctx, inbox.Change{Viewer: v, Version: 5, UnreadCount: 1, Badge: badge(1, 1, 5, cats...)})
	if got := recv(t, ch); got.Unread != 1 || got.Version != 5 || len(got.Categories) != 1 {
		t.Fatalf("versioned: %+v", got)
	}
	b.Publish(ctx, inbox.Change{Viewer: v, Version: 3, UnreadCount: 9, Badge: badge(9, 9, 3)}) // stale
	b.Publish(ctx, inbox.Change{Viewer: v, Version: 6, UnreadCount: 1, Badge: badge(1, 1, 6, cats...)})
	none(t, ch) // equal counts: nothing new
	store.set(badge(0, 2, 7))
	store.fail = 3
	b.Publish(ctx, inbox.Change{Viewer: v, Version: 7, UnreadCount: 0}) // count only
	if got := recv(t, ch); got.Unread != 0 || got.Unseen != 2 || got.Version != 7 {
		t.Fatalf("after a count-only change: %+v", got)
	}
	store.set(badge(5, 5, 6)) // a read older than what was sent: never sent
	b.Publish(ctx, inbox.Change{Viewer: v})
	none(t, ch)
	store.set(badge(4, 4, 8))
	b.Publish(ctx, inbox.Change{Viewer: v})
	if got := recv(t, ch); got.Unread != 4 || got.Version != 8 {
		t.Fatalf("after a hint: %+v", got)
	}
	cancel()
	for range ch {
	}
}

// TestUnreadViewUsesTheCount: the unreadCount stream takes the count of a count-only change
// without a store read.
func TestUnreadViewUsesTheCount(t *testing.T) {
	b := live.NewLocal()
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	store := &fakeBadges{b: badge(2, 0, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenBadge(ctx, live.Streams{Broker: b, Read: store.read}, v, live.UnreadView)
	if err != nil {
		t.Fatal(err)
	}
	if n := recv(t, ch); n != 2 {
		t.Fatalf("first %d", n)
	}
	b.Publish(ctx, inbox.Change{Viewer: v, Version: 2, UnreadCount: 7})
	if n := recv(t, ch); n != 7 {
		t.Fatalf("got %d", n)
	}
	if store.reads != 1 {
		t.Fatalf("%d reads, want only the first", store.reads)
	}
}

func (f *fakeBadges) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}
