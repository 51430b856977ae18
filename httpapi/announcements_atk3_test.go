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
	var e struct {
		InboxEvents struct {
			Kind  string `json:"kind"`
			Badge struct {
				Unread int `json:"unread"`
			} `json:"badge"`
		} `json:"inboxEvents"`
	}
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
	var e struct {
		InboxEvents struct {
			Kind            string   `json:"kind"`
			NotificationIDs []string `json:"notificationIds"`
			Badge           struct {
				Unread int `json:"unread"`
			} `json:"badge"`
		} `json:"inboxEvents"`
	}
	c.NextData("e", &e) // fails after testgw.EventTimeout
	if ev := e.InboxEvents; ev.Kind != "DELETED" || len(ev.NotificationIDs) != 1 || ev.NotificationIDs[0] != annGlobalID(ann.Announcement.ID) || ev.Badge.Unread != 0 {
		t.Fatalf("alice's event on B: %+v", ev)
	}
}
