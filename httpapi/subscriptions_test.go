package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/live"
)

func TestSubscriptionUnreadCountOverWebSocket(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := testgw.New(t)
			sender := s.Token("t1", "svc", auth.ScopeSend)
			alice := s.Token("t1", "alice")
			ids := s.Seed(sender, "alice", 2)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			c := s.DialWS(ctx, protocol)
			c.Init(alice)
			c.Subscribe("1", `subscription { unreadCount }`)
			if got := c.NextCount("1"); got != 2 {
				t.Fatalf("first value = %d, want the current 2", got)
			}
			s.Mark(alice, true, ids[0])
			if got := c.NextCount("1"); got != 1 {
				t.Fatalf("after markRead: %d, want 1", got)
			}
			s.Seed(sender, "alice", 1)
			if got := c.NextCount("1"); got != 2 {
				t.Fatalf("after a send: %d, want 2", got)
			}
			s.MustData(alice, `mutation { markAllRead { unreadCount } }`, nil, nil)
			if got := c.NextCount("1"); got != 0 {
				t.Fatalf("after markAllRead: %d, want 0", got)
			}
			// Another user's change is not seen: the next value is alice's own.
			s.Seed(sender, "bob", 1)
			s.Mark(alice, false, ids[1])
			if got := c.NextCount("1"); got != 1 {
				t.Fatalf("after bob's send and alice's markUnread: %d, want 1", got)
			}

			stop := "complete"
			if protocol == "graphql-ws" {
				stop = "stop"
			}
			c.Send(testgw.WSMessage{ID: "1", Type: stop})
			testgw.WaitFor(t, testgw.EventTimeout, "the subscription to end", func() bool { return s.Broker.Subscribers() == 0 })
			_ = c.Conn.Close(websocket.StatusNormalClosure, "")
		})
	}
}

