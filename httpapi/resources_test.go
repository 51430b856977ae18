package httpapi_test

// Resources: every goroutine tied to a subscription ends when its client goes away, and a
// shutdown (the root package: TestGracefulShutdown) closes subscriptions with 1001.

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
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
		var m testgw.WSMessage
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
		t.Skip("opens 400 subscriptions")
	}
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	s.Seed(sender, "alice", 1)
	tokens := make([]string, 50)
	for i := range tokens {
		tokens[i] = s.Token("t1", fmt.Sprintf("user-%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Warm up (connection pools, the store's workers), then take the baseline.
	if conn, err := rawSubscriber(ctx, s.URL, tokens[0], 1); err != nil {
		t.Fatal(err)
	} else {
		_ = conn.Close(websocket.StatusNormalClosure, "")
	}
	testgw.WaitFor(t, testgw.EventTimeout, "the warm-up subscription to end", func() bool { return s.Broker.Subscribers() == 0 })
	s.CloseIdleConnections()
	baseline := settledGoroutines(t, 1<<30, 0)
	const tolerance = 10

	// 200 subscriptions on 10 connections, then 200 connections of one subscription; half
	// of each closed normally, half dropped without a close frame. A goroutine left by
	// one subscription in ten would show 40 over the tolerance (each start reads the
	// badge: 2,000 subscriptions were 2,000 GetItems on the shared engine).
	type batch struct{ conns, perConn int }
	for _, b := range []batch{{10, 20}, {200, 1}} {
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
				c, err := rawSubscriber(ctx, s.URL, tokens[i%len(tokens)], b.perConn)
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
		if n := s.Broker.Subscribers(); n != b.conns*b.perConn {
			t.Fatalf("%d subscriptions registered, want %d", n, b.conns*b.perConn)
		}
		for i, c := range conns {
			if i%2 == 0 {
				go func() { _ = c.Close(websocket.StatusNormalClosure, "bye") }()
			} else {
				_ = c.CloseNow()
			}
		}
		testgw.WaitFor(t, 30*time.Second, "every subscription to end", func() bool { return s.Broker.Subscribers() == 0 })
	}
	// Connection pools (to DynamoDB, of the test's own requests) grew with the load;
	// their idle connections are not a subscription's.
	s.CloseIdleConnections()
	n := settledGoroutines(t, baseline+tolerance, 30*time.Second)
	t.Logf("goroutines: baseline %d, after 400 subscriptions %d", baseline, n)
}
