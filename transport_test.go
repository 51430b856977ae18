package main

// Transport behaviour as the protocols specify: graphql-transport-ws close codes
// (4401, 4408, 4409, 4429, 4403 at token expiry), ping/pong, the legacy graphql-ws
// keep-alive, SSE heartbeats, and the Origin allow-list of WebSocket upgrades.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/store"
)

// newTestServerConfig is newTestServer with configuration adjusted by set (timeouts,
// keep-alive, allowed origins).
func newTestServerConfig(t *testing.T, set func(*Config)) *testServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	broker := live.NewLocal()
	lw := &testLogWriter{t: t}
	log := slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st := store.New(dynlocaltest.Client(t), dynlocaltest.TableName(t), store.WithPublisher(broker), store.WithLogger(log))
	t.Cleanup(func() {
		st.Close()
		lw.mu.Lock()
		lw.done = true
		lw.mu.Unlock()
	})
	if err := st.CreateTable(ctx); err != nil {
		t.Fatalf("create table: %v", err)
	}
	v, err := auth.NewVerifier(auth.Config{Secret: testSecret, Leeway: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{ComplexityLimit: 5000}
	if set != nil {
		set(&cfg)
	}
	srv := httptest.NewServer(newHandler(cfg, log, v, st, broker, "", nil))
	t.Cleanup(srv.Close)
	return &testServer{t: t, srv: srv, url: srv.URL + "/graphql", verifier: v, store: st, broker: broker, seq: new(atomic.Int64)}
}

// expectClose waits for the server to close c with code (and, when reason is not empty,
// that reason); messages other than keep-alives and those allowed fail the test.
func (c *wsClient) expectClose(code websocket.StatusCode, reason string, within time.Duration, allowed ...string) []wsMessage {
	c.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var got []wsMessage
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				err := <-c.readErr
				var ce websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != code || (reason != "" && ce.Reason != reason) {
					c.t.Fatalf("connection ended with %v, want close %d %q", err, code, reason)
				}
				return got
			}
			if m.Type == "ka" {
				continue
			}
			ok = false
			for _, a := range allowed {
				ok = ok || a == m.Type
			}
			if !ok {
				c.t.Fatalf("before close %d: unexpected %s message (id %q) %s", code, m.Type, m.ID, m.Payload)
			}
			got = append(got, m)
		case <-timer.C:
			c.t.Fatalf("connection not closed with %d within %v", code, within)
		}
	}
}

func TestWebSocketPingPong(t *testing.T) {
	s := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.dialWS(ctx, "graphql-transport-ws")
	c.init(s.token("t1", "alice"))
	c.send(map[string]any{"type": "ping", "payload": map[string]any{"n": 1}})
	if m := c.nextRaw(); m.Type != "pong" || string(m.Payload) != `{"n":1}` {
		t.Fatalf("after ping: %s %s, want pong with the ping's payload", m.Type, m.Payload)
	}
}

// nextRaw returns the next message, pongs included.
func (c *wsClient) nextRaw() wsMessage {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatalf("websocket closed: %v", <-c.readErr)
		}
		return m
	case <-time.After(eventTimeout):
		c.t.Fatalf("no websocket message within %v", eventTimeout)
	}
	return wsMessage{}
}

func TestWebSocketInitTimeoutCloses4408(t *testing.T) {
	s := newTestServerConfig(t, func(c *Config) { c.WSInitTimeout = 300 * time.Millisecond })
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.withT(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			c := s.dialWS(ctx, protocol)
			c.expectClose(4408, "Connection initialisation timeout", 10*time.Second)
			if d := time.Since(start); d < 250*time.Millisecond {
				t.Fatalf("closed after %v, before the init timeout", d)
			}
		})
	}
	// A connection that sent connection_init in time stays open past the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.dialWS(ctx, "graphql-transport-ws")
	c.init(s.token("t1", "alice"))
	time.Sleep(600 * time.Millisecond)
	c.send(map[string]any{"type": "ping"})
	if m := c.nextRaw(); m.Type != "pong" {
		t.Fatalf("after the init timeout: %s, want pong", m.Type)
	}
}

