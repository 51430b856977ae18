package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// opTrigger sits in front of a ddbfault proxy and counts calls by operation: when the
// nth call of op arrives it arms proxy.FailNext(n, fault), so that exactly that call (and
// the store's n-1 retries of it, which follow it on the handler's one goroutine) fail.
type opTrigger struct {
	proxy *ddbfault.Proxy
	op    string
	nth   int
	n     int
	fault ddbfault.Fault

	mu     sync.Mutex
	counts map[string]int
	ops    []string
	fired  bool
}

func (o *opTrigger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		op = op[i+1:]
	}
	o.mu.Lock()
	o.counts[op]++
	o.ops = append(o.ops, op)
	if !o.fired && op == o.op && o.counts[op] == o.nth {
		o.fired = true
		o.proxy.FailNext(o.n, o.fault)
	}
	o.mu.Unlock()
	o.proxy.ServeHTTP(w, r)
}

// faultyStore returns a store over f's table whose calls go through a fault proxy armed
// by trig (its proxy is set here). The store retries with short waits (the budget of
// calls is the default's).
func faultyStore(t *testing.T, f *fixture, trig *opTrigger) *store.Store {
	t.Helper()
	trig.proxy = ddbfault.New(dynlocaltest.Endpoint(t), ddbfault.Config{})
	trig.counts = map[string]int{}
	ps := httptest.NewServer(trig)
	t.Cleanup(func() { ps.Close(); trig.proxy.Close() })
	db := dynlocaltest.Client(t, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(ps.URL)
		o.Retryer = store.NewSDKRetryer()
	})
	p := store.DefaultRetryPolicy
	p.BaseDelay, p.MaxDelay = time.Millisecond, 5*time.Millisecond
	st := store.New(db, f.table, store.WithSweepWorkers(0), store.WithSchedShards(2), store.WithRetryPolicy(p), store.WithClock(f.clk.Now))
	t.Cleanup(st.Close)
	return st
}

// faultTimeout plus faultMargin is what the tests' claims last: a claim left behind
// expires when the fixture's clock moved that far.
const (
	faultTimeout = 600 * time.Millisecond
	faultMargin  = 200 * time.Millisecond
)

// faultPoint is one DynamoDB call of a delivery, the scenario that makes it and what the
// delivery must end as.
type faultPoint struct {
	name string
	op   string // the operation, and which of its calls (1 = the first) in the run
	nth  int
	// prepare sends the notification and readies the providers; it returns the task the
	// faulty run handles and the channels of the handlers.
	prepare func(t *testing.T, f *fixture, e *faultEnv) inbox.Task
	// check asserts the end state (record, provider counts, tasks) after the runs.
	check func(t *testing.T, f *fixture, e *faultEnv, runErr error)
}

// faultEnv is one case's notification and providers, and the fixture's clock.
type faultEnv struct {
	clk     *clockwork.FakeClock
	id, key string
	recv    *channeltest.WebhookReceiver
	push    *fakePush
	dev     inbox.Device
	first   inbox.Task // the send's task
	chans   *channel.Registry
}

// sent is what the providers received.
func (e *faultEnv) sent() int {
	n := 0
	if e.recv != nil {
		n += len(e.recv.Requests())
	}
	if e.push != nil {
		n += int(e.push.sends.Load())
	}
	return n
}

func (e *faultEnv) handler(st delivery.Store) *delivery.Handler {
	return delivery.NewHandler(st, delivery.Options{Channels: e.chans, Logger: quiet, Backoff: 10 * time.Millisecond,
		MaxBackoff: 20 * time.Millisecond, Timeout: faultTimeout, ClaimMargin: faultMargin, Clock: e.clk})
}

// webhookEnv sends one webhook notification (receiver answering resps, then 200).
func webhookEnv(t *testing.T, f *fixture, e *faultEnv, idem string, resps ...channeltest.WebhookResponse) {
	t.Helper()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	recv.Respond(resps...)
	f.withWebhook(t, url)
	e.recv, e.key = recv, inbox.ChannelWebhook
	e.chans = channel.NewRegistry().Register(inbox.ChannelWebhook, "", channel.NewWebhook(channel.WebhookConfig{}))
	e.id, e.first = f.send(t, idem, inbox.ChannelWebhook, inbox.ChannelWebhook)
}

