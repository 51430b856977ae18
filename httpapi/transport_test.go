package httpapi_test

// Transport behaviour as the protocols specify: graphql-transport-ws close codes
// (4401, 4408, 4409, 4429, 4403 at token expiry), ping/pong, the legacy graphql-ws
// keep-alive, SSE heartbeats, and the Origin allow-list of WebSocket upgrades.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/internal/testgw"
)

func TestWebSocketPingPong(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Init(s.Token("t1", "alice"))
	c.Send(map[string]any{"type": "ping", "payload": map[string]any{"n": 1}})
	if m := c.NextRaw(); m.Type != "pong" || string(m.Payload) != `{"n":1}` {
		t.Fatalf("after ping: %s %s, want pong with the ping's payload", m.Type, m.Payload)
	}
}

func TestWebSocketInitTimeoutCloses4408(t *testing.T) {
	t.Parallel()
	s := testgw.NewConfig(t, func(c *app.Config) { c.WSInitTimeout = 300 * time.Millisecond })
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.WithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			c := s.DialWS(ctx, protocol)
			c.ExpectClose(4408, "Connection initialisation timeout", 10*time.Second)
			if d := time.Since(start); d < 250*time.Millisecond {
				t.Fatalf("closed after %v, before the init timeout", d)
			}
		})
	}
	// A connection that sent connection_init in time stays open past the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Init(s.Token("t1", "alice"))
	time.Sleep(600 * time.Millisecond)
	c.Send(map[string]any{"type": "ping"})
	if m := c.NextRaw(); m.Type != "pong" {
		t.Fatalf("after the init timeout: %s, want pong", m.Type)
	}
}

// TestWebSocketRefusedInitSaysWhy: a connection_init without a usable token closes with
// 4403 and a reason that says what was wrong (a browser's WebSocket shows only the close
// code and reason), not a bare "Forbidden".
func TestWebSocketRefusedInitSaysWhy(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	for _, tc := range []struct{ name, payload, reason string }{
		{"no payload", `null`, `Forbidden: no token: send {"Authorization": "Bearer <JWT>"} as connection_init's payload`},
		{"no Authorization", `{"token":"x"}`, `Forbidden: no token: send {"Authorization": "Bearer <JWT>"} as connection_init's payload`},
		{"not Bearer", `{"Authorization":"Basic abc"}`, "Forbidden: unsupported authorization scheme (want Bearer)"},
		{"malformed token", `{"Authorization":"Bearer abc"}`, "Forbidden: malformed token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.WithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := s.DialWS(ctx, "graphql-transport-ws")
			c.Send(testgw.WSMessage{Type: "connection_init", Payload: json.RawMessage(tc.payload)})
			c.ExpectClose(4403, tc.reason, testgw.EventTimeout)
		})
	}
}

func TestWebSocketSecondInitCloses4429(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-transport-ws")
	alice := s.Token("t1", "alice")
	c.Init(alice)
	c.Send(testgw.WSMessage{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + alice + `"}`)})
	c.ExpectClose(4429, "Too many initialisation requests", testgw.EventTimeout)
}

func TestWebSocketSubscribeBeforeInitCloses4401(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Subscribe("1", `subscription { unreadCount }`)
	c.ExpectClose(4401, "Unauthorized", testgw.EventTimeout)
	if n := s.Broker.Subscribers(); n != 0 {
		t.Fatalf("%d subscriptions registered", n)
	}
}

