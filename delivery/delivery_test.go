package delivery_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// tenant and user of every test's sends.
const tenant, user = "acme", "a"

var viewer = inbox.Viewer{TenantID: tenant, UserID: user}

// webhookSecret signs the tests' webhooks (a raw secret: the adapter keys it as is).
const webhookSecret = "a-raw-secret-of-the-tests"

// quiet is a logger that discards.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture is a store over a fresh table whose operations are recorded, on a fake clock
// that the handlers share: claims expire and retries fall due when a test advances it.
type fixture struct {
	st    *store.Store
	db    *dynamodb.Client
	rec   *ddbtrace.Recorder
	clk   *clockwork.FakeClock
	table string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	db := dynlocaltest.Client(t, rec.Option())
	table := dynlocaltest.TableName(t)
	clk := clocktest.New()
	st := store.New(db, table, store.WithSweepWorkers(0), store.WithSchedShards(2), store.WithClock(clk.Now))
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if slices.Contains(rec.Ops(), "Scan") {
			t.Errorf("a Scan was sent: %v", rec.Ops())
		}
	})
	return &fixture{st: st, db: db, rec: rec, clk: clk, table: table}
}

// tasks returns the deliver tasks due from a minute ago to within ahead, for key ("" any).
func (f *fixture) tasks(t *testing.T, key string, ahead time.Duration) []inbox.Task {
	t.Helper()
	ctx := context.Background()
	now := f.clk.Now()
	var out []inbox.Task
	for shard := range f.st.SchedShards() {
		for b := now.Add(-time.Minute).Truncate(time.Minute); !b.After(now.Add(ahead)); b = b.Add(time.Minute) {
			page, err := f.st.DueTasks(ctx, shard, b, now.Add(ahead), nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range page.Tasks {
				if task.Kind == inbox.TaskDeliver && (key == "" || task.Token == key) {
					out = append(out, task)
				}
			}
		}
	}
	return out
}

// send sends one notification to user a of tenant acme over the template channels chans
// (in-app added) and returns its id and the one deliver task of key it wrote.
func (f *fixture) send(t *testing.T, idemKey, key string, chans ...string) (string, inbox.Task) {
	t.Helper()
	res, err := service.Writer{Store: f.st}.Send(context.Background(), tenant, inbox.SendInput{IdempotencyKey: idemKey, Recipients: []string{user},
		Type: "invoice.paid", Title: "Invoice paid", Body: "Thank you", TemplateChannels: append([]string{inbox.ChannelInApp}, chans...)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.NotificationIDs[0]
	return id, f.taskOf(t, id, key)
}

// taskOf returns the one deliver task of notification id's record key due now.
func (f *fixture) taskOf(t *testing.T, id, key string) inbox.Task {
	t.Helper()
	var mine []inbox.Task
	for _, task := range f.tasks(t, key, time.Minute) {
		if task.Ref == id {
			mine = append(mine, task)
		}
	}
	if len(mine) != 1 || mine[0].Viewer != viewer {
		t.Fatalf("deliver tasks of %s's %s: %+v, want one", id, key, mine)
	}
	return mine[0]
}

// record returns notification id's delivery record key.
func (f *fixture) record(t *testing.T, id, key string) inbox.ChannelStatus {
	t.Helper()
	st, err := f.st.Status(context.Background(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Channels {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("no %s record in %+v", key, st)
	return inbox.ChannelStatus{}
}

// withWebhook stores the tenant's webhook settings: receiver's URL and webhookSecret.
func (f *fixture) withWebhook(t *testing.T, url string) {
	t.Helper()
	if _, err := f.st.PutTenantSettings(context.Background(), tenant, inbox.TenantSettings{WebhookURL: url, WebhookSecret: webhookSecret}); err != nil {
		t.Fatal(err)
	}
}

// webhookHandler is a handler on f's clock whose only channel is the real webhook
// adapter; o's other fields are kept.
func webhookHandler(f *fixture, o delivery.Options) *delivery.Handler {
	o.Channels = channel.NewRegistry().Register(inbox.ChannelWebhook, "", channel.NewWebhook(channel.WebhookConfig{}))
	if o.Logger == nil {
		o.Logger = quiet
	}
	o.Clock = f.clk
	return delivery.NewHandler(f.st, o)
}

// Without a provider the handler marks the record SKIPPED no_provider once: a second run
// of the same task sends one refused conditional UpdateItem and changes nothing. A
// malformed task is dropped without a write.
func TestDeliverMarksNoProviderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.PutUserProfile(ctx, viewer, inbox.UserProfile{Addresses: map[string]string{"email": "a@example.com"}}); err != nil {
		t.Fatal(err)
	}
	id, task := f.send(t, "k", inbox.ChannelEmail, inbox.ChannelEmail)
	h := delivery.NewHandler(f.st, delivery.Options{Logger: quiet, Clock: f.clk})
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	first := f.record(t, id, inbox.ChannelEmail)
	if first.Status != inbox.DeliverySkipped || first.Reason != inbox.ReasonNoProvider || first.Attempts != 0 {
		t.Fatalf("after one run: %+v", first)
	}
	f.rec.Reset()
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"UpdateItem"}) {
		t.Errorf("second run sent %v, want one (refused) UpdateItem", ops)
	}
	if again := f.record(t, id, inbox.ChannelEmail); again != first {
		t.Fatalf("second run changed the record: %+v, was %+v", again, first)
	}
	f.rec.Reset()
	for _, bad := range []inbox.Task{
		{Kind: inbox.TaskDeliver, Ref: id, Token: "FAX", Viewer: task.Viewer},
		{Kind: inbox.TaskDeliver, Ref: id, Token: "PUSH#nothex", Viewer: task.Viewer},
		{Kind: inbox.TaskDeliver, Ref: id, Token: inbox.ChannelInApp, Viewer: task.Viewer},
		{Kind: inbox.TaskDeliver, Ref: "", Token: inbox.ChannelEmail, Viewer: task.Viewer},
		{Kind: inbox.TaskDeliver, Ref: id, Token: inbox.ChannelEmail},
	} {
		if err := h.Handle(ctx, bad); err != nil {
			t.Fatalf("malformed task %+v: %v", bad, err)
		}
	}
	if ops := f.rec.Ops(); len(ops) != 0 {
		t.Fatalf("malformed tasks wrote %v", ops)
	}
}

// A webhook delivery: the tenant's receiver gets one signed POST (verified with the
// Standard Webhooks library) of the record's payload, with webhook-id = the record's
// idempotency key; the record is SENT by "webhook" after one attempt. A second run of the
// task sends nothing.
func TestDeliverWebhookSentOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	f.withWebhook(t, url)
	id, task := f.send(t, "k", inbox.ChannelWebhook, inbox.ChannelWebhook)
	h := webhookHandler(f, delivery.Options{})
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	reqs := recv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the receiver got %d requests, want 1", len(reqs))
	}
	ref := inbox.DeliveryRef{TenantID: tenant, NotificationID: id, Key: inbox.ChannelWebhook}
	r := reqs[0]
	if r.VerifyErr != nil || r.Header.Get("webhook-id") != delivery.IdempotencyKey(ref) || !strings.Contains(string(r.Body), id) {
		t.Fatalf("request: verify %v, webhook-id %q (want %q), body %s", r.VerifyErr, r.Header.Get("webhook-id"), delivery.IdempotencyKey(ref), r.Body)
	}
	c := f.record(t, id, inbox.ChannelWebhook)
	if c.Status != inbox.DeliverySent || c.Attempts != 1 || c.Provider != channel.ProviderWebhook || c.Error != "" || c.SentAt.IsZero() {
		t.Fatalf("record %+v", c)
	}
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if n := len(recv.Requests()); n != 1 {
		t.Fatalf("a second run sent again: %d requests", n)
	}
	if again := f.record(t, id, inbox.ChannelWebhook); again != c {
		t.Fatalf("a second run changed the record: %+v, was %+v", again, c)
	}
}

// A 503 with Retry-After: 120 is transient: the record stays QUEUED with the error and
// the attempt counted, and its next deliver task is due after the Retry-After (longer
// than the backoff here); that task sends again with the same webhook-id and the record
// ends SENT after 2 attempts.
func TestDeliverRetriesA503AfterRetryAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	recv.Respond(channeltest.WebhookResponse{Status: 503, RetryAfter: "120"})
	f.withWebhook(t, url)
	id, task := f.send(t, "k", inbox.ChannelWebhook, inbox.ChannelWebhook)
	h := webhookHandler(f, delivery.Options{Backoff: 10 * time.Millisecond})
	start := f.clk.Now()
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	c := f.record(t, id, inbox.ChannelWebhook)
	if c.Status != inbox.DeliveryQueued || c.Attempts != 1 || !strings.Contains(c.Error, "503") {
		t.Fatalf("after the 503: %+v", c)
	}
	var next []inbox.Task
	for _, nt := range f.tasks(t, inbox.ChannelWebhook, 5*time.Minute) {
		if nt.Ref == id && nt.Due.After(task.Due) {
			next = append(next, nt)
		}
	}
	if len(next) != 1 {
		t.Fatalf("retry tasks %+v, want one", next)
	}
	if wait := next[0].Due.Sub(start); wait != 120*time.Second {
		t.Fatalf("the retry is due in %v, want the Retry-After's 120s", wait)
	}
	if err := h.Handle(ctx, next[0]); err != nil {
		t.Fatal(err)
	}
	reqs := recv.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("webhook-id") != reqs[1].Header.Get("webhook-id") {
		t.Fatalf("requests %d, webhook-ids differ or missing", len(reqs))
	}
	c = f.record(t, id, inbox.ChannelWebhook)
	if c.Status != inbox.DeliverySent || c.Attempts != 2 || c.Error != "" {
		t.Fatalf("after the retry: %+v", c)
	}
}