// retryTask returns the deliver task of e's record due after its first one (none: zero).
func retryTasks(t *testing.T, f *fixture, e *faultEnv) []inbox.Task {
	var out []inbox.Task
	for _, nt := range f.tasks(t, e.key, time.Hour) {
		if nt.Ref == e.id && nt.Due.After(e.first.Due) {
			out = append(out, nt)
		}
	}
	return out
}

// wantRecord fails unless e's record has status and its error has prefix errPrefix
// ("" none at all) after attempts attempts.
func wantRecord(t *testing.T, f *fixture, e *faultEnv, status, errPrefix string, attempts int) inbox.ChannelStatus {
	t.Helper()
	c := f.record(t, e.id, e.key)
	okErr := (errPrefix == "" && c.Error == "") || (errPrefix != "" && strings.HasPrefix(c.Error, errPrefix))
	if c.Status != status || !okErr || (attempts >= 0 && c.Attempts != attempts) {
		t.Errorf("record %+v; want %s, error %q, %d attempts (provider received %d)", c, status, errPrefix, attempts, e.sent())
	}
	return c
}

// The points of one delivery where DynamoDB is called, in the order a run makes them.
var faultPoints = []faultPoint{
	{name: "settings read", op: "GetItem", nth: 1,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			webhookEnv(t, f, e, "settings")
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			wantRecord(t, f, e, inbox.DeliverySent, "", 1)
			if e.sent() != 1 {
				t.Errorf("the receiver got %d requests, want 1", e.sent())
			}
		}},
	{name: "claim", op: "UpdateItem", nth: 1,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			webhookEnv(t, f, e, "claim")
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			if e.sent() != 1 {
				t.Errorf("the receiver got %d requests, want 1 (a claim whose answer was lost is the run's own)", e.sent())
			}
			wantRecord(t, f, e, inbox.DeliverySent, "", -1)
		}},
	{name: "preferences re-check", op: "GetItem", nth: 2,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			webhookEnv(t, f, e, "recheck", channeltest.WebhookResponse{Status: 503})
			// The first attempt (no faults) gets the 503 and writes the retry task.
			if err := e.handler(f.st).Handle(context.Background(), e.first); err != nil {
				t.Fatal(err)
			}
			rt := retryTasks(t, f, e)
			if len(rt) != 1 {
				t.Fatalf("retry tasks %+v", rt)
			}
			return rt[0]
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			// A failed re-check is a transient failure of attempt 2 (its retry is written),
			// or, when the read succeeded on a store retry, attempt 2 sends.
			c := f.record(t, e.id, e.key)
			switch {
			case c.Status == inbox.DeliverySent && c.Error == "" && e.sent() == 2:
			case c.Status == inbox.DeliveryQueued && e.sent() == 1 && len(retryTasks(t, f, e)) >= 1:
			default:
				t.Errorf("record %+v after %d requests (tasks %+v)", c, e.sent(), retryTasks(t, f, e))
			}
		}},
	{name: "DeliverySent", op: "UpdateItem", nth: 2,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			webhookEnv(t, f, e, "sent")
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			if e.sent() != 1 {
				t.Errorf("the receiver got %d requests, want 1", e.sent())
			}
			wantRecord(t, f, e, inbox.DeliverySent, "", 1)
		}},
	{name: "DeliveryRetry", op: "TransactWriteItems", nth: 1,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			webhookEnv(t, f, e, "retry", channeltest.WebhookResponse{Status: 503})
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, runErr error) {
			c := f.record(t, e.id, e.key)
			switch {
			case runErr == nil && c.Status == inbox.DeliveryQueued && c.Attempts == 1 && e.sent() == 1 && len(retryTasks(t, f, e)) == 1:
				// recorded, the retry due
			case c.Status == inbox.DeliverySent && c.Error == "" && e.sent() == 2:
				// the run's error made the scheduler run the task again, which sent
			default:
				t.Errorf("record %+v after %d requests, run error %v, retry tasks %+v; want QUEUED for a retry or SENT by the re-run",
					c, e.sent(), runErr, retryTasks(t, f, e))
			}
		}},
	{name: "DeliveryFailed", op: "UpdateItem", nth: 2,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			webhookEnv(t, f, e, "failed", channeltest.WebhookResponse{Status: 400})
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			if e.sent() != 1 {
				t.Errorf("the receiver got %d requests, want 1", e.sent())
			}
			wantRecord(t, f, e, inbox.DeliveryFailed, channel.ProviderWebhook, 1)
		}},
	{name: "device re-check", op: "BatchGetItem", nth: 1,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			pushEnv(t, f, e, "devrecheck")
			e.push.err = nil
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			// A failed re-check is a transient failure of attempt 1 (its retry is
			// written, nothing sent), or, when the read succeeded on a store retry, it sends.
			c := f.record(t, e.id, e.key)
			switch {
			case c.Status == inbox.DeliverySent && c.Error == "" && e.sent() == 1:
			case c.Status == inbox.DeliveryQueued && e.sent() == 0 && len(retryTasks(t, f, e)) == 1:
			default:
				t.Errorf("record %+v after %d sends (tasks %+v)", c, e.sent(), retryTasks(t, f, e))
			}
		}},
	{name: "PruneDevice profile read", op: "GetItem", nth: 1,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			pushEnv(t, f, e, "pruneprofile")
			return e.first
		},
		check: checkPruned},
	{name: "PruneDevice owner read", op: "GetItem", nth: 2,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			pushEnv(t, f, e, "pruneowner")
			return e.first
		},
		check: checkPruned},
	{name: "PruneDevice", op: "TransactWriteItems", nth: 1,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			pushEnv(t, f, e, "prune")
			return e.first
		},
		check: checkPruned},
	{name: "DeliveryFailed after the prune", op: "UpdateItem", nth: 2,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			pushEnv(t, f, e, "prunefail")
			return e.first
		},
		check: checkPruned},
	{name: "DeliveryUnconfirmed", op: "UpdateItem", nth: 2,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			webhookEnv(t, f, e, "orphan")
			ref := inbox.DeliveryRef{TenantID: tenant, NotificationID: e.id, Key: e.key}
			if _, out, err := f.st.ClaimDelivery(context.Background(), ref, 100*time.Millisecond); err != nil || out != inbox.ClaimOK {
				t.Fatalf("claim: %v %v", out, err)
			}
			f.clk.Advance(150 * time.Millisecond) // the worker that claimed it died
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			if e.sent() != 0 {
				t.Errorf("an orphaned record was sent: %d requests", e.sent())
			}
			wantRecord(t, f, e, inbox.DeliverySent, "unconfirmed", 1)
		}},
	{name: "SkipDelivery", op: "UpdateItem", nth: 1,
		prepare: func(t *testing.T, f *fixture, e *faultEnv) inbox.Task {
			if _, err := f.st.PutUserProfile(context.Background(), viewer, inbox.UserProfile{Addresses: map[string]string{"email": "a@example.com"}}); err != nil {
				t.Fatal(err)
			}
			e.key = inbox.ChannelEmail // no email provider: skipped
			e.id, e.first = f.send(t, "skip", inbox.ChannelEmail, inbox.ChannelEmail)
			return e.first
		},
		check: func(t *testing.T, f *fixture, e *faultEnv, _ error) {
			c := f.record(t, e.id, e.key)
			if c.Status != inbox.DeliverySkipped || c.Reason != inbox.ReasonNoProvider || c.Attempts != 0 {
				t.Errorf("record %+v, want SKIPPED no_provider", c)
			}
		}},
}