func TestWebSocketSecondInitCloses4429(t *testing.T) {
	s := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.dialWS(ctx, "graphql-transport-ws")
	alice := s.token("t1", "alice")
	c.init(alice)
	c.send(wsMessage{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + alice + `"}`)})
	c.expectClose(4429, "Too many initialisation requests", eventTimeout)
}

func TestWebSocketSubscribeBeforeInitCloses4401(t *testing.T) {
	s := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.dialWS(ctx, "graphql-transport-ws")
	c.subscribe("1", `subscription { unreadCount }`)
	c.expectClose(4401, "Unauthorized", eventTimeout)
	if n := s.broker.Subscribers(); n != 0 {
		t.Fatalf("%d subscriptions registered", n)
	}
}

func TestWebSocketDuplicateIDCloses4409(t *testing.T) {
	s := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := s.token("t1", "alice")
	c := s.dialWS(ctx, "graphql-transport-ws")
	c.init(alice)

	// An id the server completed (a query) or the client completed may be used again.
	for range 2 {
		c.subscribe("q", `{ viewer { unreadCount } }`)
		var d struct{ Viewer struct{ UnreadCount int } }
		c.nextData("q", &d)
		if m := c.next(); m.Type != "complete" || m.ID != "q" {
			t.Fatalf("after the query's result: %s %q, want complete of q", m.Type, m.ID)
		}
	}
	c.subscribe("1", `subscription { unreadCount }`)
	if got := c.nextCount("1"); got != 0 {
		t.Fatalf("first value %d, want 0", got)
	}
	c.send(wsMessage{ID: "1", Type: "complete"})
	waitFor(t, eventTimeout, "the subscription to end", func() bool { return s.broker.Subscribers() == 0 })
	c.subscribe("1", `subscription { unreadCount }`)
	if got := c.nextCount("1"); got != 0 {
		t.Fatalf("first value of the reused id: %d, want 0", got)
	}

	// A second subscribe with a running operation's id ends the connection.
	c.subscribe("1", `subscription { unreadCount }`)
	c.expectClose(4409, "Subscriber for this id already exists", eventTimeout)
	waitFor(t, eventTimeout, "the subscriptions to end", func() bool { return s.broker.Subscribers() == 0 })
}

func TestWebSocketLegacyKeepAlive(t *testing.T) {
	s := newTestServerConfig(t, func(c *Config) { c.KeepAlive = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.dialWS(ctx, "graphql-ws")
	c.init(s.token("t1", "alice"))
	deadline := time.After(eventTimeout)
	for kas := 0; kas < 3; {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				t.Fatalf("connection ended: %v", <-c.readErr)
			}
			if m.Type != "ka" {
				t.Fatalf("unexpected %s %s", m.Type, m.Payload)
			}
			kas++
		case <-deadline:
			t.Fatalf("fewer than 3 keep-alive messages within %v", eventTimeout)
		}
	}
}