func TestSubscriptionNotificationAdded(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Init(alice)
	c.Subscribe("added", `subscription { notificationAdded { id title read actor { name } } }`)
	// No first value: wait until the server registered the subscription.
	testgw.WaitFor(t, testgw.EventTimeout, "the subscription to register", func() bool { return s.Broker.Subscribers() == 1 })

	type added struct {
		NotificationAdded struct {
			ID    string `json:"id"`
			Title string `json:"title"`
			Read  bool   `json:"read"`
			Actor *struct {
				Name string `json:"name"`
			} `json:"actor"`
		} `json:"notificationAdded"`
	}
	s.Seed(sender, "bob", 1) // not alice's: never delivered to her
	first := s.Send(sender, s.SendInput("first", "alice", "bob"))
	var a added
	c.NextData("added", &a)
	n := a.NotificationAdded
	if n.ID != first.NotificationIds[0] || n.Title != "first" || n.Read || n.Actor == nil || n.Actor.Name != "The Octocat" {
		t.Fatalf("notificationAdded = %+v, want %s \"first\" by The Octocat", n, first.NotificationIds[0])
	}
	// A replay notifies nobody; the next event is the next notification, once.
	in := s.SendInput("second", "alice")
	second := s.Send(sender, in)
	if replay := s.Send(sender, in); !replay.Duplicate {
		t.Fatalf("replay = %+v", replay)
	}
	third := s.Send(sender, s.SendInput("third", "alice"))
	for _, want := range []string{second.NotificationIds[0], third.NotificationIds[0]} {
		c.NextData("added", &a)
		if a.NotificationAdded.ID != want {
			t.Fatalf("notificationAdded = %s (%s), want %s: a notification delivered twice or out of order",
				a.NotificationAdded.ID, a.NotificationAdded.Title, want)
		}
	}
	select {
	case m, ok := <-c.Msgs:
		if ok && m.Type != "ka" {
			t.Fatalf("unexpected message %s %s", m.Type, m.Payload)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// TestNotificationAddedSlowConsumer overflows one notificationAdded subscriber's buffer:
// that subscription ends with a SLOW_CONSUMER error, and the connection and its other
// subscription go on.
func TestNotificationAddedSlowConsumer(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Init(s.Token("t1", "alice"))
	c.Subscribe("badge", `subscription { unreadCount }`)
	if got := c.NextCount("badge"); got != 0 {
		t.Fatalf("first badge %d", got)
	}
	// Each event loads its actor (a BatchGetItem, after the dataloader's window): the
	// server renders far more slowly than the broker below delivers.
	c.Subscribe("added", `subscription { notificationAdded { id actor { name } } }`)
	testgw.WaitFor(t, testgw.EventTimeout, "the subscription to register", func() bool { return s.Broker.Subscribers() == 2 })
	alice := inbox.Viewer{TenantID: "t1", UserID: "alice"}
	const burst = 20 * live.NotificationBuffer
	for i := range burst {
		s.Broker.Publish(ctx, inbox.Change{Viewer: alice, Notification: &inbox.Notification{
			ID: fmt.Sprintf("01SLOW%020d", i), Type: "t", CreatedAt: time.Now(), ActorID: "nobody"}})
	}
	delivered := 0
	for {
		m := c.Next()
		if m.Type == "next" && m.ID == "added" {
			delivered++
			continue
		}
		if m.Type == "next" && m.ID == "badge" {
			continue // the notifications' badge hints re-read the (unchanged) count
		}
		if m.Type != "error" || m.ID != "added" || !strings.Contains(string(m.Payload), `"SLOW_CONSUMER"`) {
			t.Fatalf("got %s (id %q) %s, want a SLOW_CONSUMER error for added", m.Type, m.ID, m.Payload)
		}
		break
	}
	if delivered >= burst {
		t.Fatalf("all %d notifications delivered: no overflow", delivered)
	}
	t.Logf("%d of %d notifications delivered before the overflow", delivered, burst)
	testgw.WaitFor(t, testgw.EventTimeout, "the overflowed subscription to end", func() bool { return s.Broker.Subscribers() == 1 })
	// The badge subscription on the same connection still works.
	sender := s.Token("t1", "svc", auth.ScopeSend)
	s.Send(sender, s.SendInput("after", "alice"))
	for {
		m := c.Next()
		if m.Type != "next" || m.ID != "badge" {
			t.Fatalf("got %s (id %q) %s, want the badge", m.Type, m.ID, m.Payload)
		}
		var p struct{ Data struct{ UnreadCount int } }
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Data.UnreadCount == 1 {
			break
		}
	}
}

func TestWebSocketInitWithoutValidTokenIsRefused(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	past, err := auth.NewVerifier(auth.Config{Secret: testgw.Secret, Clock: clockwork.NewFakeClockAt(time.Now().Add(-3 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := past.Sign(auth.Claims{TenantID: "t1", UserID: "alice"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		for name, payload := range map[string]string{
			"no payload":    ``,
			"empty":         `{}`,
			"garbage token": `{"Authorization":"Bearer not.a.jwt"}`,
			"expired token": `{"Authorization":"Bearer ` + expired + `"}`,
			"wrong scheme":  `{"Authorization":"Basic YWxpY2U6c2VjcmV0"}`,
		} {
			t.Run(protocol+"/"+strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
				s := s.WithT(t)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				c := s.DialWS(ctx, protocol)
				m := testgw.WSMessage{Type: "connection_init"}
				if payload != "" {
					m.Payload = json.RawMessage(payload)
				}
				c.Send(m)
				// A subscribe right behind the init must not run either. The server may have
				// closed the connection already, so the write may fail.
				sub := `{"id":"1","type":"subscribe","payload":{"query":"subscription { unreadCount }"}}`
				if protocol == "graphql-ws" {
					sub = strings.Replace(sub, `"subscribe"`, `"start"`, 1)
				}
				_ = c.Conn.Write(ctx, websocket.MessageText, []byte(sub))
				timer := time.NewTimer(testgw.EventTimeout)
				defer timer.Stop()
				for {
					select {
					case m, ok := <-c.Msgs:
						if !ok {
							err := <-c.ReadErr
							if code := websocket.CloseStatus(err); code != 4403 {
								t.Fatalf("connection ended with %v (close code %d), want close code 4403", err, code)
							}
							if n := s.Broker.Subscribers(); n != 0 {
								t.Fatalf("%d subscriptions registered", n)
							}
							return
						}
						switch m.Type {
						case "connection_error", "ka":
							// graphql-ws may explain before closing; nothing else may come.
						default:
							t.Fatalf("unauthenticated connection got %s %s", m.Type, m.Payload)
						}
					case <-timer.C:
						t.Fatal("connection not closed")
					}
				}
			})
		}
	}
}

func TestSubscriptionUnreadCountOverSSE(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	ids := s.Seed(sender, "alice", 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st := s.SubscribeSSE(ctx, alice, `subscription { unreadCount }`)
	if got := st.NextCount(); got != 3 {
		t.Fatalf("first SSE value = %d, want 3", got)
	}
	s.Mark(alice, true, ids[0], ids[1])
	if got := st.NextCount(); got != 1 {
		t.Fatalf("after markRead: %d, want 1", got)
	}
	s.Seed(sender, "alice", 1)
	if got := st.NextCount(); got != 2 {
		t.Fatalf("after a send: %d, want 2", got)
	}
	cancel()
	testgw.WaitFor(t, testgw.EventTimeout, "the SSE subscription to end", func() bool { return s.Broker.Subscribers() == 0 })

	// Without a token the stream carries an UNAUTHENTICATED error and completes.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	body := strings.NewReader(`{"query":"subscription { unreadCount }"}`)
	req, _ := http.NewRequestWithContext(ctx2, http.MethodPost, s.URL, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all bytes.Buffer
	if _, err := all.ReadFrom(resp.Body); err != nil {
		t.Fatalf("read unauthenticated SSE: %v", err)
	}
	if !strings.Contains(all.String(), "UNAUTHENTICATED") || strings.Contains(all.String(), `"unreadCount":`) {
		t.Fatalf("unauthenticated SSE stream:\n%s", all.String())
	}
}