// pushEnv registers an FCM device whose provider answers UNREGISTERED and sends to it.
func pushEnv(t *testing.T, f *fixture, e *faultEnv, idem string) {
	t.Helper()
	dev, err := f.st.RegisterDevice(context.Background(), viewer, "fcm-token-"+idem, inbox.PlatformFCM)
	if err != nil {
		t.Fatal(err)
	}
	e.dev = dev
	e.push = &fakePush{provider: channel.ProviderFCM, err: &channel.Error{Provider: channel.ProviderFCM, Kind: channel.Unregistered, Status: 404, Code: "UNREGISTERED"}}
	e.chans = channel.NewRegistry().Register(inbox.ChannelPush, inbox.PlatformFCM, e.push)
	e.key = inbox.DeliveryKey(inbox.ChannelPush, dev.ID)
	e.id, e.first = f.send(t, idem, e.key, inbox.ChannelPush)
}

// checkPruned: the unregistered device was sent to once, is gone, and its record FAILED.
func checkPruned(t *testing.T, f *fixture, e *faultEnv, _ error) {
	if e.sent() != 1 {
		t.Errorf("the provider got %d sends, want 1", e.sent())
	}
	wantRecord(t, f, e, inbox.DeliveryFailed, channel.ProviderFCM, 1)
	devs, err := f.st.Devices(context.Background(), viewer)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.ID == e.dev.ID {
			t.Errorf("the unregistered device is still registered: %+v", devs)
		}
	}
}

