package rest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// TestActorIsLeftOutOfListAndSegmentSends: a send to several recipients or to a segment
// that includes its actor skips the actor (status skipped, reason actor, in every
// channel; no notification, nothing in the feed) and reaches everyone else;
// includeActor: true reaches the actor too; a send to recipientUserId reaches its one
// recipient even when they are the actor.
func TestActorIsLeftOutOfListAndSegmentSends(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	actor := map[string]any{"id": "ann", "name": "Ann"}
	body := func(extra map[string]any) map[string]any {
		b := map[string]any{"type": "comment", "title": "Ann commented", "actor": actor}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}

	// A list: ann is skipped with reason actor; bob and cy get it.
	acc := decode[gen.Accepted](t, send(t, s, svc, "list-actor", body(map[string]any{"recipients": []string{"ann", "bob", "cy"}})), 202)
	for _, u := range []string{"bob", "cy"} {
		waitFeed(t, s, svc, u, 1)
	}
	testgw.WaitFor(t, 30*time.Second, "the list send done", func() bool { return requestDone(t, s, "list-actor") })
	if items := feed(t, s, svc, "ann"); len(items) != 0 {
		t.Fatalf("the actor was notified of their own action: %s", mustJSON(t, items))
	}
	st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+acc.NotificationIds[0]+"/status", svc, nil, nil), 200)
	if st.UserId != "ann" || st.Status != "skipped" || len(st.Channels) == 0 {
		t.Fatalf("the actor's status: %s", mustJSON(t, st))
	}
	for _, c := range st.Channels {
		if c.Status != "skipped" || c.Error == nil || *c.Error != "actor" {
			t.Fatalf("the actor's %s record: %s", c.Channel, mustJSON(t, st))
		}
	}

	// includeActor: the actor gets it too.
	decode[gen.Accepted](t, send(t, s, svc, "list-actor-in", body(map[string]any{"recipients": []string{"ann", "bob"}, "includeActor": true})), 202)
	waitFeed(t, s, svc, "ann", 1)
	waitFeed(t, s, svc, "bob", 2)

	// One recipient, named: reached even when they are the actor.
	decode[gen.Accepted](t, send(t, s, svc, "one-actor", body(map[string]any{"recipientUserId": "ann"})), 202)
	waitFeed(t, s, svc, "ann", 2)

	// A segment holding the actor: everyone but the actor.
	members := []string{"ann", "dan", "eve"}
	decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/team/members", admin, nil, map[string]any{"add": members}), 200)
	acc = decode[gen.Accepted](t, send(t, s, svc, "seg-actor", body(map[string]any{"segment": "team"})), 202)
	bc := pollBroadcast(t, s, svc, *acc.BroadcastId, "done", 60*time.Second)
	if bc.Recipients != 3 || bc.Written != 2 || bc.Skipped != 1 {
		t.Fatalf("segment broadcast: %s", mustJSON(t, bc))
	}
	for _, u := range []string{"dan", "eve"} {
		if items := feed(t, s, svc, u); len(items) != 1 {
			t.Fatalf("%s's feed: %s", u, mustJSON(t, items))
		}
	}
	if items := feed(t, s, svc, "ann"); len(items) != 2 {
		t.Fatalf("the actor's feed after the segment send: %s", mustJSON(t, items))
	}

	// The same key with includeActor flipped is another request: a conflict.
	expectProblem(t, send(t, s, svc, "list-actor", body(map[string]any{"recipients": []string{"ann", "bob", "cy"}, "includeActor": true})), 409, "CONFLICT")
}

// requestDone reports whether the send request under key is processed.
func requestDone(t *testing.T, s *testgw.Server, key string) bool {
	t.Helper()
	r, ok, err := s.Store.GetRequest(t.Context(), tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok && r.State == "done"
}
