package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// deliveryFixture is a store at routingNow (settable) whose tenant has a webhook, and
// whose user "u" has an email address, a phone and two push devices.
type deliveryFixture struct {
	*fixture
	clk  *testClock
	devs []inbox.Device
}

func newDeliveryFixture(t *testing.T) *deliveryFixture {
	t.Helper()
	clk := &testClock{t: routingNow}
	f := &deliveryFixture{fixture: newFixture(t, store.WithClock(clk.now)), clk: clk}
	ctx := context.Background()
	if _, err := f.s.PutTenantSettings(ctx, f.tenant, inbox.TenantSettings{
		WebhookURL: "https://hooks.example.com/inbox", WebhookSecret: "whsec_0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.PutUserProfile(ctx, f.viewer("u"), inbox.UserProfile{Addresses: map[string]string{"email": "u@example.com", "phone": "+4915112345678"}}); err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{inbox.PlatformAPNs, inbox.PlatformFCM} {
		d, err := f.s.RegisterDevice(ctx, f.viewer("u"), fmt.Sprintf("%s-token", p), p)
		if err != nil {
			t.Fatal(err)
		}
		f.devs = append(f.devs, d)
		if i == 0 {
			clk.advance(time.Second)
		}
	}
	clk.t = routingNow
	return f
}

// send sends a notification with every channel to users under key and returns the
// status ids.
func (f *deliveryFixture) send(t *testing.T, key string, in inbox.SendInput, users ...string) map[string]string {
	t.Helper()
	return f.sendRendered(t, key, in, nil, users...)
}

// sendRendered is send with the template content render makes (nil: none, every channel).
func (f *deliveryFixture) sendRendered(t *testing.T, key string, in inbox.SendInput, render service.RenderFunc, users ...string) map[string]string {
	t.Helper()
	in.IdempotencyKey, in.Recipients = key, users
	if in.Type == "" {
		in.Type = "comment"
	}
	if render == nil && in.TemplateChannels == nil {
		in.TemplateChannels = []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelWebhook}
	}
	res, err := writer(f.s).Write(context.Background(), f.tenant, in, render)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusIDs
}

func (f *deliveryFixture) ref(id, key string) inbox.DeliveryRef {
	return inbox.DeliveryRef{TenantID: f.tenant, NotificationID: id, Key: key}
}

