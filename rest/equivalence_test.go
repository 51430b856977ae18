package rest_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// stored is what the store holds of one user's notifications, without what differs
// between two sends of the same input (ids, times): each notification and its status
// records, newest first.
type stored struct {
	Notification inbox.Notification
	Status       inbox.NotificationStatus
}

// storedOf reads user's notifications in tenant and their status records, each with its
// id and times cleared.
func storedOf(t *testing.T, s *testgw.Server, tenant, user string) []stored {
	t.Helper()
	ctx := t.Context()
	first := 100
	page, err := s.Store.Inbox(ctx, inbox.Viewer{TenantID: tenant, UserID: user}, inbox.PageQuery{First: &first})
	if err != nil {
		t.Fatal(err)
	}
	var out []stored
	for _, n := range page.Nodes() {
		st, err := s.Store.Status(ctx, tenant, n.ID)
		if err != nil {
			t.Fatalf("status of %s: %v", n.ID, err)
		}
		n.ID, n.CreatedAt = "", time.Time{}
		st.ID, st.CreatedAt = "", time.Time{}
		for i := range st.Channels {
			c := &st.Channels[i]
			c.SentAt, c.DeliveredAt, c.OpenedAt, c.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		}
		out = append(out, stored{Notification: *n, Status: st})
	}
	return out
}

// TestGraphQLAndRESTSendsStoreTheSame sends the same input through GraphQL
// sendNotification (tenant gql) and REST POST /v1/notifications (tenant rst), both with
// the same idempotency key, and compares what each stored for every recipient:
// the notification (every field but id and creation time) and its status records.
func TestGraphQLAndRESTSendsStoreTheSame(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const gql, rst = "gql", "rst"
	for _, tn := range []string{gql, rst} {
		admin := s.Token(tn, "svc", rest.ScopeAdmin)
		decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"email": "alice@example.com"}), 200)
		decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/bob", admin, nil, map[string]any{"locale": "de"}), 200)
		for _, body := range []map[string]any{
			{"locale": "en", "title": "{{ who }} commented", "body": "on {{ what }}", "email": map[string]any{"subject": "New comment", "text": "{{ who }}"}},
			{"locale": "de", "title": "{{ who }} hat kommentiert", "body": "zu {{ what }}"},
		} {
			decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/comment", admin, nil, body), 200)
		}
	}
	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	data := map[string]any{"who": "Ada", "what": "PR 7", "n": []int{1, 2}}
	actor := map[string]any{"id": "ada", "name": "Ada", "url": "https://example.com/ada"}
	target := map[string]any{"id": "pr-7", "kind": "pull_request", "title": "PR 7", "url": "https://example.com/pr/7"}
	actions := []any{map[string]any{"label": "Open", "url": "https://example.com/pr/7"}}
	for _, c := range []struct {
		name string
		// graphQL and rest are the same send in each transport's spelling.
		graphQL, rest map[string]any
	}{
		{"content",
			map[string]any{"recipients": []string{"alice", "bob"}, "type": "comment", "category": "reviews", "title": "Ada commented",
				"body": "on PR 7", "actor": actor, "target": target, "actions": actions, "groupKey": "pr-7", "expiresAt": expires,
				"payload": data, "channels": []string{"IN_APP", "EMAIL"}, "priority": "TRANSACTIONAL"},
			map[string]any{"recipients": []string{"alice", "bob"}, "type": "comment", "category": "reviews", "title": "Ada commented",
				"body": "on PR 7", "actor": actor, "target": target, "actions": actions, "groupKey": "pr-7", "expiresAt": expires,
				"data": data, "channelsHint": []string{"in_app", "email"}, "priority": "transactional"}},
		{"template",
			map[string]any{"recipients": []string{"alice", "bob"}, "type": "comment", "template": "comment", "data": data, "payload": data,
				"locale": "en", "actor": actor, "target": target},
			map[string]any{"recipients": []string{"alice", "bob"}, "type": "comment", "template": "comment", "data": data,
				"locale": "en", "actor": actor, "target": target}},
		// The actor (ada) left out of a list, under a throttle: both transports map them.
		{"flows",
			map[string]any{"recipients": []string{"alice", "bob", "ada"}, "type": "comment", "title": "Ada commented", "actor": actor,
				"throttle": map[string]any{"key": "comments", "limit": 1, "window": "1h"}},
			map[string]any{"recipients": []string{"alice", "bob", "ada"}, "type": "comment", "title": "Ada commented", "actor": actor,
				"throttle": map[string]any{"key": "comments", "limit": 1, "window": "1h"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := s.WithT(t)
			key := "same-" + c.name
			gin := c.graphQL
			gin["idempotencyKey"] = key
			res := s.Send(s.ServiceToken(gql, "svc"), gin)
			if res.Accepted != 2 {
				t.Fatalf("GraphQL send: %+v", res)
			}
			rsvc := s.Token(rst, "svc", rest.ScopeSend)
			decode[gen.Accepted](t, send(t, s, rsvc, key, c.rest), 202)
			for _, u := range []string{"alice", "bob"} {
				waitFeed(t, s, rsvc, u, len(storedOf(t, s, gql, u)))
				g, r := storedOf(t, s, gql, u), storedOf(t, s, rst, u)
				gj, _ := json.Marshal(g)
				rj, _ := json.Marshal(r)
				if string(gj) != string(rj) {
					t.Fatalf("%s: GraphQL stored\n%s\nREST stored\n%s", u, gj, rj)
				}
				if len(g) == 0 || g[0].Notification.Title == "" || g[0].Notification.ActorID != "ada" {
					t.Fatalf("%s: nothing worth comparing: %s", u, gj)
				}
			}
		})
	}
	for _, tn := range []string{gql, rst} {
		if got := storedOf(t, s, tn, "ada"); len(got) != 0 {
			t.Fatalf("%s: the actor was notified: %+v", tn, got)
		}
	}
	// What the template rendered, per locale (the comparison alone would pass were both wrong).
	bob := storedOf(t, s, rst, "bob")
	alice := storedOf(t, s, rst, "alice")
	if len(bob) != 3 || bob[1].Notification.Title != "Ada hat kommentiert" || alice[1].Notification.Title != "Ada commented" ||
		string(alice[1].Notification.Payload) != `{"n":[1,2],"what":"PR 7","who":"Ada"}` {
		t.Fatalf("rendered: alice %+v, bob %+v", alice, bob)
	}
}
