package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/live/redistest"
	"github.com/inboxgw/gateway/store"
)

// relayLease is the relays' lease in the multi-instance test: a killed relay's standby
// takes over once it has expired. 4 s: with 2 s, renewals and the standby's attempts (a
// third of the lease each) timed out on a loaded 2-core machine running other packages'
// engines, and the standby had not acquired after 11 s.
const relayLease = 4 * time.Second

// liveState follows a connection's "badge" (unreadCount) and "added"
// (notificationAdded) operations.
type liveState struct {
	t     *testing.T
	c     *testgw.WSClient
	count int
	added map[string]int // notification id -> deliveries
}

// waitFor reads messages until the badge is count and every id in ids was delivered,
// failing on an error message, a notification delivered twice, or the timeout.
func (s *liveState) waitFor(what string, count int, ids ...string) {
	s.t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	done := func() bool {
		if s.count != count {
			return false
		}
		for _, id := range ids {
			if s.added[id] == 0 {
				return false
			}
		}
		return true
	}
	for !done() {
		select {
		case m, ok := <-s.c.Msgs:
			if !ok {
				s.t.Fatalf("%s: connection ended: %v", what, <-s.c.ReadErr)
			}
			if m.Type != "next" {
				s.t.Fatalf("%s: unexpected %s message (id %q): %s", what, m.Type, m.ID, m.Payload)
			}
			var p struct {
				Data struct {
					UnreadCount       *int `json:"unreadCount"`
					NotificationAdded *struct {
						ID string `json:"id"`
					} `json:"notificationAdded"`
				} `json:"data"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				s.t.Fatalf("%s: %v in %s", what, err, m.Payload)
			}
			switch {
			case m.ID == "badge" && p.Data.UnreadCount != nil:
				s.count = *p.Data.UnreadCount
			case m.ID == "added" && p.Data.NotificationAdded != nil:
				id := p.Data.NotificationAdded.ID
				s.added[id]++
				if s.added[id] > 1 {
					s.t.Fatalf("%s: notification %s delivered twice", what, id)
				}
			default:
				s.t.Fatalf("%s: unexpected result of %q: %s", what, m.ID, m.Payload)
			}
		case <-deadline.C:
			s.t.Fatalf("%s: timed out with badge %d (want %d), notifications %v (want %v)", what, s.count, count, s.added, ids)
		}
	}
}

// outsideSend writes a notification for user of tenant and counts it in META the way a
// service writing the table directly would: plain SDK calls (store.OutsideSendInput), no
// gateway. It returns the notification's GraphQL id.
func outsideSend(t *testing.T, db *dynamodb.Client, table, tenant, user string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.RequestTimeout)
	defer cancel()
	id := ulid.Make().String()
	in, err := store.OutsideSendInput(table, inbox.Viewer{TenantID: tenant, UserID: user},
		inbox.Notification{ID: id, Type: "outside.write", Title: "from a service", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.TransactWriteItems(ctx, in); err != nil {
		t.Fatalf("outside TransactWriteItems: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString([]byte("Notification:" + id))
}

// TestTwoInstancesAndRelayOverRedis is the scale-out proof: two gateway processes and
// a stream relay on one table with INBOX_BROKER=redis. A WebSocket subscriber on instance
// A sees changes made through instance B and changes written straight into the table
// (through the relay); the relay is killed (SIGKILL) and its standby takes over within
// the lease, losing nothing.
func TestTwoInstancesAndRelayOverRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateway and relay processes")
	}
	rds := redistest.Server(t)
	table := dynlocaltest.TableName(t)
	db := dynlocaltest.Client(t)
	dynlocaltest.KeepStreams(t) // the relay reads the stream
	env := gwEnv(t, table, "INBOX_BROKER=redis", "INBOX_REDIS_URL="+rds.URL(),
		"INBOX_RELAY_LEASE="+relayLease.String())

	_, a := startGatewayProc(t, "gateway-A", env)
	_, b := startGatewayProc(t, "gateway-B", env)
	relay1 := startProc(t, "relay-1", env, "relay")
	relay1.waitLog("relay: reading stream", time.Time{}, procTimeout)
	relay2 := startProc(t, "relay-2", env, "relay")
	relay2.waitLog("relay: lease held by another relay; standing by", time.Time{}, procTimeout)

	sender := b.Token("t1", "svc", auth.ScopeSend)
	alice := a.Token("t1", "alice")
	ids := b.Seed(sender, "alice", 3)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := a.DialWS(ctx, "graphql-transport-ws")
	c.Init(alice)
	c.Subscribe("added", `subscription { notificationAdded { id } }`)
	c.Subscribe("badge", `subscription { unreadCount }`)
	st := &liveState{t: t, c: c, count: -1, added: map[string]int{}}
	st.waitFor("first value", 3)

	// A markRead sent to instance B reaches the subscriber on instance A.
	if n, _ := b.Mark(alice, true, ids[0]); n != 2 {
		t.Fatalf("markRead on B: unreadCount %d, want 2", n)
	}
	st.waitFor("markRead on B", 2)
	// A send through B: badge and notificationAdded, once (B and the relay both publish it).
	g1 := b.Seed(sender, "alice", 1)[0]
	st.waitFor("send on B", 3, g1)

	// A service writes the table directly: only the relay can tell the gateways.
	o1 := outsideSend(t, db, table, "t1", "alice")
	st.waitFor("outside write through relay-1", 4, o1)

	// The relay dies without releasing its lease; changes keep coming meanwhile.
	killed := time.Now()
	relay1.kill(syscall.SIGKILL)
	o2 := outsideSend(t, db, table, "t1", "alice")
	o3 := outsideSend(t, db, table, "t1", "alice")
	// The standby takes over (a generous deadline: how soon after the lease's end is
	// relay.TestRelayTakeoverLosesNothing's to prove, on an injected clock; a wall-clock
	// bound here failed whenever the machine was busy).
	took := relay2.waitLog("relay: lease acquired", killed, procTimeout).at.Sub(killed)
	t.Logf("relay-2 took over %v after relay-1 was killed (lease %v)", took.Round(time.Millisecond), relayLease)
	st.waitFor("outside writes while no relay ran", 6, o2, o3)
	o4 := outsideSend(t, db, table, "t1", "alice")
	st.waitFor("outside write through relay-2", 7, o4)
	if n, _ := b.Mark(alice, true, ids[1], o2); n != 5 {
		t.Fatalf("markRead on B after takeover: unreadCount %d, want 5", n)
	}
	st.waitFor("markRead on B after takeover", 5)

	// Nothing lost, nothing doubled: the badge is the table's, every notification came once.
	if got := a.Unread(alice); got != st.count {
		t.Fatalf("subscriber shows %d, instance A reads %d", st.count, got)
	}
	if got := b.Unread(alice); got != 5 {
		t.Fatalf("instance B reads %d, want 5", got)
	}
	for _, id := range []string{g1, o1, o2, o3, o4} {
		if st.added[id] != 1 {
			t.Fatalf("notification %s delivered %d times, want once (all: %v)", id, st.added[id], st.added)
		}
	}
	select {
	case m, ok := <-c.Msgs:
		if ok {
			t.Fatalf("unexpected late message %s %s: %s", m.Type, m.ID, m.Payload)
		}
	case <-time.After(500 * time.Millisecond):
	}
}
