package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
)

// eventTimeout bounds the wait for one subscription event.
const eventTimeout = 10 * time.Second

// wsMessage is a message of graphql-transport-ws or the legacy graphql-ws protocol.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// wsClient is a real WebSocket client of one GraphQL subprotocol.
type wsClient struct {
	t        *testing.T
	conn     *websocket.Conn
	protocol string
	msgs     chan wsMessage
	readErr  chan error // the error that ended the read loop
}

// dialWS opens a WebSocket to the server's /graphql with subprotocol and reads every
// message into a channel (answering graphql-transport-ws pings).
func (s *testServer) dialWS(ctx context.Context, protocol string) *wsClient {
	s.t.Helper()
	wsURL := "ws" + strings.TrimPrefix(s.url, "http")
	conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{protocol}})
	if err != nil {
		s.t.Fatalf("dial %s (%s): %v", wsURL, protocol, err)
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != protocol || conn.Subprotocol() != protocol {
		s.t.Fatalf("server chose subprotocol %q, want %q", conn.Subprotocol(), protocol)
	}
	c := &wsClient{t: s.t, conn: conn, protocol: protocol, msgs: make(chan wsMessage, 64), readErr: make(chan error, 1)}
	s.t.Cleanup(func() { _ = conn.CloseNow() })
	go func() {
		for {
			var m wsMessage
			if err := wsjson.Read(context.Background(), conn, &m); err != nil {
				c.readErr <- err
				close(c.msgs)
				return
			}
			if m.Type == "ping" {
				_ = wsjson.Write(context.Background(), conn, wsMessage{Type: "pong"})
				continue
			}
			c.msgs <- m
		}
	}()
	return c
}

func (c *wsClient) send(m any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := wsjson.Write(ctx, c.conn, m); err != nil {
		c.t.Fatalf("websocket write: %v", err)
	}
}

// next returns the next message that is not a keep-alive, failing on timeout or close.
func (c *wsClient) next() wsMessage {
	c.t.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.t.Fatalf("websocket closed: %v", <-c.readErr)
			}
			if m.Type == "ka" || m.Type == "pong" {
				continue
			}
			return m
		case <-timer.C:
			c.t.Fatalf("no websocket message within %v", eventTimeout)
		}
	}
}

// init sends connection_init with the bearer token and expects connection_ack.
func (c *wsClient) init(token string) {
	c.t.Helper()
	c.send(wsMessage{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + token + `"}`)})
	if m := c.next(); m.Type != "connection_ack" {
		c.t.Fatalf("after connection_init: got %+v, want connection_ack", m)
	}
}

// subscribe starts operation id with query.
func (c *wsClient) subscribe(id, query string) {
	c.t.Helper()
	typ := "subscribe"
	if c.protocol == "graphql-ws" {
		typ = "start"
	}
	payload, _ := json.Marshal(map[string]any{"query": query})
	c.send(wsMessage{ID: id, Type: typ, Payload: payload})
}

// nextData returns the data of the next result of operation id (next in
// graphql-transport-ws, data in graphql-ws), failing on errors or another message.
func (c *wsClient) nextData(id string, dst any) {
	c.t.Helper()
	want := "next"
	if c.protocol == "graphql-ws" {
		want = "data"
	}
	m := c.next()
	if m.Type != want || m.ID != id {
		c.t.Fatalf("got %s message %s (id %q), want %s of %q", m.Type, m.Payload, m.ID, want, id)
	}
	var p struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil || len(p.Errors) > 0 {
		c.t.Fatalf("result %s: %v %+v", m.Payload, err, p.Errors)
	}
	if err := json.Unmarshal(p.Data, dst); err != nil {
		c.t.Fatalf("decode %s: %v", p.Data, err)
	}
}

// nextCount returns the next unreadCount of operation id.
func (c *wsClient) nextCount(id string) int {
	c.t.Helper()
	var d struct {
		UnreadCount *int `json:"unreadCount"`
	}
	c.nextData(id, &d)
	if d.UnreadCount == nil {
		c.t.Fatalf("result of %s has no unreadCount", id)
	}
	return *d.UnreadCount
}

