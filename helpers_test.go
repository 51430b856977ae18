package main

// Helpers of the integration tests: every test runs the real HTTP surface (newHandler) over
// a fresh table of DynamoDB Local, with real HS256 tokens and real HTTP requests.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/store"
)

// testSecret is the HS256 key of every test server (32+ bytes).
var testSecret = []byte("inbox-gateway-integration-test-secret-0123456789")

// requestTimeout bounds one HTTP request of a test.
const requestTimeout = 20 * time.Second

// testServer is one gateway over one fresh table.
type testServer struct {
	t        *testing.T
	srv      *httptest.Server
	url      string // http://127.0.0.1:port/graphql
	verifier *auth.Verifier
	store    *store.Store
	broker   *live.Local
	seq      *atomic.Int64 // idempotency keys
}

// testLogWriter forwards the server's log lines to t.Log until the test ends (a late line
// from a background goroutine is dropped rather than logged after the test completed).
type testLogWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// newTestServer starts the gateway's whole HTTP surface on a loopback port, over a new
// table; everything is closed when the test ends.
func newTestServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerConfig(t, nil)
}

// withT returns s reporting to t: a subtest uses its own t, never its parent's.
func (s *testServer) withT(t *testing.T) *testServer {
	c := *s
	c.t = t
	return &c
}

// token signs a real token for user of tenant with scopes, valid for an hour.
func (s *testServer) token(tenant, user string, scopes ...string) string {
	s.t.Helper()
	tok, err := s.verifier.Sign(auth.Claims{TenantID: tenant, UserID: user, Scopes: scopes}, time.Hour)
	if err != nil {
		s.t.Fatalf("sign token: %v", err)
	}
	return tok
}

// gqlError is one GraphQL error of a response.
type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

func (e gqlError) code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// gqlResponse is a decoded GraphQL HTTP response.
type gqlResponse struct {
	Status int
	Header http.Header
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// codes returns the extensions.code of every error.
func (r gqlResponse) codes() []string {
	out := make([]string, len(r.Errors))
	for i, e := range r.Errors {
		out[i] = e.code()
	}
	return out
}

// post sends one GraphQL request (POST application/json) with token as bearer token (none
// when empty) and decodes the answer.
func (s *testServer) post(token, query string, vars map[string]any) gqlResponse {
	s.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST /graphql: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("read response: %v", err)
	}
	var out gqlResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("decode response (HTTP %d): %v\n%s", resp.StatusCode, err, raw)
	}
	out.Status, out.Header = resp.StatusCode, resp.Header
	return out
}

// mustData runs a request that must succeed and decodes its data into dst.
func (s *testServer) mustData(token, query string, vars map[string]any, dst any) {
	s.t.Helper()
	r := s.post(token, query, vars)
	if r.Status != http.StatusOK || len(r.Errors) > 0 {
		s.t.Fatalf("request failed: HTTP %d, errors %+v\nquery: %s", r.Status, r.Errors, query)
	}
	if dst != nil {
		if err := json.Unmarshal(r.Data, dst); err != nil {
			s.t.Fatalf("decode data: %v\n%s", err, r.Data)
		}
	}
}

// expectError runs a request that must fail with exactly one error of code.
func (s *testServer) expectError(token, query string, vars map[string]any, code string) gqlResponse {
	s.t.Helper()
	r := s.post(token, query, vars)
	if len(r.Errors) == 0 {
		s.t.Fatalf("want error %s, got none; data %s\nquery: %s vars: %v", code, r.Data, query, vars)
	}
	for _, e := range r.Errors {
		if e.code() != code {
			s.t.Fatalf("want every error to have code %s, got %v (%+v)\nquery: %s vars: %v", code, r.codes(), r.Errors, query, vars)
		}
		if m := strings.ToLower(e.Message); strings.Contains(m, "dynamodb") || strings.Contains(m, "exception") || strings.Contains(e.Message, "T#") {
			s.t.Errorf("error message leaks internals: %q", e.Message)
		}
	}
	return r
}

