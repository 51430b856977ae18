package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// faultyServer is a gateway (with its scheduler) whose every DynamoDB call, the send
// service's, the lanes' and the scheduler's, goes through a fault proxy; the proxy is
// disabled until the test enables it (the table is created without faults).
func faultyServer(t *testing.T, cfg ddbfault.Config) (*testgw.Server, *armedProxy) {
	t.Helper()
	proxy := &armedProxy{Proxy: ddbfault.New(dynlocaltest.Endpoint(t), cfg)}
	ps := httptest.NewServer(proxy)
	t.Cleanup(func() { ps.Close(); proxy.Close() })
	s := testgw.NewWith(t, testgw.Options{Scheduler: true, DynamoDB: []func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(ps.URL)
		o.Retryer = store.NewSDKRetryer()
	}}})
	return s, proxy
}

// armedProxy is a fault proxy that can be armed to lose every answer from the first
// call of an operation whose request body holds a string on (Proxy.FailNext from that
// call).
type armedProxy struct {
	*ddbfault.Proxy
	mu        sync.Mutex
	op, match string
}

// LoseFrom loses the answers of every call from the first call of op whose body holds
// match.
func (p *armedProxy) LoseFrom(op, match string) {
	p.mu.Lock()
	p.op, p.match = op, match
	p.mu.Unlock()
}

func (p *armedProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	if p.match != "" && strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+p.op) && bytes.Contains(body, []byte(p.match)) {
		p.match = ""
		p.FailNext(1<<30, ddbfault.AnswerLost)
	}
	p.mu.Unlock()
	p.Proxy.ServeHTTP(w, r)
}

// retriable reports whether a is an answer a client retries with the same key: the
// storage's failure (503 UNAVAILABLE, 429 THROTTLED) or an internal error (500).
func retriable(a answer) bool {
	return a.Status == http.StatusServiceUnavailable || a.Status == http.StatusTooManyRequests || a.Status == http.StatusInternalServerError
}

// untilAccepted posts body under key until it is answered 202 (each other answer must be
// one a client retries), then replays it replays more times; every 202 must carry the
// same body. It returns that body.
func untilAccepted(t *testing.T, s *testgw.Server, token, path, key string, body any, replays int) []byte {
	t.Helper()
	var first []byte
	for attempt, accepted := 0, 0; accepted <= replays; attempt++ {
		if attempt == 60 {
			t.Fatalf("%s %s: not accepted %d times in %d attempts", path, key, replays+1, attempt)
		}
		a := call(t, s, http.MethodPost, path, token, map[string]string{"Idempotency-Key": key}, body)
		switch {
		case a.Status == http.StatusAccepted:
			accepted++
			if first == nil {
				first = a.Body
			} else if string(a.Body) != string(first) {
				t.Fatalf("%s %s: a retry answered %s, the first 202 %s", path, key, a.Body, first)
			}
		case !retriable(a):
			t.Fatalf("%s %s: answered %d %s under storage faults; a retry with the same key must succeed or fail retriably", path, key, a.Status, a.Body)
		}
	}
	return first
}