// record returns the status record key of notification id.
func (f *deliveryFixture) record(t *testing.T, id, key string) inbox.ChannelStatus {
	t.Helper()
	st, err := f.s.Status(context.Background(), f.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Channels {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("no record %s in %+v", key, st.Channels)
	return inbox.ChannelStatus{}
}

func (f *deliveryFixture) claim(t *testing.T, ref inbox.DeliveryRef, want inbox.ClaimOutcome) inbox.DeliveryJob {
	t.Helper()
	job, o, err := f.s.ClaimDelivery(context.Background(), ref, time.Minute)
	if err != nil || o != want {
		t.Fatalf("claim %s = %v, %v; want %v", ref.Key, o, err, want)
	}
	return job
}

// Routing per device: two devices give two PUSH records and two deliver tasks, each
// record carrying its device and the push content; email, SMS and the webhook carry
// their address and content; a user without devices gets one PUSH record SKIPPED
// no_device and no push task.
func TestRoutingPerDevice(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	in := inbox.SendInput{Title: "Ada commented", Body: "Looks good", Category: "social",
		Payload: inbox.JSON(`{"k":1}`), Actor: &inbox.Actor{ActorID: "ada", Name: "Ada"},
		Target:  &inbox.Target{Kind: "issue", TargetID: "42", Title: "Issue 42"},
		Actions: []inbox.Action{{Label: "Open", URL: "https://example.com/42"}}}
	ids := f.send(t, "per-device", in, "u", "bare")
	keyA, keyF := inbox.DeliveryKey(inbox.ChannelPush, f.devs[0].ID), inbox.DeliveryKey(inbox.ChannelPush, f.devs[1].ID)

	st, err := f.s.Status(ctx, f.tenant, ids["u"])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range st.Channels {
		got = append(got, c.Channel+" "+c.Key+" "+c.DeviceID+" "+describe(c))
		if !c.UpdatedAt.Equal(routingNow) {
			t.Errorf("%s: updatedAt %v", c.Key, c.UpdatedAt)
		}
	}
	pushes := []string{"PUSH " + keyA + " " + f.devs[0].ID + " QUEUED", "PUSH " + keyF + " " + f.devs[1].ID + " QUEUED"}
	sort.Strings(pushes)
	want := append(append([]string{"IN_APP IN_APP  DELIVERED", "EMAIL EMAIL  QUEUED"}, pushes...), "SMS SMS  QUEUED", "WEBHOOK WEBHOOK  QUEUED")
	if !slices.Equal(got, want) {
		t.Fatalf("records of u\n got  %q\n want %q", got, want)
	}
	st, err = f.s.Status(ctx, f.tenant, ids["bare"])
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Channels[2]; c.Channel != inbox.ChannelPush || c.Key != inbox.ChannelPush || c.DeviceID != "" || c.Reason != inbox.ReasonNoDevice {
		t.Fatalf("bare's push = %+v", c)
	}
	tasks := deliverTasks(t, f.fixture, ids)
	var wantTasks []string
	for _, k := range []string{"EMAIL", keyA, keyF, "SMS", "WEBHOOK"} {
		wantTasks = append(wantTasks, fmt.Sprintf("u %s %s %s", ids["u"], k, routingNow.Format(time.RFC3339)))
	}
	wantTasks = append(wantTasks, fmt.Sprintf("bare %s WEBHOOK %s", ids["bare"], routingNow.Format(time.RFC3339)))
	sort.Strings(wantTasks)
	if !slices.Equal(tasks, wantTasks) {
		t.Fatalf("deliver tasks\n got  %v\n want %v", tasks, wantTasks)
	}

	// What each record carries, as the claims give it: no template, so the title and body.
	jobs := map[string]inbox.DeliveryJob{}
	for _, k := range []string{"EMAIL", keyA, keyF, "SMS", "WEBHOOK"} {
		jobs[k] = f.claim(t, f.ref(ids["u"], k), inbox.ClaimOK)
	}
	base := inbox.DeliveryJob{UserID: "u", Attempt: 1}
	wantJobs := map[string]inbox.DeliveryJob{
		"EMAIL": {Channel: inbox.ChannelEmail, To: "u@example.com", Subject: "Ada commented", Text: "Looks good"},
		keyA:    {Channel: inbox.ChannelPush, To: "apns-token", Platform: inbox.PlatformAPNs, DeviceID: f.devs[0].ID, Title: "Ada commented", Body: "Looks good"},
		keyF:    {Channel: inbox.ChannelPush, To: "fcm-token", Platform: inbox.PlatformFCM, DeviceID: f.devs[1].ID, Title: "Ada commented", Body: "Looks good"},
		"SMS":   {Channel: inbox.ChannelSMS, To: "+4915112345678", Text: "Ada commented\nLooks good"},
	}
	for k, w := range wantJobs {
		w.Ref, w.UserID, w.Attempt = f.ref(ids["u"], k), base.UserID, base.Attempt
		if g := jobs[k]; !equalJob(g, w) {
			t.Errorf("job %s\n got  %+v\n want %+v", k, g, w)
		}
	}
	wh := jobs["WEBHOOK"]
	if wh.Channel != inbox.ChannelWebhook || wh.To != "" || wh.Attempt != 1 {
		t.Errorf("webhook job %+v", wh)
	}
	var p struct {
		Type      string `json:"type"`
		Timestamp string `json:"timestamp"`
		Data      struct {
			ID, UserID, Type, Category, Title, Body, CreatedAt string
			Payload                                            map[string]int
			Actor                                              struct{ ID, Name string }
			Target                                             struct{ ID, Kind, Title string }
			Actions                                            []struct{ Label, URL string }
		} `json:"data"`
	}
	if err := json.Unmarshal(wh.Payload, &p); err != nil {
		t.Fatalf("webhook payload %s: %v", wh.Payload, err)
	}
	d := p.Data
	if p.Type != store.WebhookEventType || p.Timestamp != routingNow.Format(time.RFC3339Nano) || d.ID != ids["u"] || d.UserID != "u" ||
		d.Type != "comment" || d.Category != "social" || d.Title != "Ada commented" || d.Body != "Looks good" || d.Payload["k"] != 1 ||
		d.Actor.ID != "ada" || d.Actor.Name != "Ada" || d.Target.ID != "42" || d.Target.Kind != "issue" ||
		len(d.Actions) != 1 || d.Actions[0].URL != "https://example.com/42" {
		t.Errorf("webhook payload %s", wh.Payload)
	}
}

func equalJob(a, b inbox.DeliveryJob) bool {
	return a.Ref == b.Ref && a.UserID == b.UserID && a.Channel == b.Channel && a.Attempt == b.Attempt && a.To == b.To &&
		a.Platform == b.Platform && a.DeviceID == b.DeviceID && a.Subject == b.Subject && a.Text == b.Text && a.HTML == b.HTML &&
		a.Title == b.Title && a.Body == b.Body && string(a.Payload) == string(b.Payload)
}

// A template's channel parts go into the records (per recipient locale); quiet hours
// defer the record and its task, and the content waits with it.
func TestRoutingTemplateContent(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	in := inbox.SendInput{Title: "ignored", RenderKey: "tpl@1"}
	render := func(_ context.Context, locale string) (inbox.Rendered, error) {
		return inbox.Rendered{Title: "T", Body: "B",
			Parts:    map[string]inbox.Content{inbox.ChannelEmail: {Subject: "S", HTML: "<p>H</p>", Text: "X"}, inbox.ChannelPush: {Title: "PT", Body: "PB"}, inbox.ChannelSMS: {Text: "sms"}},
			Channels: []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS}}, nil
	}
	if _, err := f.s.UpdatePreferences(ctx, f.viewer("u"), inbox.PreferencesUpdate{
		QuietHours: &inbox.QuietHours{Start: "11:00", End: "13:00"}, Timezone: sptr("UTC")}); err != nil {
		t.Fatal(err)
	}
	ids := f.sendRendered(t, "tpl", in, render, "u")
	end := routingNow.Add(time.Hour)
	for _, k := range []string{"EMAIL", "SMS", inbox.DeliveryKey(inbox.ChannelPush, f.devs[0].ID)} {
		if c := f.record(t, ids["u"], k); c.Status != inbox.DeliveryQueued || !c.DeferredUntil.Equal(end) {
			t.Errorf("%s = %+v, want deferred to %v", k, c, end)
		}
	}
	e := f.claim(t, f.ref(ids["u"], "EMAIL"), inbox.ClaimOK)
	s := f.claim(t, f.ref(ids["u"], "SMS"), inbox.ClaimOK)
	p := f.claim(t, f.ref(ids["u"], inbox.DeliveryKey(inbox.ChannelPush, f.devs[1].ID)), inbox.ClaimOK)
	if e.Subject != "S" || e.HTML != "<p>H</p>" || e.Text != "X" || s.Text != "sms" || p.Title != "PT" || p.Body != "PB" {
		t.Fatalf("template content: email %+v, sms %+v, push %+v", e, s, p)
	}
	st, err := f.s.Status(ctx, f.tenant, ids["u"])
	if err != nil {
		t.Fatal(err)
	}
	// The webhook needs no template part: the tenant has a URL, so it is queued, at once
	// (quiet hours are the user's; the webhook goes to the tenant).
	if i := slices.IndexFunc(st.Channels, func(c inbox.ChannelStatus) bool { return c.Channel == inbox.ChannelWebhook }); i < 0 ||
		st.Channels[i].Status != inbox.DeliveryQueued || !st.Channels[i].DeferredUntil.IsZero() || len(st.Channels) != 6 {
		t.Errorf("records %+v", st.Channels)
	}
}

// The delivery state machine: claim (busy while held), sent (conditioned on the claim's
// attempt, content dropped, later claims done), retry (claim released and the next task
// written in one transaction), failed, skip; every outcome with the wrong attempt or
// after another is refused with ErrClaimLost and changes nothing.
func TestDeliveryTransitions(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	ids := f.send(t, "transitions", inbox.SendInput{Title: "hi", Body: "there"}, "u")
	email := f.ref(ids["u"], "EMAIL")

	// Sent.
	f.rec.Reset()
	job := f.claim(t, email, inbox.ClaimOK)
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"UpdateItem"}) {
		t.Errorf("claim ops %v, want one UpdateItem", ops)
	}
	if job.Attempt != 1 || job.To != "u@example.com" {
		t.Fatalf("job %+v", job)
	}
	f.rec.Reset()
	f.claim(t, email, inbox.ClaimBusy)
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"UpdateItem", "GetItem"}) {
		t.Errorf("busy claim ops %v, want UpdateItem, GetItem", ops)
	}
	if err := f.s.DeliverySent(ctx, email, 2, "smtp", "m1"); !errors.Is(err, inbox.ErrClaimLost) {
		t.Fatalf("sent with another attempt: %v", err)
	}
	f.clk.advance(time.Second)
	if err := f.s.DeliverySent(ctx, email, 1, "smtp", "<m1@example.com>"); err != nil {
		t.Fatal(err)
	}
	c := f.record(t, ids["u"], "EMAIL")
	if c.Status != inbox.DeliverySent || c.Provider != "smtp" || c.ProviderMessageID != "<m1@example.com>" || c.Attempts != 1 ||
		!c.SentAt.Equal(routingNow.Add(time.Second)) || !c.UpdatedAt.Equal(c.SentAt) || c.Error != "" {
		t.Fatalf("sent record %+v", c)
	}
	if j := f.claim(t, email, inbox.ClaimDone); j.To != "" {
		t.Fatalf("done claim returned %+v", j)
	}
	for name, err := range map[string]error{
		"sent again":  f.s.DeliverySent(ctx, email, 1, "smtp", "m2"),
		"failed":      f.s.DeliveryFailed(ctx, email, 1, "smtp", "boom"),
		"retry":       f.s.DeliveryRetry(ctx, email, "u", 1, "smtp", "boom", routingNow.Add(time.Hour)),
		"unconfirmed": f.s.DeliveryUnconfirmed(ctx, email, 1),
	} {
		if !errors.Is(err, inbox.ErrClaimLost) {
			t.Errorf("%s after sent: %v, want inbox.ErrClaimLost", name, err)
		}
	}
	if ok, err := f.s.SkipDelivery(ctx, f.tenant, ids["u"], "EMAIL", inbox.ReasonNoProvider); err != nil || ok {
		t.Errorf("skip after sent = %v, %v", ok, err)
	}
	if c2 := f.record(t, ids["u"], "EMAIL"); c2 != c {
		t.Fatalf("refused outcomes changed the record:\n %+v\n %+v", c2, c)
	}
	if j := f.claim(t, email, inbox.ClaimDone); !equalJob(j, inbox.DeliveryJob{}) {
		t.Fatalf("content after sent: %+v", j)
	}

	// Retry, then failed.
	sms := f.ref(ids["u"], "SMS")
	f.claim(t, sms, inbox.ClaimOK)
	at := routingNow.Add(30 * time.Minute)
	f.rec.Reset()
	if err := f.s.DeliveryRetry(ctx, sms, "u", 1, "twilio", "503 unavailable", at); err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"TransactWriteItems"}) {
		t.Errorf("retry ops %v", ops)
	}
	c = f.record(t, ids["u"], "SMS")
	if c.Status != inbox.DeliveryQueued || c.Attempts != 1 || c.Error != "503 unavailable" || c.Provider != "twilio" {
		t.Fatalf("retried record %+v", c)
	}
	tasks := deliverTasks(t, f.fixture, map[string]string{"u": ids["u"]})
	if !slices.Contains(tasks, fmt.Sprintf("u %s SMS %s", ids["u"], at.Format(time.RFC3339))) ||
		!slices.Contains(tasks, fmt.Sprintf("u %s SMS %s", ids["u"], routingNow.Format(time.RFC3339))) {
		t.Fatalf("retry task missing: %v", tasks)
	}
	if err := f.s.DeliveryRetry(ctx, sms, "u", 1, "twilio", "again", at); !errors.Is(err, inbox.ErrClaimLost) {
		t.Fatalf("retry of a released claim: %v", err)
	}
	job = f.claim(t, sms, inbox.ClaimOK)
	if job.Attempt != 2 || job.Text != "hi\nthere" {
		t.Fatalf("second claim %+v", job)
	}
	if err := f.s.DeliveryFailed(ctx, sms, 1, "twilio", "x"); !errors.Is(err, inbox.ErrClaimLost) {
		t.Fatalf("failed with the first attempt: %v", err)
	}
	if err := f.s.DeliveryFailed(ctx, sms, 2, "twilio", "21211 invalid To"); err != nil {
		t.Fatal(err)
	}
	c = f.record(t, ids["u"], "SMS")
	if c.Status != inbox.DeliveryFailed || c.Attempts != 2 || c.Error != "21211 invalid To" || !c.SentAt.IsZero() {
		t.Fatalf("failed record %+v", c)
	}
	f.claim(t, sms, inbox.ClaimDone)

	// Skip by a push record's key; malformed refs and keys are refused before any call.
	key := inbox.DeliveryKey(inbox.ChannelPush, f.devs[0].ID)
	if ok, err := f.s.SkipDelivery(ctx, f.tenant, ids["u"], key, inbox.ReasonNoProvider); err != nil || !ok {
		t.Fatalf("skip push = %v, %v", ok, err)
	}
	if c := f.record(t, ids["u"], key); c.Status != inbox.DeliverySkipped || c.Reason != inbox.ReasonNoProvider || c.DeviceID != f.devs[0].ID {
		t.Fatalf("skipped push %+v", c)
	}
	if ok, err := f.s.SkipDelivery(ctx, f.tenant, ids["u"], key, inbox.ReasonNoProvider); err != nil || ok {
		t.Fatalf("second skip = %v, %v", ok, err)
	}
	f.rec.Reset()
	for _, bad := range []inbox.DeliveryRef{
		{TenantID: f.tenant, NotificationID: ids["u"], Key: "FAX"},
		{TenantID: f.tenant, NotificationID: ids["u"], Key: "PUSH#nothex"},
		{TenantID: f.tenant, NotificationID: "a#b", Key: "EMAIL"},
		{TenantID: "", NotificationID: ids["u"], Key: "EMAIL"},
	} {
		if _, _, err := f.s.ClaimDelivery(ctx, bad, time.Minute); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("claim %+v: %v", bad, err)
		}
		if err := f.s.DeliverySent(ctx, bad, 1, "smtp", ""); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("sent %+v: %v", bad, err)
		}
		if _, err := f.s.SkipDelivery(ctx, bad.TenantID, bad.NotificationID, bad.Key, "x"); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("skip %+v: %v", bad, err)
		}
	}
	if _, _, err := f.s.ClaimDelivery(ctx, email, 0); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("claim without a lease: %v", err)
	}
	if ops := f.rec.Ops(); len(ops) != 0 {
		t.Errorf("refused calls sent %v", ops)
	}
	// A record that does not exist: claim done, skip false.
	if _, o, err := f.s.ClaimDelivery(ctx, f.ref("01ARZ3NDEKTSV4RRFFQ69G5FAV", "EMAIL"), time.Minute); err != nil || o != inbox.ClaimDone {
		t.Errorf("claim of no record = %v, %v", o, err)
	}
}

