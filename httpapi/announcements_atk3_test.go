package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/inboxgw/gateway/internal/testgw"
)

// An inboxEvents stream on an instance that never read the tenant's announcement set (a
// fresh instance behind the load balancer): the first event of the user's own, made on
// the other instance with its badge whole, has the badge counting the tenant's active
// announcement, as every read and badge stream counts it, not the user's own counters alone.
func TestInboxEventsOnAColdInstanceCountAnnouncements(t *testing.T) {
	t.Parallel()
	a := testgw.New(t)
	b := testgw.NewWith(t, testgw.Options{Peer: a, SharedBroker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := a.ServiceToken("acme", "svc")
	sendAnnouncement(t, a, svc, "cold-events", "Cold")
	aliceTok := a.Token("acme", "alice")
	own := a.Seed(svc, "alice", 2)
	if n := a.Unread(aliceTok); n != 3 {
		t.Fatalf("alice's unreadCount on A: %d, want 3 (2 of hers, 1 announcement)", n)
	}
	c := b.WithT(t).DialWS(ctx, "graphql-transport-ws")
	c.Init(aliceTok)
	c.Subscribe("e", `subscription { inboxEvents { kind badge { unread } } }`)
	testgw.WaitFor(t, testgw.EventTimeout, "alice's stream on B", func() bool { return a.Broker.Subscribers() == 1 })

	if _, u := stateOp(t, a, aliceTok, "markRead", own[0]); u != 2 {
		t.Fatalf("markRead on A answered unread %d, want 2", u)
	}
	var e inboxEventData
	c.NextData("e", &e)
	if e.InboxEvents.Kind != "READ" || e.InboxEvents.Badge.Unread != 2 {
		t.Fatalf("alice's READ event on B: %+v, want unread 2 (1 of hers, 1 announcement)", e.InboxEvents)
	}
}

// An inboxEvents stream opened on an instance that never read the tenant's set hears of
// the withdrawal (DELETED, the announcement's node id) of an announcement that was
// active when it opened, as a stream on a warm instance does.
func TestInboxEventsOnAColdInstanceHearOfAWithdrawal(t *testing.T) {
	t.Parallel()
	a := testgw.New(t)
	b := testgw.NewWith(t, testgw.Options{Peer: a, SharedBroker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := a.ServiceToken("acme", "svc")
	ann := sendAnnouncement(t, a, svc, "cold-withdrawn", "Cold")
	aliceTok := a.Token("acme", "alice")
	c := b.WithT(t).DialWS(ctx, "graphql-transport-ws")
	c.Init(aliceTok)
	c.Subscribe("e", `subscription { inboxEvents { kind notificationIds badge { unread } } }`)
	testgw.WaitFor(t, testgw.EventTimeout, "alice's stream on B", func() bool { return a.Broker.Subscribers() == 1 })

	withdraw(t, a, svc, ann.Announcement.ID)
	var e inboxEventData
	c.NextData("e", &e) // fails after testgw.EventTimeout
	if ev := e.InboxEvents; ev.Kind != "DELETED" || len(ev.NotificationIDs) != 1 || ev.NotificationIDs[0] != annGlobalID(ann.Announcement.ID) || ev.Badge.Unread != 0 {
		t.Fatalf("alice's event on B: %+v", ev)
	}
}

// A user who deleted an announcement from their inbox hears of its DELETED once: its
// withdrawal later sends their inboxEvents stream nothing (the next event is their own).
func TestInboxEventsDeleteOfAnAnnouncementComesOnce(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := s.ServiceToken("acme", "svc")
	erinTok := s.Token("acme", "erin")
	c := s.WithT(t).DialWS(ctx, "graphql-transport-ws")
	c.Init(erinTok)
	c.Subscribe("e", `subscription { inboxEvents { kind notificationIds notification { kind } } }`)
	testgw.WaitFor(t, testgw.EventTimeout, "erin's stream", func() bool { return s.Broker.Subscribers() == 1 })
	ann := sendAnnouncement(t, s, svc, "deleted-once", "Delete me")
	gid := annGlobalID(ann.Announcement.ID)
	var e inboxEventData
	if c.NextData("e", &e); e.InboxEvents.Kind != "ADDED" || e.InboxEvents.NotificationIDs[0] != gid {
		t.Fatalf("the announcement: %+v", e.InboxEvents)
	}
	s.MustData(erinTok, `mutation($ids: [ID!]!) { deleteNotifications(ids: $ids) { deletedIds } }`, map[string]any{"ids": []string{gid}}, nil)
	if c.NextData("e", &e); e.InboxEvents.Kind != "DELETED" || e.InboxEvents.NotificationIDs[0] != gid {
		t.Fatalf("erin's delete: %+v", e.InboxEvents)
	}
	withdraw(t, s, svc, ann.Announcement.ID)
	s.Seed(svc, "erin", 1)
	if c.NextData("e", &e); e.InboxEvents.Kind != "ADDED" || e.InboxEvents.Notification == nil || e.InboxEvents.Notification.Kind != "PERSONAL" {
		t.Fatalf("after the withdrawal, erin's next event: %+v (want her own notification's ADDED)", e.InboxEvents)
	}
}