func TestSSEHeartbeat(t *testing.T) {
	s := newTestServerConfig(t, func(c *Config) { c.KeepAlive = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"query": `subscription { unreadCount }`})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token("t1", "alice"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	pings, events := 0, 0
	for pings < 3 && sc.Scan() {
		switch line := sc.Text(); {
		case line == ": ping":
			pings++
		case strings.HasPrefix(line, "event: next"):
			events++
		}
	}
	if pings < 3 || events != 1 {
		t.Fatalf("read %d pings and %d events (%v), want 3 pings after the first value", pings, events, sc.Err())
	}
	cancel()
	waitFor(t, eventTimeout, "the SSE subscription to end", func() bool { return s.broker.Subscribers() == 0 })
}

func TestWebSocketOriginAllowList(t *testing.T) {
	dial := func(t *testing.T, s *testServer, origin string) (*websocket.Conn, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		h := http.Header{}
		h.Set("Origin", origin)
		conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http"),
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: h})
		if err != nil {
			if resp == nil {
				t.Fatalf("dial with Origin %s: %v", origin, err)
			}
			return nil, resp.StatusCode
		}
		t.Cleanup(func() { _ = conn.CloseNow() })
		return conn, resp.StatusCode
	}
	t.Run("default same origin only", func(t *testing.T) {
		s := newTestServer(t)
		if _, code := dial(t, s, "https://evil.example"); code != http.StatusForbidden {
			t.Fatalf("foreign Origin: HTTP %d, want 403", code)
		}
		if _, code := dial(t, s, s.srv.URL); code != http.StatusSwitchingProtocols {
			t.Fatalf("same Origin: HTTP %d, want 101", code)
		}
	})
	t.Run("INBOX_ALLOWED_ORIGINS", func(t *testing.T) {
		t.Setenv("INBOX_ALLOWED_ORIGINS", "https://app.example.com,*.trusted.example")
		env, err := loadConfig()
		if err != nil {
			t.Fatal(err)
		}
		s := newTestServerConfig(t, func(c *Config) { c.AllowedOrigins = env.AllowedOrigins })
		for _, o := range []string{"https://app.example.com", "https://x.trusted.example", s.srv.URL} {
			if _, code := dial(t, s, o); code != http.StatusSwitchingProtocols {
				t.Fatalf("allowed Origin %s: HTTP %d, want 101", o, code)
			}
		}
		for _, o := range []string{"http://app.example.com", "https://evil.example", "https://trusted.example.evil"} {
			if _, code := dial(t, s, o); code != http.StatusForbidden {
				t.Fatalf("foreign Origin %s: HTTP %d, want 403", o, code)
			}
		}
	})
}

func TestWebSocketTokenExpiryEndsConnection(t *testing.T) {
	s := newTestServer(t)
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.withT(t)
			// Issued by a clock 30s behind, so its exp is 28s ago: the server's 30s leeway
			// still accepts it, for 2 more seconds.
			behind, err := auth.NewVerifier(auth.Config{Secret: testSecret, Now: func() time.Time { return time.Now().Add(-30 * time.Second) }})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := behind.Sign(auth.Claims{TenantID: "t1", UserID: "alice"}, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			claims, err := s.verifier.Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := s.dialWS(ctx, protocol)
			c.init(tok)
			c.subscribe("1", `subscription { unreadCount }`)
			if got := c.nextCount("1"); got != 0 {
				t.Fatalf("first value %d", got)
			}
			msgs := c.expectClose(4403, "token expired", 10*time.Second, "error", "connection_error")
			if early := time.Until(claims.ValidUntil); early > 100*time.Millisecond {
				t.Fatalf("closed %v before the token's expiry (exp plus the leeway)", early)
			}
			var sawError bool
			for _, m := range msgs {
				if m.Type == "error" && m.ID == "1" && strings.Contains(string(m.Payload), `"token expired"`) &&
					strings.Contains(string(m.Payload), `"UNAUTHENTICATED"`) {
					sawError = true
				}
			}
			if !sawError {
				t.Fatalf("no UNAUTHENTICATED \"token expired\" error for the running subscription; got %+v", msgs)
			}
			waitFor(t, eventTimeout, "the subscription to end", func() bool { return s.broker.Subscribers() == 0 })
		})
	}
}

// TestWebSocketNothingAfterComplete reuses an id right after completing it, many times. A
// result already on its way when the complete arrived may still come, but never an error
// from the cancelled operation (its first read, cancelled, used to answer with an INTERNAL
// error, under the reused id), and on graphql-ws nothing after the server's complete.
func TestWebSocketNothingAfterComplete(t *testing.T) {
	s := newTestServer(t)
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.withT(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := s.dialWS(ctx, protocol)
			c.init(s.token("t1", "alice"))
			stop := "complete"
			if protocol == "graphql-ws" {
				stop = "stop"
			}
			clean := func(m wsMessage) {
				t.Helper()
				if m.Type == "error" || strings.Contains(string(m.Payload), `"errors"`) {
					t.Fatalf("%s (id %q) %s: an error from a completed operation", m.Type, m.ID, m.Payload)
				}
			}
			for range 30 {
				c.subscribe("1", `subscription { unreadCount }`)
				c.send(wsMessage{ID: "1", Type: stop})
				if protocol == "graphql-ws" {
					// The legacy server answers a stop with complete (a result sent before
					// the stop arrived may precede it), and nothing follows it.
					for m := c.next(); m.Type != "complete"; m = c.next() {
						clean(m)
					}
				}
			}
			c.subscribe("final", `subscription { unreadCount }`)
			for m := c.next(); m.ID != "final"; m = c.next() {
				clean(m) // an in-flight result of id 1, sent before its complete arrived
			}
			if protocol == "graphql-ws" {
				// A legacy start on a running id replaces it: only the new one answers.
				c.subscribe("final", `subscription { unreadCount }`)
				if got := c.nextCount("final"); got != 0 {
					t.Fatalf("first value of the replacing start %d, want 0", got)
				}
			}
			select {
			case m, ok := <-c.msgs:
				if ok && m.Type != "ka" {
					t.Fatalf("unexpected %s (id %q) %s", m.Type, m.ID, m.Payload)
				}
			case <-time.After(300 * time.Millisecond):
			}
		})
	}
}

