package live_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

// fakeSets is an instance's announcement cache over a "table" the test sets: Refresh
// reads the table (counted) when asked for a newer sequence, or a resync.
type fakeSets struct {
	mu     sync.Mutex
	cached *inbox.AnnouncementSet
	table  *inbox.AnnouncementSet
	reads  int
}

func (f *fakeSets) Cached(string) *inbox.AnnouncementSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cached
}

func (f *fakeSets) Refresh(_ context.Context, _ string, seq int64) (*inbox.AnnouncementSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq < 0 || f.cached == nil || seq > f.cached.Seq {
		f.reads++
		f.cached = f.table
	}
	return f.cached, nil
}

func (f *fakeSets) put(set *inbox.AnnouncementSet) {
	f.mu.Lock()
	f.table = set
	f.mu.Unlock()
}

func (f *fakeSets) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// TestAnnouncementReachesEveryBadgeStreamWithOneRead: when an announcement is created and
// then withdrawn, every unreadCount stream of the tenant gets the exact new count, after
// ONE read of the set for the instance (not one per stream), a notificationAdded stream
// gets the announcement once, and another tenant's stream nothing.
func TestAnnouncementReachesEveryBadgeStreamWithOneRead(t *testing.T) {
	b := live.NewLocal()
	sets := &fakeSets{cached: &inbox.AnnouncementSet{}}
	st := live.Streams{Broker: b, Read: (&fakeBadges{b: inbox.Badge{Unread: 2, Unseen: 2, Version: 1, Marks: &inbox.AnnouncementMarks{}}}).read,
		Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const streams = 50
	var chans []<-chan int
	for i := range streams {
		ch, err := live.OpenBadge(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "u" + string(rune('a'+i%26)) + string(rune('a'+i/26))}, live.UnreadView)
		if err != nil {
			t.Fatal(err)
		}
		if n := recv(t, ch); n != 2 {
			t.Fatalf("first count %d", n)
		}
		chans = append(chans, ch)
	}
	other, err := live.OpenBadge(ctx, st, inbox.Viewer{TenantID: "globex", UserID: "ua"}, live.UnreadView)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, other)
	added, err := live.OpenAdded(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "ua"})
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENT00000000000", TenantID: "acme", Type: "news", Title: "Maintenance",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	sets.put(&inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}})
	b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 1})
	for i, ch := range chans {
		if n := recv(t, ch); n != 3 {
			t.Fatalf("stream %d: %d after the announcement, want 3", i, n)
		}
	}
	if n := sets.readCount(); n != 1 {
		t.Fatalf("%d reads of the set for %d streams, want 1", n, streams)
	}
	if n := recv(t, added); n.ID != a.ID || n.Kind != inbox.KindAnnouncement || n.Read || n.Title != "Maintenance" {
		t.Fatalf("notificationAdded: %+v", n)
	}
	none(t, other)

	// The relay's copy of the same change reads nothing and sends nothing.
	b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 1})
	none(t, chans[0])

	withdrawn := *a
	wt := now
	withdrawn.WithdrawnAt = &wt
	sets.put(&inbox.AnnouncementSet{Seq: 2})
	b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 2})
	for i, ch := range chans {
		if n := recv(t, ch); n != 2 {
			t.Fatalf("stream %d: %d after the withdrawal, want 2", i, n)
		}
	}
	if n := sets.readCount(); n != 2 {
		t.Fatalf("%d reads of the set, want 2", n)
	}
	none(t, added)
	none(t, other)
}

// TestAnnouncementsAreInboxEvents: an inboxEvents stream gets an announcement created
// while it runs as ADDED (id "@<ULID>", the announcement unread, the badge counting it),
// its withdrawal as DELETED and another's expiry as EXPIRED, each with the exact badge;
// the stream reads the user's badge once, when it does not yet know it, and after a change
// that carried the badge whole it reads nothing.
func TestAnnouncementsAreInboxEvents(t *testing.T) {
	b := live.NewLocal()
	sets := &fakeSets{cached: &inbox.AnnouncementSet{}}
	v := inbox.Viewer{TenantID: "acme", UserID: "ua"}
	store := &fakeBadges{b: inbox.Badge{Unread: 2, Unseen: 2, Version: 1, Marks: &inbox.AnnouncementMarks{}}}
	st := live.Streams{Broker: b, Read: store.read, Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenEvents(ctx, st, v, func(e live.Event) live.Event { return e })
	if err != nil {
		t.Fatal(err)
	}
	tenantChange := func(seq int64) {
		b.Publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: seq})
	}

	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENTA0000000000", TenantID: "acme", Type: "news", Title: "Maintenance",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	sets.put(&inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}})
	tenantChange(1)
	e := recv(t, ch)
	if e.Kind != inbox.EventAdded || len(e.IDs) != 1 || e.IDs[0] != "@"+a.ID || e.Notification == nil ||
		e.Notification.Kind != inbox.KindAnnouncement || e.Notification.Read || e.Badge.Unread != 3 {
		t.Fatalf("announcement created: %+v", e)
	}
	if n := store.readCount(); n != 1 {
		t.Fatalf("%d badge reads for the first announcement event, want 1 (the user's badge was not known)", n)
	}

	// A change of the user's that carries the badge whole: its event, then what it taught.
	b.Publish(ctx, inbox.Change{Viewer: v, Kind: inbox.EventRead, IDs: []string{"01KOWN000000000000000000000"}, Version: 2,
		Badge: inbox.Badge{Unread: 1, Unseen: 1, Version: 2, Marks: &inbox.AnnouncementMarks{}}})
	if e := recv(t, ch); e.Kind != inbox.EventRead || e.Badge.Unread != 2 {
		t.Fatalf("read: %+v", e)
	}

	c := &inbox.Announcement{ID: "01KANNOUNCEMENTC0000000000", TenantID: "acme", Type: "news", Title: "Soon over",
		CreatedAt: now.Add(time.Millisecond), ExpiresAt: now.Add(time.Hour)}
	sets.put(&inbox.AnnouncementSet{Seq: 2, Items: []*inbox.Announcement{c, a}})
	tenantChange(2)
	if e := recv(t, ch); e.Kind != inbox.EventAdded || e.IDs[0] != "@"+c.ID || e.Badge.Unread != 3 {
		t.Fatalf("second announcement: %+v", e)
	}

	withdrawn := *a
	wt := time.Now().UTC()
	withdrawn.WithdrawnAt = &wt
	expired := *c
	expired.ExpiresAt = now.Add(-time.Second)
	sets.put(&inbox.AnnouncementSet{Seq: 3, Items: []*inbox.Announcement{&expired, &withdrawn}})
	tenantChange(3)
	got := map[inbox.EventKind]live.Event{}
	for range 2 {
		e := recv(t, ch)
		got[e.Kind] = e
	}
	if e := got[inbox.EventDeleted]; len(e.IDs) != 1 || e.IDs[0] != "@"+a.ID || e.Badge.Unread != 1 {
		t.Fatalf("withdrawn: %+v (events %+v)", e, got)
	}
	if e := got[inbox.EventExpired]; len(e.IDs) != 1 || e.IDs[0] != "@"+c.ID || e.Badge.Unread != 1 {
		t.Fatalf("expired: %+v (events %+v)", e, got)
	}
	if n := store.readCount(); n != 1 {
		t.Fatalf("%d badge reads after four announcement events, want still 1", n)
	}
	none(t, ch)
}