// The send-once rule under DynamoDB faults at each call of one delivery: the call is
// throttled, refused by an outage, or runs and loses its answer; once (the store's retry
// absorbs it) or for the store's whole budget of 6 calls (the run fails and the
// scheduler runs the task again, here at once and then after each claim could expire).
// Whatever happened, the provider got the message at most once, a message never sent is
// never recorded SENT (except an orphaned claim's, which is the unconfirmed rule), and the
// record ends as without faults (or, where a run's error made the task run again, as that
// re-run leaves it).
func TestDeliverFaultAtEachCall(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name string
		f    ddbfault.Fault
	}{{"throttled", ddbfault.Throttling}, {"outage", ddbfault.Outage}, {"answer lost", ddbfault.AnswerLost}}
	for _, fp := range faultPoints {
		for _, fl := range faults {
			for _, n := range []int{1, store.DefaultRetryPolicy.Attempts} {
				t.Run(fmt.Sprintf("%s/%s/x%d", fp.name, fl.name, n), func(t *testing.T) {
					t.Parallel()
					f := newFixture(t)
					ctx := context.Background()
					e := &faultEnv{clk: f.clk}
					task := fp.prepare(t, f, e)
					trig := &opTrigger{op: fp.op, nth: fp.nth, n: n, fault: fl.f}
					fst := faultyStore(t, f, trig)
					runErr := e.handler(fst).Handle(ctx, task)
					trig.mu.Lock()
					fired, ops := trig.fired, trig.ops
					trig.mu.Unlock()
					if !fired {
						t.Fatalf("the fault never fired: calls %v", ops)
					}
					if n == 1 && runErr != nil {
						t.Errorf("one fault, absorbed by the store's retry: Handle = %v", runErr)
					}
					// The scheduler runs a failed task again (here without faults) until it
					// succeeds; a live claim left behind is waited out.
					err := runErr
					for i := 0; err != nil && i < 5; i++ {
						if errors.Is(err, delivery.ErrBusy) {
							f.clk.Advance(faultTimeout + faultMargin)
						}
						err = e.handler(f.st).Handle(ctx, task)
					}
					if err != nil {
						t.Fatalf("the task never succeeded: %v (first run: %v)", err, runErr)
					}
					if e.sent() > 1 && !(fp.op == "TransactWriteItems" || fp.name == "preferences re-check") {
						t.Errorf("the provider got %d sends", e.sent())
					}
					fp.check(t, f, e, runErr)
					if t.Failed() {
						t.Logf("calls of the faulty run: %v; first run's error: %v", ops, runErr)
					}
				})
			}
		}
	}
}