// An expired claim (a worker stopped during the provider call) is orphaned: the next
// claim returns its job with its attempt and never claims it again; DeliveryUnconfirmed
// marks it SENT "unconfirmed" only when the claim expired and is that attempt's.
func TestDeliveryOrphanedClaim(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	ids := f.send(t, "orphan", inbox.SendInput{Title: "hi"}, "u")
	ref := f.ref(ids["u"], "WEBHOOK")
	f.claim(t, ref, inbox.ClaimOK)
	if err := f.s.DeliveryUnconfirmed(ctx, ref, 1); !errors.Is(err, inbox.ErrClaimLost) {
		t.Fatalf("unconfirmed while the claim lives: %v", err)
	}
	f.clk.advance(59 * time.Second)
	f.claim(t, ref, inbox.ClaimBusy)
	f.clk.advance(2 * time.Second)
	job := f.claim(t, ref, inbox.ClaimOrphaned)
	if job.Attempt != 1 || job.Channel != inbox.ChannelWebhook || len(job.Payload) == 0 || job.Ref != ref {
		t.Fatalf("orphaned job %+v", job)
	}
	// Claiming again does not take it over: still orphaned, the same attempt.
	if j := f.claim(t, ref, inbox.ClaimOrphaned); j.Attempt != 1 {
		t.Fatalf("second look = %+v", j)
	}
	if err := f.s.DeliveryUnconfirmed(ctx, ref, 2); !errors.Is(err, inbox.ErrClaimLost) {
		t.Fatalf("unconfirmed of another attempt: %v", err)
	}
	if err := f.s.DeliverySent(ctx, ref, 2, "webhook", ""); !errors.Is(err, inbox.ErrClaimLost) {
		t.Fatalf("sent of another attempt: %v", err)
	}
	if err := f.s.DeliveryUnconfirmed(ctx, ref, 1); err != nil {
		t.Fatal(err)
	}
	c := f.record(t, ids["u"], "WEBHOOK")
	if c.Status != inbox.DeliverySent || c.Attempts != 1 || !strings.HasPrefix(c.Error, "unconfirmed: ") || c.SentAt.IsZero() {
		t.Fatalf("unconfirmed record %+v", c)
	}
	f.claim(t, ref, inbox.ClaimDone)
	if err := f.s.DeliveryUnconfirmed(ctx, ref, 1); !errors.Is(err, inbox.ErrClaimLost) {
		t.Fatalf("unconfirmed twice: %v", err)
	}
	// The provider's callback settles it: the record had no provider, it takes the
	// event's; another provider's event then changes nothing.
	if ok, err := f.s.ApplyProviderEvent(ctx, inbox.ProviderEvent{Ref: ref, Provider: "p1", MessageID: "m1", Status: inbox.DeliveryDelivered}); err != nil || !ok {
		t.Fatalf("delivered after unconfirmed = %v, %v", ok, err)
	}
	if ok, err := f.s.ApplyProviderEvent(ctx, inbox.ProviderEvent{Ref: ref, Provider: "p2", Status: inbox.DeliveryOpened}); err != nil || ok {
		t.Fatalf("another provider's event = %v, %v", ok, err)
	}
	c = f.record(t, ids["u"], "WEBHOOK")
	if c.Status != inbox.DeliveryDelivered || c.Provider != "p1" || c.ProviderMessageID != "m1" {
		t.Fatalf("settled record %+v", c)
	}
}

