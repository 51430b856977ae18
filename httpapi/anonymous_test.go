package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/httpapi"
)

// Requests without a token share AnonymousConcurrency slots: while one holds the only
// slot (its body still arriving), a second waits, and a request with a token is not held
// up; when the first ends, the second runs. A flood of anonymous megabyte documents so
// takes at most that many goroutines' CPU from the clients with a token.
func TestAnonymousRequestsShareFewSlots(t *testing.T) {
	t.Parallel()
	g := newGatewayWith(t, gatewaySetup{options: func(o *httpapi.Options) { o.AnonymousConcurrency = 1 }})
	addr := strings.TrimPrefix(g.srv.URL, "http://")

	// The first anonymous request takes the slot and sends half of its body.
	body := gql(`{ __typename }`)
	holder, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	fmt.Fprintf(holder, "POST /graphql HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body[:len(body)/2])

	waited := make(chan int, 1)
	go func() {
		// Give the holder time to be admitted first.
		time.Sleep(200 * time.Millisecond)
		// Accept: text/event-stream is no way around the bound.
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			waited <- -1
			return
		}
		resp.Body.Close()
		waited <- resp.StatusCode
	}()

	// A request with a token is served meanwhile.
	time.Sleep(400 * time.Millisecond)
	if status, code, _ := g.post(t, gql(`{ viewer { unreadCount } }`)); status != http.StatusOK || code != "" {
		t.Fatalf("request with a token while the anonymous slot is held: HTTP %d code %q", status, code)
	}
	select {
	case s := <-waited:
		t.Fatalf("second anonymous request answered (HTTP %d) while the only slot was held", s)
	case <-time.After(300 * time.Millisecond):
	}

	// The holder's body completes: it is answered, and the waiting request runs.
	if _, err := holder.Write([]byte(body[len(body)/2:])); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-waited:
		if s != http.StatusOK && s != http.StatusBadRequest {
			t.Fatalf("second anonymous request after the slot was freed: HTTP %d", s)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("second anonymous request still waiting after the slot was freed")
	}
}
