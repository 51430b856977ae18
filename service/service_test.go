package service_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/routing"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

const tenant = "acme"

type env struct {
	db    *dynamodb.Client
	st    *store.Store
	table string
}

func setup(t testing.TB, opts ...func(*dynamodb.Options)) *env {
	t.Helper()
	db := dynlocaltest.Client(t, opts...)
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0), store.WithSchedShards(2))
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{db: db, st: st, table: table}
}

// setupClock is setup with the store on clk (store.WithClock): a test moves the time its
// writes see by advancing clk, and gives the service clk.Now too.
func setupClock(t testing.TB) (*env, *clockwork.FakeClock) {
	t.Helper()
	clk := clocktest.New()
	db := dynlocaltest.Client(t)
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0), store.WithSchedShards(2), store.WithClock(clk.Now))
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{db: db, st: st, table: table}, clk
}

// newService builds a Service over e's store; with a running scheduler when sch.
func (e *env) newService(t testing.TB, o service.Options, sch bool) *service.Service {
	t.Helper()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := service.New(e.st, o)
	t.Cleanup(svc.Close)
	if sch {
		s := sched.New(e.st, sched.Options{DB: e.db, Poll: 200 * time.Millisecond, Lease: 6 * time.Second,
			Lookback: 2 * time.Minute, Logger: o.Logger})
		s.Register(service.TaskSend, sched.HandlerFunc(svc.Handler()))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return svc
}

func users(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("u%04d", i)
	}
	return out
}