func TestSubscriptionUnreadCountOverWebSocket(t *testing.T) {
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := newTestServer(t)
			sender := s.token("t1", "svc", auth.ScopeSend)
			alice := s.token("t1", "alice")
			ids := s.seed(sender, "alice", 2)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			c := s.dialWS(ctx, protocol)
			c.init(alice)
			c.subscribe("1", `subscription { unreadCount }`)
			if got := c.nextCount("1"); got != 2 {
				t.Fatalf("first value = %d, want the current 2", got)
			}
			s.mark(alice, true, ids[0])
			if got := c.nextCount("1"); got != 1 {
				t.Fatalf("after markRead: %d, want 1", got)
			}
			s.seed(sender, "alice", 1)
			if got := c.nextCount("1"); got != 2 {
				t.Fatalf("after a send: %d, want 2", got)
			}
			s.mustData(alice, `mutation { markAllRead { unreadCount } }`, nil, nil)
			if got := c.nextCount("1"); got != 0 {
				t.Fatalf("after markAllRead: %d, want 0", got)
			}
			// Another user's change is not seen: the next value is alice's own.
			s.seed(sender, "bob", 1)
			s.mark(alice, false, ids[1])
			if got := c.nextCount("1"); got != 1 {
				t.Fatalf("after bob's send and alice's markUnread: %d, want 1", got)
			}

			stop := "complete"
			if protocol == "graphql-ws" {
				stop = "stop"
			}
			c.send(wsMessage{ID: "1", Type: stop})
			waitFor(t, eventTimeout, "the subscription to end", func() bool { return s.broker.Subscribers() == 0 })
			_ = c.conn.Close(websocket.StatusNormalClosure, "")
		})
	}
}