func TestWebSocketDuplicateIDCloses4409(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := s.Token("t1", "alice")
	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Init(alice)

	// An id the server completed (a query) or the client completed may be used again.
	for range 2 {
		c.Subscribe("q", `{ viewer { unreadCount } }`)
		var d struct{ Viewer struct{ UnreadCount int } }
		c.NextData("q", &d)
		if m := c.Next(); m.Type != "complete" || m.ID != "q" {
			t.Fatalf("after the query's result: %s %q, want complete of q", m.Type, m.ID)
		}
	}
	c.Subscribe("1", `subscription { unreadCount }`)
	if got := c.NextCount("1"); got != 0 {
		t.Fatalf("first value %d, want 0", got)
	}
	c.Send(testgw.WSMessage{ID: "1", Type: "complete"})
	testgw.WaitFor(t, testgw.EventTimeout, "the subscription to end", func() bool { return s.Broker.Subscribers() == 0 })
	c.Subscribe("1", `subscription { unreadCount }`)
	if got := c.NextCount("1"); got != 0 {
		t.Fatalf("first value of the reused id: %d, want 0", got)
	}

	// A second subscribe with a running operation's id ends the connection.
	c.Subscribe("1", `subscription { unreadCount }`)
	c.ExpectClose(4409, "Subscriber for this id already exists", testgw.EventTimeout)
	testgw.WaitFor(t, testgw.EventTimeout, "the subscriptions to end", func() bool { return s.Broker.Subscribers() == 0 })
}