// Provider events move a record forward only (SENT → DELIVERED → OPENED; FAILED from
// SENT or DELIVERED), only for the record's provider and message id; a stale, repeated
// or foreign event changes nothing.
func TestApplyProviderEvent(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	ids := f.send(t, "events", inbox.SendInput{Title: "hi"}, "u")
	sms, email, push := f.ref(ids["u"], "SMS"), f.ref(ids["u"], "EMAIL"), f.ref(ids["u"], inbox.DeliveryKey(inbox.ChannelPush, f.devs[1].ID))
	ev := func(ref inbox.DeliveryRef, provider, mid, status string) inbox.ProviderEvent {
		return inbox.ProviderEvent{Ref: ref, Provider: provider, MessageID: mid, Status: status, Error: "reason " + status}
	}
	apply := func(e inbox.ProviderEvent, want bool) {
		t.Helper()
		if got, err := f.s.ApplyProviderEvent(ctx, e); err != nil || got != want {
			t.Fatalf("apply %+v = %v, %v; want %v", e, got, err, want)
		}
	}
	// QUEUED: nothing to move (the callback came before the send was recorded).
	apply(ev(sms, "twilio", "SM1", inbox.DeliveryDelivered), false)
	f.claim(t, sms, inbox.ClaimOK)
	if err := f.s.DeliverySent(ctx, sms, 1, "twilio", "SM1"); err != nil {
		t.Fatal(err)
	}
	apply(ev(sms, "sendgrid", "SM1", inbox.DeliveryDelivered), false) // another provider
	apply(ev(sms, "twilio", "SM2", inbox.DeliveryDelivered), false)   // another message
	before := f.record(t, ids["u"], "SMS")
	if before.Status != inbox.DeliverySent {
		t.Fatalf("foreign events changed %+v", before)
	}
	f.clk.advance(time.Minute)
	deliveredAt := routingNow.Add(30 * time.Second)
	e := ev(sms, "twilio", "SM1", inbox.DeliveryDelivered)
	e.At = deliveredAt
	apply(e, true)
	apply(e, false) // repeated
	c := f.record(t, ids["u"], "SMS")
	if c.Status != inbox.DeliveryDelivered || !c.DeliveredAt.Equal(deliveredAt) || !c.UpdatedAt.Equal(routingNow.Add(time.Minute)) || c.Error != "" {
		t.Fatalf("delivered record %+v", c)
	}
	apply(ev(sms, "twilio", "SM1", inbox.DeliveryOpened), true)
	c = f.record(t, ids["u"], "SMS")
	if c.Status != inbox.DeliveryOpened || !c.DeliveredAt.Equal(deliveredAt) || c.OpenedAt.IsZero() {
		t.Fatalf("opened record %+v", c)
	}
	apply(ev(sms, "twilio", "SM1", inbox.DeliveryDelivered), false) // backwards
	apply(ev(sms, "twilio", "SM1", inbox.DeliveryFailed), false)    // after opened
	apply(ev(sms, "twilio", "SM1", inbox.DeliveryOpened), false)    // repeated

	// A bounce after delivery fails the record; nothing moves a failed one. The record
	// has no message id: the event's is taken.
	f.claim(t, email, inbox.ClaimOK)
	if err := f.s.DeliverySent(ctx, email, 1, "sendgrid", ""); err != nil {
		t.Fatal(err)
	}
	apply(ev(email, "sendgrid", "sg-1", inbox.DeliveryDelivered), true)
	apply(ev(email, "sendgrid", "sg-2", inbox.DeliveryFailed), false) // not the message taken
	apply(ev(email, "sendgrid", "", inbox.DeliveryFailed), true)      // no id: provider only
	c = f.record(t, ids["u"], "EMAIL")
	if c.Status != inbox.DeliveryFailed || c.Error != "reason FAILED" || c.ProviderMessageID != "sg-1" || c.DeliveredAt.IsZero() {
		t.Fatalf("bounced record %+v", c)
	}
	apply(ev(email, "sendgrid", "", inbox.DeliveryDelivered), false)
	apply(ev(email, "sendgrid", "", inbox.DeliveryOpened), false)

	// SENT → OPENED directly sets deliveredAt too; SENT → FAILED.
	f.claim(t, push, inbox.ClaimOK)
	if err := f.s.DeliverySent(ctx, push, 1, "fcm", "projects/p/messages/1"); err != nil {
		t.Fatal(err)
	}
	apply(ev(push, "fcm", "", inbox.DeliveryOpened), true)
	if c := f.record(t, ids["u"], push.Key); c.Status != inbox.DeliveryOpened || c.DeliveredAt.IsZero() || !c.DeliveredAt.Equal(c.OpenedAt) {
		t.Fatalf("opened push %+v", c)
	}
	// No record, bad input.
	apply(ev(f.ref("01ARZ3NDEKTSV4RRFFQ69G5FAV", "SMS"), "twilio", "SM9", inbox.DeliveryDelivered), false)
	for _, bad := range []inbox.ProviderEvent{
		ev(sms, "twilio", "SM1", inbox.DeliverySent), ev(sms, "twilio", "SM1", inbox.DeliveryQueued),
		ev(sms, "", "SM1", inbox.DeliveryDelivered), ev(f.ref("a#b", "SMS"), "twilio", "", inbox.DeliveryDelivered),
	} {
		if _, err := f.s.ApplyProviderEvent(ctx, bad); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("apply %+v: %v, want BAD_USER_INPUT", bad, err)
		}
	}
}