func TestSubscriptionNotificationAdded(t *testing.T) {
	s := newTestServer(t)
	sender := s.token("t1", "svc", auth.ScopeSend)
	alice := s.token("t1", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := s.dialWS(ctx, "graphql-transport-ws")
	c.init(alice)
	c.subscribe("added", `subscription { notificationAdded { id title read actor { name } } }`)
	// No first value: wait until the server registered the subscription.
	waitFor(t, eventTimeout, "the subscription to register", func() bool { return s.broker.Subscribers() == 1 })

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
	s.seed(sender, "bob", 1) // not alice's: never delivered to her
	first := s.send(sender, s.sendInput("first", "alice", "bob"))
	var a added
	c.nextData("added", &a)
	n := a.NotificationAdded
	if n.ID != first.NotificationIds[0] || n.Title != "first" || n.Read || n.Actor == nil || n.Actor.Name != "The Octocat" {
		t.Fatalf("notificationAdded = %+v, want %s \"first\" by The Octocat", n, first.NotificationIds[0])
	}
	// A replay notifies nobody; the next event is the next notification, once.
	in := s.sendInput("second", "alice")
	second := s.send(sender, in)
	if replay := s.send(sender, in); !replay.Duplicate {
		t.Fatalf("replay = %+v", replay)
	}
	third := s.send(sender, s.sendInput("third", "alice"))
	for _, want := range []string{second.NotificationIds[0], third.NotificationIds[0]} {
		c.nextData("added", &a)
		if a.NotificationAdded.ID != want {
			t.Fatalf("notificationAdded = %s (%s), want %s: a notification delivered twice or out of order",
				a.NotificationAdded.ID, a.NotificationAdded.Title, want)
		}
	}
	select {
	case m, ok := <-c.msgs:
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
	s := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.dialWS(ctx, "graphql-transport-ws")
	c.init(s.token("t1", "alice"))
	c.subscribe("badge", `subscription { unreadCount }`)
	if got := c.nextCount("badge"); got != 0 {
		t.Fatalf("first badge %d", got)
	}
	// Each event loads its actor (a BatchGetItem, after the dataloader's window): the
	// server renders far more slowly than the broker below delivers.
	c.subscribe("added", `subscription { notificationAdded { id actor { name } } }`)
	waitFor(t, eventTimeout, "the subscription to register", func() bool { return s.broker.Subscribers() == 2 })
	alice := inbox.Viewer{TenantID: "t1", UserID: "alice"}
	const burst = 20 * live.NotificationBuffer
	for i := range burst {
		s.broker.Publish(ctx, inbox.Change{Viewer: alice, Notification: &inbox.Notification{
			ID: fmt.Sprintf("01SLOW%020d", i), Type: "t", CreatedAt: time.Now(), ActorID: "nobody"}})
	}
	delivered := 0
	for {
		m := c.next()
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
	waitFor(t, eventTimeout, "the overflowed subscription to end", func() bool { return s.broker.Subscribers() == 1 })
	// The badge subscription on the same connection still works.
	sender := s.token("t1", "svc", auth.ScopeSend)
	s.send(sender, s.sendInput("after", "alice"))
	for {
		m := c.next()
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
	s := newTestServer(t)
	past, err := auth.NewVerifier(auth.Config{Secret: testSecret, Now: func() time.Time { return time.Now().Add(-3 * time.Hour) }})
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
				s := s.withT(t)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				c := s.dialWS(ctx, protocol)
				m := wsMessage{Type: "connection_init"}
				if payload != "" {
					m.Payload = json.RawMessage(payload)
				}
				c.send(m)
				// A subscribe right behind the init must not run either. The server may have
				// closed the connection already, so the write may fail.
				sub := `{"id":"1","type":"subscribe","payload":{"query":"subscription { unreadCount }"}}`
				if protocol == "graphql-ws" {
					sub = strings.Replace(sub, `"subscribe"`, `"start"`, 1)
				}
				_ = c.conn.Write(ctx, websocket.MessageText, []byte(sub))
				timer := time.NewTimer(eventTimeout)
				defer timer.Stop()
				for {
					select {
					case m, ok := <-c.msgs:
						if !ok {
							err := <-c.readErr
							if code := websocket.CloseStatus(err); code != 4403 {
								t.Fatalf("connection ended with %v (close code %d), want close code 4403", err, code)
							}
							if n := s.broker.Subscribers(); n != 0 {
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

// sseStream is a running SSE subscription: the data of each "next" event.
type sseStream struct {
	t      *testing.T
	events chan json.RawMessage
	done   chan error
}

// subscribeSSE posts a subscription with Accept: text/event-stream (gqlgen's SSE
// transport, the graphql-sse "distinct connections" mode) and reads its events.
func (s *testServer) subscribeSSE(ctx context.Context, token, query string) *sseStream {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("SSE request: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		s.t.Fatalf("SSE: HTTP %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	st := &sseStream{t: s.t, events: make(chan json.RawMessage, 16), done: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				event = ""
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
				if event == "complete" {
					st.done <- nil
					close(st.events)
					return
				}
			case strings.HasPrefix(line, "data:") && event == "next":
				st.events <- json.RawMessage(strings.TrimSpace(strings.TrimPrefix(line, "data:")))
			}
		}
		err := sc.Err()
		if err == nil {
			err = errors.New("stream ended without complete")
		}
		st.done <- err
		close(st.events)
	}()
	return st
}

func (st *sseStream) nextCount() int {
	st.t.Helper()
	select {
	case raw, ok := <-st.events:
		if !ok {
			st.t.Fatalf("SSE stream ended: %v", <-st.done)
		}
		var r struct {
			Data struct {
				UnreadCount *int `json:"unreadCount"`
			} `json:"data"`
			Errors []gqlError `json:"errors"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || len(r.Errors) > 0 || r.Data.UnreadCount == nil {
			st.t.Fatalf("SSE event %s: %v %+v", raw, err, r.Errors)
		}
		return *r.Data.UnreadCount
	case <-time.After(eventTimeout):
		st.t.Fatalf("no SSE event within %v", eventTimeout)
	}
	return 0
}

func TestSubscriptionUnreadCountOverSSE(t *testing.T) {
	s := newTestServer(t)
	sender := s.token("t1", "svc", auth.ScopeSend)
	alice := s.token("t1", "alice")
	ids := s.seed(sender, "alice", 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st := s.subscribeSSE(ctx, alice, `subscription { unreadCount }`)
	if got := st.nextCount(); got != 3 {
		t.Fatalf("first SSE value = %d, want 3", got)
	}
	s.mark(alice, true, ids[0], ids[1])
	if got := st.nextCount(); got != 1 {
		t.Fatalf("after markRead: %d, want 1", got)
	}
	s.seed(sender, "alice", 1)
	if got := st.nextCount(); got != 2 {
		t.Fatalf("after a send: %d, want 2", got)
	}
	cancel()
	waitFor(t, eventTimeout, "the SSE subscription to end", func() bool { return s.broker.Subscribers() == 0 })

	// Without a token the stream carries an UNAUTHENTICATED error and completes.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	body := strings.NewReader(`{"query":"subscription { unreadCount }"}`)
	req, _ := http.NewRequestWithContext(ctx2, http.MethodPost, s.url, body)
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
