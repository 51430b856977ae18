package live_test

import (
	"context"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

func TestLocalCoalescesAndDeduplicates(t *testing.T) {
	b := live.NewLocal()
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	s := b.Subscribe(v)
	ctx := context.Background()
	for ver := int64(1); ver <= 5; ver++ {
		b.Publish(ctx, inbox.Change{Viewer: v, UnreadCount: int(ver), Version: ver})
	}
	b.Publish(ctx, inbox.Change{Viewer: v, UnreadCount: 1, Version: 2}) // stale
	<-s.BadgeChanged()
	if c := s.Latest(); c.Version != 5 || c.UnreadCount != 5 {
		t.Fatalf("latest = %+v, want version 5 count 5", c)
	}
	select {
	case <-s.BadgeChanged():
		t.Fatal("more than one pending badge signal")
	default:
	}
	n := &inbox.Notification{ID: "N1"}
	b.Publish(ctx, inbox.Change{Viewer: v, Notification: n})
	b.Publish(ctx, inbox.Change{Viewer: v, Notification: &inbox.Notification{ID: "N1"}})
	if got := <-s.Added(); got.ID != "N1" {
		t.Fatalf("added %q", got.ID)
	}
	select {
	case got := <-s.Added():
		t.Fatalf("duplicate delivered: %+v", got)
	default:
	}
	// Overflow closes Overflowed for this subscriber only.
	other := b.Subscribe(inbox.Viewer{TenantID: "t", UserID: "w"})
	for i := range live.NotificationBuffer + 1 {
		b.Publish(ctx, inbox.Change{Viewer: v, Notification: &inbox.Notification{ID: string(rune('a'+i%26)) + string(rune('A'+i/26))}})
	}
	select {
	case <-s.Overflowed():
	default:
		t.Fatal("overflow not signalled")
	}
	select {
	case <-other.Overflowed():
		t.Fatal("other subscriber overflowed")
	default:
	}
	s.Close()
	other.Close()
	s.Close()
	if n := b.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers left", n)
	}
}

func TestBadgeOnlyQueuesNoNotifications(t *testing.T) {
	b := live.NewLocal()
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	s := b.Subscribe(v, live.BadgeOnly())
	defer s.Close()
	changes := 0
	s.OnChange(func() { changes++ })
	ctx := context.Background()
	for i := range 2 * live.NotificationBuffer {
		b.Publish(ctx, inbox.Change{Viewer: v, Notification: &inbox.Notification{ID: string(rune('a'+i%26)) + string(rune('A'+i/26))}})
	}
	if s.Added() != nil || s.Overflowed() != nil {
		t.Fatal("a badge-only subscription has a notification queue")
	}
	// Each new notification is a badge hint (count unknown: Version 0), coalesced.
	select {
	case <-s.BadgeChanged():
	default:
		t.Fatal("no badge signal for the notifications' hints")
	}
	if c := s.Latest(); c.Version != 0 {
		t.Fatalf("latest = %+v, want a re-read hint", c)
	}
	if changes != 1+2*live.NotificationBuffer {
		t.Fatalf("OnChange ran %d times, want once when set and once for each hint", changes)
	}
}

// TestLocalTenantChanges: the local broker hands a tenant's change (no user) to its
// OnTenantChange functions, and a user's change not; a removed function hears nothing.
func TestLocalTenantChanges(t *testing.T) {
	b := live.NewLocal()
	var got []inbox.Change
	stop := b.OnTenantChange(func(c inbox.Change) { got = append(got, c) })
	b.Publish(context.Background(), inbox.Change{Viewer: inbox.Viewer{TenantID: "acme", UserID: "alice"}, Version: 1})
	b.Publish(context.Background(), inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 2})
	stop()
	b.Publish(context.Background(), inbox.Change{Viewer: inbox.Viewer{TenantID: "acme"}, Kind: inbox.EventAnnouncements, Version: 3})
	if len(got) != 1 || got[0].Version != 2 {
		t.Fatalf("heard %+v, want the tenant's change of version 2 alone", got)
	}
}