// Transient failures up to the bound: the last attempt fails the record, saying how many
// attempts were made; a permanent failure (400) fails it at once.
func TestDeliverFailsAfterTheAttemptsAndAtOnceWhenPermanent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	recv.SetDefault(channeltest.WebhookResponse{Status: 500})
	f.withWebhook(t, url)
	id, task := f.send(t, "k1", inbox.ChannelWebhook, inbox.ChannelWebhook)
	h := webhookHandler(f, delivery.Options{Attempts: 2, Backoff: 10 * time.Millisecond})
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	var retry *inbox.Task
	for _, nt := range f.tasks(t, inbox.ChannelWebhook, time.Minute) {
		if nt.Ref == id && nt.Due.After(task.Due) {
			retry = &nt
		}
	}
	if retry == nil {
		t.Fatal("no retry task after the first 500")
	}
	if err := h.Handle(ctx, *retry); err != nil {
		t.Fatal(err)
	}
	c := f.record(t, id, inbox.ChannelWebhook)
	if c.Status != inbox.DeliveryFailed || c.Attempts != 2 || !strings.Contains(c.Error, "500") || !strings.Contains(c.Error, "after 2 attempts") {
		t.Fatalf("after 2 transient failures with 2 attempts: %+v", c)
	}

	recv.SetDefault(channeltest.WebhookResponse{Status: 400, Body: "bad payload"})
	id2, task2 := f.send(t, "k2", inbox.ChannelWebhook, inbox.ChannelWebhook)
	if err := h.Handle(ctx, task2); err != nil {
		t.Fatal(err)
	}
	c = f.record(t, id2, inbox.ChannelWebhook)
	if c.Status != inbox.DeliveryFailed || c.Attempts != 1 || !strings.Contains(c.Error, "400") {
		t.Fatalf("after a 400: %+v", c)
	}
	for _, nt := range f.tasks(t, inbox.ChannelWebhook, time.Minute) {
		if nt.Ref == id2 && nt.Due.After(task2.Due) {
			t.Fatalf("a permanent failure was rescheduled: %+v", nt)
		}
	}
}

