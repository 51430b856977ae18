package testgw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// GQLError is one GraphQL error of a response.
type GQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Code is the error's extensions.code ("" when it has none).
func (e GQLError) Code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// Response is a decoded GraphQL HTTP response.
type Response struct {
	Status int
	Header http.Header
	Data   json.RawMessage `json:"data"`
	Errors []GQLError      `json:"errors"`
}

// Codes returns the extensions.code of every error.
func (r Response) Codes() []string {
	out := make([]string, len(r.Errors))
	for i, e := range r.Errors {
		out[i] = e.Code()
	}
	return out
}

// Post sends one GraphQL request (POST application/json) with token as bearer token (none
// when empty) and decodes the answer.
func (s *Server) Post(token, query string, vars map[string]any) Response {
	s.T.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		s.T.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		s.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.T.Fatalf("POST /graphql: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.T.Fatalf("read response: %v", err)
	}
	var out Response
	if err := json.Unmarshal(raw, &out); err != nil {
		s.T.Fatalf("decode response (HTTP %d): %v\n%s", resp.StatusCode, err, raw)
	}
	out.Status, out.Header = resp.StatusCode, resp.Header
	return out
}

// MustData runs a request that must succeed and decodes its data into dst (unless nil).
func (s *Server) MustData(token, query string, vars map[string]any, dst any) {
	s.T.Helper()
	r := s.Post(token, query, vars)
	if r.Status != http.StatusOK || len(r.Errors) > 0 {
		s.T.Fatalf("request failed: HTTP %d, errors %+v\nquery: %s", r.Status, r.Errors, query)
	}
	if dst != nil {
		if err := json.Unmarshal(r.Data, dst); err != nil {
			s.T.Fatalf("decode data: %v\n%s", err, r.Data)
		}
	}
}

// ExpectError runs a request that must fail with errors all of code, none of whose
// messages leaks internals (DynamoDB, exception names, keys).
func (s *Server) ExpectError(token, query string, vars map[string]any, code string) Response {
	s.T.Helper()
	r := s.Post(token, query, vars)
	if len(r.Errors) == 0 {
		s.T.Fatalf("want error %s, got none; data %s\nquery: %s vars: %v", code, r.Data, query, vars)
	}
	for _, e := range r.Errors {
		if e.Code() != code {
			s.T.Fatalf("want every error to have code %s, got %v (%+v)\nquery: %s vars: %v", code, r.Codes(), r.Errors, query, vars)
		}
		if m := strings.ToLower(e.Message); strings.Contains(m, "dynamodb") || strings.Contains(m, "exception") || strings.Contains(e.Message, "T#") {
			s.T.Errorf("error message leaks internals: %q", e.Message)
		}
	}
	return r
}

// SendMutation is the sendNotification operation every test uses.
const SendMutation = `mutation($in: SendNotificationInput!) {
  sendNotification(input: $in) { notificationIds accepted duplicate }
}`

// SendResult is sendNotification's answer.
type SendResult struct {
	NotificationIds []string `json:"notificationIds"`
	Accepted        int      `json:"accepted"`
	Duplicate       bool     `json:"duplicate"`
}

// SendInput returns a valid send input to recipients, with a fresh idempotency key.
func (s *Server) SendInput(title string, recipients ...string) map[string]any {
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

// Send sends with senderToken (scope notifications:send) and returns the result.
func (s *Server) Send(senderToken string, in map[string]any) SendResult {
	s.T.Helper()
	var d struct {
		SendNotification SendResult `json:"sendNotification"`
	}
	s.MustData(senderToken, SendMutation, map[string]any{"in": in}, &d)
	return d.SendNotification
}

// Seed sends n notifications, one at a time, to user of the sender's tenant and returns
// their ids in send order (oldest first).
func (s *Server) Seed(senderToken, user string, n int) []string {
	s.T.Helper()
	var ids []string
	for i := range n {
		res := s.Send(senderToken, s.SendInput(fmt.Sprintf("n%d", i), user))
		if res.Accepted != 1 || len(res.NotificationIds) != 1 || res.Duplicate {
			s.T.Fatalf("seed: unexpected send result %+v", res)
		}
		ids = append(ids, res.NotificationIds[0])
	}
	return ids
}

// Unread returns the viewer's unreadCount over HTTP.
func (s *Server) Unread(token string) int {
	s.T.Helper()
	var d struct {
		Viewer struct {
			UnreadCount int `json:"unreadCount"`
		} `json:"viewer"`
	}
	s.MustData(token, `{ viewer { unreadCount } }`, nil, &d)
	return d.Viewer.UnreadCount
}

// InboxIDs returns the ids of the viewer's first 100 notifications, newest first.
func (s *Server) InboxIDs(token string) []string {
	s.T.Helper()
	var d struct {
		Viewer struct {
			Inbox struct {
				Nodes []struct {
					ID string `json:"id"`
				} `json:"nodes"`
			} `json:"inbox"`
		} `json:"viewer"`
	}
	s.MustData(token, `{ viewer { inbox(first: 100) { nodes { id } } } }`, nil, &d)
	ids := make([]string, len(d.Viewer.Inbox.Nodes))
	for i, n := range d.Viewer.Inbox.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// ExpectUnread fails the test unless the viewer's badge is want.
func (s *Server) ExpectUnread(token string, want int, what string) {
	s.T.Helper()
	if got := s.Unread(token); got != want {
		s.T.Fatalf("%s: unreadCount = %d, want %d", what, got, want)
	}
}

// ExpectInboxLen fails the test unless the viewer's inbox holds exactly n notifications.
func (s *Server) ExpectInboxLen(token string, n int, what string) {
	s.T.Helper()
	if got := s.InboxIDs(token); len(got) != n {
		s.T.Fatalf("%s: inbox holds %d notifications, want %d", what, len(got), n)
	}
}

// Marked is a notification in a markRead or markUnread payload.
type Marked struct {
	ID     string  `json:"id"`
	Read   bool    `json:"read"`
	ReadAt *string `json:"readAt"`
}

// Mark marks ids read (markRead) or unread (markUnread) and returns the payload's
// unreadCount and notifications.
func (s *Server) Mark(token string, read bool, ids ...string) (unreadCount int, notifs []Marked) {
	s.T.Helper()
	field := "markUnread"
	if read {
		field = "markRead"
	}
	var d map[string]struct {
		Notifications []Marked `json:"notifications"`
		UnreadCount   int      `json:"unreadCount"`
	}
	s.MustData(token, `mutation($ids: [ID!]!) { `+field+`(ids: $ids) { notifications { id read readAt } unreadCount } }`,
		map[string]any{"ids": ids}, &d)
	return d[field].UnreadCount, d[field].Notifications
}
