package live_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

// TestAnnouncementEventBadgeIgnoresAnOlderChangeAfterAHint: once a re-read hint (a
// broker's resync, a writer that sends no badge) left the user's own badge unknown, a
// change older than the badge the stream already knew (the stream relay's late copy of
// an earlier META write) must not become the badge an announcement's event composes: the
// event counts the user's own badge as committed (read), not as it was two writes ago.
func TestAnnouncementEventBadgeIgnoresAnOlderChangeAfterAHint(t *testing.T) {
	b := live.NewLocal()
	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENTA0000000000", TenantID: "acme", Type: "news", Title: "First",
		CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}
	sets := &fakeSets{cached: &inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}}}
	v := inbox.Viewer{TenantID: "acme", UserID: "ua"}
	marks := func() *inbox.AnnouncementMarks { return &inbox.AnnouncementMarks{} }
	store := &fakeBadges{b: inbox.Badge{Unread: 1, Unseen: 1, Version: 5, Marks: marks()}}
	st := live.Streams{Broker: b, Read: store.read, Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenEvents(ctx, st, v, func(e live.Event) live.Event { return e })
	if err != nil {
		t.Fatal(err)
	}
	// Two marks of the user's: v4 (2 unread of their own), v5 (1); each event brings its badge.
	for _, c := range []struct {
		id     string
		unread int
		ver    int64
	}{{"01KOWN000000000000000000001", 2, 4}, {"01KOWN000000000000000000002", 1, 5}} {
		b.Publish(ctx, inbox.Change{Viewer: v, Kind: inbox.EventRead, IDs: []string{c.id}, Version: c.ver, UnreadCount: c.unread,
			Badge: inbox.Badge{Unread: c.unread, Unseen: c.unread, Version: c.ver, Marks: marks()}})
		if e := recv(t, ch); e.Kind != inbox.EventRead || e.Badge.Unread != c.unread+1 {
			t.Fatalf("read v%d: %+v", c.ver, e)
		}
	}
	// The broker lost and regained its connection: re-read.
	b.Publish(ctx, inbox.Change{Viewer: v})
	// The relay's copy of the v4 META record, late.
	b.Publish(ctx, inbox.Change{Viewer: v, Version: 4, UnreadCount: 2, Badge: inbox.Badge{Unread: 2, Unseen: 2, Version: 4, Marks: marks()}})

	c := &inbox.Announcement{ID: "01KANNOUNCEMENTC0000000000", TenantID: "acme", Type: "news", Title: "Second",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	sets.put(&inbox.AnnouncementSet{Seq: 2, Items: []*inbox.Announcement{c, a}})
	b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 2})
	e := recv(t, ch)
	if e.Kind != inbox.EventAdded || e.IDs[0] != "@"+c.ID {
		t.Fatalf("the second announcement: %+v", e)
	}
	if e.Badge.Unread != 3 || e.Badge.Version != 5 {
		t.Fatalf("the second announcement's badge: unread %d (own v%d), want 3 (1 of the user's own as of v5, 2 announcements)",
			e.Badge.Unread, e.Badge.Version)
	}
}

// hookSets is a fakeSets that runs hook (once) right after a Cached call took its value,
// after skip calls: what another goroutine does in between (the tenant watch's refresh).
type hookSets struct {
	fakeSets
	hook func()
	skip int
}

func (h *hookSets) Cached(tenant string) *inbox.AnnouncementSet {
	set := h.fakeSets.Cached(tenant)
	h.mu.Lock()
	var f func()
	if h.hook != nil {
		if h.skip == 0 {
			f, h.hook = h.hook, nil
		}
		h.skip--
	}
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return set
}

func (h *hookSets) arm(skip int, f func()) {
	h.mu.Lock()
	h.hook, h.skip = f, skip
	h.mu.Unlock()
}

// TestAnnouncementCreatedWhileAnEventsStreamOpensIsNotMissed: an announcement whose
// refresh lands between the stream taking the tenant's set (the announcements it knows)
// and joining the tenant's watch (which recomposes the streams joined) reaches the stream
// as ADDED all the same, and its withdrawal as DELETED; it was neither, the stream
// having known nothing of it.
func TestAnnouncementCreatedWhileAnEventsStreamOpensIsNotMissed(t *testing.T) {
	b := live.NewLocal()
	sets := &hookSets{fakeSets: fakeSets{cached: &inbox.AnnouncementSet{}}}
	mark := inbox.Badge{Unread: 0, Version: 1, Marks: &inbox.AnnouncementMarks{}}
	st := live.Streams{Broker: b, Read: (&fakeBadges{b: mark}).read, Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv := func(e live.Event) live.Event { return e }
	first, err := live.OpenEvents(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "ub"}, conv)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENTA0000000000", TenantID: "acme", Type: "news", Title: "Racing",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	// OpenEvents looks at the cached set twice: is it cached (else it reads it), then the
	// announcements active; the refresh lands after the second.
	sets.arm(1, func() {
		sets.put(&inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}})
		b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 1})
		if e := recv(t, first); e.Kind != inbox.EventAdded { // the refresh recomposed the streams joined
			t.Errorf("first stream: %+v", e)
		}
	})
	second, err := live.OpenEvents(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "ua"}, conv)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-second:
		if e.Kind != inbox.EventAdded || e.IDs[0] != "@"+a.ID {
			t.Fatalf("second stream: %+v", e)
		}
	case <-time.After(2 * time.Second):
		sets.put(&inbox.AnnouncementSet{Seq: 2})
		b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 2})
		recv(t, first) // DELETED there
		select {
		case e := <-second:
			t.Fatalf("the announcement created as the second stream opened never came as ADDED; then: %+v", e)
		case <-time.After(time.Second):
			t.Fatal("the announcement created as the second stream opened never came, neither ADDED nor DELETED")
		}
	}
}