// A receiver that never answers: the attempt ends at Timeout as a transient failure
// saying so, and is rescheduled.
func TestDeliverTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	recv.SetDefault(channeltest.WebhookResponse{Hold: true})
	f.withWebhook(t, url)
	id, task := f.send(t, "k", inbox.ChannelWebhook, inbox.ChannelWebhook)
	h := webhookHandler(f, delivery.Options{Timeout: 300 * time.Millisecond, Backoff: 10 * time.Millisecond})
	start := time.Now()
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the attempt took %v with a 300ms timeout", took)
	}
	c := f.record(t, id, inbox.ChannelWebhook)
	if c.Status != inbox.DeliveryQueued || c.Attempts != 1 || c.Error == "" {
		t.Fatalf("after a timeout: %+v", c)
	}
	if len(f.tasks(t, inbox.ChannelWebhook, time.Minute)) != 2 {
		t.Fatalf("tasks %+v, want the first and its retry", f.tasks(t, inbox.ChannelWebhook, time.Minute))
	}
}

// The send-once rule: a record claimed by an attempt that never recorded an outcome (its
// worker died) is, once the claim expired, marked SENT "unconfirmed" without a send; while
// the claim is live, the task fails with ErrBusy and sends nothing.
func TestDeliverOrphanedClaimIsNeverResent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	f.withWebhook(t, url)
	id, task := f.send(t, "k", inbox.ChannelWebhook, inbox.ChannelWebhook)
	ref := inbox.DeliveryRef{TenantID: tenant, NotificationID: id, Key: inbox.ChannelWebhook}
	// A worker claims the record for a second and dies.
	if _, out, err := f.st.ClaimDelivery(ctx, ref, time.Second); err != nil || out != inbox.ClaimOK {
		t.Fatalf("claim: %v %v", out, err)
	}
	h := webhookHandler(f, delivery.Options{})
	if err := h.Handle(ctx, task); !errors.Is(err, delivery.ErrBusy) {
		t.Fatalf("with a live claim Handle = %v, want ErrBusy", err)
	}
	f.clk.Advance(999 * time.Millisecond) // the claim's last millisecond
	if err := h.Handle(ctx, task); !errors.Is(err, delivery.ErrBusy) {
		t.Fatalf("a millisecond before the claim expires Handle = %v, want ErrBusy", err)
	}
	f.clk.Advance(2 * time.Millisecond)
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if n := len(recv.Requests()); n != 0 {
		t.Fatalf("the orphaned record was sent: %d requests", n)
	}
	c := f.record(t, id, inbox.ChannelWebhook)
	if c.Status != inbox.DeliverySent || !strings.HasPrefix(c.Error, "unconfirmed") || c.Attempts != 1 {
		t.Fatalf("record %+v, want SENT unconfirmed", c)
	}
	if err := h.Handle(ctx, task); err != nil || len(recv.Requests()) != 0 {
		t.Fatalf("a later run: %v, %d requests", err, len(recv.Requests()))
	}
}

