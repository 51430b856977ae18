package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/internal/testgw"
)

// peerKeepAlive is the keep-alive interval of the dead-peer tests: the gateway must drop
// a silent peer within about two intervals (issue 8, item 8). The WebSocket keep-alive
// runs on the gateway's fake clock, which the tests advance; the SSE write deadline
// (about two intervals) is a real socket deadline, on the wall clock.
const peerKeepAlive = time.Second

// peerDropBound is how long the tests wait for what a drop causes (the connection closed,
// its subscription released): the WebSocket drop itself happens when the fake clock is
// advanced, so this bounds the teardown's I/O, and for SSE the real write deadline. Before
// the fix such a peer stayed for as long as anyone watched (60 s and more).
const peerDropBound = 3*peerKeepAlive + 3*time.Second

// smallSendBuffers is a listener whose accepted connections have a small kernel send
// buffer, so a peer that stops reading fills the path after a few KiB instead of the
// megabytes loopback autotuning allows.
type smallSendBuffers struct{ net.Listener }

// newPeerGateway is newGateway with a 1 s keep-alive on clk and small server send
// buffers; it returns the handler too, for its count of open WebSockets.
func newPeerGateway(t *testing.T, clk clockwork.Clock) (*gateway, *httpapi.Handler) {
	t.Helper()
	g := newGatewayWith(t, gatewaySetup{
		options:  func(o *httpapi.Options) { o.KeepAlive = peerKeepAlive },
		listener: func(l net.Listener) net.Listener { return smallSendBuffers{l} },
		clock:    clk,
	})
	return g, g.h
}

// armed waits until clk has n timers waiting (a WebSocket connection has two once
// acknowledged: its keep-alive and its token's expiry): a keep-alive tick re-arms its
// timer before it writes anything, so after an advance this is the tick having run.
func armed(t *testing.T, clk *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.EventTimeout)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("%d timers on the clock: not within %v", n, testgw.EventTimeout)
	}
}

// ticksDone waits until no keep-alive tick runs: each has had the WebSocket pong it
// waits for (recorded before the tick returns), or given up. It counts the goroutines of
// the whole test binary, so only a test that is not parallel uses it.
func ticksDone(t *testing.T) {
	t.Helper()
	waitUntil(t, testgw.EventTimeout, "the keep-alive ticks to end", func() bool {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
		return !strings.Contains(buf.String(), "httpapi.(*wsConn).keepAliveTick")
	})
}

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// waitUntil polls cond until it holds or within passes; it returns how long it took.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// rawDial opens a TCP connection to the test server with a small receive buffer.
func rawDial(t *testing.T, g *gateway) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).SetReadBuffer(2048)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// writeFrame writes one masked text frame, as a client must (RFC 6455 section 5.3).
func writeFrame(t *testing.T, conn net.Conn, payload []byte) {
	t.Helper()
	frame := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	default:
		frame = append(frame, 0x80|126)
		frame = binary.BigEndian.AppendUint16(frame, uint16(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	if _, err := conn.Write(frame); err != nil {
		t.Fatalf("write frame: %v", err)
	}
}

// deadWSPeer completes the WebSocket handshake for protocol, sends connection_init and a
// subscription, and from then on neither reads nor answers anything: a peer behind a
// silent network.
func deadWSPeer(t *testing.T, g *gateway, protocol string) net.Conn {
	t.Helper()
	conn := rawDial(t, g)
	fmt.Fprintf(conn, "GET /graphql HTTP/1.1\r\nHost: gateway\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n\r\n", protocol)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", resp.Status)
	}
	start := "subscribe"
	if protocol == "graphql-ws" {
		start = "start"
	}
	for _, m := range []map[string]any{
		{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + g.token}},
		{"id": "1", "type": start, "payload": map[string]string{"query": "subscription { unreadCount }"}},
	} {
		b, _ := json.Marshal(m)
		writeFrame(t, conn, b)
	}
	return conn
}

// expectClosedByServer reads what the server wrote (pings, the subscription's value) and
// fails unless the connection ends (EOF or a reset) within the bound.
func expectClosedByServer(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(peerDropBound))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("the server did not close the connection: %v", err)
	}
}

// connGoroutines counts the goroutines running code of a WebSocket connection.
func connGoroutines() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	n := 0
	for g := range strings.SplitSeq(buf.String(), "\n\n") {
		if strings.Contains(g, "httpapi.(*wsConn)") || strings.Contains(g, "httpapi.(*wsOp)") {
			n++
		}
	}
	return n
}