// TestWebSocketCancelledMutationStillPublishes sends markRead and markUnread over a
// WebSocket and completes each at once: a mutation that started commits and publishes, so
// the live badge of another connection always ends on the store's count.
func TestWebSocketCancelledMutationStillPublishes(t *testing.T) {
	s := newTestServer(t)
	sender := s.token("t1", "svc", auth.ScopeSend)
	erin := s.token("t1", "erin")
	ids := s.seed(sender, "erin", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sub := s.dialWS(ctx, "graphql-transport-ws")
	sub.init(erin)
	sub.subscribe("badge", `subscription { unreadCount }`)
	shown := sub.nextCount("badge")
	mut := s.dialWS(ctx, "graphql-transport-ws")
	mut.init(erin)
	for round := range 20 {
		for i, id := range ids {
			op := "markRead"
			if (round+i)%2 == 1 {
				op = "markUnread"
			}
			opID := fmt.Sprintf("m%d-%d", round, i)
			mut.subscribe(opID, `mutation { `+op+`(ids: ["`+id+`"]) { unreadCount } }`)
			time.Sleep(time.Duration(round%4) * time.Millisecond)
			mut.send(wsMessage{ID: opID, Type: "complete"})
		}
		// Settle: the store's count, then the badge catching up with it.
		time.Sleep(150 * time.Millisecond)
		wantB, err := s.store.Badge(ctx, inbox.Viewer{TenantID: "t1", UserID: "erin"})
		want := wantB.Unread
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.After(eventTimeout)
		for shown != want {
			select {
			case m, ok := <-sub.msgs:
				if !ok {
					t.Fatalf("subscriber closed: %v", <-sub.readErr)
				}
				var p struct{ Data struct{ UnreadCount int } }
				if m.Type == "next" && json.Unmarshal(m.Payload, &p) == nil {
					shown = p.Data.UnreadCount
				}
			case <-deadline:
				t.Fatalf("round %d: the badge shows %d, the store says %d", round, shown, want)
			}
		}
	}
	// Drain the mutations' own answers: the connection stayed healthy.
	mut.send(map[string]any{"type": "ping"})
	for m := mut.nextRaw(); m.Type != "pong"; m = mut.nextRaw() {
	}
}

func TestWebSocketConnectionLimitsAndChecks(t *testing.T) {
	s := newTestServerConfig(t, func(c *Config) { c.KeepAlive = 200 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := s.token("t1", "alice")

	t.Run("operations per connection", func(t *testing.T) {
		c := s.withT(t).dialWS(ctx, "graphql-transport-ws")
		c.init(alice)
		for i := range httpapi.MaxOperationsPerConnection {
			c.subscribe(fmt.Sprint(i), `subscription { unreadCount }`)
		}
		for range httpapi.MaxOperationsPerConnection {
			if m := c.next(); m.Type != "next" {
				t.Fatalf("got %s %s, want next", m.Type, m.Payload)
			}
		}
		c.subscribe("one-too-many", `subscription { unreadCount }`)
		if m := c.next(); m.Type != "error" || m.ID != "one-too-many" || !strings.Contains(string(m.Payload), `"BAD_REQUEST"`) {
			t.Fatalf("got %s (id %q) %s, want a BAD_REQUEST error", m.Type, m.ID, m.Payload)
		}
		c.send(wsMessage{ID: "0", Type: "complete"})
		c.subscribe("room-again", `subscription { unreadCount }`)
		if got := c.nextCount("room-again"); got != 0 {
			t.Fatalf("after one ended: %d", got)
		}
	})
	t.Run("empty id", func(t *testing.T) {
		c := s.withT(t).dialWS(ctx, "graphql-transport-ws")
		c.init(alice)
		c.subscribe("", `subscription { unreadCount }`)
		c.expectClose(4400, "Invalid message received", eventTimeout)
		c = s.withT(t).dialWS(ctx, "graphql-transport-ws")
		c.init(alice)
		c.send(wsMessage{Type: "complete"})
		c.expectClose(4400, "Invalid message received", eventTimeout)
	})
	t.Run("legacy second init", func(t *testing.T) {
		c := s.withT(t).dialWS(ctx, "graphql-ws")
		c.init(alice)
		c.send(wsMessage{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + s.token("t1", "bob") + `"}`)})
		if m := c.next(); m.Type != "connection_error" {
			t.Fatalf("second init: %s %s, want connection_error", m.Type, m.Payload)
		}
		c.subscribe("1", `subscription { unreadCount }`)
		if got := c.nextCount("1"); got != 0 {
			t.Fatalf("first value %d", got)
		}
	})
	t.Run("graphql-transport-ws ping keep-alive", func(t *testing.T) {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http"), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{"Authorization":"Bearer `+alice+`"}}`))
		pings := 0
		for pings < 2 {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			_, b, err := conn.Read(rctx)
			rcancel()
			if err != nil {
				t.Fatalf("after %d pings: %v", pings, err)
			}
			if strings.Contains(string(b), `"ping"`) {
				pings++
			}
		}
	})
	t.Run("h2c upgrade is an ordinary request", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"query":"{ viewer { unreadCount } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Connection", "Upgrade, HTTP2-Settings")
		req.Header.Set("Upgrade", "h2c")
		req.Header.Set("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP %d, want 200", resp.StatusCode)
		}
	})
}