// A provider event's time that cannot have happened (after now: year 10000, 1e18
// seconds; before 1970) is stored as now, so that the record's status reads and shows;
// a plausible one is stored as it is.
func TestApplyProviderEventStoresOnlyTimesThatCanHaveHappened(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	ids := f.send(t, "times", inbox.SendInput{Title: "hi"}, "u")
	now := routingNow.Add(time.Hour)
	f.clk.t = now
	for i, c := range []struct {
		delivered, opened, wantDelivered, wantOpened time.Time
	}{
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(1e18, 0), now, now},
		{time.Unix(-5, 0), now.Add(time.Second), now, now},
		{now.Add(-time.Minute), time.Unix(1<<63-1, 0), now.Add(-time.Minute), now},
		{routingNow.Add(time.Second), now.Add(-time.Second), routingNow.Add(time.Second), now.Add(-time.Second)},
	} {
		key := []string{inbox.ChannelSMS, inbox.ChannelEmail, inbox.DeliveryKey(inbox.ChannelPush, f.devs[0].ID), inbox.DeliveryKey(inbox.ChannelPush, f.devs[1].ID)}[i]
		ref := f.ref(ids["u"], key)
		f.claim(t, ref, inbox.ClaimOK)
		if err := f.s.DeliverySent(ctx, ref, 1, "p", ""); err != nil {
			t.Fatal(err)
		}
		for _, e := range []inbox.ProviderEvent{
			{Ref: ref, Provider: "p", Status: inbox.DeliveryDelivered, At: c.delivered},
			{Ref: ref, Provider: "p", Status: inbox.DeliveryOpened, At: c.opened},
		} {
			if ok, err := f.s.ApplyProviderEvent(ctx, e); err != nil || !ok {
				t.Fatalf("%s: apply %s at %v: %v, %v", key, e.Status, e.At, ok, err)
			}
		}
		if r := f.record(t, ids["u"], key); !r.DeliveredAt.Equal(c.wantDelivered) || !r.OpenedAt.Equal(c.wantOpened) {
			t.Errorf("%s: delivered %v, opened %v; want %v, %v", key, r.DeliveredAt, r.OpenedAt, c.wantDelivered, c.wantOpened)
		}
	}
}

