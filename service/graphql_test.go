package service_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/service"
)

// TestGraphQLAndServiceStoreTheSame: the same input through sendNotification and
// through the service (in another tenant) stores the same notification.
func TestGraphQLAndServiceStoreTheSame(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	in := map[string]any{
		"idempotencyKey": "same-key", "recipients": []string{"u"}, "type": "issue_comment.created",
		"category": "issues", "title": "t", "body": "b", "payload": map[string]any{"n": 1},
		"actor":     map[string]any{"id": "octocat", "name": "The Octocat"},
		"target":    map[string]any{"id": "repo-1", "kind": "repository", "title": "hello"},
		"expiresAt": expires.Format(time.RFC3339), "groupKey": "g1",
		"actions":  []map[string]any{{"label": "Open", "url": "https://example.com/1"}},
		"priority": "TRANSACTIONAL", "channels": []string{"IN_APP", "EMAIL"}, "locale": "en",
	}
	r := s.Post(s.Token("t1", "svc", auth.ScopeSend), testgw.SendMutation, map[string]any{"in": in})
	if len(r.Errors) > 0 {
		t.Fatalf("graphql: %+v", r.Errors)
	}
	svc := service.New(s.Store, service.Options{})
	t.Cleanup(svc.Close)
	if _, err := svc.Send(context.Background(), "t2", service.SendRequest{IdempotencyKey: "same-key", Recipients: []string{"u"},
		Type: "issue_comment.created", Category: "issues", Title: "t", Body: "b", Payload: inbox.JSON(`{"n":1}`),
		Actor:     &inbox.Actor{ActorID: "octocat", Name: "The Octocat"},
		Target:    &inbox.Target{TargetID: "repo-1", Kind: "repository", Title: "hello"},
		ExpiresAt: expires, GroupKey: "g1", Actions: []inbox.Action{{Label: "Open", URL: "https://example.com/1"}},
		Priority: service.Transactional, Channels: []string{inbox.ChannelInApp, inbox.ChannelEmail}, Locale: "en"}); err != nil {
		t.Fatal(err)
	}
	read := func(tenant string) inbox.Notification {
		first := 10
		p, err := s.Store.Inbox(context.Background(), inbox.Viewer{TenantID: tenant, UserID: "u"}, inbox.PageQuery{First: &first})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Edges) != 1 {
			t.Fatalf("%s: %d notifications, want 1", tenant, len(p.Edges))
		}
		n := *p.Edges[0].Node
		n.ID, n.CreatedAt = "", time.Time{}
		return n
	}
	if a, b := read("t1"), read("t2"); !reflect.DeepEqual(a, b) {
		t.Fatalf("graphql stored %+v\nservice stored %+v", a, b)
	}
}
