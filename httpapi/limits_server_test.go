package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
)

// Issue 8, item 4: a body sent one byte at a time and a connection idle after a request
// both stayed open past 150 s. Real slow clients over TCP against the server httpapi.NewServer
// builds (as server.go does), with short timeouts: the server closes them within the
// timeout (bounds are generous: a closed connection is what is asserted, not a time).

// shortTimeouts are the test's server timeouts.
var shortTimeouts = httpapi.Timeouts{ReadHeader: 2 * time.Second, Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}

// closedWithin reads conn until the server closes it and returns how long that took; it
// fails the test when the connection is still open after limit.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, conn)
	took := time.Since(start)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("the connection is still open after %v", took)
	}
	return took
}

func TestSlowBodyIsCutAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, shortTimeouts)
	conn, err := net.Dial("tcp", g.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 10,000 bytes at one byte per 20 ms: 200 s to send it all.
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	took := closedWithin(t, conn, 10*time.Second)
	t.Logf("closed after %v (read timeout %v)", took, shortTimeouts.Read)
}

func TestIdleConnectionIsClosedAtTheIdleTimeout(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, shortTimeouts)
	conn, err := net.Dial("tcp", g.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: HTTP %d", resp.StatusCode)
	}
	took := closedWithin(t, conn, 10*time.Second)
	t.Logf("closed after %v idle (idle timeout %v)", took, shortTimeouts.Idle)
}

// The write and read timeouts must not end streams: an SSE subscription and a WebSocket
// keep delivering after several times both timeouts. The WebSocket's keep-alive runs on a
// clock that stands still (a peer's late pong, which is not what this test is about,
// cannot drop it); SSE's keep-alive pings, 1 s apart, flow meanwhile.
func TestStreamsOutliveTheReadAndWriteTimeouts(t *testing.T) {
	t.Parallel()
	g := newGatewayWith(t, gatewaySetup{options: func(o *httpapi.Options) { o.KeepAlive = time.Second }, timeouts: &shortTimeouts, clock: clocktest.New()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	counts := g.sseCounts(t, ctx)
	if c, _ := next(t, counts, 5*time.Second); c != "0" {
		t.Fatalf("SSE first value %q, want 0", c)
	}

	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.srv.URL, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	type msg struct {
		Type    string         `json:"type"`
		ID      string         `json:"id,omitempty"`
		Payload map[string]any `json:"payload,omitempty"`
	}
	send := func(m msg) {
		if err := wsjson.Write(ctx, ws, m); err != nil {
			t.Fatal(err)
		}
	}
	// A reader answers pings (the protocol's, and WebSocket pongs, which coder/websocket
	// sends only while a Read is pending) all along: a peer that stops reading is dropped
	// after two keep-alive intervals, and this one must stay.
	msgs := make(chan msg, 16)
	go func() {
		defer close(msgs)
		for {
			var m msg
			if err := wsjson.Read(ctx, ws, &m); err != nil {
				return
			}
			if m.Type == "ping" {
				_ = wsjson.Write(ctx, ws, msg{Type: "pong"})
				continue
			}
			msgs <- m
		}
	}()
	recv := func() msg {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatal("WebSocket closed")
			}
			return m
		case <-ctx.Done():
			t.Fatal("WebSocket: no message")
		}
		return msg{}
	}
	send(msg{Type: "connection_init", Payload: map[string]any{"Authorization": "Bearer " + g.token}})
	if m := recv(); m.Type != "connection_ack" {
		t.Fatalf("WebSocket: %+v, want connection_ack", m)
	}
	send(msg{Type: "subscribe", ID: "1", Payload: map[string]any{"query": "subscription { unreadCount }"}})
	if m := recv(); m.Type != "next" {
		t.Fatalf("WebSocket: %+v, want next", m)
	}

	// Several read and write timeouts later (pings flow meanwhile), both still deliver.
	pause := time.After(6 * shortTimeouts.Write)
	for waiting := true; waiting; {
		select {
		case <-pause:
			waiting = false
		case _, ok := <-counts:
			if !ok {
				t.Fatal("the SSE stream ended")
			}
		}
	}
	g.seed(t, 1, "t", mod(1), mod(1))
	if c, ok := next(t, counts, 5*time.Second); c != "1" {
		t.Fatalf("SSE after %v: %q (open %v), want 1", 6*shortTimeouts.Write, c, ok)
	}
	if m := recv(); m.Type != "next" || fmt.Sprint(m.Payload["data"]) != "map[unreadCount:1]" {
		t.Fatalf("WebSocket after %v: %+v, want unreadCount 1", 6*shortTimeouts.Write, m)
	}
}

// Issue 8, item 7: requests had no deadline. A query runs within Options.QueryTimeout, a
// mutation within Options.MutationTimeout (its writes keep it when the client leaves);
// a deadline hit is a coded, retryable UNAVAILABLE. A timeout of 1 ns makes the hit
// certain without timing.
func TestRequestsHaveDeadlines(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, func(o *httpapi.Options) { o.QueryTimeout = time.Nanosecond }, httpapi.Timeouts{})
	if status, code, data := g.post(t, gql(`{ viewer { unreadCount } }`)); status != http.StatusOK || code != inbox.CodeUnavailable {
		t.Errorf("query past its deadline: HTTP %d code %q data %v", status, code, data)
	}
	if _, code, _ := g.post(t, gql(`mutation { markAllRead { unreadCount } }`)); code != "" {
		t.Errorf("mutation with the default timeout: code %q", code)
	}

	g = newLimitedGateway(t, func(o *httpapi.Options) { o.MutationTimeout = time.Nanosecond }, httpapi.Timeouts{})
	if _, code, _ := g.post(t, gql(`mutation { markAllRead { unreadCount } }`)); code != inbox.CodeUnavailable {
		t.Errorf("mutation past its deadline: code %q", code)
	}
	if _, code, _ := g.post(t, gql(`{ viewer { unreadCount } }`)); code != "" {
		t.Errorf("query with the default timeout: code %q", code)
	}
}

// Subscriptions have no deadline, but each event's fields are bounded by the query
// timeout: with 1 ns the stream stays open and an event's profile read reports
// UNAVAILABLE instead of running unbounded.
func TestSubscriptionEventFieldsAreBounded(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, func(o *httpapi.Options) { o.QueryTimeout = time.Nanosecond }, httpapi.Timeouts{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	events := g.sseEvents(t, ctx, "subscription { notificationAdded { title actor { name } } }")
	for deadline := time.Now().Add(10 * time.Second); g.broker.Subscribers() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscription was not registered")
		}
	}
	for i := 0; i < 2; i++ {
		g.seed(t, 1, "t", mod(1), mod(1))
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event %d: the stream ended", i)
			}
			if !strings.Contains(ev, `"title":"n0"`) || !strings.Contains(ev, inbox.CodeUnavailable) {
				t.Fatalf("event %d = %s, want the title and an UNAVAILABLE actor", i, ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d did not arrive", i)
		}
	}
}
