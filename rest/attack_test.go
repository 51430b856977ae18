package rest_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/service"
)

// Attacks on the service API through the real server (see the report of helper "attack").

// TestAttackKeyReusedAcrossSendAndBroadcast: an Idempotency-Key used by POST
// /v1/broadcasts, then by a segment send of POST /v1/notifications with another body,
// answered 202 naming the first request's broadcast, and the send was never processed
// (its recovery task met CONFLICT until the scheduler dropped it). Each endpoint's keys
// now name their own broadcasts: the send gets its own, which reaches done.
func TestAttackKeyReusedAcrossSendAndBroadcast(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	svc := s.ServiceToken(tenant, "svc")
	decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/all/members", admin, nil, map[string]any{"add": []string{"a", "b"}}), 200)
	key := map[string]string{"Idempotency-Key": "k-shared"}
	first := decode[gen.BroadcastAccepted](t, call(t, s, http.MethodPost, "/v1/broadcasts", svc, key,
		map[string]any{"segment": "all", "type": "news", "title": "first"}), 202)
	acc := decode[gen.Accepted](t, call(t, s, http.MethodPost, "/v1/notifications", svc, key,
		map[string]any{"segment": "all", "type": "news", "title": "second"}), 202)
	if acc.BroadcastId == nil || *acc.BroadcastId == first.BroadcastId {
		t.Fatalf("the send's 202 names the other request's broadcast: %+v (first %s)", acc, first.BroadcastId)
	}
	pollBroadcast(t, s, svc, first.BroadcastId, "done", 90*time.Second)
	pollBroadcast(t, s, svc, *acc.BroadcastId, "done", 90*time.Second)
	for _, u := range []string{"a", "b"} {
		tok := s.Token(tenant, u)
		testgw.WaitFor(t, 20*time.Second, u+"'s two notifications", func() bool { return len(s.InboxIDs(tok)) == 2 })
	}
}

// TestAttackConcurrentIdenticalSends: identical sends racing on one key write one set.
func TestAttackConcurrentIdenticalSends(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	svc := s.ServiceToken(tenant, "svc")
	body := map[string]any{"recipients": []string{"r1", "r2", "r3"}, "type": "otp", "title": "code"}
	var wg sync.WaitGroup
	ids := make([][]string, 8)
	statuses := make([]int, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := call(t, s, http.MethodPost, "/v1/notifications", svc, map[string]string{"Idempotency-Key": "race"}, body)
			statuses[i] = a.Status
			if a.Status == 202 {
				ids[i] = decode[gen.Accepted](t, a, 202).NotificationIds
			}
		}()
	}
	wg.Wait()
	for i := range ids {
		if statuses[i] != 202 || strings.Join(ids[i], ",") != strings.Join(ids[0], ",") {
			t.Fatalf("answer %d: %d %v, first %v", i, statuses[i], ids[i], ids[0])
		}
	}
	for _, u := range []string{"r1", "r2", "r3"} {
		tok := s.Token(tenant, u)
		testgw.WaitFor(t, 20*time.Second, "delivery", func() bool { return len(s.InboxIDs(tok)) >= 1 })
		time.Sleep(200 * time.Millisecond)
		if n := len(s.InboxIDs(tok)); n != 1 {
			t.Fatalf("%s has %d notifications", u, n)
		}
	}
}