// POST /v1/notifications and POST /v1/broadcasts while DynamoDB throttles, fails and
// loses answers after committing (seeded rates, every call of the gateway: the accept,
// the lanes, the scheduler): each request retried with its Idempotency-Key until
// accepted, then replayed, answers the same ids every time; once the faults stop, every
// recipient has exactly one notification of each send and broadcast (nothing twice,
// nothing lost), every request is done and every broadcast is done with exact counts.
func TestSendAndBroadcastRetriesUnderDynamoDBFaults(t *testing.T) {
	t.Parallel()
	s, proxy := faultyServer(t, ddbfault.Config{Seed: 5, Throttle: 0.08, Outage: 0.06, LostAnswer: 0.12})
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	users := []string{"ann", "ben", "cat", "dan"}
	want := map[string][]string{} // user -> titles
	ids := map[string][]string{}  // user -> notification ids of sends
	proxy.SetEnabled(true)
	const sends, broadcasts = 12, 4
	for i := range sends {
		to := []string{users[i%len(users)], users[(i+1)%len(users)]}
		title := fmt.Sprintf("send %d", i)
		body := map[string]any{"recipients": to, "type": "invoice.paid", "title": title}
		if i%3 == 0 {
			body["priority"] = "bulk"
		}
		var acc gen.Accepted
		mustUnmarshal(t, untilAccepted(t, s, svc, "/v1/notifications", fmt.Sprintf("send-%d", i), body, 2), &acc)
		if len(acc.NotificationIds) != len(to) {
			t.Fatalf("send %d: %s", i, mustJSON(t, acc))
		}
		for j, u := range to {
			want[u] = append(want[u], title)
			ids[u] = append(ids[u], acc.NotificationIds[j])
		}
	}
	var bcs []string
	for i := range broadcasts {
		to := []string{users[i%len(users)], users[(i+2)%len(users)], users[(i+3)%len(users)]}
		title := fmt.Sprintf("broadcast %d", i)
		var acc gen.BroadcastAccepted
		mustUnmarshal(t, untilAccepted(t, s, svc, "/v1/broadcasts", fmt.Sprintf("bc-%d", i),
			map[string]any{"recipients": to, "type": "news", "title": title}, 2), &acc)
		bcs = append(bcs, acc.BroadcastId)
		for _, u := range to {
			want[u] = append(want[u], title)
		}
	}
	// Every answer lost from the write of the send's request on: it commits, the client
	// sees an error; its retry with the key answers the ids that write chose, and the
	// recipient gets one notification.
	proxy.SetEnabled(false) // the random faults end: the lost answers alone from here
	proxy.LoseFrom("PutItem", "#REQ#lost-1")
	lost := map[string]any{"recipientUserId": "eve", "type": "otp", "title": "lost answer"}
	a := call(t, s, http.MethodPost, "/v1/notifications", svc, map[string]string{"Idempotency-Key": "lost-1"}, lost)
	proxy.FailNext(0, ddbfault.AnswerLost)
	if !retriable(a) {
		t.Fatalf("a send whose every answer was lost: %d %s", a.Status, a.Body)
	}
	if !requestWritten(t, s, tenant, "lost-1") {
		t.Fatal("the send's write did not commit: the case tests nothing")
	}
	var lostAcc gen.Accepted
	mustUnmarshal(t, untilAccepted(t, s, svc, "/v1/notifications", "lost-1", lost, 2), &lostAcc)
	if lostAcc.NotificationId == nil {
		t.Fatalf("lost-1 answered %s", mustJSON(t, lostAcc))
	}
	want["eve"], ids["eve"] = []string{"lost answer"}, []string{*lostAcc.NotificationId}
	users = append(users, "eve")
	// The same for a broadcast: from the write that creates it on.
	proxy.LoseFrom("TransactWriteItems", "#BCAST#"+service.BroadcastID("bc-lost"))
	lostBc := map[string]any{"recipients": []string{"eve", "ann"}, "type": "news", "title": "lost broadcast"}
	a = call(t, s, http.MethodPost, "/v1/broadcasts", svc, map[string]string{"Idempotency-Key": "bc-lost"}, lostBc)
	proxy.FailNext(0, ddbfault.AnswerLost)
	if !retriable(a) {
		t.Fatalf("a broadcast whose every answer was lost: %d %s", a.Status, a.Body)
	}
	if _, err := s.Store.GetBroadcast(t.Context(), tenant, service.BroadcastID("bc-lost")); err != nil {
		t.Fatalf("the broadcast's write did not commit (%v): the case tests nothing", err)
	}
	var bcAcc gen.BroadcastAccepted
	mustUnmarshal(t, untilAccepted(t, s, svc, "/v1/broadcasts", "bc-lost", lostBc, 2), &bcAcc)
	bcs = append(bcs, bcAcc.BroadcastId)
	want["eve"], want["ann"] = append(want["eve"], "lost broadcast"), append(want["ann"], "lost broadcast")

	st := proxy.Stats()
	t.Logf("faults while accepting: %+v", st)
	if st.LostAnswers == 0 || st.Throttled == 0 || st.Outages == 0 {
		t.Fatalf("the run injected too few faults to test anything: %+v", st)
	}

	for i, id := range bcs {
		if bc := pollBroadcast(t, s, svc, id, "done", 60*time.Second); bc.Recipients < 2 || bc.Written != bc.Recipients || bc.Failed != 0 || bc.Skipped != 0 {
			t.Fatalf("broadcast %d: %s", i, mustJSON(t, bc))
		}
	}
	for _, u := range users {
		slices.Sort(want[u])
		var got []string
		testgw.WaitFor(t, 60*time.Second, u+"'s notifications", func() bool {
			got = feedTitles(t, s, svc, u)
			sort.Strings(got)
			return len(got) >= len(want[u])
		})
		if !slices.Equal(got, want[u]) {
			t.Fatalf("%s's feed: %v, want %v", u, got, want[u])
		}
		f := decode[gen.Feed](t, call(t, s, http.MethodGet, "/v1/notifications?userId="+u+"&limit=100", svc, nil, nil), 200)
		for _, id := range ids[u] {
			if !slices.ContainsFunc(f.Items, func(n gen.Notification) bool { return n.Id == id }) {
				t.Fatalf("%s's feed lacks the accepted id %s: %s", u, id, mustJSON(t, f.Items))
			}
		}
	}
	for i := range sends {
		key := fmt.Sprintf("send-%d", i)
		testgw.WaitFor(t, 60*time.Second, key+" done", func() bool {
			r, ok, err := s.Store.GetRequest(t.Context(), tenant, key)
			return err == nil && ok && r.State == inbox.RequestDone
		})
	}
}

// mustUnmarshal decodes JSON b into v.
func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