// TestWebSocketLegacyKeepAlive: graphql-ws has a "ka" at the acknowledgement and one at
// every keep-alive interval, which the test ticks on the gateway's clock.
func TestWebSocketLegacyKeepAlive(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	const keepAlive = 15 * time.Second
	s := testgw.NewWith(t, testgw.Options{Clock: clk, Config: func(c *app.Config) { c.KeepAlive = keepAlive }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-ws")
	c.Init(s.Token("t1", "alice"))
	for kas := 0; kas < 3; kas++ {
		if kas > 0 {
			// The server reads a message of the client's (any counts as hearing from
			// it: the legacy protocol has no client pong) before the clock moves on.
			heardFrom(t, c)
			clk.Advance(keepAlive)
		}
		if m := c.NextRaw(); m.Type != "ka" {
			t.Fatalf("keep-alive %d: unexpected %s %s", kas, m.Type, m.Payload)
		}
	}
}

// heardFrom makes the server read a message from c and answer it (a graphql-transport-ws
// ping, or a graphql-ws query, whose result and complete it skips), so the connection has
// heard from its peer at the clock's present time before a test advances it.
func heardFrom(t *testing.T, c *testgw.WSClient) {
	t.Helper()
	if c.Protocol == "graphql-transport-ws" {
		c.Send(testgw.WSMessage{Type: "ping", Payload: json.RawMessage(`{"heard":1}`)})
		for m := c.NextRaw(); m.Type != "pong" || string(m.Payload) != `{"heard":1}`; m = c.NextRaw() {
		}
		return
	}
	c.Subscribe("heard", `{ __typename }`)
	for m := c.NextRaw(); m.ID != "heard" || m.Type != "complete"; m = c.NextRaw() {
	}
}

func TestSSEHeartbeat(t *testing.T) {
	t.Parallel()
	s := testgw.NewConfig(t, func(c *app.Config) { c.KeepAlive = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"query": `subscription { unreadCount }`})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.Token("t1", "alice"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// Pings count only after the first value: the first value waits on a DynamoDB read,
	// and on a loaded machine several heartbeats may come before it (CI saw 3).
	pings, events := 0, 0
	for pings < 3 && sc.Scan() {
		switch line := sc.Text(); {
		case line == ": ping" && events > 0:
			pings++
		case strings.HasPrefix(line, "event: next"):
			events++
		}
	}
	if pings < 3 || events != 1 {
		t.Fatalf("read %d pings and %d events (%v), want 3 pings after the first value", pings, events, sc.Err())
	}
	cancel()
	testgw.WaitFor(t, testgw.EventTimeout, "the SSE subscription to end", func() bool { return s.Broker.Subscribers() == 0 })
}

func TestWebSocketOriginAllowList(t *testing.T) {
	dial := func(t *testing.T, s *testgw.Server, origin string) (*websocket.Conn, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		h := http.Header{}
		h.Set("Origin", origin)
		conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http"),
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
		s := testgw.New(t)
		if _, code := dial(t, s, "https://evil.example"); code != http.StatusForbidden {
			t.Fatalf("foreign Origin: HTTP %d, want 403", code)
		}
		if _, code := dial(t, s, s.HTTP.URL); code != http.StatusSwitchingProtocols {
			t.Fatalf("same Origin: HTTP %d, want 101", code)
		}
	})
	t.Run("INBOX_ALLOWED_ORIGINS", func(t *testing.T) {
		t.Setenv("INBOX_ALLOWED_ORIGINS", "https://app.example.com,*.trusted.example")
		env, err := app.LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		s := testgw.NewConfig(t, func(c *app.Config) { c.AllowedOrigins = env.AllowedOrigins })
		for _, o := range []string{"https://app.example.com", "https://x.trusted.example", s.HTTP.URL} {
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
	t.Parallel()
	clk := clocktest.New()
	s := newExpiryGateway(t, clk, testgw.Options{})
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.WithT(t)
			tok, claims := expiringToken(t, s, auth.Claims{TenantID: "t1", UserID: "alice"})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := s.DialWS(ctx, protocol)
			c.Init(tok)
			c.Subscribe("1", `subscription { unreadCount }`)
			if got := c.NextCount("1"); got != 0 {
				t.Fatalf("first value %d", got)
			}
			// A second before the token's end (exp plus the leeway) the connection
			// still serves: it does not end early.
			clk.Advance(clk.Until(claims.ValidUntil) - time.Second)
			c.Subscribe("2", `subscription { unreadCount }`)
			if got := c.NextCount("2"); got != 0 {
				t.Fatalf("a second before the expiry: first value %d", got)
			}
			clk.Advance(time.Second)
			msgs := c.ExpectClose(4403, "token expired", testgw.EventTimeout, "error", "connection_error")
			ended := map[string]bool{}
			for _, m := range msgs {
				if m.Type == "error" && strings.Contains(string(m.Payload), `"token expired"`) &&
					strings.Contains(string(m.Payload), `"UNAUTHENTICATED"`) {
					ended[m.ID] = true
				}
			}
			if !ended["1"] || !ended["2"] {
				t.Fatalf("want an UNAUTHENTICATED \"token expired\" error for both running subscriptions; got %+v", msgs)
			}
			testgw.WaitFor(t, testgw.EventTimeout, "the subscriptions to end", func() bool { return s.Broker.Subscribers() == 0 })
		})
	}
}

// TestWebSocketNothingAfterComplete reuses an id right after completing it, many times. A
// result already on its way when the complete arrived may still come, but never an error
// from the cancelled operation (its first read, cancelled, used to answer with an INTERNAL
// error, under the reused id), and on graphql-ws nothing after the server's complete.
func TestWebSocketNothingAfterComplete(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.WithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := s.DialWS(ctx, protocol)
			c.Init(s.Token("t1", "alice"))
			stop := "complete"
			if protocol == "graphql-ws" {
				stop = "stop"
			}
			clean := func(m testgw.WSMessage) {
				t.Helper()
				if m.Type == "error" || strings.Contains(string(m.Payload), `"errors"`) {
					t.Fatalf("%s (id %q) %s: an error from a completed operation", m.Type, m.ID, m.Payload)
				}
			}
			for range 30 {
				c.Subscribe("1", `subscription { unreadCount }`)
				c.Send(testgw.WSMessage{ID: "1", Type: stop})
				if protocol == "graphql-ws" {
					// The legacy server answers a stop with complete (a result sent before
					// the stop arrived may precede it), and nothing follows it.
					for m := c.Next(); m.Type != "complete"; m = c.Next() {
						clean(m)
					}
				}
			}
			c.Subscribe("final", `subscription { unreadCount }`)
			for m := c.Next(); m.ID != "final"; m = c.Next() {
				clean(m) // an in-flight result of id 1, sent before its complete arrived
			}
			if protocol == "graphql-ws" {
				// A legacy start on a running id replaces it: only the new one answers.
				c.Subscribe("final", `subscription { unreadCount }`)
				if got := c.NextCount("final"); got != 0 {
					t.Fatalf("first value of the replacing start %d, want 0", got)
				}
			}
			select {
			case m, ok := <-c.Msgs:
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
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	erin := s.Token("t1", "erin")
	ids := s.Seed(sender, "erin", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sub := s.DialWS(ctx, "graphql-transport-ws")
	sub.Init(erin)
	sub.Subscribe("badge", `subscription { unreadCount }`)
	shown := sub.NextCount("badge")
	mut := s.DialWS(ctx, "graphql-transport-ws")
	mut.Init(erin)
	for round := range 20 {
		for i, id := range ids {
			op := "markRead"
			if (round+i)%2 == 1 {
				op = "markUnread"
			}
			opID := fmt.Sprintf("m%d-%d", round, i)
			mut.Subscribe(opID, `mutation { `+op+`(ids: ["`+id+`"]) { unreadCount } }`)
			time.Sleep(time.Duration(round%4) * time.Millisecond)
			mut.Send(testgw.WSMessage{ID: opID, Type: "complete"})
		}
		// Settle: the badge catching up with the store's count. The cancelled mutations'
		// writes finish after their clients left, some maybe after a first read of the
		// count (under load), so the count is read again until the two agree.
		time.Sleep(150 * time.Millisecond)
		deadline := time.After(testgw.EventTimeout)
		for {
			wantB, err := s.Store.Badge(ctx, inbox.Viewer{TenantID: "t1", UserID: "erin"})
			want := wantB.Unread
			if err != nil {
				t.Fatal(err)
			}
			if shown == want {
				break
			}
			select {
			case m, ok := <-sub.Msgs:
				if !ok {
					t.Fatalf("subscriber closed: %v", <-sub.ReadErr)
				}
				var p struct{ Data struct{ UnreadCount int } }
				if m.Type == "next" && json.Unmarshal(m.Payload, &p) == nil {
					shown = p.Data.UnreadCount
				}
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				t.Fatalf("round %d: the badge shows %d, the store says %d", round, shown, want)
			}
		}
	}
	// Drain the mutations' own answers: the connection stayed healthy.
	mut.Send(map[string]any{"type": "ping"})
	for m := mut.NextRaw(); m.Type != "pong"; m = mut.NextRaw() {
	}
}

func TestWebSocketConnectionLimitsAndChecks(t *testing.T) {
	t.Parallel()
	// The keep-alive ticks only when the test advances the clock: a client busy reading
	// a hundred results is never dropped as a silent peer.
	clk := clocktest.New()
	const keepAlive = 15 * time.Second
	s := testgw.NewWith(t, testgw.Options{Clock: clk, Config: func(c *app.Config) { c.KeepAlive = keepAlive }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := s.Token("t1", "alice")

	t.Run("operations per connection", func(t *testing.T) {
		c := s.WithT(t).DialWS(ctx, "graphql-transport-ws")
		c.Init(alice)
		for i := range httpapi.MaxOperationsPerConnection {
			c.Subscribe(fmt.Sprint(i), `subscription { unreadCount }`)
		}
		for range httpapi.MaxOperationsPerConnection {
			if m := c.Next(); m.Type != "next" {
				t.Fatalf("got %s %s, want next", m.Type, m.Payload)
			}
		}
		c.Subscribe("one-too-many", `subscription { unreadCount }`)
		if m := c.Next(); m.Type != "error" || m.ID != "one-too-many" || !strings.Contains(string(m.Payload), `"BAD_REQUEST"`) {
			t.Fatalf("got %s (id %q) %s, want a BAD_REQUEST error", m.Type, m.ID, m.Payload)
		}
		c.Send(testgw.WSMessage{ID: "0", Type: "complete"})
		c.Subscribe("room-again", `subscription { unreadCount }`)
		if got := c.NextCount("room-again"); got != 0 {
			t.Fatalf("after one ended: %d", got)
		}
	})
	t.Run("empty id", func(t *testing.T) {
		c := s.WithT(t).DialWS(ctx, "graphql-transport-ws")
		c.Init(alice)
		c.Subscribe("", `subscription { unreadCount }`)
		c.ExpectClose(4400, "Invalid message received", testgw.EventTimeout)
		c = s.WithT(t).DialWS(ctx, "graphql-transport-ws")
		c.Init(alice)
		c.Send(testgw.WSMessage{Type: "complete"})
		c.ExpectClose(4400, "Invalid message received", testgw.EventTimeout)
	})
	t.Run("legacy second init", func(t *testing.T) {
		c := s.WithT(t).DialWS(ctx, "graphql-ws")
		c.Init(alice)
		c.Send(testgw.WSMessage{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + s.Token("t1", "bob") + `"}`)})
		if m := c.Next(); m.Type != "connection_error" {
			t.Fatalf("second init: %s %s, want connection_error", m.Type, m.Payload)
		}
		c.Subscribe("1", `subscription { unreadCount }`)
		if got := c.NextCount("1"); got != 0 {
			t.Fatalf("first value %d", got)
		}
	})
	t.Run("graphql-transport-ws ping keep-alive", func(t *testing.T) {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http"), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{"Authorization":"Bearer `+alice+`"}}`))
		read := func(what string) string {
			t.Helper()
			rctx, rcancel := context.WithTimeout(ctx, testgw.EventTimeout)
			defer rcancel()
			_, b, err := conn.Read(rctx)
			if err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			return string(b)
		}
		if m := read("connection_ack"); !strings.Contains(m, `"connection_ack"`) {
			t.Fatalf("after connection_init: %s", m)
		}
		for i := range 2 {
			clk.Advance(keepAlive)
			if m := read("a ping"); !strings.Contains(m, `"ping"`) {
				t.Fatalf("keep-alive %d: %s, want a ping", i, m)
			}
			// Answered, and the answer read by the server (its pong to a ping of ours
			// comes after it), before the clock moves on.
			_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`))
			for m := read("the pong"); !strings.Contains(m, `"pong"`); m = read("the pong") {
			}
		}
	})
	t.Run("h2c upgrade is an ordinary request", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(`{"query":"{ viewer { unreadCount } }"}`))
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
	t.Parallel()
	s := testgw.New(t)
	u, err := url.Parse(s.URL)
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
	init := `{"type":"connection_init","payload":{"Authorization":"Bearer ` + s.Token("t1", "alice") + `"}}`
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

// TestWebSocketTokenExpiryLetsRunningMutationsAnswer sends mutations across the moment
// the token expires. No operation starts once the connection is expiring, a mutation that
// started answers (its result, then complete) before the 4403 close, and exactly the
// mutations that answered with a result were written: none is told "token expired" after
// committing, none is written without an answer. The expiry is the verifier's clock
// advanced right after a burst of mutations, which race it on the server; the first of an
// earlier burst had answered (one ran before the expiry), and those sent once the
// subscription ended with "token expired" find the connection expiring (none runs).
func TestWebSocketTokenExpiryLetsRunningMutationsAnswer(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	s := newExpiryGateway(t, clk, testgw.Options{})
	tok, claims := expiringToken(t, s, auth.Claims{TenantID: "t1", UserID: "dora"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Init(tok)
	c.Subscribe("sub", `subscription { unreadCount }`)
	if got := c.NextCount("sub"); got != 0 {
		t.Fatalf("first value %d", got)
	}
	const first, second, after = 10, 10, 10
	sent := 0
	mutate := func() {
		id := fmt.Sprint("exp-", sent)
		sent++
		payload, _ := json.Marshal(map[string]any{"query": `mutation { updatePreferences(input: {categories: [{category: "` + id + `", channels: {sms: false}}]}) { locale } }`})
		m, _ := json.Marshal(testgw.WSMessage{ID: id, Type: "subscribe", Payload: payload})
		_ = c.Conn.Write(ctx, websocket.MessageText, m) // fails once the socket closed
	}
	var msgs []testgw.WSMessage
	next := func(what string) testgw.WSMessage {
		select {
		case m, ok := <-c.Msgs:
			if !ok {
				t.Fatalf("the connection closed while waiting for %s: %v", what, <-c.ReadErr)
			}
			msgs = append(msgs, m)
			return m
		case <-time.After(testgw.EventTimeout):
			t.Fatalf("waited %v for %s", testgw.EventTimeout, what)
		}
		return testgw.WSMessage{}
	}
	for range first {
		mutate()
	}
	for m := next("exp-0's answer"); m.ID != "exp-0"; m = next("exp-0's answer") {
	}
	for range second {
		mutate()
	}
	clk.Advance(clk.Until(claims.ValidUntil))
	for m := next("the subscription's end"); m.ID != "sub" || m.Type != "error"; m = next("the subscription's end") {
	}
	for range after {
		mutate()
	}
	for m := range c.Msgs {
		msgs = append(msgs, m)
	}
	if code := websocket.CloseStatus(<-c.ReadErr); code != 4403 {
		t.Fatalf("closed with %d, want 4403", code)
	}
	terminal := map[string]string{}
	answered := map[string]bool{}
	for _, m := range msgs {
		switch {
		case m.ID == "sub":
			if m.Type == "error" && !strings.Contains(string(m.Payload), `"token expired"`) {
				t.Fatalf("subscription error %s", m.Payload)
			}
		case m.Type == "next":
			if terminal[m.ID] != "" {
				t.Fatalf("next for %s after its %s", m.ID, terminal[m.ID])
			}
			if strings.Contains(string(m.Payload), `"errors"`) {
				t.Fatalf("%s answered with errors: %s", m.ID, m.Payload)
			}
			answered[m.ID] = true
		case m.Type == "complete" || m.Type == "error":
			if terminal[m.ID] != "" {
				t.Fatalf("%s ended twice: %s, then %s", m.ID, terminal[m.ID], m.Type)
			}
			if m.Type == "error" && !strings.Contains(string(m.Payload), `"token expired"`) {
				t.Fatalf("%s: error %s", m.ID, m.Payload)
			}
			terminal[m.ID] = m.Type
		}
	}
	for id := range answered {
		if terminal[id] != "complete" {
			t.Fatalf("%s answered but ended with %q, want complete", id, terminal[id])
		}
	}
	var d struct {
		Viewer struct {
			Preferences struct {
				Categories []struct{ Category string }
			}
		}
	}
	s.MustData(s.Token("t1", "dora"), `{ viewer { preferences { categories { category } } } }`, nil, &d)
	written := map[string]bool{}
	for _, cat := range d.Viewer.Preferences.Categories {
		written[cat.Category] = true
	}
	for i := range sent {
		id := fmt.Sprint("exp-", i)
		if written[id] != answered[id] {
			t.Fatalf("%s: written %v, answered with a result %v (ended: %q)", id, written[id], answered[id], terminal[id])
		}
		if i >= first+second && answered[id] {
			t.Fatalf("%s, sent after the subscription ended with \"token expired\", ran", id)
		}
	}
	t.Logf("%d mutations sent across the expiry: %d answered and written, the rest not started", sent, len(answered))
}

// newExpiryGateway is a gateway whose verifier runs on clk, so a token expires when the
// test advances clk, with a keep-alive of an hour: advancing clk to a token's end (at
// most a minute and a half, see expiringToken) ticks no keep-alive.
func newExpiryGateway(t *testing.T, clk clockwork.Clock, o testgw.Options) *testgw.Server {
	t.Helper()
	o.Clock = clk
	o.Config = func(c *app.Config) { c.KeepAlive = time.Hour }
	return testgw.NewWith(t, o)
}

// expiringToken signs c for a minute of the gateway's clock (Options.Clock, which stands
// still until the test advances it: the set-up spends none of the minute) and returns the
// token and its claims as the server verifies them (ValidUntil: exp plus the 30 s leeway,
// when the server's connection expires it).
func expiringToken(t *testing.T, s *testgw.Server, c auth.Claims) (string, auth.Claims) {
	t.Helper()
	tok, err := s.Verifier.Sign(c, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := s.Verifier.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok, claims
}