// sendMutation is the sendNotification operation every test uses.
const sendMutation = `mutation($in: SendNotificationInput!) {
  sendNotification(input: $in) { notificationIds accepted duplicate }
}`

type sendResult struct {
	NotificationIds []string `json:"notificationIds"`
	Accepted        int      `json:"accepted"`
	Duplicate       bool     `json:"duplicate"`
}

// sendInput returns a valid send input to recipients, with a fresh idempotency key.
func (s *testServer) sendInput(title string, recipients ...string) map[string]any {
	return map[string]any{
		"idempotencyKey": fmt.Sprintf("key-%d-%d", time.Now().UnixNano(), s.seq.Add(1)),
		"recipients":     recipients,
		"type":           "issue_comment.created",
		"category":       "issues",
		"title":          title,
		"body":           "body of " + title,
		"actor":          map[string]any{"id": "octocat", "name": "The Octocat", "url": "https://github.com/octocat"},
		"target":         map[string]any{"id": "repo-1", "kind": "repository", "title": "hello-world"},
		"payload":        map[string]any{"n": 1, "tags": []string{"a"}},
	}
}

// send sends with senderToken (scope notifications:send) and returns the result.
func (s *testServer) send(senderToken string, in map[string]any) sendResult {
	s.t.Helper()
	var d struct {
		SendNotification sendResult `json:"sendNotification"`
	}
	s.mustData(senderToken, sendMutation, map[string]any{"in": in}, &d)
	return d.SendNotification
}

// seed sends n notifications, one at a time, to user of the sender's tenant and returns
// their ids in send order (oldest first).
func (s *testServer) seed(senderToken, user string, n int) []string {
	s.t.Helper()
	var ids []string
	for i := range n {
		res := s.send(senderToken, s.sendInput(fmt.Sprintf("n%d", i), user))
		if res.Accepted != 1 || len(res.NotificationIds) != 1 || res.Duplicate {
			s.t.Fatalf("seed: unexpected send result %+v", res)
		}
		ids = append(ids, res.NotificationIds[0])
	}
	return ids
}

// unread returns the viewer's unreadCount over HTTP.
func (s *testServer) unread(token string) int {
	s.t.Helper()
	var d struct {
		Viewer struct {
			UnreadCount int `json:"unreadCount"`
		} `json:"viewer"`
	}
	s.mustData(token, `{ viewer { unreadCount } }`, nil, &d)
	return d.Viewer.UnreadCount
}

// inboxIDs returns the ids of the viewer's first 100 notifications, newest first.
func (s *testServer) inboxIDs(token string) []string {
	s.t.Helper()
	var d struct {
		Viewer struct {
			Inbox struct {
				Nodes []struct {
					ID string `json:"id"`
				} `json:"nodes"`
			} `json:"inbox"`
		} `json:"viewer"`
	}
	s.mustData(token, `{ viewer { inbox(first: 100) { nodes { id } } } }`, nil, &d)
	ids := make([]string, len(d.Viewer.Inbox.Nodes))
	for i, n := range d.Viewer.Inbox.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// expectUnread fails the test unless the viewer's badge is want (and, when the inbox is
// meant to be empty, so is the inbox).
func (s *testServer) expectUnread(token string, want int, what string) {
	s.t.Helper()
	if got := s.unread(token); got != want {
		s.t.Fatalf("%s: unreadCount = %d, want %d", what, got, want)
	}
}

// expectInboxLen fails the test unless the viewer's inbox holds exactly n notifications.
func (s *testServer) expectInboxLen(token string, n int, what string) {
	s.t.Helper()
	if got := s.inboxIDs(token); len(got) != n {
		s.t.Fatalf("%s: inbox holds %d notifications, want %d", what, len(got), n)
	}
}

// waitFor polls cond every 10 ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