// TestAnnouncementExpiryReachesAnEventsStreamJoiningAColdWatch: the tenant's watch began
// with a notificationAdded stream on an instance that had not read the set (no expiry to
// arm); an inboxEvents stream that joins it once the set is cached hears of an
// announcement's expiry (EXPIRED) at its time, not at the tenant's next change.
func TestAnnouncementExpiryReachesAnEventsStreamJoiningAColdWatch(t *testing.T) {
	b := live.NewLocal()
	sets := &fakeSets{}
	st := live.Streams{Broker: b, Read: (&fakeBadges{b: inbox.Badge{Version: 1, Marks: &inbox.AnnouncementMarks{}}}).read,
		Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := inbox.Viewer{TenantID: "acme", UserID: "ua"}
	if _, err := live.OpenAdded(ctx, st, v); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENTA0000000000", TenantID: "acme", Type: "news", Title: "Brief",
		CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(300 * time.Millisecond)}
	sets.mu.Lock()
	sets.cached = &inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}} // read by a page of the tenant's
	sets.mu.Unlock()
	ch, err := live.OpenEvents(ctx, st, v, func(e live.Event) live.Event { return e })
	if err != nil {
		t.Fatal(err)
	}
	if e := recv(t, ch); e.Kind != inbox.EventExpired || e.IDs[0] != "@"+a.ID {
		t.Fatalf("at the expiry: %+v", e)
	}
}

// TestAnnouncementExpiryReachesAnEventsStreamOpenedCold: an inboxEvents stream opened on
// an instance that has not read the tenant's set (it reads it for the stream) hears of
// the expiry of an announcement active when it began (EXPIRED) at its time.
func TestAnnouncementExpiryReachesAnEventsStreamOpenedCold(t *testing.T) {
	b := live.NewLocal()
	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENTA0000000000", TenantID: "acme", Type: "news", Title: "Brief",
		CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(300 * time.Millisecond)}
	sets := &fakeSets{table: &inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}}}
	st := live.Streams{Broker: b, Read: (&fakeBadges{b: inbox.Badge{Version: 1, Marks: &inbox.AnnouncementMarks{}}}).read,
		Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenEvents(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "ua"}, func(e live.Event) live.Event { return e })
	if err != nil {
		t.Fatal(err)
	}
	if e := recv(t, ch); e.Kind != inbox.EventExpired || e.IDs[0] != "@"+a.ID {
		t.Fatalf("at the expiry: %+v", e)
	}
}

// TestAnnouncementDeletedByTheUserIsNotDeletedAgain: a user who deleted an announcement
// from their inbox got its DELETED event then; its withdrawal (or expiry) later removes
// nothing more from their inbox, and their stream gets no second DELETED for it.
func TestAnnouncementDeletedByTheUserIsNotDeletedAgain(t *testing.T) {
	b := live.NewLocal()
	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENTA0000000000", TenantID: "acme", Type: "news", Title: "Gone",
		CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour)}
	sets := &fakeSets{cached: &inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}}}
	v := inbox.Viewer{TenantID: "acme", UserID: "ua"}
	deleted := &inbox.AnnouncementMarks{ByID: map[string]inbox.AnnouncementMark{a.ID: {Deleted: true}}}
	st := live.Streams{Broker: b, Read: (&fakeBadges{b: inbox.Badge{Version: 2, Marks: deleted}}).read, Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenEvents(ctx, st, v, func(e live.Event) live.Event { return e })
	if err != nil {
		t.Fatal(err)
	}
	// The user's delete (store.MarkAnnouncements): its event names the announcement "@<ULID>".
	b.Publish(ctx, inbox.Change{Viewer: v, Kind: inbox.EventDeleted, IDs: []string{"@" + a.ID}, Version: 2,
		Badge: inbox.Badge{Version: 2, Marks: deleted}})
	if e := recv(t, ch); e.Kind != inbox.EventDeleted || e.IDs[0] != "@"+a.ID || e.Badge.Unread != 0 {
		t.Fatalf("the user's delete: %+v", e)
	}
	sets.put(&inbox.AnnouncementSet{Seq: 2})
	b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 2})
	if testWaitRead(sets, 1) {
		none(t, ch)
	}
}

// testWaitRead waits (5 s at most) until sets was read n times, and reports whether it was.
func testWaitRead(sets *fakeSets, n int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for sets.readCount() < n {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// TestAnnouncementCreatedWhileAnAddedStreamOpensIsNotMissed: the same race for
// notificationAdded: an announcement whose refresh lands between the stream taking the
// tenant's set and joining the tenant's watch is streamed to it all the same.
func TestAnnouncementCreatedWhileAnAddedStreamOpensIsNotMissed(t *testing.T) {
	b := live.NewLocal()
	sets := &hookSets{fakeSets: fakeSets{cached: &inbox.AnnouncementSet{}}}
	st := live.Streams{Broker: b, Read: (&fakeBadges{b: inbox.Badge{Version: 1, Marks: &inbox.AnnouncementMarks{}}}).read,
		Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := live.OpenAdded(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "ub"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENTA0000000000", TenantID: "acme", Type: "news", Title: "Racing",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	sets.arm(0, func() { // as the second stream takes the set
		sets.put(&inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}})
		b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 1})
		if n := recv(t, first); n.ID != a.ID { // the refresh recomposed the streams joined
			t.Errorf("first stream: %+v", n)
		}
	})
	second, err := live.OpenAdded(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "ua"})
	if err != nil {
		t.Fatal(err)
	}
	if n := recv(t, second); n.ID != a.ID || n.Kind != inbox.KindAnnouncement {
		t.Fatalf("second stream: %+v", n)
	}
}