// A subscriber that stops reading and answering (no pong, no frame, no FIN) is dropped
// at the second keep-alive tick after it was last heard from (two intervals of silence),
// not at the first, and its subscription released, on both protocols.
func TestWebSocketDeadPeerIsDropped(t *testing.T) {
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			clk := clocktest.New()
			g, h := newPeerGateway(t, clk)
			conn := deadWSPeer(t, g, protocol)
			waitUntil(t, 10*time.Second, "the subscription to start", func() bool {
				return g.broker.Subscribers() == 1 && h.WebSockets() == 1
			})
			if connGoroutines() == 0 {
				t.Fatal("no goroutine of the connection found: connGoroutines counts nothing")
			}
			armed(t, clk, 2)
			clk.Advance(peerKeepAlive) // one interval of silence: a ping, no drop
			armed(t, clk, 2)
			if n, s := h.WebSockets(), g.broker.Subscribers(); n != 1 || s != 1 {
				t.Fatalf("after one silent interval: %d connections, %d subscriptions; want 1 and 1", n, s)
			}
			clk.Advance(peerKeepAlive) // two: dropped
			waitUntil(t, peerDropBound, "the silent peer to be dropped and its subscription released", func() bool {
				return g.broker.Subscribers() == 0 && h.WebSockets() == 0
			})
			expectClosedByServer(t, conn)
			// Nothing of the connection runs any more: its reader, flusher, keep-alive
			// ticks and operations are gone.
			waitUntil(t, 5*time.Second, "the connection's goroutines to end", func() bool {
				return connGoroutines() == 0
			})
		})
	}
}

// A live subscriber that sends nothing after subscribing (the legacy protocol has no
// client pong; a graphql-transport-ws client may ignore pings) stays connected: the
// WebSocket pongs its library sends while it reads show it is there. Not parallel:
// ticksDone counts the goroutines of the whole binary.
func TestWebSocketQuietLivePeerStays(t *testing.T) {
	clk := clocktest.New()
	g, h := newPeerGateway(t, clk)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.srv.URL, "http")+"/graphql",
			&websocket.DialOptions{Subprotocols: []string{protocol}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.CloseNow() })
		start := "subscribe"
		if protocol == "graphql-ws" {
			start = "start"
		}
		for _, m := range []map[string]any{
			{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + g.token}},
			{"id": "1", "type": start, "payload": map[string]string{"query": "subscription { unreadCount }"}},
		} {
			b, _ := json.Marshal(m)
			if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
				t.Fatal(err)
			}
		}
		go func() { // read (and so answer WebSocket pings), never write
			for {
				if _, _, err := conn.Read(ctx); err != nil {
					return
				}
			}
		}()
	}
	waitUntil(t, 10*time.Second, "both subscriptions to start", func() bool {
		return g.broker.Subscribers() == 2 && h.WebSockets() == 2
	})
	// Four intervals, each tick's pong back before the next: two silent intervals in a
	// row would drop a connection, and the clock stands still while a pong travels.
	armed(t, clk, 4)
	for range 4 {
		clk.Advance(peerKeepAlive)
		armed(t, clk, 4)
		ticksDone(t)
	}
	armed(t, clk, 4) // a dropped connection's timers are stopped before its tick ends
	if n, s := h.WebSockets(), g.broker.Subscribers(); n != 2 || s != 2 {
		t.Fatalf("after 4 keep-alive intervals: %d connections, %d subscriptions; want 2 and 2", n, s)
	}
}

// An SSE subscriber that stops reading is dropped once a write stalls past its deadline,
// and its subscription released.
func TestSSEStalledReaderIsDropped(t *testing.T) {
	t.Parallel()
	g, _ := newPeerGateway(t, nil)
	conn := rawDial(t, g)
	body := `{"query":"subscription { notificationAdded { id payload } }"}`
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"+
		"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", g.token, len(body), body)
	waitUntil(t, 10*time.Second, "the SSE subscription to start", func() bool { return g.broker.Subscribers() == 1 })
	// 64 events of about 12 KiB: far more than the socket buffers on the way hold.
	payload := inbox.JSON(`{"blob":"` + strings.Repeat("x", 12<<10) + `"}`)
	sending := time.Now()
	for i := 0; i < 64 && g.broker.Subscribers() > 0; i++ {
		_, err := g.send(context.Background(), "acme", inbox.SendInput{
			IdempotencyKey: fmt.Sprintf("stall-%d", i), Recipients: []string{"alice"}, Type: "stall", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, peerDropBound, "the stalled SSE stream to end and release its subscription", func() bool {
		return g.broker.Subscribers() == 0
	})
	t.Logf("stalled SSE reader dropped %v after the first event was sent (write deadline %v)",
		time.Since(sending).Round(10*time.Millisecond), 2*peerKeepAlive)
	expectClosedByServer(t, conn)
}