// fakePush is a push adapter answering err (nil: accepted as "m1") and counting sends.
type fakePush struct {
	provider string
	err      error
	sends    atomic.Int32
	last     atomic.Pointer[channel.Message]
}

func (p *fakePush) Provider() string { return p.provider }

func (p *fakePush) Send(_ context.Context, m channel.Message) (channel.Result, error) {
	p.sends.Add(1)
	p.last.Store(&m)
	if p.err != nil {
		return channel.Result{}, p.err
	}
	return channel.Result{Provider: p.provider, MessageID: "m1"}, nil
}

// Push records go to the adapter of their device's platform with the device's token;
// an Unregistered answer removes the device from the user's profile and fails the
// record; a platform without an adapter is SKIPPED no_provider.
func TestDeliverPushByPlatformAndPruneOnUnregistered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	apnsDev, err := f.st.RegisterDevice(ctx, viewer, strings.Repeat("ab", 32), inbox.PlatformAPNs)
	if err != nil {
		t.Fatal(err)
	}
	fcmDev, err := f.st.RegisterDevice(ctx, viewer, "fcm-registration-token-1", inbox.PlatformFCM)
	if err != nil {
		t.Fatal(err)
	}
	apnsKey, fcmKey := inbox.DeliveryKey(inbox.ChannelPush, apnsDev.ID), inbox.DeliveryKey(inbox.ChannelPush, fcmDev.ID)
	apns := &fakePush{provider: channel.ProviderAPNs}
	fcm := &fakePush{provider: channel.ProviderFCM, err: &channel.Error{Provider: channel.ProviderFCM, Kind: channel.Unregistered, Status: 404, Code: "UNREGISTERED"}}
	h := delivery.NewHandler(f.st, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelPush, inbox.PlatformAPNs, apns).Register(inbox.ChannelPush, inbox.PlatformFCM, fcm), Logger: quiet, Clock: f.clk})

	id, apnsTask := f.send(t, "k", apnsKey, inbox.ChannelPush)
	if err := h.Handle(ctx, apnsTask); err != nil {
		t.Fatal(err)
	}
	if m := apns.last.Load(); apns.sends.Load() != 1 || m == nil || m.To != apnsDev.Token || m.Platform != inbox.PlatformAPNs || m.Title != "Invoice paid" || m.Body != "Thank you" {
		t.Fatalf("APNs sends %d, last %+v", apns.sends.Load(), m)
	}
	if c := f.record(t, id, apnsKey); c.Status != inbox.DeliverySent || c.ProviderMessageID != "m1" || c.Provider != channel.ProviderAPNs {
		t.Fatalf("APNs record %+v", c)
	}

	fcmTask := f.taskOf(t, id, fcmKey) // the same send's other device
	if err := h.Handle(ctx, fcmTask); err != nil {
		t.Fatal(err)
	}
	if c := f.record(t, id, fcmKey); c.Status != inbox.DeliveryFailed || !strings.Contains(c.Error, "UNREGISTERED") || fcm.sends.Load() != 1 {
		t.Fatalf("FCM record %+v after %d sends", c, fcm.sends.Load())
	}
	devs, err := f.st.Devices(ctx, viewer)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].ID != apnsDev.ID {
		t.Fatalf("devices after UNREGISTERED: %+v, want the APNs one only", devs)
	}

	// Without an FCM adapter an FCM device's record is skipped, not sent elsewhere.
	fcm2, err := f.st.RegisterDevice(ctx, viewer, "fcm-registration-token-2", inbox.PlatformFCM)
	if err != nil {
		t.Fatal(err)
	}
	key2 := inbox.DeliveryKey(inbox.ChannelPush, fcm2.ID)
	id2, task2 := f.send(t, "k2", key2, inbox.ChannelPush)
	apnsOnly := delivery.NewHandler(f.st, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelPush, inbox.PlatformAPNs, apns), Logger: quiet, Clock: f.clk})
	if err := apnsOnly.Handle(ctx, task2); err != nil {
		t.Fatal(err)
	}
	if c := f.record(t, id2, key2); c.Status != inbox.DeliverySkipped || c.Reason != inbox.ReasonNoProvider {
		t.Fatalf("FCM record without an FCM adapter: %+v", c)
	}
	if apns.sends.Load() != 1 {
		t.Fatalf("APNs sends %d, want still 1 (an FCM record never goes to APNs)", apns.sends.Load())
	}
}

