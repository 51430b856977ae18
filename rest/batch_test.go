package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// TestBatchOverREST: three comments with a batch of maxItems 3 answer the same
// notification id, which reads `batching` until the third closes it at once: then ONE
// notification with activityCount 3 and its activities is in the inbox, and ONE email
// went out, rendered with the activities ("Ann and 2 others"). A batch over its bounds
// is a 400 problem naming the member.
func TestBatchOverREST(t *testing.T) {
	t.Parallel()
	s, smtpSrv, admin := newEmailing(t, "dee", "dee@example.test", "note", nil)
	decode[map[string]any](t, call(t, s, http.MethodPut, "/v1/templates/comments", admin, nil, map[string]any{
		"locale": "en", "title": "{{ activities[0].actor.name }} and {{ total_activities | minus: 1 }} others commented",
		"email": map[string]any{"subject": "{{ total_activities }} new comments", "text": "{% for a in activities %}{{ a.data.text }};{% endfor %}"}}), 200)
	body := func(actor, text string) map[string]any {
		return map[string]any{"recipientUserId": "dee", "type": "comment", "template": "comments",
			"actor": map[string]any{"id": strings.ToLower(actor), "name": actor}, "data": map[string]any{"text": text},
			"batch": map[string]any{"key": "post-7", "window": "1h", "maxItems": 3}}
	}
	var id string
	for i, actor := range []string{"Ann", "Bob", "Cy"} {
		a := decode[gen.Accepted](t, send(t, s, admin, fmt.Sprintf("cm-%d", i), body(actor, "t"+actor)), 202)
		if id == "" {
			id = *a.NotificationId
		}
		if *a.NotificationId != id || len(a.NotificationIds) != 1 || a.NotificationIds[0] != id {
			t.Fatalf("send %d answered %+v, want the batch %s", i, a, id)
		}
		if i == 1 {
			st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+id+"/status", admin, nil, nil), 200)
			if st.Status != "batching" || len(feed(t, s, admin, "dee")) != 0 {
				t.Fatalf("before the close: %s", mustJSON(t, st))
			}
		}
	}
	items := feed(t, s, admin, "dee")
	if len(items) != 1 || items[0].Id != id || items[0].ActivityCount == nil || *items[0].ActivityCount != 3 ||
		items[0].Activities == nil || len(*items[0].Activities) != 3 || (*items[0].Activities)[2].Actor.Id != "cy" {
		t.Fatalf("the inbox after the close: %s", mustJSON(t, items))
	}
	if got := *items[0].Title; got != "Ann and 2 others commented" {
		t.Fatalf("title %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := smtpSrv.WaitMessages(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Subject != "3 new comments" || !strings.Contains(msgs[0].Text, "tAnn;tBob;tCy;") {
		t.Fatalf("emails: %d, first %+v", len(msgs), msgs[0])
	}
	// A replay answers the same batch and sends nothing more.
	a := decode[gen.Accepted](t, send(t, s, admin, "cm-1", body("Bob", "tBob")), 202)
	if *a.NotificationId != id {
		t.Fatalf("replay answered %s", *a.NotificationId)
	}
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	for name, b := range map[string]map[string]any{
		"window":   {"window": "100ms"},
		"maxItems": {"window": "1m", "maxItems": 5000},
		"key":      {"window": "1m", "key": strings.Repeat("k", 10<<10)},
	} {
		req := body("Ann", "x")
		req["batch"] = b
		if a := send(t, s, svc, "bad-"+name, req); a.Status != 400 || !strings.Contains(string(a.Body), "batch") {
			t.Errorf("%s: %d %s", name, a.Status, a.Body)
		}
	}
	if n := len(smtpSrv.Messages()); n != 1 {
		t.Fatalf("%d emails in all, want 1", n)
	}
}

