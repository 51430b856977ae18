package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/internal/testgw"
)

// liveWithin is how soon every badge subscriber of the tenant must hear of an
// announcement (DESIGN.md "Announcements (v3)": within 2 s).
const liveWithin = 2 * time.Second

// badgeSub is one WebSocket client with one badge subscription.
type badgeSub struct {
	c     *testgw.WSClient
	count bool // subscription { unreadCount } rather than { badge { unread } }
}

// subscribeBadge opens a connection as token on s with a badge subscription (unreadCount
// when count) and returns it once its first value came (want).
func subscribeBadge(ctx context.Context, t *testing.T, s *testgw.Server, token string, count bool, want int) *badgeSub {
	t.Helper()
	b := &badgeSub{c: s.WithT(t).DialWS(ctx, "graphql-transport-ws"), count: count}
	b.c.Init(token)
	if count {
		b.c.Subscribe("b", `subscription { unreadCount }`)
	} else {
		b.c.Subscribe("b", `subscription { badge { unread } }`)
	}
	if got := b.next(); got != want {
		t.Fatalf("first value %d, want %d", got, want)
	}
	return b
}

// next is the subscription's next value.
func (b *badgeSub) next() int {
	if b.count {
		return b.c.NextCount("b")
	}
	var d struct {
		Badge struct {
			Unread int `json:"unread"`
		} `json:"badge"`
	}
	b.c.NextData("b", &d)
	return d.Badge.Unread
}

// expect waits for the subscription's next value, which must be want and come within
// liveWithin of since.
func (b *badgeSub) expect(t *testing.T, what string, since time.Time, want int) {
	t.Helper()
	got := b.next()
	if took := time.Since(since); took > liveWithin {
		t.Errorf("%s: the value came %v after the change, want within %v", what, took.Round(time.Millisecond), liveWithin)
	}
	if got != want {
		t.Fatalf("%s: value %d, want %d", what, got, want)
	}
}

// withdraw withdraws announcement id with svc.
func withdraw(t *testing.T, s *testgw.Server, svc, id string) {
	t.Helper()
	s.WithT(t).MustData(svc, `mutation($id: ID!) { withdrawAnnouncement(id: $id) { id } }`, map[string]any{"id": id}, nil)
}

// Every badge and unreadCount subscriber of the tenant gets the exact new value within
// 2 s of an announcement's creation and again of its withdrawal (a user with
// notifications of their own and one without, over WebSocket and SSE); a subscriber of another tenant gets
// nothing (their next value is their own next notification's). When the streams end, the
// instance's watch of the tenants ends too.
func TestAnnouncementReachesBadgeSubscribersLive(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc, globexSvc := s.ServiceToken("acme", "svc"), s.ServiceToken("globex", "svc")
	s.Seed(svc, "alice", 2)
	alice := subscribeBadge(ctx, t, s, s.Token("acme", "alice"), false, 2)
	carol := subscribeBadge(ctx, t, s, s.Token("acme", "carol"), true, 0)
	bob := subscribeBadge(ctx, t, s, s.Token("globex", "bob"), false, 0)
	sctx, scancel := context.WithCancel(ctx)
	dave := s.SubscribeSSE(sctx, s.Token("acme", "dave"), `subscription { unreadCount }`)
	if n := dave.NextCount(); n != 0 {
		t.Fatalf("dave's first value over SSE: %d", n)
	}
	sseExpect := func(what string, since time.Time, want int) {
		t.Helper()
		n := dave.NextCount()
		if took := time.Since(since); took > liveWithin {
			t.Errorf("%s: the value came %v after the change, want within %v", what, took.Round(time.Millisecond), liveWithin)
		}
		if n != want {
			t.Fatalf("%s: value %d, want %d", what, n, want)
		}
	}

	start := time.Now()
	ann := sendAnnouncement(t, s, svc, "live-1", "Live")
	alice.expect(t, "alice after the announcement", start, 3)
	carol.expect(t, "carol after the announcement", start, 1)
	sseExpect("dave (SSE) after the announcement", start, 1)

	start = time.Now()
	withdraw(t, s, svc, ann.Announcement.ID)
	alice.expect(t, "alice after the withdrawal", start, 2)
	carol.expect(t, "carol after the withdrawal", start, 0)
	sseExpect("dave (SSE) after the withdrawal", start, 0)
	scancel()

	// globex's bob heard nothing of acme's announcements: his next value is his own.
	s.Seed(globexSvc, "bob", 1)
	if got := bob.next(); got != 1 {
		t.Fatalf("bob's next value %d, want 1 (his own notification)", got)
	}
	// And carol's per-user state counts live: she reads an announcement, her badge drops.
	start = time.Now()
	ann = sendAnnouncement(t, s, svc, "live-2", "Live again")
	carol.expect(t, "carol after the second announcement", start, 1)
	if notFound, u := stateOp(t, s, s.Token("acme", "carol"), "markRead", annGlobalID(ann.Announcement.ID)); len(notFound) != 0 || u != 0 {
		t.Fatalf("carol's markRead: notFound %v unread %d", notFound, u)
	}
	carol.expect(t, "carol after her markRead", time.Now(), 0)

	// Every stream gone, every tenant watch (and its broker subscription) goes too.
	for _, b := range []*badgeSub{alice, carol, bob} {
		b.c.Conn.CloseNow()
	}
	testgw.WaitFor(t, testgw.EventTimeout, "no subscription left on the broker", func() bool { return s.Broker.Subscribers() == 0 })
}