// A push goes to a device only while it is still the recipient's: a token another user
// of the tenant registered after the send is SKIPPED device_moved, one the recipient
// unregistered after the send SKIPPED no_device, and neither reaches the provider; a
// device that stayed gets its push.
func TestDeliverPushOnlyToTheRecipientsDevice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	fcm := &fakePush{provider: channel.ProviderFCM}
	h := delivery.NewHandler(f.st, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelPush, inbox.PlatformFCM, fcm), Logger: quiet})
	for _, c := range []struct {
		name, token string
		after       func(token string) error
		want        string // "" sent
	}{
		{"moved to another user", "fcm-token-moved", func(token string) error {
			_, err := f.st.RegisterDevice(ctx, inbox.Viewer{TenantID: tenant, UserID: "b"}, token, inbox.PlatformFCM)
			return err
		}, inbox.ReasonDeviceMoved},
		{"unregistered", "fcm-token-gone", func(token string) error {
			_, err := f.st.UnregisterDevice(ctx, viewer, token)
			return err
		}, inbox.ReasonNoDevice},
		{"registered by another tenant's user", "fcm-token-kept", func(token string) error {
			_, err := f.st.RegisterDevice(ctx, inbox.Viewer{TenantID: "globex", UserID: "b"}, token, inbox.PlatformFCM)
			return err
		}, ""},
	} {
		dev, err := f.st.RegisterDevice(ctx, viewer, c.token, inbox.PlatformFCM)
		if err != nil {
			t.Fatal(err)
		}
		key := inbox.DeliveryKey(inbox.ChannelPush, dev.ID)
		id, task := f.send(t, "k-"+c.token, key, inbox.ChannelPush)
		if err := c.after(c.token); err != nil {
			t.Fatal(err)
		}
		before := fcm.sends.Load()
		if err := h.Handle(ctx, task); err != nil {
			t.Fatal(err)
		}
		rec, sent := f.record(t, id, key), fcm.sends.Load()-before
		switch {
		case c.want == "" && (rec.Status != inbox.DeliverySent || sent != 1):
			t.Errorf("%s: %+v after %d sends, want SENT once", c.name, rec, sent)
		case c.want != "" && (rec.Status != inbox.DeliverySkipped || rec.Reason != c.want || sent != 0):
			t.Errorf("%s: %+v after %d sends, want SKIPPED %s and no send", c.name, rec, sent, c.want)
		}
	}
}