// TestWebSocketMessagesPipelinedAndLarge sends connection_init in the same write as the
// upgrade request (the bytes reach the server before it answered the handshake, so they
// sit in net/http's reader when the connection is taken over), then a subscribe far larger
// than the connection's read buffer.
func TestWebSocketMessagesPipelinedAndLarge(t *testing.T) {
	s := newTestServer(t)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	frame := func(payload string) []byte {
		b := []byte{0x81} // FIN, text
		switch n := len(payload); {
		case n < 126:
			b = append(b, 0x80|byte(n))
		case n < 1<<16:
			b = append(b, 0x80|126, byte(n>>8), byte(n))
		default:
			b = append(b, 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		mask := []byte{1, 2, 3, 4}
		b = append(b, mask...)
		for i := range len(payload) {
			b = append(b, payload[i]^mask[i%4])
		}
		return b
	}
	handshake := "GET " + u.Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
	init := `{"type":"connection_init","payload":{"Authorization":"Bearer ` + s.token("t1", "alice") + `"}}`
	if _, err := conn.Write(append([]byte(handshake), frame(init)...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	readText := func() string {
		t.Helper()
		h := make([]byte, 2)
		if _, err := io.ReadFull(br, h); err != nil {
			t.Fatal(err)
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			x := make([]byte, 2)
			_, _ = io.ReadFull(br, x)
			n = int(x[0])<<8 | int(x[1])
		case 127:
			t.Fatal("frame too large")
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		return string(p)
	}
	if m := readText(); !strings.Contains(m, `"connection_ack"`) {
		t.Fatalf("after the pipelined init: %s", m)
	}
	// A 100 KiB query (a long comment) in one message.
	query := "# " + strings.Repeat("x", 100<<10) + "\nsubscription { unreadCount }"
	sub, _ := json.Marshal(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]string{"query": query}})
	if _, err := conn.Write(frame(string(sub))); err != nil {
		t.Fatal(err)
	}
	if m := readText(); !strings.Contains(m, `"next"`) || !strings.Contains(m, `"unreadCount":0`) {
		t.Fatalf("after the large subscribe: %s", m)
	}
}

func TestTransportConfigBounds(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"INBOX_KEEPALIVE", "1ms"},
		{"INBOX_KEEPALIVE", "-1s"},
		{"INBOX_KEEPALIVE", "0s"},
		{"INBOX_WS_INIT_TIMEOUT", "0s"},
	} {
		t.Setenv(tc.name, tc.value)
		if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%s: %v, want an error naming it", tc.name, tc.value, err)
		}
		t.Setenv(tc.name, map[string]string{"INBOX_KEEPALIVE": "15s", "INBOX_WS_INIT_TIMEOUT": "10s"}[tc.name])
	}
	if _, err := loadConfig(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// TestWebSocketTokenExpiryLetsRunningMutationsAnswer sends a mutation every 10 ms across
// the moment the token expires. No operation starts once the connection is expiring, a
// mutation that started answers (its result, then complete) before the 4403 close, and
// exactly the mutations that answered with a result were written: none is told "token
// expired" after committing, none is written without an answer.
func TestWebSocketTokenExpiryLetsRunningMutationsAnswer(t *testing.T) {
	s := newTestServer(t)
	behind, err := auth.NewVerifier(auth.Config{Secret: testSecret, Now: func() time.Time { return time.Now().Add(-30 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := behind.Sign(auth.Claims{TenantID: "t1", UserID: "svc", Scopes: []string{auth.ScopeSend}}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := s.verifier.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.dialWS(ctx, "graphql-transport-ws")
	c.init(tok)
	time.Sleep(time.Until(claims.ValidUntil.Add(-300 * time.Millisecond)))
	sent := 0
	for until := claims.ValidUntil.Add(300 * time.Millisecond); time.Now().Before(until); sent++ {
		payload, _ := json.Marshal(map[string]any{"query": sendMutation, "variables": map[string]any{"in": s.sendInput(fmt.Sprint("exp-", sent), "dora")}})
		m, _ := json.Marshal(wsMessage{ID: fmt.Sprint("exp-", sent), Type: "subscribe", Payload: payload})
		_ = c.conn.Write(ctx, websocket.MessageText, m) // fails once the socket closed
		time.Sleep(10 * time.Millisecond)
	}
	terminal := map[string]string{}
	answered := map[string]bool{}
	for m := range c.msgs {
		switch m.Type {
		case "next":
			if terminal[m.ID] != "" {
				t.Fatalf("next for %s after its %s", m.ID, terminal[m.ID])
			}
			if strings.Contains(string(m.Payload), `"errors"`) {
				t.Fatalf("%s answered with errors: %s", m.ID, m.Payload)
			}
			answered[m.ID] = true
		case "complete", "error":
			if terminal[m.ID] != "" {
				t.Fatalf("%s ended twice: %s, then %s", m.ID, terminal[m.ID], m.Type)
			}
			if m.Type == "error" && !strings.Contains(string(m.Payload), `"token expired"`) {
				t.Fatalf("%s: error %s", m.ID, m.Payload)
			}
			terminal[m.ID] = m.Type
		}
	}
	if code := websocket.CloseStatus(<-c.readErr); code != 4403 {
		t.Fatalf("closed with %d, want 4403", code)
	}
	for id := range answered {
		if terminal[id] != "complete" {
			t.Fatalf("%s answered but ended with %q, want complete", id, terminal[id])
		}
	}
	var d struct {
		Viewer struct {
			Inbox struct {
				Edges []struct{ Node struct{ Title string } }
			}
		}
	}
	s.mustData(s.token("t1", "dora"), `{ viewer { inbox(first: 100) { edges { node { title } } } } }`, nil, &d)
	written := map[string]bool{}
	for _, e := range d.Viewer.Inbox.Edges {
		written[e.Node.Title] = true
	}
	for i := range sent {
		id := fmt.Sprint("exp-", i)
		if written[id] != answered[id] {
			t.Fatalf("%s: written %v, answered with a result %v (ended: %q)", id, written[id], answered[id], terminal[id])
		}
	}
	if len(answered) == 0 || len(answered) == sent {
		t.Fatalf("%d of %d mutations answered: the sends did not straddle the expiry", len(answered), sent)
	}
	t.Logf("%d mutations sent across the expiry: %d answered and written, the rest not started", sent, len(answered))
}