// inboxOf returns u's notification ids and unread badge.
func (e *env) inboxOf(t *testing.T, u string) ([]string, int) {
	t.Helper()
	v := inbox.Viewer{TenantID: tenant, UserID: u}
	first := 100
	p, err := e.st.Inbox(context.Background(), v, inbox.PageQuery{First: &first})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ed := range p.Edges {
		ids = append(ids, ed.Node.ID)
	}
	b, err := e.st.Badge(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return ids, b.Unread
}

func waitDone(t *testing.T, e *env, key string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, ok, err := e.st.GetRequest(context.Background(), tenant, key)
		if err != nil {
			t.Fatal(err)
		}
		if ok && r.State == inbox.RequestDone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request %s not done after %v (found %v, state %q)", key, within, ok, r.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAcceptThenProcess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	req := service.SendRequest{IdempotencyKey: "k1", Recipients: []string{"a", "b", "a"}, Type: "comment", Title: "hi"}
	sent, err := svc.Send(context.Background(), tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Processed || sent.Result.Accepted != 2 || sent.Result.Duplicate {
		t.Fatalf("sent = %+v", sent)
	}
	if !slices.Equal(sent.Result.NotificationIDs, sent.NotificationIDs) || !slices.Equal(sent.Recipients, []string{"a", "b"}) {
		t.Fatalf("written %v, pre-assigned %v for %v", sent.Result.NotificationIDs, sent.NotificationIDs, sent.Recipients)
	}
	for i, u := range []string{"a", "b"} {
		ids, unread := e.inboxOf(t, u)
		if !slices.Equal(ids, []string{sent.NotificationIDs[i]}) || unread != 1 {
			t.Errorf("%s: ids %v unread %d", u, ids, unread)
		}
	}
	r, ok, err := e.st.GetRequest(context.Background(), tenant, "k1")
	if err != nil || !ok || r.State != inbox.RequestDone {
		t.Fatalf("request %+v %v %v", r, ok, err)
	}

	// A replay answers the first answer, writes nothing.
	again, err := svc.Send(context.Background(), tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || !again.Result.Duplicate || !slices.Equal(again.Result.NotificationIDs, sent.NotificationIDs) ||
		again.RequestID != sent.RequestID {
		t.Fatalf("replay = %+v, first %+v", again, sent)
	}
	acc, err := svc.Accept(context.Background(), tenant, req)
	if err != nil || !acc.Replayed || !slices.Equal(acc.NotificationIDs, sent.NotificationIDs) {
		t.Fatalf("accept replay = %+v, %v", acc, err)
	}

	// The same key with another body: CONFLICT, nothing written.
	other := req
	other.Recipients = []string{"c"}
	if _, err := svc.Accept(context.Background(), tenant, other); inbox.ErrorCode(err) != inbox.CodeConflict {
		t.Fatalf("other body: %v, want CONFLICT", err)
	}
	if ids, _ := e.inboxOf(t, "c"); len(ids) != 0 {
		t.Fatalf("c got %v", ids)
	}
	// Keys are per tenant.
	if _, err := svc.Send(context.Background(), "other", other); err != nil {
		t.Fatalf("another tenant's key: %v", err)
	}
}

func TestRejectedWritesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	now := time.Now()
	base := service.SendRequest{IdempotencyKey: "k", Recipients: []string{"a"}, Type: "t"}
	for name, mod := range map[string]func(r *service.SendRequest){
		"key with #":       func(r *service.SendRequest) { r.IdempotencyKey = "a#b" },
		"recipient with #": func(r *service.SendRequest) { r.Recipients = []string{"a#U#b"} },
		"1001 recipients":  func(r *service.SendRequest) { r.Recipients = users(1001) },
		"no recipients":    func(r *service.SendRequest) { r.Recipients = nil },
		"sendAt past":      func(r *service.SendRequest) { r.SendAt = now.Add(-time.Minute) },
		"sendAt > 1 year":  func(r *service.SendRequest) { r.SendAt = now.Add(366 * 24 * time.Hour) },
		"segment no bcast": func(r *service.SendRequest) { r.Recipients, r.Segment = nil, "vip" },
		"template missing": func(r *service.SendRequest) { r.Template = "welcome" },
		"bad channel":      func(r *service.SendRequest) { r.Channels = []string{"FAX"} },
		"bad priority":     func(r *service.SendRequest) { r.Priority = "urgent" },
		"bad data":         func(r *service.SendRequest) { r.Data = inbox.JSON("{") },
		"no type":          func(r *service.SendRequest) { r.Type = "" },
	} {
		r := base
		mod(&r)
		_, err := svc.Accept(context.Background(), tenant, r)
		if inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v, want BAD_USER_INPUT", name, err)
		}
		if r.IdempotencyKey == "k" {
			if _, ok, err := e.st.GetRequest(context.Background(), tenant, "k"); err != nil || ok {
				t.Errorf("%s: a request was written (%v)", name, err)
			}
		}
	}
	if ids, _ := e.inboxOf(t, "a"); len(ids) != 0 {
		t.Fatalf("a got %v", ids)
	}
}

// TestCrashAfterAccept: a process accepts and dies before processing (AcceptOnly); a
// fresh Service with a scheduler on the same table finishes the request: every
// recipient exactly one notification, badges exact.
func TestCrashAfterAccept(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dead := service.New(e.st, service.Options{AcceptOnly: true, RecoveryDelay: 500 * time.Millisecond, Chunk: 10})
	rs := users(25) // three chunks of 10
	acc, err := dead.Accept(context.Background(), tenant, service.SendRequest{IdempotencyKey: "crash", Recipients: rs,
		Type: "t", Priority: service.Bulk})
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	e.newService(t, service.Options{RecoveryDelay: 500 * time.Millisecond, Chunk: 10}, true)
	waitDone(t, e, "crash", 30*time.Second)
	for i, u := range rs {
		ids, unread := e.inboxOf(t, u)
		if !slices.Equal(ids, []string{acc.NotificationIDs[i]}) || unread != 1 {
			t.Fatalf("%s: ids %v unread %d, want [%s] 1", u, ids, unread, acc.NotificationIDs[i])
		}
	}
}

func TestSendAtRunsLater(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, true)
	at := time.Now().Add(1500 * time.Millisecond)
	sent, err := svc.Send(context.Background(), tenant, service.SendRequest{IdempotencyKey: "later",
		Recipients: []string{"a"}, Type: "t", SendAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Processed || len(sent.NotificationIDs) != 1 {
		t.Fatalf("sent = %+v", sent)
	}
	if ids, _ := e.inboxOf(t, "a"); len(ids) != 0 {
		t.Fatalf("written before sendAt: %v", ids)
	}
	waitDone(t, e, "later", 30*time.Second)
	if time.Now().Before(at) {
		t.Fatal("ran before sendAt")
	}
	if ids, unread := e.inboxOf(t, "a"); !slices.Equal(ids, sent.NotificationIDs) || unread != 1 {
		t.Fatalf("ids %v unread %d, want %v", ids, unread, sent.NotificationIDs)
	}
}

// slowStore delays the sends of bulk keys ("bulk-") at their first store call (the
// guards of the key).
type slowStore struct {
	*store.Store
	running atomic.Int32
	release chan struct{} // bulk sends wait for it
}

func (s *slowStore) Guards(ctx context.Context, tenantID, key string) (map[string]routing.Guard, error) {
	if strings.HasPrefix(key, "bulk-") {
		s.running.Add(1)
		defer s.running.Add(-1)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Guards(ctx, tenantID, key)
}

func TestBulkNeverDelaysTransactional(t *testing.T) {
	t.Parallel()
	e := setup(t)
	slow := &slowStore{Store: e.st, release: make(chan struct{})}
	defer close(slow.release)
	svc := service.New(slow, service.Options{Bulk: 2, Transactional: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(svc.Close)
	for i := range 6 {
		if _, err := svc.Accept(context.Background(), tenant, service.SendRequest{IdempotencyKey: fmt.Sprintf("bulk-%d", i),
			Recipients: []string{"b"}, Type: "t", Priority: service.Bulk}); err != nil {
			t.Fatal(err)
		}
	}
	for slow.running.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	// The bulk lane's workers are held until the end of the test (not for a time, which a
	// loaded machine made flaky): a transactional send that needed one would never end.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent, err := svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: "otp", Recipients: []string{"a"}, Type: "otp"})
	if err != nil || !sent.Processed || sent.Result.Accepted != 1 {
		t.Fatalf("sent %+v, %v (a transactional send waited for the saturated bulk lane)", sent, err)
	}
	if n := slow.running.Load(); n != 2 {
		t.Fatalf("%d bulk sends running, want the lane's 2", n)
	}
}

// TestPreassignedIDBelowClock: a pre-assigned id the inbox's clock passed (a later
// notification written first) is kept while no watermark covers it; after a
// markAllRead above it, the notification gets a fresh id and stays unread.
func TestPreassignedIDBelowClock(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	early, early2 := e.st.NewID(), e.st.NewID()
	if _, err := (service.Writer{Store: e.st}).Send(ctx, tenant, inbox.SendInput{IdempotencyKey: "later", Recipients: []string{"a"}, Type: "t"}); err != nil {
		t.Fatal(err)
	}
	res, err := service.Writer{Store: e.st}.Send(ctx, tenant, inbox.SendInput{IdempotencyKey: "early", Recipients: []string{"a"}, Type: "t",
		NotificationIDs: map[string]string{"a": early}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.NotificationIDs, []string{early}) {
		t.Fatalf("written %v, want %s", res.NotificationIDs, early)
	}
	if ids, unread := e.inboxOf(t, "a"); len(ids) != 2 || ids[1] != early || unread != 2 {
		t.Fatalf("ids %v unread %d", ids, unread)
	}
	if _, err := e.st.MarkAll(ctx, inbox.Viewer{TenantID: tenant, UserID: "a"}, nil); err != nil {
		t.Fatal(err)
	}
	res, err = service.Writer{Store: e.st}.Send(ctx, tenant, inbox.SendInput{IdempotencyKey: "early2", Recipients: []string{"a"}, Type: "t",
		NotificationIDs: map[string]string{"a": early2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NotificationIDs) != 1 || res.NotificationIDs[0] <= early2 {
		t.Fatalf("written %v, want a fresh id above %s", res.NotificationIDs, early2)
	}
	if _, unread := e.inboxOf(t, "a"); unread != 1 {
		t.Fatalf("unread %d, want 1", unread)
	}
}