// Backoff is full jitter: uniform in [0, min(MaxBackoff, Backoff·2^(n-1))].
func TestBackoffIsFullJitterCapped(t *testing.T) {
	t.Parallel()
	var ceilings []int64
	h := delivery.NewHandler(nil, delivery.Options{Backoff: time.Second, MaxBackoff: 10 * time.Second,
		Jitter: func(n int64) int64 { ceilings = append(ceilings, n); return n - 1 }})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := h.Backoff(i + 1); got != w {
			t.Errorf("Backoff(%d) at the top of its range = %v, want %v", i+1, got, w)
		}
	}
	zero := delivery.NewHandler(nil, delivery.Options{Jitter: func(int64) int64 { return 0 }})
	if got := zero.Backoff(3); got != 0 {
		t.Errorf("Backoff at the bottom of its range = %v, want 0", got)
	}
	random := delivery.NewHandler(nil, delivery.Options{Backoff: time.Second})
	for n := 1; n <= 5; n++ {
		if d := random.Backoff(n); d < 0 || d > time.Second<<(n-1) {
			t.Errorf("Backoff(%d) = %v, outside [0, %v]", n, d, time.Second<<(n-1))
		}
	}
}

// Through the real scheduler (on the fixture's clock): the webhook task the send wrote,
// due at once, runs at the scheduler's first pass and the record is SENT.
func TestDeliverThroughScheduler(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	f.withWebhook(t, url)
	id, _ := f.send(t, "k", inbox.ChannelWebhook, inbox.ChannelWebhook)
	outcomes := make(chan sched.Outcome, 10)
	s := sched.New(f.st, sched.Options{DB: f.db, Logger: quiet, Clock: f.clk,
		Observe: func(kind string, out sched.Outcome, _ time.Duration) {
			if kind == inbox.TaskDeliver {
				outcomes <- out
			}
		}})
	webhookHandler(f, delivery.Options{}).Register(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case out := <-outcomes:
		if out != sched.Done {
			t.Fatalf("the deliver task's outcome: %s, stats %+v", out, s.Stats())
		}
	case <-time.After(clocktest.Within):
		t.Fatalf("the deliver task did not run, stats %+v", s.Stats())
	}
	if c := f.record(t, id, inbox.ChannelWebhook); c.Status != inbox.DeliverySent || len(recv.Requests()) != 1 {
		t.Fatalf("record %+v, %d requests", c, len(recv.Requests()))
	}
}

// A record that waited is sent under the preferences of now: the first attempt runs
// without re-reading them (no GetItem of PREFS), gets a 503, and while the retry waits the
// user mutes the notification's thread; the retry then marks the record SKIPPED muted
// and the receiver never hears of it again.
func TestDeliverRechecksPreferencesAfterAWait(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	recv, url := channeltest.StartWebhook(t, webhookSecret)
	recv.Respond(channeltest.WebhookResponse{Status: 503})
	f.withWebhook(t, url)
	res, err := service.Writer{Store: f.st}.Send(ctx, tenant, inbox.SendInput{IdempotencyKey: "thread", Recipients: []string{user}, Type: "comment",
		Title: "New comment", Target: &inbox.Target{Kind: "issue", TargetID: "42"}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.NotificationIDs[0]
	task := f.taskOf(t, id, inbox.ChannelWebhook)
	h := webhookHandler(f, delivery.Options{Backoff: 10 * time.Millisecond})
	f.rec.Reset()
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); slices.Contains(ops, "GetItem") {
		t.Errorf("the first attempt read %v: it needs no re-check", ops)
	}
	if c := f.record(t, id, inbox.ChannelWebhook); c.Status != inbox.DeliveryQueued || c.Attempts != 1 {
		t.Fatalf("after the 503: %+v", c)
	}
	if _, err := f.st.UpdatePreferences(ctx, viewer, inbox.PreferencesUpdate{
		MuteTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "42"}}}); err != nil {
		t.Fatal(err)
	}
	var retry inbox.Task
	for _, nt := range f.tasks(t, inbox.ChannelWebhook, time.Hour) {
		if nt.Ref == id && nt.Due.After(task.Due) {
			retry = nt
		}
	}
	if retry.Ref == "" {
		t.Fatal("no retry task")
	}
	if err := h.Handle(ctx, retry); err != nil {
		t.Fatal(err)
	}
	c := f.record(t, id, inbox.ChannelWebhook)
	if c.Status != inbox.DeliverySkipped || c.Reason != inbox.ReasonMuted {
		t.Fatalf("after the mute: %+v, want SKIPPED muted", c)
	}
	if n := len(recv.Requests()); n != 1 {
		t.Fatalf("the receiver got %d requests, want only the first (503)", n)
	}
}

