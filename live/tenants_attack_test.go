package live_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/live/redistest"
)

// TestRedisTenantChannelTakesOnlyTenantChanges: messages on the tenant channel that are
// not a tenant's change (a user's viewer, no tenant at all: which would read as a resync
// of every tenant, garbage) reach neither the OnTenantChange functions nor the user's
// subscriptions; the tenant change after them does, once.
func TestRedisTenantChannelTakesOnlyTenantChanges(t *testing.T) {
	srv := redistest.Server(t)
	b := newRedisBroker(t, srv.URL())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	got := make(chan inbox.Change, 16)
	defer b.OnTenantChange(func(c inbox.Change) { got <- c })()
	alice := b.Subscribe(inbox.Viewer{TenantID: "t1", UserID: "alice"})
	defer alice.Close()
	waitServerChannels(t, rdb, 1)
	waitBadge(t, alice, 5*time.Second) // the subscription's resync
	ctx := context.Background()
	for _, m := range []string{
		`{"origin":"evil","tenant":"t1","user":"alice","count":99,"version":99,"kind":"ANNOUNCEMENTS"}`,
		`{"origin":"evil","tenant":"","user":"","version":98,"kind":"ANNOUNCEMENTS"}`,
		`{"origin":"evil","tenant":"","user":"alice","version":97}`,
		`not json`,
		`{"origin":"other","tenant":"t1","user":"","version":3,"kind":"ANNOUNCEMENTS"}`,
	} {
		if err := rdb.Publish(ctx, "inbox:~tenants", m).Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case c := <-got:
		if c.Viewer != (inbox.Viewer{TenantID: "t1"}) || c.Version != 3 || c.Kind != inbox.EventAnnouncements {
			t.Fatalf("the tenant functions got %+v, want t1's change 3 only", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the tenant change never arrived")
	}
	select {
	case c := <-got:
		t.Fatalf("and then %+v", c)
	case <-alice.BadgeChanged():
		t.Fatalf("alice's subscription got %+v from the tenant channel", alice.Latest())
	default:
	}
}

// TestAnnouncedSurvivesABogusSequence: a tenant change announcing a sequence the table
// never reached (forged or corrupt on the broker) is read once and disproved by the set
// read; the tenant's real changes after it still reach its badge streams (before, every
// change below the bogus sequence was taken for one heard already, for good).
func TestAnnouncedSurvivesABogusSequence(t *testing.T) {
	b := live.NewLocal()
	sets := &fakeSets{cached: &inbox.AnnouncementSet{}, table: &inbox.AnnouncementSet{}}
	st := live.Streams{Broker: b, Read: (&fakeBadges{b: inbox.Badge{Unread: 2, Unseen: 2, Version: 1, Marks: &inbox.AnnouncementMarks{}}}).read,
		Ann: live.NewAnnounced(b, sets, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := live.OpenBadge(ctx, st, inbox.Viewer{TenantID: "acme", UserID: "ua"}, live.UnreadView)
	if err != nil {
		t.Fatal(err)
	}
	if n := recv(t, ch); n != 2 {
		t.Fatalf("first count %d", n)
	}
	tenant := inbox.Viewer{TenantID: "acme"}
	b.Publish(ctx, inbox.Change{Viewer: tenant, Kind: inbox.EventAnnouncements, Version: 1 << 60})
	for deadline := time.Now().Add(5 * time.Second); sets.readCount() != 1; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the bogus change was never read")
		}
	}
	now := time.Now().UTC()
	a := &inbox.Announcement{ID: "01KANNOUNCEMENT00000000000", TenantID: "acme", Type: "news", Title: "Real",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	sets.put(&inbox.AnnouncementSet{Seq: 1, Items: []*inbox.Announcement{a}})
	b.Publish(ctx, inbox.Change{Viewer: tenant, Kind: inbox.EventAnnouncements, Version: 1})
	if n := recv(t, ch); n != 3 {
		t.Fatalf("after the real announcement: %d, want 3", n)
	}
}
