package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
)

// An SSE subscription ends when its token expires, not later.
func TestSSESubscriptionEndsAtTokenExpiry(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	tok, err := g.v.Sign(auth.Claims{TenantID: "acme", UserID: "alice"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", strings.NewReader(`{"query":"subscription { unreadCount }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	client := &http.Client{Timeout: 15 * time.Second}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body) // returns when the server ends the stream
	if err != nil {
		t.Fatalf("stream did not end by itself: %v", err)
	}
	took := time.Since(start)
	if !strings.Contains(string(body), `"unreadCount":0`) || !strings.Contains(string(body), "complete") {
		t.Fatalf("stream = %q", body)
	}
	if took < time.Second || took > 10*time.Second {
		t.Fatalf("stream ended after %v; want about the token's 2 s lifetime", took)
	}
}
