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