// TestAttackIDsInPaths: ids that try to break out of a key or of the path.
func TestAttackIDsInPaths(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.ServiceToken(tenant, "svc")
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	for _, p := range []string{"/v1/notifications/a%23b/status", "/v1/notifications/a%2Fb/status", "/v1/notifications/" + strings.Repeat("x", 5000) + "/status",
		"/v1/broadcasts/%E2%80%AE", "/v1/broadcasts/a%00b", "/v1/notifications/%FF/status", "/v1/notifications/a,b/status"} {
		a := call(t, s, http.MethodGet, p, svc, nil, nil)
		if a.Status >= 500 {
			t.Fatalf("%s: %d %s", p[:min(len(p), 60)], a.Status, a.Body)
		}
		t.Logf("%s: %d %s", p[:min(len(p), 60)], a.Status, a.Body)
	}
	for _, p := range []string{"/v1/segments/a%23b", "/v1/templates/a%2523", "/v1/users/a%23/preferences"} {
		a := call(t, s, http.MethodGet, p, admin, nil, nil)
		if a.Status >= 500 {
			t.Fatalf("%s: %d %s", p, a.Status, a.Body)
		}
		t.Logf("%s: %d %s", p, a.Status, a.Body)
	}
	// A user token reaches only its own preferences, whatever the spelling.
	alice := s.Token(tenant, "alice")
	for _, p := range []string{"/v1/users/bob/preferences", "/v1/users/alice%2F..%2Fbob/preferences", "/v1/users/%61lice/preferences", "/v1/users/alice/../bob/preferences"} {
		a := call(t, s, http.MethodGet, p, alice, nil, nil)
		t.Logf("%s: %d %s", p, a.Status, a.Body)
	}
	// Keys.
	for _, k := range []string{strings.Repeat("k", 300), "a#b", "a\x01b", "\u202e"} {
		req, _ := http.NewRequest(http.MethodPost, s.HTTP.URL+"/v1/notifications", strings.NewReader(`{"recipientUserId":"u","type":"t","title":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+svc)
		req.Header.Set("Idempotency-Key", k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Logf("key %q: %v", k[:min(len(k), 10)], err)
			continue
		}
		resp.Body.Close()
		t.Logf("key %q: %d", k[:min(len(k), 10)], resp.StatusCode)
	}
}

// TestAttackSendToUnknownSegment: a segment send to a segment without members is
// BAD_USER_INPUT at accept time (issue 10 item 9: nothing is written), as POST
// /v1/broadcasts answers it.
func TestAttackSendToUnknownSegment(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.ServiceToken(tenant, "svc")
	a := call(t, s, http.MethodPost, "/v1/notifications", svc, map[string]string{"Idempotency-Key": "ghost-seg"},
		map[string]any{"segment": "nobody-here", "type": "news", "title": "x"})
	expectProblem(t, a, 400, "BAD_USER_INPUT")
}

// TestAttackClientKeyCollidesWithBroadcastPageKey: the store's guards of a broadcast's
// page are keyed "{broadcastId}:{shard}:{page}", a string a client may send as its own
// Idempotency-Key (CheckID allows ':'): a send under that key beforehand makes the page
// meet a key reused with another body: the broadcast ended failed and "b" got nothing.
// Such keys are refused now.
func TestAttackClientKeyCollidesWithBroadcastPageKey(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	svc := s.ServiceToken(tenant, "svc")
	pageKey := service.BroadcastID("launch") + ":00:0"
	expectProblem(t, call(t, s, http.MethodPost, "/v1/notifications", svc, map[string]string{"Idempotency-Key": pageKey},
		map[string]any{"recipients": []string{"a"}, "type": "t", "title": "earlier"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPost, "/v1/notifications", svc, map[string]string{"Idempotency-Key": "chunk~0~1"},
		map[string]any{"recipients": []string{"a"}, "type": "t", "title": "earlier"}), 400, "BAD_USER_INPUT")
	acc := decode[gen.BroadcastAccepted](t, call(t, s, http.MethodPost, "/v1/broadcasts", svc, map[string]string{"Idempotency-Key": "launch"},
		map[string]any{"recipients": []string{"a", "b"}, "type": "t", "title": "launch"}), 202)
	bc := pollBroadcast(t, s, svc, acc.BroadcastId, "done", 90*time.Second)
	if bc.Written != 2 || bc.Failed != 0 {
		t.Fatalf("the broadcast met the client's key: %+v", bc)
	}
}

// TestAttackHostileBodies: wrong content types, duplicate members, deep nesting, a body
// over the limit: each a problem, never a 500.
func TestAttackHostileBodies(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.ServiceToken(tenant, "svc")
	deep := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	for i, c := range []struct {
		ct, body string
		status   int
	}{
		{"text/plain", `{"recipientUserId":"u","type":"t","title":"x"}`, 400},
		{"application/json", `{"recipientUserId":"u","recipientUserId":"v","type":"t","title":"x"}`, 400}, // TestBodyMembersAreNamedExactlyOnce
		{"application/json", `{"recipientUserId":"u","type":"t","title":"x","data":` + deep + `}`, 400},
		{"application/json", `{"recipientUserId":"u","type":"t","title":"x","data":{"s":"` + strings.Repeat("x", 600<<10) + `"}}`, 413},
		{"application/json", `{"recipientUserId":"u","type":"t","title":"x"} {}`, 400},
		{"application/json", `[]`, 400},
	} {
		req, _ := http.NewRequest(http.MethodPost, s.HTTP.URL+"/v1/notifications", strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ct)
		req.Header.Set("Authorization", "Bearer "+svc)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("hostile-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("case %d: %d, want %d", i, resp.StatusCode, c.status)
		}
	}
}
