package main

// Resources of a gateway process: a shutdown closes subscriptions with 1001 while in-flight requests drain.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/internal/testgw"
)

// TestGracefulShutdown sends SIGTERM to a gateway process holding WebSocket and SSE
// subscriptions and an in-flight request: the subscriptions end (1001 going away, SSE
// complete), the request is answered, and the process exits cleanly.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	table := dynlocaltest.TableName(t)
	p, s := startGatewayProc(t, "gateway", gwEnv(t, table))
	alice := s.Token("t1", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var clients []*testgw.WSClient
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		c := s.DialWS(ctx, protocol)
		c.Init(alice)
		c.Subscribe("1", `subscription { unreadCount }`)
		if got := c.NextCount("1"); got != 0 {
			t.Fatalf("%s: first value %d", protocol, got)
		}
		clients = append(clients, c)
	}
	sse := s.SubscribeSSE(ctx, alice, `subscription { unreadCount }`)
	if got := sse.NextCount(); got != 0 {
		t.Fatalf("SSE first value %d", got)
	}

	// A request in flight: its body is still being sent when the shutdown begins.
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, pr)
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
		c.ExpectClose(websocket.StatusGoingAway, "server shutting down", 10*time.Second)
	}
	select {
	case err := <-sse.Done:
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
	if _, err := http.Get(strings.TrimSuffix(s.URL, "/graphql") + "/healthz"); err == nil {
		t.Fatal("gateway still answers after shutdown")
	}
}
