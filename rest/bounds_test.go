package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// tracedServer is the gateway (without its scheduler, so that only the requests call
// DynamoDB) with every DynamoDB call recorded.
func tracedServer(t *testing.T) (*testgw.Server, *ddbtrace.Recorder) {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	s := testgw.NewWith(t, testgw.Options{DynamoDB: []func(*dynamodb.Options){rec.Option()}})
	return s, rec
}

// What a request costs in DynamoDB calls is bounded by what it names, never by how
// often or how hard a client asks: requests without a token (or with a bad one, or a
// user token on a service route) call nothing, whatever their body; a replay storm of
// one broadcast costs one GetItem a replay, and the storm's concurrent first requests
// create one broadcast; status costs one Query whatever the id; a segment change of the
// most ids is a bounded batch; sendNotification under many aliases is refused before
// any call.
func TestRequestCostsAreBoundedWithAndWithoutAToken(t *testing.T) {
	t.Parallel()
	s, rec := tracedServer(t)
	svc, admin := s.Token(tenant, "svc", rest.ScopeSend), s.Token(tenant, "svc", rest.ScopeAdmin)
	user := s.Token(tenant, "alice")
	big := `{"recipients": [` + strings.Repeat(`"x",`, 200_000) + `"y"], "type": "t", "title": "t"}`

	// Without a usable token: 401/403 and no call, for every route with a body or not.
	rec.Reset()
	other, err := auth.NewVerifier(auth.Config{Secret: []byte(strings.Repeat("o", 32))})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.Sign(auth.Claims{TenantID: tenant, Subject: "svc", Scopes: []string{rest.ScopeSend, rest.ScopeAdmin}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", "not-a-jwt", user + "x", forged, user} {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodPost, "/v1/notifications", big},
			{http.MethodGet, "/v1/notifications?userId=alice", ""},
			{http.MethodGet, "/v1/notifications/01J0000000000000000000000/status", ""},
			{http.MethodPost, "/v1/broadcasts", big},
			{http.MethodGet, "/v1/broadcasts/bc1", ""},
			{http.MethodDelete, "/v1/broadcasts/bc1", ""},
			{http.MethodPut, "/v1/segments/s/members", big},
			{http.MethodGet, "/v1/segments/s", ""},
			{http.MethodPut, "/v1/templates/t", big},
			{http.MethodGet, "/v1/templates/t", ""},
			{http.MethodPut, "/v1/users/bob", big},
			{http.MethodPut, "/v1/tenant/settings", big},
			{http.MethodGet, "/v1/users/bob/preferences", ""},
			{http.MethodPost, "/v1/users/bob/devices", big},
		} {
			st := rawCall(t, s, r.method, r.path, token, r.body)
			if st != http.StatusUnauthorized && st != http.StatusForbidden {
				t.Errorf("%s %s with token %.12q: %d, want 401 or 403", r.method, r.path, token, st)
			}
		}
	}
	if ops := rec.Ops(); len(ops) != 0 {
		t.Fatalf("requests without a usable token called DynamoDB: %v", ops)
	}

	// A broadcast's first requests, 16 at once under one key: one broadcast, one id.
	body := map[string]any{"recipients": []string{"a", "b"}, "type": "news", "title": "storm",
		"sendAt": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)}
	var wg sync.WaitGroup
	answers := make([]answer, 16)
	for i := range answers {
		wg.Go(func() {
			answers[i] = callNoFatal(s, http.MethodPost, "/v1/broadcasts", svc, map[string]string{"Idempotency-Key": "storm"}, body)
		})
	}
	wg.Wait()
	var id string
	for i, a := range answers {
		if a.Status != http.StatusAccepted {
			t.Fatalf("concurrent first request %d: %d %s", i, a.Status, a.Body)
		}
		var acc gen.BroadcastAccepted
		mustUnmarshal(t, a.Body, &acc)
		if id == "" {
			id = acc.BroadcastId
		} else if acc.BroadcastId != id {
			t.Fatalf("concurrent first requests answered two broadcasts: %s and %s", id, acc.BroadcastId)
		}
	}
	// Its replays: one GetItem each, and no write.
	rec.Reset()
	const replays = 50
	for range replays {
		if a := call(t, s, http.MethodPost, "/v1/broadcasts", svc, map[string]string{"Idempotency-Key": "storm"}, body); a.Status != http.StatusAccepted {
			t.Fatalf("replay: %d %s", a.Status, a.Body)
		}
	}
	if n, all := rec.Count("GetItem"), len(rec.Ops()); n != replays || all != replays {
		t.Fatalf("%d replays: %d GetItem, %d calls (%v), want one GetItem each", replays, n, all, summarize(rec.Ops()))
	}

	// Status: one Query, whatever the id names.
	for _, sid := range []string{"01J0000000000000000000000", strings.Repeat("z", 256), "bc-not-a-notification"} {
		rec.Reset()
		call(t, s, http.MethodGet, "/v1/notifications/"+sid+"/status", svc, nil, nil)
		if ops := rec.Ops(); len(ops) > 1 {
			t.Errorf("status of %.20s: %v, want at most one call", sid, ops)
		}
	}

	// The largest segment change: a bounded number of calls.
	ids := make([]string, rest.MaxSegmentChange)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%04d", i)
	}
	rec.Reset()
	decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/big/members", admin, nil, map[string]any{"add": ids}), 200)
	if n := len(rec.Ops()); n > 2*rest.MaxSegmentChange/25+20 {
		t.Errorf("a change of %d members: %d calls (%v)", rest.MaxSegmentChange, n, summarize(rec.Ops()))
	}
	t.Logf("a change of %d members: %d calls (%v)", rest.MaxSegmentChange, len(rec.Ops()), summarize(rec.Ops()))

	// sendNotification under more aliases than INBOX_MAX_MUTATION_FIELDS (5), or than
	// the complexity limit allows: refused before any call.
	for _, n := range []int{6, 100} {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `s%d: sendNotification(input: {idempotencyKey: "k%d", recipients: ["a"], type: "t", title: "t"}) { accepted } `, i, i)
		}
		rec.Reset()
		r := s.WithT(t).Post(s.ServiceToken(tenant, "svc"), "mutation { "+b.String()+"}", nil)
		if len(r.Errors) == 0 || string(r.Data) != "" && string(r.Data) != "null" {
			t.Fatalf("%d aliased sends: %s %+v", n, r.Data, r.Errors)
		}
		for _, c := range r.Codes() {
			if c != "BAD_USER_INPUT" && c != "COMPLEXITY_LIMIT_EXCEEDED" {
				t.Fatalf("%d aliased sends: %v", n, r.Codes())
			}
		}
		if ops := rec.Ops(); len(ops) != 0 {
			t.Fatalf("%d aliased sends called DynamoDB: %v", n, summarize(ops))
		}
	}
}

// rawCall sends body (JSON, when not empty) with token and returns the status, the
// answer read and discarded.
func rawCall(t *testing.T, s *testgw.Server, method, path, token, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, s.HTTP.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// callNoFatal is call for another goroutine: no validation, errors as status 0.
func callNoFatal(s *testgw.Server, method, path, token string, header map[string]string, body any) answer {
	js, _ := json.Marshal(body)
	req, err := http.NewRequest(method, s.HTTP.URL+path, bytes.NewReader(js))
	if err != nil {
		return answer{Body: []byte(err.Error())}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{Body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// summarize counts ops by name.
func summarize(ops []string) map[string]int {
	m := map[string]int{}
	for _, op := range ops {
		m[op]++
	}
	return m
}