// A retry's task has the id of the task that runs (one id per record) and task items are
// keyed by id and due millisecond, so a retry due in the running task's millisecond would
// replace it, and the scheduler, deleting the finished task, would delete the retry: the
// record left QUEUED with no task. The retry is due after the running task whatever the
// backoff (here 0) and the handler's clock: a first attempt run the instant it was sent,
// a retry run exactly at its due time, a handler whose clock is behind the writer's.
func TestDeliverRetryIsDueAfterTheTaskThatRuns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// run returns the task to run and the handler's clock for it, after the first
		// task of the send was written (and the fixture's clock has not moved since).
		run func(t *testing.T, f *fixture, h func(clockwork.Clock) *delivery.Handler, first inbox.Task) (inbox.Task, clockwork.Clock)
	}{
		{"the first attempt at the instant of the send", func(t *testing.T, f *fixture, _ func(clockwork.Clock) *delivery.Handler, first inbox.Task) (inbox.Task, clockwork.Clock) {
			return first, f.clk
		}},
		{"a retry at its due time", func(t *testing.T, f *fixture, h func(clockwork.Clock) *delivery.Handler, first inbox.Task) (inbox.Task, clockwork.Clock) {
			f.clk.Advance(time.Second)
			retry := runAsScheduler(t, f, h(f.clk), first)
			f.clk.Advance(retry.Due.Sub(f.clk.Now()))
			return retry, f.clk
		}},
		{"a handler whose clock is 2 s behind", func(t *testing.T, f *fixture, _ func(clockwork.Clock) *delivery.Handler, first inbox.Task) (inbox.Task, clockwork.Clock) {
			return first, clockwork.NewFakeClockAt(f.clk.Now().Add(-2 * time.Second))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			recv, url := channeltest.StartWebhook(t, webhookSecret)
			recv.SetDefault(channeltest.WebhookResponse{Status: 503})
			f.withWebhook(t, url)
			id, first := f.send(t, "k", inbox.ChannelWebhook, inbox.ChannelWebhook)
			h := func(clk clockwork.Clock) *delivery.Handler {
				return delivery.NewHandler(f.st, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelWebhook, "", channel.NewWebhook(channel.WebhookConfig{})),
					Logger: quiet, Clock: clk, Jitter: func(int64) int64 { return 0 }})
			}
			task, clk := tc.run(t, f, h, first)
			retry := runAsScheduler(t, f, h(clk), task)
			if !retry.Due.After(task.Due) {
				t.Fatalf("the retry is due at %v, not after the task that wrote it (%v)", retry.Due, task.Due)
			}
			if c := f.record(t, id, inbox.ChannelWebhook); c.Status != inbox.DeliveryQueued {
				t.Fatalf("record %+v, want QUEUED for the retry", c)
			}
		})
	}
}

// runAsScheduler runs task with h and then deletes it as the scheduler does after a
// handler succeeded; it returns the one deliver task of the record left, which it fails
// without.
func runAsScheduler(t *testing.T, f *fixture, h *delivery.Handler, task inbox.Task) inbox.Task {
	t.Helper()
	ctx := context.Background()
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	shard := store.SchedShard(task.ID, f.st.SchedShards())
	if _, err := f.st.CompleteTask(ctx, shard, store.SchedBucket(task.Due), task); err != nil {
		t.Fatal(err)
	}
	var left []inbox.Task
	for _, nt := range f.tasks(t, task.Token, time.Hour) {
		if nt.Ref == task.Ref {
			left = append(left, nt)
		}
	}
	if len(left) != 1 {
		t.Fatalf("after the run of the task due %v and its deletion, the record's tasks are %+v; want its retry", task.Due, left)
	}
	return left[0]
}
