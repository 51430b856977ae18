package ddbfault_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/store"
)

// faultRates is the suite's bad day: more than one call in four is throttled, fails, loses
// its answer after running, or is held up to 150 ms.
var faultRates = ddbfault.Config{Seed: 8, Throttle: 0.12, Outage: 0.08, LostAnswer: 0.08, Latency: 0.08, LatencySpike: 150 * time.Millisecond}

// badgeWithin is how soon after a successful mutation the live badge must show the stored
// value (issue 8: "within 1 s"; 5 s under the race detector, see race_test.go), plus three
// times what one badge read costs the engine at that moment (milliseconds on an idle
// DynamoDB Local, seconds on a shared one under load).
var badgeWithin = time.Second

// suite is the real gateway (HTTP, JWTs, local broker) over a store whose DynamoDB
// client goes through the fault proxy, and a second store reading the same table
// without faults (the truth).
type suite struct {
	t      *testing.T
	proxy  *ddbfault.Proxy
	srv    *httptest.Server
	v      *auth.Verifier
	truth  *store.Store
	st     *store.Store // the gateway's store, behind the proxy
	tenant string
	tokens map[string]string
	sender string
}

func newSuite(t *testing.T, users []string) *suite {
	t.Helper()
	table := dynlocaltest.TableName(t)
	direct := dynlocaltest.Client(t)
	truth := store.New(direct, table, store.WithSweepWorkers(0))
	t.Cleanup(truth.Close)
	if err := truth.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy := ddbfault.New(dynlocaltest.Endpoint(t), faultRates)
	ps := httptest.NewServer(proxy)
	t.Cleanup(func() { ps.Close(); proxy.Close() })
	faulty := dynlocaltest.Client(t, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(ps.URL)
		o.Retryer = store.NewSDKRetryer()
	})
	const secret = "fault-suite-secret-0123456789abcdef"
	v, err := auth.NewVerifier(auth.Config{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	// The gateway as serve composes it (app.Build), its client behind the proxy.
	g, err := app.Build(context.Background(), app.Config{Table: table, ComplexityLimit: 100000, JWTSecret: secret},
		app.Deps{Log: slog.New(slog.DiscardHandler), DB: faulty, Broker: live.NewLocal(), Verifier: v,
			Store: []store.Option{store.WithSweepWorkers(1)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	st := g.Store
	srv := httptest.NewServer(g.HTTP)
	t.Cleanup(srv.Close)
	s := &suite{t: t, proxy: proxy, srv: srv, v: v, truth: truth, st: st, tenant: "acme", tokens: map[string]string{}}
	for _, u := range users {
		s.tokens[u] = s.sign(u)
	}
	s.sender = s.sign("svc", auth.ScopeSend)
	return s
}

func (s *suite) sign(user string, scopes ...string) string {
	tok, err := s.v.Sign(auth.Claims{TenantID: s.tenant, UserID: user, Scopes: scopes}, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// gqlError is one error of a GraphQL response.
type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code string `json:"code"`
	} `json:"extensions"`
}

// do runs one GraphQL operation with token and returns its data and errors.
func (s *suite) do(token, query string, vars map[string]any) (map[string]json.RawMessage, []gqlError, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []gqlError                 `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, nil, fmt.Errorf("HTTP %d: undecodable body: %w", resp.StatusCode, err)
	}
	return out.Data, out.Errors, nil
}

// tally counts the client-visible errors by code.
type tally struct {
	mu    sync.Mutex
	codes map[string]int
	bad   []string
}

func (t *tally) add(op string, errs []gqlError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range errs {
		t.codes[e.Extensions.Code]++
		switch e.Extensions.Code {
		case inbox.CodeThrottled, inbox.CodeUnavailable:
		default:
			t.bad = append(t.bad, fmt.Sprintf("%s: code %q message %q", op, e.Extensions.Code, e.Message))
		}
	}
}

// mutate runs a mutation until it succeeds, as a client retrying on THROTTLED and
// UNAVAILABLE would (at most 30 tries), recording every error. It returns the data.
func (s *suite) mutate(tl *tally, op, token, query string, vars map[string]any) (json.RawMessage, bool) {
	for try := 0; try < 30; try++ {
		data, errs, err := s.do(token, query, vars)
		if err != nil {
			tl.add(op, []gqlError{{Message: err.Error()}})
			return nil, false
		}
		if len(errs) == 0 {
			for _, v := range data { // the operation's one field
				return v, true
			}
			return nil, true
		}
		tl.add(op, errs)
		time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
	}
	return nil, false
}

// badgeWatch follows one user's unreadCount subscription over SSE.
type badgeWatch struct {
	last   atomic.Int64
	got    atomic.Bool
	closed atomic.Bool
}

func (s *suite) watch(ctx context.Context, user string) *badgeWatch {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/graphql", strings.NewReader(`{"query":"subscription { unreadCount }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.tokens[user])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	w := &badgeWatch{}
	go func() {
		defer resp.Body.Close()
		defer w.closed.Store(true)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), `data: {"data":{"unreadCount":`); ok {
				if n, err := strconv.Atoi(strings.TrimSuffix(v, "}}")); err == nil {
					w.last.Store(int64(n))
					w.got.Store(true)
				}
			}
		}
	}()
	for i := 0; i < 500 && !w.got.Load(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !w.got.Load() {
		s.t.Fatalf("%s: no first badge value", user)
	}
	return w
}

// reaches waits up to badgeWithin plus slack for w to show want.
func (w *badgeWatch) reaches(want int, slack time.Duration) bool {
	deadline := time.Now().Add(badgeWithin + slack)
	for {
		if w.last.Load() == int64(want) {
			return true
		}
		if time.Now().After(deadline) || w.closed.Load() {
			return w.last.Load() == int64(want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const (
	sendQ     = `mutation($in: SendNotificationInput!) { sendNotification(input: $in) { notificationIds accepted duplicate } }`
	markQ     = `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }`
	unmarkQ   = `mutation($ids: [ID!]!) { markUnread(ids: $ids) { unreadCount } }`
	markAllQ  = `mutation { markAllRead { unreadCount } }`
	badgeQ    = `query { viewer { unreadCount } }`
	opsPerUsr = 40
)

type sendPayload struct {
	NotificationIDs []string `json:"notificationIds"`
	Accepted        int      `json:"accepted"`
}

// The fault-injection suite (issue 8, "Tests and measurements that must exist"): the real
// gateway over DynamoDB Local behind a proxy injecting throttles, 500s, answers lost after
// the commit and latency spikes. Concurrent sends (idempotent, retried by the client with
// the same key, some sent twice at once), marks, unmarks and mark-alls over four users,
// each with a live badge subscriber over SSE. It asserts: every client-visible error is
// coded THROTTLED or UNAVAILABLE (never INTERNAL_SERVER_ERROR, never uncoded); after
// every successful mutation the subscriber shows the stored badge within 1 s; at the end
// (read back without faults) each counter equals its unread items and each idempotency
// key landed exactly once per recipient.
func TestFaultInjectionSuite(t *testing.T) {
	users := []string{"u0", "u1", "u2", "u3"}
	s := newSuite(t, users)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watches := map[string]*badgeWatch{}
	for _, u := range users {
		watches[u] = s.watch(ctx, u)
	}
	tl := &tally{codes: map[string]int{}}
	var (
		mu      sync.Mutex
		sentTo  = map[string][]string{} // idempotency key -> recipients
		late    []string
		failed  []string
		mutOK   atomic.Int64
		mutated = func(u, what string) {
			mutOK.Add(1)
			began := time.Now()
			n, err := s.truth.UnreadCount(context.Background(), inbox.Viewer{TenantID: s.tenant, UserID: u})
			if err != nil {
				t.Errorf("read back %s: %v", u, err)
				return
			}
			// The subscriber's re-read is the same GetItem: on a slow engine (a loaded
			// shared DynamoDB Local) the bound grows by what that read costs there.
			if !watches[u].reaches(n, 3*time.Since(began)) {
				mu.Lock()
				late = append(late, fmt.Sprintf("%s after %s: live badge %d, stored %d", u, what, watches[u].last.Load(), n))
				mu.Unlock()
			}
		}
	)
	s.proxy.SetEnabled(true)

	// Phase 1: one client per user (so the stored badge holds still while its live value
	// is checked), all four at once.
	var wg sync.WaitGroup
	for ui, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(ui), 8))
			var ids []string
			for i := 0; i < opsPerUsr; i++ {
				var what, q string
				var vars map[string]any
				switch r := rnd.IntN(10); {
				case r < 4 || len(ids) == 0:
					key := fmt.Sprintf("p1-%s-%d", u, i)
					mu.Lock()
					sentTo[key] = []string{u}
					mu.Unlock()
					what, q, vars = "send "+key, sendQ, map[string]any{"in": map[string]any{"idempotencyKey": key, "recipients": []string{u}, "type": "t", "title": key}}
				case r < 7:
					what, q, vars = "markRead", markQ, map[string]any{"ids": []string{ids[rnd.IntN(len(ids))]}}
				case r < 9:
					what, q, vars = "markUnread", unmarkQ, map[string]any{"ids": []string{ids[rnd.IntN(len(ids))]}}
				default:
					what, q = "markAllRead", markAllQ
				}
				tok := s.tokens[u]
				if q == sendQ {
					tok = s.sender
				}
				data, ok := s.mutate(tl, what, tok, q, vars)
				if !ok {
					mu.Lock()
					failed = append(failed, u+": "+what)
					mu.Unlock()
					continue
				}
				if q == sendQ {
					var p sendPayload
					if err := json.Unmarshal(data, &p); err != nil || len(p.NotificationIDs) != 1 {
						t.Errorf("%s: payload %s (%v)", what, data, err)
						continue
					}
					ids = append(ids, p.NotificationIDs[0])
				}
				mutated(u, what)
			}
		}()
	}
	wg.Wait()

	// Phase 2: fan-out sends to every user, each key sent by two clients at once (and
	// retried by each until it succeeds); then every badge must settle on its stored value.
	const keys = 16
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("p2-%d", k)
		sentTo[key] = users
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				vars := map[string]any{"in": map[string]any{"idempotencyKey": key, "recipients": users, "type": "t", "title": key}}
				data, ok := s.mutate(tl, "send "+key, s.sender, sendQ, vars)
				var p sendPayload
				if !ok || json.Unmarshal(data, &p) != nil || p.Accepted != len(users) {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("send %s: %s", key, data))
					mu.Unlock()
					return
				}
				mutOK.Add(1)
			}()
		}
		if k%4 == 3 {
			wg.Wait()
		}
	}
	wg.Wait()
	for _, u := range users {
		mutated(u, "the fan-out sends")
	}

	// Phase 3: batched sends, each retried until it succeeds: 12 per user in batches of 4,
	// so each closes at once on its fourth join (a join whose answer or close was lost is
	// replayed, and its replay closes the full batch). Each user ends with 3 notifications
	// of 4 activities each, counted once.
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				key := fmt.Sprintf("p3-%s-%d", u, i)
				vars := map[string]any{"in": map[string]any{"idempotencyKey": key, "recipients": []string{u}, "type": "batched",
					"title": "batched", "actor": map[string]any{"id": fmt.Sprintf("a%d", i)},
					"batch": map[string]any{"key": "thread", "window": "1h", "maxItems": 4}}}
				if data, ok := s.mutate(tl, "batched send "+key, s.sender, sendQ, vars); !ok {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("batched send %s: %s", key, data))
					mu.Unlock()
					return
				}
				mutOK.Add(1)
			}
		}()
	}
	wg.Wait()
	for _, u := range users {
		mutated(u, "the batched sends")
	}

	// A full outage and full throttling: every request fails, and always with a code.
	for _, c := range []struct {
		cfg  ddbfault.Config
		want string
	}{
		{ddbfault.Config{Throttle: 1}, inbox.CodeThrottled},
		{ddbfault.Config{Outage: 1}, inbox.CodeUnavailable},
	} {
		s.proxy.SetConfig(c.cfg)
		for _, q := range []string{badgeQ, markAllQ} {
			_, errs, err := s.do(s.tokens["u0"], q, nil)
			if err != nil || len(errs) != 1 || errs[0].Extensions.Code != c.want {
				t.Errorf("%s under %+v: %v %+v; want one %s error", q, c.cfg, err, errs, c.want)
			}
		}
	}
	s.proxy.SetEnabled(false)
	stats := s.proxy.Stats()

	mu.Lock()
	defer mu.Unlock()
	for _, b := range tl.bad {
		t.Error("client-visible error not THROTTLED/UNAVAILABLE: " + b)
	}
	for _, f := range failed {
		t.Error("mutation never succeeded: " + f)
	}
	for _, l := range late {
		t.Error("live badge missed a committed change: " + l)
	}

	// Read back without faults: counters are exact and every key landed once per recipient.
	for _, u := range users {
		v := inbox.Viewer{TenantID: s.tenant, UserID: u}
		count, err := s.truth.UnreadCount(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		titles := map[string]int{}
		unread, after := 0, ""
		for {
			q := inbox.PageQuery{First: ptr(100), After: after}
			p, err := s.truth.Inbox(context.Background(), v, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range p.Nodes() {
				titles[n.Title]++
				if n.Title == "batched" && n.ActivityCount != 4 {
					t.Errorf("%s: a batch of %d activities, want 4", u, n.ActivityCount)
				}
				if !n.Read {
					unread++
				}
			}
			if !p.PageInfo.HasNextPage {
				break
			}
			after = *p.PageInfo.EndCursor
		}
		if count != unread {
			t.Errorf("%s: counter %d, unread items %d", u, count, unread)
		}
		if titles["batched"] != 3 {
			t.Errorf("%s: %d batched notifications, want 3", u, titles["batched"])
		}
		for key, rs := range sentTo {
			for _, r := range rs {
				if r == u && titles[key] != 1 {
					t.Errorf("%s: key %s landed %d times, want once", u, key, titles[key])
				}
			}
		}
		if watches[u].closed.Load() {
			t.Errorf("%s: the badge subscription ended", u)
		}
	}
	if stats.Throttled == 0 || stats.Outages == 0 || stats.LostAnswers == 0 || stats.Delayed == 0 {
		t.Errorf("the proxy did not inject every kind of fault: %+v", stats)
	}
	t.Logf("proxy: %+v; successful mutations: %d; client-visible errors by code: %v", stats, mutOK.Load(), tl.codes)
}

func ptr(i int) *int { return &i }

// Issue 8, item 10: a subscriber whose badge re-read fails keeps retrying (with backoff)
// until it succeeds, instead of logging the failure and giving up: once DynamoDB answers
// again, the live badge shows the stored value.
func TestBadgeRereadIsRetriedUntilItSucceeds(t *testing.T) {
	s := newSuite(t, []string{"u0"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := s.watch(ctx, "u0")
	if w.last.Load() != 0 {
		t.Fatalf("first value %d, want 0", w.last.Load())
	}
	// Every GetItem fails (the badge re-read is one); the send's transaction passes.
	s.proxy.SetConfig(ddbfault.Config{Outage: 1, Ops: []string{"GetItem"}})
	s.proxy.SetEnabled(true)
	vars := map[string]any{"in": map[string]any{"idempotencyKey": "k", "recipients": []string{"u0"}, "type": "t", "title": "k"}}
	if _, errs, err := s.do(s.sender, sendQ, vars); err != nil || len(errs) > 0 {
		t.Fatalf("send: %v %+v", err, errs)
	}
	// Long enough for the store's retries of a re-read to run out (6 calls) and the
	// subscriber to try again, or at most 3 s.
	for i := 0; i < 300 && s.proxy.Stats().Outages < 7; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if w.last.Load() != 0 {
		t.Fatalf("the badge moved to %d while every read failed", w.last.Load())
	}
	s.proxy.SetEnabled(false)
	// Generous: the subscriber's backoff is at most 1 s, plus the read.
	deadline := time.Now().Add(5 * time.Second)
	for w.last.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := w.last.Load(); got != 1 {
		t.Fatalf("live badge %d 5 s after the storage recovered, want the stored 1", got)
	}
}

// Issue 8, item 12: the SDK's retries and the store's do not multiply. A read under a
// full outage makes exactly the store's budget of HTTP calls (6), not the SDK's attempts
// times the store's, and ends UNAVAILABLE.
func TestStoreAndSDKRetriesDoNotMultiply(t *testing.T) {
	s := newSuite(t, nil)
	s.proxy.SetConfig(ddbfault.Config{Outage: 1})
	s.proxy.SetEnabled(true)
	before := s.proxy.Stats().Calls
	_, err := s.st.UnreadCount(context.Background(), inbox.Viewer{TenantID: s.tenant, UserID: "u0"})
	if code := inbox.ErrorCode(err); code != inbox.CodeUnavailable {
		t.Fatalf("read under a full outage: %v (code %q), want UNAVAILABLE", err, code)
	}
	if n := s.proxy.Stats().Calls - before; n != int64(store.DefaultRetryPolicy.Attempts) {
		t.Fatalf("%d HTTP calls for one read; want the store's budget of %d", n, store.DefaultRetryPolicy.Attempts)
	}
}