// TestBatchOverGraphQL: sendNotification's batch answers the batch's id; the closed
// notification shows activityCount and its activities with their actors (whose ids
// node() resolves); an unbatched one reads 1 and itself; activities(first:) is bounded.
func TestBatchOverGraphQL(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.ServiceToken(tenant, "svc")
	in := func(key, actor string) map[string]any {
		return map[string]any{"idempotencyKey": key, "recipients": []string{"dee"}, "type": "comment", "title": "New comments",
			"actor": map[string]any{"id": actor, "name": "Name " + actor}, "payload": map[string]any{"by": actor},
			"batch": map[string]any{"key": "p", "window": "1h", "maxItems": 2}}
	}
	first := s.Send(svc, in("g1", "ann"))
	second := s.Send(svc, in("g2", "bob"))
	if len(first.NotificationIds) != 1 || second.NotificationIds[0] != first.NotificationIds[0] {
		t.Fatalf("answers %+v and %+v", first, second)
	}
	plain := s.SendInput("plain", "dee")
	s.Send(svc, plain)
	dee := s.Token(tenant, "dee")
	var d struct {
		Viewer struct {
			Inbox struct {
				Edges []struct {
					Node struct {
						ID            string
						Title         string
						ActivityCount int
						Activities    []struct {
							Actor     *struct{ ID, Name string }
							Data      map[string]any
							CreatedAt string
						}
					}
				}
			}
		}
	}
	s.MustData(dee, `{ viewer { inbox(first: 5) { edges { node { id title activityCount
		activities { actor { id name } data createdAt } } } } } }`, nil, &d)
	edges := d.Viewer.Inbox.Edges
	if len(edges) != 2 {
		t.Fatalf("inbox: %+v", edges)
	}
	plainNode, batch := edges[0].Node, edges[1].Node
	if batch.Title != "New comments" {
		plainNode, batch = batch, plainNode
	}
	if batch.ActivityCount != 2 || len(batch.Activities) != 2 || batch.Activities[0].Actor.Name != "Name ann" ||
		batch.Activities[1].Data["by"] != "bob" || batch.Activities[1].CreatedAt == "" {
		t.Fatalf("batched: %+v", batch)
	}
	if plainNode.ActivityCount != 1 || len(plainNode.Activities) != 1 || plainNode.Activities[0].Actor.Name != "The Octocat" {
		t.Fatalf("unbatched: %+v", plainNode)
	}
	var n struct {
		Node *struct{ Name string }
	}
	s.MustData(dee, `query($id: ID!) { node(id: $id) { ... on Actor { name } } }`, map[string]any{"id": batch.Activities[1].Actor.ID}, &n)
	if n.Node == nil || n.Node.Name != "Name bob" {
		t.Fatalf("node(activity's actor) = %+v", n.Node)
	}
	s.ExpectError(dee, `{ viewer { inbox(first: 1) { edges { node { activities(first: 11) { createdAt } } } } } }`, nil, "BAD_USER_INPUT")
	bad := in("g3", "cy")
	bad["batch"] = map[string]any{"window": "forever"}
	s.ExpectError(svc, testgw.SendMutation, map[string]any{"in": bad}, "BAD_USER_INPUT")
}

// TestBatchActivityActorsRideInThePage: a page that renders its batched notifications'
// activities' actors reads them with the page's other profiles (at most a Query and one
// BatchGetItem), not one dataloader batch after another (the last attack on batches:
// 21 to 26 calls for a page of 100).
func TestBatchActivityActorsRideInThePage(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	s := testgw.NewWith(t, testgw.Options{DynamoDB: []func(*dynamodb.Options){rec.Option()}})
	svc := s.ServiceToken(tenant, "svc")
	for b := range 10 {
		for a := range 10 {
			s.Send(svc, map[string]any{"idempotencyKey": fmt.Sprintf("ar-%d-%d", b, a), "recipients": []string{"dee"}, "type": "comment",
				"title": fmt.Sprintf("Post %d", b), "actor": map[string]any{"id": fmt.Sprintf("a%d-%d", b, a), "name": fmt.Sprintf("Actor %d-%d", b, a)},
				"batch": map[string]any{"key": fmt.Sprintf("post-%d", b), "window": "1h", "maxItems": 10}})
		}
	}
	rec.Reset()
	var d struct {
		Viewer struct {
			Inbox struct {
				Edges []struct {
					Node struct {
						Activities []struct{ Actor *struct{ Name string } }
					}
				}
			}
		}
	}
	s.MustData(s.Token(tenant, "dee"), `{ viewer { inbox(first: 10) { edges { node { actor { name } activities { actor { name } } } } } } }`, nil, &d)
	names := 0
	for _, e := range d.Viewer.Inbox.Edges {
		for _, a := range e.Node.Activities {
			if a.Actor != nil && strings.HasPrefix(a.Actor.Name, "Actor ") {
				names++
			}
		}
	}
	if len(d.Viewer.Inbox.Edges) != 10 || names != 100 {
		t.Fatalf("%d notifications, %d activity actors named: %+v", len(d.Viewer.Inbox.Edges), names, d)
	}
	ops := rec.Ops()
	if len(ops) > 2 {
		t.Fatalf("the page took %d calls: %v", len(ops), ops)
	}
	t.Logf("calls: %v", ops)
}