// mixEnv is a store and a scheduler client behind a fault proxy with rates cfg (enabled).
func mixEnv(t *testing.T, f *fixture, cfg ddbfault.Config) (*store.Store, *dynamodb.Client, *ddbfault.Proxy) {
	t.Helper()
	proxy := ddbfault.New(dynlocaltest.Endpoint(t), cfg)
	ps := httptest.NewServer(proxy)
	t.Cleanup(func() { ps.Close(); proxy.Close() })
	db := dynlocaltest.Client(t, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(ps.URL)
		o.Retryer = store.NewSDKRetryer()
	})
	st := store.New(db, f.table, store.WithSweepWorkers(0), store.WithSchedShards(2), store.WithClock(f.clk.Now))
	t.Cleanup(st.Close)
	return st, db, proxy
}

// 80 webhook deliveries through the real scheduler while DynamoDB throttles, fails and
// loses answers after committing (seeded, 5-8% each) for the handler and the scheduler
// alike, and the receiver refuses the first 12 requests with a 503 (retried): every
// message reaches the receiver exactly once, or at most once with its record
// SENT "unconfirmed"; a message never received is never SENT otherwise; no record is
// left QUEUED.
func TestDeliverRandomFaultsThroughScheduler(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	// The first refused503 requests are answered 503: their records are retried through
	// tasks of their own.
	const refused503 = 12
	for range refused503 {
		recv.Respond(channeltest.WebhookResponse{Status: 503})
	}
	f.withWebhook(t, url)
	const n = 80
	ids := make([]string, 0, n)
	for i := range n {
		res, err := service.Writer{Store: f.st}.Send(ctx, tenant, inbox.SendInput{IdempotencyKey: fmt.Sprintf("mix-%d", i), Recipients: []string{user},
			Type: "invoice.paid", Title: "Invoice paid", TemplateChannels: []string{inbox.ChannelInApp, inbox.ChannelWebhook}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.NotificationIDs[0])
	}
	fst, db, proxy := mixEnv(t, f, ddbfault.Config{Seed: 11, Throttle: 0.06, Outage: 0.05, LostAnswer: 0.08, Latency: 0.05, LatencySpike: 100 * time.Millisecond})
	h := delivery.NewHandler(fst, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelWebhook, "", channel.NewWebhook(channel.WebhookConfig{})),
		Logger: quiet, Backoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Timeout: 2 * time.Second, ClaimMargin: time.Second,
		Clock: f.clk})
	// On the fixture's clock: safety-net passes every 100 ms, a membership of 30 s (renewed
	// every 10 s, and again a second later when a fault refused a renewal).
	const step = 100 * time.Millisecond
	s := sched.New(fst, sched.Options{DB: db, Poll: step, Lease: 30 * time.Second, Logger: quiet, Clock: f.clk,
		RetryBase: 100 * time.Millisecond, RetryMax: time.Second, MaxAttempts: 50, HandlerTimeout: h.HandlerTimeout(),
		CallTimeout: time.Minute})
	h.Register(s)
	proxy.SetEnabled(true)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() {
		cancel()
		<-done
	}()

	// The scheduler's passes and the handlers' runs settle between two steps of the clock
	// (clocktest.Settle: the fake clock stands still while the engine answers); every
	// second of the clock, the records still QUEUED are read again.
	settle := func() {
		clocktest.Settle(t, f.clk, func() int { return 1 + len(s.Held()) }, func() bool { return s.Stats().Running == 0 })
	}
	settle()
	const rounds = 90 // seconds of the clock
	var queued []string
	for round := 0; ; round++ {
		left := queued[:0]
		if queued == nil {
			left = nil
			queued = ids
		}
		for _, id := range queued {
			if c := f.record(t, id, inbox.ChannelWebhook); c.Status == inbox.DeliveryQueued {
				left = append(left, id)
			}
		}
		queued = left
		if len(queued) == 0 || round == rounds {
			break
		}
		for range time.Second / step {
			f.clk.Advance(step)
			settle()
		}
	}
	proxy.SetEnabled(false)
	stats := proxy.Stats()
	if len(queued) > 0 {
		t.Errorf("%d records still QUEUED after %d s of the clock (e.g. %s); scheduler %+v", len(queued), rounds, queued[0], s.Stats())
	}
	got := map[string]int{} // accepted (200) requests by webhook-id
	reqs := recv.Requests()
	for i, r := range reqs {
		if i >= refused503 {
			got[r.Header.Get("webhook-id")]++
		}
	}
	unconfirmed := 0
	for _, id := range ids {
		c := f.record(t, id, inbox.ChannelWebhook)
		k := delivery.IdempotencyKey(inbox.DeliveryRef{TenantID: tenant, NotificationID: id, Key: inbox.ChannelWebhook})
		switch r := got[k]; {
		case r > 1:
			t.Errorf("%s: the receiver got it %d times", id, r)
		case c.Status == inbox.DeliverySent && strings.HasPrefix(c.Error, "unconfirmed"):
			unconfirmed++
		case c.Status == inbox.DeliverySent && c.Error == "" && r == 1:
		case c.Status == inbox.DeliveryFailed && r == 0 && strings.Contains(c.Error, "503"):
			// refused on every attempt
		default:
			t.Errorf("%s: record %+v after %d receptions", id, c, r)
		}
	}
	if stats.Throttled == 0 || stats.Outages == 0 || stats.LostAnswers == 0 {
		t.Errorf("the proxy did not inject every kind of fault: %+v", stats)
	}
	if len(reqs) <= refused503 {
		t.Errorf("the receiver got %d requests, fewer than its scripted 503s", len(reqs))
	}
	t.Logf("proxy %+v; requests %d; unconfirmed %d; scheduler %+v", stats, len(reqs), unconfirmed, s.Stats())
}