// A user with inbox.MaxDevices devices: one send transaction holds a record and a task
// per device (within TransactWriteItems' limits), and the devices come with the profile
// in the routing's one BatchGetItem (no read of their own).
func TestRoutingMaxDevices(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	v := f.viewer("many")
	if _, err := f.s.PutUserProfile(ctx, v, inbox.UserProfile{Addresses: map[string]string{"email": "m@example.com", "phone": "+4915112345678"}}); err != nil {
		t.Fatal(err)
	}
	for i := range inbox.MaxDevices {
		if _, err := f.s.RegisterDevice(ctx, v, fmt.Sprintf("token-%02d", i), inbox.PlatformFCM); err != nil {
			t.Fatal(err)
		}
	}
	f.rec.Reset()
	ids := f.send(t, "many", inbox.SendInput{Title: "hi"}, "many")
	ops := f.rec.Ops()
	batches := 0
	for _, op := range ops {
		if op == "BatchGetItem" {
			batches++
		}
	}
	// The recipients' items, then whether their addresses are suppressed (AP27).
	if slices.Contains(ops, "GetItem") || batches != 2 {
		t.Errorf("send ops %v: want two BatchGetItems and no GetItem", ops)
	}
	st, err := f.s.Status(ctx, f.tenant, ids["many"])
	if err != nil {
		t.Fatal(err)
	}
	devs, err := f.s.Devices(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	var push []string
	for _, c := range st.Channels {
		if c.Channel == inbox.ChannelPush && c.Status == inbox.DeliveryQueued {
			push = append(push, c.DeviceID)
		}
	}
	want := deviceIDs(devs)
	sort.Strings(want)
	if !slices.Equal(push, want) {
		t.Fatalf("push records %v, want one per device %v", push, want)
	}
	if tasks := deliverTasks(t, f.fixture, ids); len(tasks) != inbox.MaxDevices+3 {
		t.Fatalf("%d deliver tasks, want %d: %v", len(tasks), inbox.MaxDevices+3, tasks)
	}
}

// NotifyDue hears, after the send commits, the shard and due time of every task it
// wrote: the deliveries due at once (email, SMS, two devices, the webhook: 5), and with
// quiet hours the webhook's at once and the other four at the window's end (11:00 to
// 13:00 UTC: a deferral, not a task forgotten by the scheduler until its safety poll).
func TestNotifyDueNamesEveryTaskWritten(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	type wake struct {
		shard int
		due   time.Time
	}
	var mu sync.Mutex
	var heard []wake
	f.s.NotifyDue(func(n int, due time.Time) {
		mu.Lock()
		heard = append(heard, wake{n, due})
		mu.Unlock()
	})
	got := func() (now, later []wake) {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range heard {
			if w.shard < 0 || w.shard >= f.s.SchedShards() {
				t.Errorf("shard %d out of [0, %d)", w.shard, f.s.SchedShards())
			}
			if w.due.After(f.clk.now().Add(time.Minute)) {
				later = append(later, w)
			} else {
				now = append(now, w)
			}
		}
		heard = nil
		return now, later
	}
	f.send(t, "now", inbox.SendInput{}, "u")
	if now, later := got(); len(now) != 5 || len(later) != 0 {
		t.Fatalf("heard %v due now and %v later, want 5 due now", now, later)
	}
	if _, err := f.s.UpdatePreferences(context.Background(), f.viewer("u"), inbox.PreferencesUpdate{
		QuietHours: &inbox.QuietHours{Start: "11:00", End: "13:00"}, Timezone: sptr("UTC")}); err != nil {
		t.Fatal(err)
	}
	f.send(t, "quiet", inbox.SendInput{}, "u")
	now, later := got()
	if len(now) != 1 || len(later) != 4 {
		t.Fatalf("a quiet-hours send: heard %v due now and %v later, want the webhook's now and 4 deferred", now, later)
	}
	for _, w := range later {
		if h, m, _ := w.due.UTC().Clock(); h != 13 || m != 0 {
			t.Errorf("a deferred delivery is due %v, want the end of quiet hours (13:00 UTC)", w.due)
		}
	}
	f.s.NotifyDue(nil)
	f.send(t, "off", inbox.SendInput{}, "u2")
	if now, later := got(); len(now)+len(later) != 0 {
		t.Fatalf("heard %v %v after NotifyDue(nil)", now, later)
	}
}

// RecheckDelivery answers with the preferences of now: the user's global email switch
// (opted_out), the category's (category_opted_out), a mute (muted, the webhook too), and
// nothing once the tenant makes the category critical. Each is one GetItem of PREFS (the
// tenant's settings come from the cache).
func TestRecheckDeliveryUsesThePreferencesOfNow(t *testing.T) {
	t.Parallel()
	f := newDeliveryFixture(t)
	ctx := context.Background()
	ids := f.send(t, "k", inbox.SendInput{Category: "social", Target: &inbox.Target{Kind: "issue", TargetID: "7"}}, "u")
	email := f.claim(t, f.ref(ids["u"], "EMAIL"), inbox.ClaimOK)
	hook := f.claim(t, f.ref(ids["u"], "WEBHOOK"), inbox.ClaimOK)
	if email.Category != "social" || email.TargetKind != "issue" || email.TargetID != "7" || email.Deferred {
		t.Fatalf("job %+v", email)
	}
	check := func(what string, job inbox.DeliveryJob, want string) {
		t.Helper()
		f.rec.Reset()
		got, err := f.s.RecheckDelivery(ctx, job)
		if err != nil || got != want {
			t.Fatalf("%s: %q, %v; want %q", what, got, err, want)
		}
		if ops := f.rec.Ops(); !slices.Equal(ops, []string{"GetItem"}) {
			t.Errorf("%s: ops %v, want one GetItem", what, ops)
		}
	}
	check("nothing changed", email, "")
	update := func(u inbox.PreferencesUpdate) {
		t.Helper()
		if _, err := f.s.UpdatePreferences(ctx, f.viewer("u"), u); err != nil {
			t.Fatal(err)
		}
	}
	update(inbox.PreferencesUpdate{Categories: []inbox.CategorySwitches{{Category: "social", Channels: inbox.SwitchChanges{inbox.ChannelEmail: false}}}})
	check("category off", email, inbox.ReasonCategoryOptedOut)
	check("the webhook has no switch", hook, "")
	update(inbox.PreferencesUpdate{Channels: inbox.SwitchChanges{inbox.ChannelEmail: false}})
	check("email off", email, inbox.ReasonOptedOut)
	update(inbox.PreferencesUpdate{Channels: inbox.SwitchChanges{inbox.ChannelEmail: true},
		Categories:  []inbox.CategorySwitches{{Category: "social", Channels: inbox.SwitchChanges{inbox.ChannelEmail: true}}},
		MuteTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "7"}}})
	check("muted", email, inbox.ReasonMuted)
	check("muted webhook", hook, inbox.ReasonMuted)
	if _, err := f.s.PutTenantSettings(ctx, f.tenant, inbox.TenantSettings{Preferences: &inbox.TenantPreferences{Critical: []string{"social"}},
		WebhookURL: "https://hooks.example.com/inbox", WebhookSecret: "whsec_0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	f.rec.Reset()
	if got, err := f.s.RecheckDelivery(ctx, email); err != nil || got != "" {
		t.Fatalf("critical: %q, %v", got, err)
	}
	if ops := f.rec.Ops(); len(ops) != 0 {
		t.Errorf("critical: ops %v, want none", ops)
	}
}
