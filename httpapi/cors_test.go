package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/httpapi"
)

// A browser app on an allowed origin (INBOX_ALLOWED_ORIGINS, the WebSocket allow-list)
// passes the preflight and reads the answer; any other origin gets no CORS headers.
func TestCORSFollowsTheAllowedOrigins(t *testing.T) {
	t.Parallel()
	g := newGatewayWith(t, gatewaySetup{options: func(o *httpapi.Options) {
		o.AllowedOrigins = []string{"app.example.com", "https://*.example.org"}
	}})
	preflight := func(origin string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodOptions, g.srv.URL+"/graphql", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	post := func(origin string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", strings.NewReader(gql(`{ viewer { unreadCount } }`)))
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+g.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, origin := range []string{"https://app.example.com", "http://APP.example.com", "https://eu.example.org"} {
		resp := preflight(origin)
		if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
			t.Errorf("preflight from %s: HTTP %d, headers %v", origin, resp.StatusCode, resp.Header)
		}
		if resp := post(origin); resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("POST from %s: HTTP %d, Access-Control-Allow-Origin %q", origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	for _, origin := range []string{"https://evil.example", "http://eu.example.org", "https://app.example.com.evil.example", "null"} {
		if got := preflight(origin).Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("preflight from %s: Access-Control-Allow-Origin %q, want none", origin, got)
		}
		if got := post(origin).Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("POST from %s: Access-Control-Allow-Origin %q, want none", origin, got)
		}
	}

	// Without an allow-list: same origin only, no CORS headers at all.
	plain := newGateway(t)
	req, _ := http.NewRequest(http.MethodOptions, plain.srv.URL+"/graphql", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("no allow-list: Access-Control-Allow-Origin %q", got)
	}
}