// Provider callbacks under faults: the provider retries a callback until it gets a 2xx
// (here: applies the event until ApplyProviderEvent returns no error), including after an
// answer lost once the update committed. Each event lands once, a retried or late event
// never moves a record backwards (DELIVERED after OPENED, DELIVERED after FAILED), and the
// times of the first application stay.
func TestProviderCallbacksUnderFaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.PutUserProfile(ctx, viewer, inbox.UserProfile{Addresses: map[string]string{"phone": "+15005550006"}}); err != nil {
		t.Fatal(err)
	}
	sms := &fakePush{provider: channel.ProviderTwilio}
	h := delivery.NewHandler(f.st, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelSMS, "", sms), Logger: quiet, Clock: f.clk})
	var refs []inbox.DeliveryRef
	for _, k := range []string{"cb1", "cb2"} {
		id, task := f.send(t, k, inbox.ChannelSMS, inbox.ChannelSMS)
		if err := h.Handle(ctx, task); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, inbox.DeliveryRef{TenantID: tenant, NotificationID: id, Key: inbox.ChannelSMS})
	}
	trig := &opTrigger{}
	fst := faultyStore(t, f, trig)
	// deliver applies ev as a provider delivers a callback: the fault f on its first n
	// calls, then again until it is accepted (at most 5 times). It returns whether the
	// accepted call reported a change.
	deliver := func(ev inbox.ProviderEvent, n int, fault ddbfault.Fault) bool {
		t.Helper()
		trig.proxy.FailNext(n, fault)
		for try := 0; ; try++ {
			changed, err := fst.ApplyProviderEvent(ctx, ev)
			if err == nil {
				return changed
			}
			if try == 5 {
				t.Fatalf("%s %s: never accepted: %v", ev.Ref.NotificationID, ev.Status, err)
			}
		}
	}
	state := func(ref inbox.DeliveryRef) inbox.ChannelStatus { return f.record(t, ref.NotificationID, ref.Key) }
	t0 := f.clk.Now().Add(-time.Minute).Truncate(time.Millisecond)
	ev := func(ref inbox.DeliveryRef, status string, at time.Time) inbox.ProviderEvent {
		return inbox.ProviderEvent{Ref: ref, Provider: channel.ProviderTwilio, MessageID: "m1", Status: status, At: at}
	}

	// Record 1: delivered (answer lost once; then lost for the whole budget on the
	// provider's repeat), opened (an outage over the budget), then a late repeat of
	// "delivered".
	// The store's retry of the lost answer finds its own update: a change, reported as one
	// (the callback's "applied" count).
	if !deliver(ev(refs[0], inbox.DeliveryDelivered, t0), 1, ddbfault.AnswerLost) {
		t.Error("an event applied whose answer was lost (then retried by the store) reported no change")
	}
	if c := state(refs[0]); c.Status != inbox.DeliveryDelivered || !c.DeliveredAt.Equal(t0) {
		t.Fatalf("after delivered: %+v", c)
	}
	if deliver(ev(refs[0], inbox.DeliveryDelivered, t0.Add(time.Second)), store.DefaultRetryPolicy.Attempts, ddbfault.AnswerLost) {
		t.Error("a repeated delivered reported a change")
	}
	if c := state(refs[0]); c.Status != inbox.DeliveryDelivered || !c.DeliveredAt.Equal(t0) {
		t.Fatalf("after the repeated delivered: %+v (deliveredAt moved?)", c)
	}
	deliver(ev(refs[0], inbox.DeliveryOpened, t0.Add(2*time.Second)), store.DefaultRetryPolicy.Attempts, ddbfault.Outage)
	if deliver(ev(refs[0], inbox.DeliveryDelivered, t0.Add(3*time.Second)), 1, ddbfault.Throttling) {
		t.Error("a late delivered after opened reported a change")
	}
	if c := state(refs[0]); c.Status != inbox.DeliveryOpened || !c.DeliveredAt.Equal(t0) || !c.OpenedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("after opened and a late delivered: %+v", c)
	}

	// Record 2: failed (answer lost for the whole budget), then a late "delivered".
	bounce := ev(refs[1], inbox.DeliveryFailed, t0)
	bounce.Error = "30003: unreachable handset"
	deliver(bounce, store.DefaultRetryPolicy.Attempts, ddbfault.AnswerLost)
	deliver(ev(refs[1], inbox.DeliveryDelivered, t0.Add(time.Second)), 1, ddbfault.AnswerLost)
	if c := state(refs[1]); c.Status != inbox.DeliveryFailed || c.Error != bounce.Error || !c.DeliveredAt.IsZero() {
		t.Fatalf("after failed and a late delivered: %+v", c)
	}
	if sms.sends.Load() != 2 {
		t.Fatalf("the provider got %d sends, want 2", sms.sends.Load())
	}
}