// Two instances over one broker (as Redis makes them): an announcement created on A
// reaches every badge subscriber of the tenant on B within 2 s, and B reads the tenant's
// set once for all of them (one Query, not one per subscriber), with no per-subscriber
// read at all.
func TestAnnouncementReachesTheOtherInstanceWithOneRead(t *testing.T) {
	t.Parallel()
	a := testgw.New(t)
	recB := &ddbtrace.Recorder{}
	b := testgw.NewWith(t, testgw.Options{Peer: a, SharedBroker: true, DynamoDB: []func(*dynamodb.Options){recB.Option()}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := a.ServiceToken("acme", "svc")
	a.Seed(svc, "u0", 1)
	const n = 20
	subs := make([]*badgeSub, n)
	for i := range subs {
		want := 0
		if i == 0 {
			want = 1
		}
		subs[i] = subscribeBadge(ctx, t, b, b.Token("acme", fmt.Sprintf("u%d", i)), i%2 == 1, want)
	}
	recB.Reset()
	start := time.Now()
	ann := sendAnnouncement(t, a, svc, "two-1", "Both")
	for i, sub := range subs {
		want := 1
		if i == 0 {
			want = 2
		}
		sub.expect(t, fmt.Sprintf("u%d on B after the announcement on A", i), start, want)
	}
	ops := recB.Ops()
	slices.Sort(ops)
	t.Logf("B's DynamoDB calls for the announcement (%d subscribers): %v", n, ops)
	if recB.Count("Query") != 1 || len(ops) > 1 {
		t.Errorf("B's DynamoDB calls for one announcement to %d subscribers: %v, want one Query", n, ops)
	}

	recB.Reset()
	start = time.Now()
	withdraw(t, a, svc, ann.Announcement.ID)
	for i, sub := range subs {
		want := 0
		if i == 0 {
			want = 1
		}
		sub.expect(t, fmt.Sprintf("u%d on B after the withdrawal on A", i), start, want)
	}
	ops = recB.Ops()
	slices.Sort(ops)
	t.Logf("B's DynamoDB calls for the withdrawal: %v", ops)
	if recB.Count("Query") != 1 || len(ops) > 1 {
		t.Errorf("B's DynamoDB calls for one withdrawal to %d subscribers: %v, want one Query", n, ops)
	}
	// B answers reads with the new set too.
	if got := b.Unread(b.Token("acme", "u3")); got != 0 {
		t.Fatalf("u3's unreadCount on B after the withdrawal: %d", got)
	}
}

// An announcement leaves every inbox and badge when it expires, without any write: a badge
// subscriber gets the drop within 2 s of the expiry, reads agree, and its status is
// expired.
func TestAnnouncementExpiryReachesBadgeSubscribers(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := s.ServiceToken("acme", "svc")
	s.Seed(svc, "alice", 1)
	aliceTok := s.Token("acme", "alice")
	alice := subscribeBadge(ctx, t, s, aliceTok, false, 1)
	carol := subscribeBadge(ctx, t, s, s.Token("acme", "carol"), true, 0)
	expires := time.Now().Add(3 * time.Second)
	var d struct {
		SendAnnouncement annPayload `json:"sendAnnouncement"`
	}
	s.MustData(svc, sendAnnouncementMutation, map[string]any{"in": map[string]any{"idempotencyKey": "short", "type": "news",
		"title": "Brief", "expiresAt": expires.Format(time.RFC3339Nano)}}, &d)
	alice.expect(t, "alice after the announcement", expires.Add(-3*time.Second), 2)
	carol.expect(t, "carol after the announcement", expires.Add(-3*time.Second), 1)
	if n := s.Unread(aliceTok); n != 2 {
		t.Fatalf("alice's unreadCount before the expiry: %d", n)
	}
	alice.expect(t, "alice at the expiry", expires, 1)
	carol.expect(t, "carol at the expiry", expires, 0)
	if n := s.Unread(aliceTok); n != 1 {
		t.Fatalf("alice's unreadCount after the expiry: %d", n)
	}
	if nodes, _, _, _ := inboxOf(t, s, aliceTok, "INCLUDE"); len(nodes) != 1 || nodes[0].Kind != "PERSONAL" {
		t.Fatalf("alice's inbox after the expiry: %+v", nodes)
	}
	var w struct {
		WithdrawAnnouncement struct {
			Status string `json:"status"`
		} `json:"withdrawAnnouncement"`
	}
	// Withdrawing an expired one answers it (expired stays its status or becomes withdrawn).
	s.MustData(svc, `mutation($id: ID!) { withdrawAnnouncement(id: $id) { status } }`, map[string]any{"id": d.SendAnnouncement.Announcement.ID}, &w)
	if st := w.WithdrawAnnouncement.Status; st != "expired" && st != "withdrawn" {
		t.Fatalf("status of the expired announcement: %q", st)
	}
}

// A badge subscriber who joins a cold instance after the announcement counts it from its
// first value; the user's own changes made on the other instance (a new notification, the
// announcement read, a markAllRead, markUnread of it) reach it composed with the
// announcement, exactly.
func TestAnnouncementOwnChangesFromTheOtherInstanceComposeExactly(t *testing.T) {
	t.Parallel()
	a := testgw.New(t)
	b := testgw.NewWith(t, testgw.Options{Peer: a, SharedBroker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := a.ServiceToken("acme", "svc")
	ann := sendAnnouncement(t, a, svc, "cold", "Cold")
	node := annGlobalID(ann.Announcement.ID)
	aliceTok := a.Token("acme", "alice")
	for _, count := range []bool{false, true} {
		sub := subscribeBadge(ctx, t, b, aliceTok, count, 1)
		start := time.Now()
		own := a.Seed(svc, "alice", 1)[0]
		sub.expect(t, "a notification sent on A", start, 2)
		start = time.Now()
		stateOp(t, a, aliceTok, "markRead", node)
		sub.expect(t, "the announcement read on A", start, 1)
		start = time.Now()
		a.MustData(aliceTok, `mutation { markAllRead { unreadCount } }`, nil, nil)
		sub.expect(t, "markAllRead on A", start, 0)
		start = time.Now()
		stateOp(t, a, aliceTok, "markUnread", node)
		sub.expect(t, "the announcement unread on A", start, 1)
		start = time.Now()
		stateOp(t, a, aliceTok, "archive", node)
		sub.expect(t, "the announcement archived on A", start, 0)
		// Back to where the next round starts: the announcement unread, no own unread.
		stateOp(t, a, aliceTok, "unarchive", node)
		sub.expect(t, "the announcement unarchived on A", time.Now(), 1)
		a.MustData(aliceTok, `mutation($ids: [ID!]!) { deleteNotifications(ids: $ids) { deletedIds } }`, map[string]any{"ids": []string{own}}, nil)
		if n := b.Unread(aliceTok); n != 1 {
			t.Fatalf("unreadCount on B: %d", n)
		}
		sub.c.Conn.CloseNow()
	}
}

// An instance without any live subscriber of the tenant still hears of the tenant's
// announcements through the broker: an announcement created on A, and its withdrawal,
// show in B's reads (badge and inbox) at once, not after the cache's 30 s backstop.
func TestAnnouncementReadsOnTheOtherInstanceAreFresh(t *testing.T) {
	t.Parallel()
	a := testgw.New(t)
	b := testgw.NewWith(t, testgw.Options{Peer: a, SharedBroker: true})
	svc := a.ServiceToken("acme", "svc")
	alice := a.Token("acme", "alice")
	if n := b.Unread(alice); n != 0 { // B caches acme's (empty) set
		t.Fatalf("unreadCount on B: %d", n)
	}
	start := time.Now()
	ann := sendAnnouncement(t, a, svc, "fresh", "Fresh")
	testgw.WaitFor(t, liveWithin, "B to count the announcement created on A", func() bool { return b.Unread(alice) == 1 })
	t.Logf("B counted it %v after the create began", time.Since(start).Round(time.Millisecond))
	if nodes, _, _, _ := inboxOf(t, b, alice, "EXCLUDE"); len(nodes) != 1 {
		t.Fatalf("B's inbox: %+v", nodes)
	}
	start = time.Now()
	withdraw(t, a, svc, ann.Announcement.ID)
	testgw.WaitFor(t, liveWithin, "B to drop the announcement withdrawn on A", func() bool { return b.Unread(alice) == 0 })
	t.Logf("B dropped it %v after the withdrawal began", time.Since(start).Round(time.Millisecond))
	if nodes, _, _, _ := inboxOf(t, b, alice, "EXCLUDE"); len(nodes) != 0 {
		t.Fatalf("B's inbox after the withdrawal: %+v", nodes)
	}
}

// A tab's inboxEvents stream hears of the tenant's announcements as of its own
// notifications: ADDED (the announcement's node id, unread, its kind, the badge counting
// it), the user's markRead of it as READ, its withdrawal as DELETED, each with the exact
// badge and within 2 s; another tenant's stream hears nothing of them.
func TestAnnouncementsReachInboxEvents(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := s.ServiceToken("acme", "svc")
	s.Seed(svc, "erin", 1)
	const q = `subscription { inboxEvents { kind notificationIds notification { id kind title read } badge { unread } } }`
	open := func(token string) *testgw.WSClient {
		c := s.WithT(t).DialWS(ctx, "graphql-transport-ws")
		c.Init(token)
		c.Subscribe("e", q)
		return c
	}
	erin, bob := open(s.Token("acme", "erin")), open(s.Token("globex", "bob"))
	// The streams are live once a change of erin's own arrives on hers.
	s.Seed(svc, "erin", 1)
	var e inboxEventData
	erin.NextData("e", &e)
	if e.InboxEvents.Kind != "ADDED" || e.InboxEvents.Badge.Unread != 2 {
		t.Fatalf("erin's own notification: %+v", e.InboxEvents)
	}
	next := func(what string, since time.Time) inboxEventData {
		t.Helper()
		var e inboxEventData
		erin.NextData("e", &e)
		if took := time.Since(since); took > liveWithin {
			t.Errorf("%s: the event came %v after the change, want within %v", what, took.Round(time.Millisecond), liveWithin)
		}
		return e
	}

	start := time.Now()
	ann := sendAnnouncement(t, s, svc, "events-1", "Scheduled maintenance")
	gid := annGlobalID(ann.Announcement.ID)
	e = next("the announcement", start)
	if ev := e.InboxEvents; ev.Kind != "ADDED" || !slices.Equal(ev.NotificationIDs, []string{gid}) || ev.Notification == nil ||
		ev.Notification.ID != gid || ev.Notification.Kind != "ANNOUNCEMENT" || ev.Notification.Read ||
		ev.Notification.Title != "Scheduled maintenance" || ev.Badge.Unread != 3 {
		t.Fatalf("the announcement's event: %+v (notification %+v)", ev, ev.Notification)
	}

	start = time.Now()
	if notFound, u := stateOp(t, s, s.Token("acme", "erin"), "markRead", gid); len(notFound) != 0 || u != 2 {
		t.Fatalf("erin's markRead: notFound %v unread %d", notFound, u)
	}
	if ev := next("erin's markRead", start).InboxEvents; ev.Kind != "READ" || !slices.Equal(ev.NotificationIDs, []string{gid}) || ev.Badge.Unread != 2 {
		t.Fatalf("markRead's event: %+v", ev)
	}

	start = time.Now()
	withdraw(t, s, svc, ann.Announcement.ID)
	if ev := next("the withdrawal", start).InboxEvents; ev.Kind != "DELETED" || !slices.Equal(ev.NotificationIDs, []string{gid}) || ev.Badge.Unread != 2 {
		t.Fatalf("the withdrawal's event: %+v", ev)
	}

	// globex's bob heard nothing of acme's announcement: his first event is his own.
	s.Seed(s.ServiceToken("globex", "svc"), "bob", 1)
	var be inboxEventData
	bob.NextData("e", &be)
	if ev := be.InboxEvents; ev.Kind != "ADDED" || ev.Notification == nil || ev.Notification.Kind != "PERSONAL" || ev.Badge.Unread != 1 {
		t.Fatalf("bob's first event: %+v", ev)
	}
}

// inboxEventData is the data of one `inboxEvents` frame, as the tests' subscriptions select
// it (fields not selected stay zero).
type inboxEventData struct {
	InboxEvents struct {
		Kind            string   `json:"kind"`
		NotificationIDs []string `json:"notificationIds"`
		Notification    *struct {
			ID    string `json:"id"`
			Kind  string `json:"kind"`
			Title string `json:"title"`
			Read  bool   `json:"read"`
		} `json:"notification"`
		Badge struct {
			Unread int `json:"unread"`
		} `json:"badge"`
	} `json:"inboxEvents"`
}
