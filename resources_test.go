package main

// Resources: every goroutine tied to a subscription ends when its client goes away, and a
// shutdown closes subscriptions with 1001 while in-flight requests drain.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
)

// rawSubscriber opens a graphql-transport-ws connection, runs n unreadCount
// subscriptions on it and waits for each first value. It never calls t.Fatal (it runs on
// worker goroutines).
func rawSubscriber(ctx context.Context, url, token string, n int) (*websocket.Conn, error) {
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*websocket.Conn, error) { _ = conn.CloseNow(); return nil, err }
	if err := wsjson.Write(ctx, conn, map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + token}}); err != nil {
		return fail(err)
	}
	for i := range n {
		if err := wsjson.Write(ctx, conn, map[string]any{"id": fmt.Sprint(i), "type": "subscribe", "payload": map[string]string{"query": "subscription { unreadCount }"}}); err != nil {
			return fail(err)
		}
	}
	for got := 0; got < n; {
		var m wsMessage
		if err := wsjson.Read(ctx, conn, &m); err != nil {
			return fail(err)
		}
		switch m.Type {
		case "connection_ack":
		case "next":
			got++
		default:
			return fail(fmt.Errorf("unexpected %s %s", m.Type, m.Payload))
		}
	}
	return conn, nil
}

// settledGoroutines waits until the goroutine count is at most limit and returns it.
func settledGoroutines(t *testing.T, limit int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := runtime.NumGoroutine()
		if n <= limit {
			return n
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after %v, want at most %d\n%s", n, within, limit, buf)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSubscriptionChurnLeavesNoGoroutines(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,000 subscriptions")
	}
	s := newTestServer(t)
	sender := s.token("t1", "svc", auth.ScopeSend)
	s.seed(sender, "alice", 1)
	tokens := make([]string, 50)
	for i := range tokens {
		tokens[i] = s.token("t1", fmt.Sprintf("user-%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Warm up (connection pools, the store's workers), then take the baseline.
	if conn, err := rawSubscriber(ctx, s.url, tokens[0], 1); err != nil {
		t.Fatal(err)
	} else {
		_ = conn.Close(websocket.StatusNormalClosure, "")
	}
	waitFor(t, eventTimeout, "the warm-up subscription to end", func() bool { return s.broker.Subscribers() == 0 })
	baseline := settledGoroutines(t, 1<<30, 0)
	const tolerance = 10

	// 1,000 subscriptions on 10 connections, then 1,000 connections of one subscription;
	// half of each closed normally, half dropped without a close frame.
	type batch struct{ conns, perConn int }
	for _, b := range []batch{{10, 100}, {1000, 1}} {
		conns := make([]*websocket.Conn, b.conns)
		var wg sync.WaitGroup
		errs := make(chan error, b.conns)
		sem := make(chan struct{}, 16)
		for i := range conns {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c, err := rawSubscriber(ctx, s.url, tokens[i%len(tokens)], b.perConn)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = c
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("subscriber: %v", err)
		}
		if n := s.broker.Subscribers(); n != b.conns*b.perConn {
			t.Fatalf("%d subscriptions registered, want %d", n, b.conns*b.perConn)
		}
		for i, c := range conns {
			if i%2 == 0 {
				go func() { _ = c.Close(websocket.StatusNormalClosure, "bye") }()
			} else {
				_ = c.CloseNow()
			}
		}
		waitFor(t, 30*time.Second, "every subscription to end", func() bool { return s.broker.Subscribers() == 0 })
	}
	n := settledGoroutines(t, baseline+tolerance, 30*time.Second)
	t.Logf("goroutines: baseline %d, after 2,000 subscriptions %d", baseline, n)
}

// TestGracefulShutdown sends SIGTERM to a gateway process holding WebSocket and SSE
// subscriptions and an in-flight request: the subscriptions end (1001 going away, SSE
// complete), the request is answered, and the process exits cleanly.
func TestGracefulShutdown(t *testing.T) {
	table := dynlocaltest.TableName(t)
	p, s := startGatewayProc(t, "gateway", gwEnv(t, table, "INBOX_CREATE_TABLE=1"))
	alice := s.token("t1", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var clients []*wsClient
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		c := s.dialWS(ctx, protocol)
		c.init(alice)
		c.subscribe("1", `subscription { unreadCount }`)
		if got := c.nextCount("1"); got != 0 {
			t.Fatalf("%s: first value %d", protocol, got)
		}
		clients = append(clients, c)
	}
	sse := s.subscribeSSE(ctx, alice, `subscription { unreadCount }`)
	if got := sse.nextCount(); got != 0 {
		t.Fatalf("SSE first value %d", got)
	}

	// A request in flight: its body is still being sent when the shutdown begins.
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+alice)
	type result struct {
		status int
		body   string
		err    error
	}
	answered := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- result{status: resp.StatusCode, body: string(b), err: err}
	}()
	if _, err := io.WriteString(pw, `{"query":"{ viewer `); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the server is reading the body

	stopping := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog("shutting down: closing subscriptions (1001), draining requests", stopping, 10*time.Second)
	for _, c := range clients {
		c.expectClose(websocket.StatusGoingAway, "server shutting down", 10*time.Second)
	}
	select {
	case err := <-sse.done:
		if err != nil {
			t.Fatalf("SSE stream ended with %v, want event: complete", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SSE stream not ended by the shutdown")
	}

	// The in-flight request is still answered.
	if _, err := io.WriteString(pw, `{ unreadCount } }"}`); err != nil {
		t.Fatalf("finish the in-flight request's body: %v", err)
	}
	_ = pw.Close()
	select {
	case r := <-answered:
		var d struct {
			Data struct {
				Viewer struct{ UnreadCount *int } `json:"viewer"`
			} `json:"data"`
		}
		if r.err != nil || r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &d) != nil || d.Data.Viewer.UnreadCount == nil {
			t.Fatalf("in-flight request: HTTP %d %q %v, want its answer", r.status, r.body, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight request not answered")
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("gateway exited with %v", p.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("gateway did not exit after SIGTERM")
	}
	// New connections are refused once it stopped.
	if _, err := http.Get(strings.TrimSuffix(s.url, "/graphql") + "/healthz"); err == nil {
		t.Fatal("gateway still answers after shutdown")
	}
}