// Left open (finding F4, see the branch report): an outcome write that fails for longer
// than the handler's write deadline (10 s of DynamoDB outage right after the provider
// answered) leaves the claim; the next run finds it orphaned and marks the record SENT
// "unconfirmed", although here the provider refused the message (503) and nothing was
// sent. Telling an orphan that never sent from one that may have needs a durable mark
// before the provider call (a second write per delivery) or a release the next run can
// trust; neither is a small change.
func TestDeliverLongOutageAfterARefusalIsNotRecordedSent(t *testing.T) {
	t.Skip("finding F4: an outcome write failing past the 10 s write deadline ends SENT unconfirmed even when the provider refused (needs a pre-send mark; see the report)")
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	e := &faultEnv{clk: f.clk}
	webhookEnv(t, f, e, "long", channeltest.WebhookResponse{Status: 503})
	trig := &opTrigger{op: "TransactWriteItems", nth: 1, n: 1 << 20, fault: ddbfault.Outage}
	fst := faultyStore(t, f, trig)
	if err := e.handler(fst).Handle(ctx, e.first); err == nil {
		t.Fatal("Handle succeeded through a 10 s outage")
	}
	trig.proxy.FailNext(0, ddbfault.Outage)
	err := errors.New("not run")
	for i := 0; err != nil && i < 5; i++ {
		f.clk.Advance(faultTimeout + faultMargin)
		err = e.handler(f.st).Handle(ctx, e.first)
	}
	if err != nil {
		t.Fatal(err)
	}
	if c := f.record(t, e.id, e.key); c.Status == inbox.DeliverySent || e.sent() != 1 {
		t.Fatalf("record %+v after %d requests (all refused): a refused message is recorded SENT", c, e.sent())
	}
}
