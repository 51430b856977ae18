package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/providerhook/providerhooktest"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// Attacks on issue 11's channels through the real gateway (see the report of helper
// "attack11").

// unconfirmedRecord is queuedRecord's record settled unconfirmed, as after a worker
// stopped during the provider call: SENT with no provider and no message id.
func unconfirmedRecord(t *testing.T, s *testgw.Server, user, key string) inbox.DeliveryRef {
	t.Helper()
	ref := queuedRecord(t, s, user, key)
	if _, outcome, err := s.Store.ClaimDelivery(t.Context(), ref, time.Millisecond); err != nil || outcome != inbox.ClaimOK {
		t.Fatalf("claim %s: %v (outcome %v)", key, err, outcome)
	}
	time.Sleep(5 * time.Millisecond)
	job, outcome, err := s.Store.ClaimDelivery(t.Context(), ref, time.Minute)
	if err != nil || outcome != inbox.ClaimOrphaned {
		t.Fatalf("second claim %s: %v (outcome %v)", key, err, outcome)
	}
	if err := s.Store.DeliveryUnconfirmed(t.Context(), ref, job.Attempt); err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestAttackCallbackRefOfAnotherChannel: a validly signed callback whose ref names a
// record of another channel. A record with a provider is guarded by it (the event's
// provider must match), but one settled unconfirmed has none and took any event: a
// SendGrid "delivered" marked an SMS DELIVERED as provider "smtp", a Twilio
// "delivered" an EMAIL record as "twilio". Each hook now takes refs of its channel only
// (SendGrid: EMAIL; Twilio: SMS); the others are counted as events matching no record.
func TestAttackCallbackRefOfAnotherChannel(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newCallbackServer(t, key)
	sms := unconfirmedRecord(t, s, "carol", inbox.ChannelSMS)
	email := inbox.DeliveryRef{TenantID: sms.TenantID, NotificationID: sms.NotificationID, Key: inbox.ChannelEmail}
	job, outcome, err := s.Store.ClaimDelivery(t.Context(), email, time.Millisecond)
	if err != nil || outcome != inbox.ClaimOK {
		t.Fatalf("claim EMAIL: %v (%v)", err, outcome)
	}
	time.Sleep(5 * time.Millisecond)
	if job, outcome, err = s.Store.ClaimDelivery(t.Context(), email, time.Minute); err != nil || outcome != inbox.ClaimOrphaned {
		t.Fatalf("reclaim EMAIL: %v (%v)", err, outcome)
	}
	if err := s.Store.DeliveryUnconfirmed(t.Context(), email, job.Attempt); err != nil {
		t.Fatal(err)
	}
	push := inbox.DeliveryRef{TenantID: sms.TenantID, NotificationID: sms.NotificationID, Key: "PUSH#0123456789abcdef"}

	// SendGrid: events naming the SMS record and a push record.
	body, err := json.Marshal([]map[string]any{
		{"inbox_ref": sms.String(), "event": "delivered", "timestamp": time.Now().Unix()},
		{"inbox_ref": push.String(), "event": "open", "timestamp": time.Now().Unix()},
	})
	if err != nil {
		t.Fatal(err)
	}
	sig, ts, err := key.Sign(body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res := decode[gen.ProviderCallbackResult](t, call(t, s, http.MethodPost, "/v1/webhooks/provider/sendgrid", "", map[string]string{
		"Content-Type": "application/json", "X-Twilio-Email-Event-Webhook-Signature": sig, "X-Twilio-Email-Event-Webhook-Timestamp": ts}, body), 200)
	if res.Applied != 0 {
		t.Errorf("a SendGrid event changed a record of another channel: %+v", res)
	}
	if r := record(t, s, sms); r.Status != gen.DeliveryRecordStatusSent || r.Provider != nil {
		t.Errorf("the SMS record after a SendGrid event: %s", mustJSON(t, r))
	}

	// Twilio: a status callback naming the EMAIL record.
	a := twilioCallback(t, s, email, time.Now(), twilioToken, url.Values{"MessageSid": {"SM9"}, "MessageStatus": {"delivered"}})
	if res := decode[gen.ProviderCallbackResult](t, a, 200); res.Applied != 0 {
		t.Errorf("a Twilio callback changed an EMAIL record: %+v", res)
	}
	if r := record(t, s, email); r.Status != gen.DeliveryRecordStatusSent || r.Provider != nil {
		t.Errorf("the EMAIL record after a Twilio callback: %s", mustJSON(t, r))
	}

	// Each provider still settles its own channel's unconfirmed record.
	a = twilioCallback(t, s, sms, time.Now(), twilioToken, url.Values{"MessageSid": {"SM9"}, "MessageStatus": {"delivered"}})
	if res := decode[gen.ProviderCallbackResult](t, a, 200); res.Applied != 1 {
		t.Errorf("Twilio's own SMS record: %+v", res)
	}
	if r := record(t, s, sms); r.Status != gen.DeliveryRecordStatusDelivered || deref(r.Provider) != "twilio" {
		t.Errorf("the SMS record after its callback: %s", mustJSON(t, r))
	}
}

// TestAttackWebhookToALoopbackAddress: a tenant's webhook URL naming the gateway's own
// host (http://127.0.0.1:port is accepted by the settings: "http only for localhost")
// made the gateway POST to a service on its loopback interface, and the record's error
// quoted that service's answer back to the tenant (a server-side request forgery that
// reads). Outside dev mode (and without INBOX_WEBHOOK_ALLOW_PRIVATE) the webhook adapter
// now refuses to connect to a loopback, private, link-local or unspecified address: the
// record FAILED, nothing received.
func TestAttackWebhookToALoopbackAddress(t *testing.T) {
	t.Parallel()
	recv, hookURL := channeltest.StartWebhook(t, strings.Repeat("s", 32))
	recv.SetDefault(channeltest.WebhookResponse{Status: 500, Body: "internal-secret-answer"})
	s := testgw.NewWith(t, testgw.Options{Scheduler: true})
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	set := call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{
		"webhook": map[string]any{"url": hookURL, "secret": strings.Repeat("s", 32)}})
	if set.Status != 200 {
		// Refusing the URL in the settings is as good: nothing is ever sent to it.
		expectProblem(t, set, 400, "BAD_USER_INPUT")
		return
	}
	acc := decode[gen.Accepted](t, send(t, s, s.Token(tenant, "svc", rest.ScopeSend), "ssrf-1",
		map[string]any{"recipientUserId": "dave", "type": "news", "title": "hello"}), 202)
	ref := inbox.DeliveryRef{TenantID: tenant, NotificationID: *acc.NotificationId, Key: inbox.ChannelWebhook}
	var r gen.DeliveryRecord
	testgw.WaitFor(t, 60*time.Second, "the WEBHOOK record's first attempt", func() bool {
		st, err := s.Store.Status(t.Context(), tenant, ref.NotificationID)
		if err != nil {
			return false
		}
		for _, c := range st.Channels {
			if c.Key == inbox.ChannelWebhook && (c.Status != inbox.DeliveryQueued || c.Error != "") {
				r = record(t, s, ref)
				return true
			}
		}
		return false
	})
	if n := len(recv.Requests()); n != 0 {
		t.Errorf("the loopback receiver got %d requests", n)
	}
	if r.Status != gen.DeliveryRecordStatusFailed || strings.Contains(deref(r.Error), "internal-secret-answer") {
		t.Errorf("the record: %s", mustJSON(t, r))
	}
}

// TestAttackGraphQLDeliveriesCost: Notification.deliveries reads a status partition per
// notification, so aliases multiply the Queries: each alias is counted (CostRead each),
// and a document whose cost passes the limit (a page of 100 with deliveries is 100
// reads: 10,000 > 5,000; a page of 10 with 6 aliases 6,000) is refused before any
// status is read. Within the limit, each alias costs its Query and answers the same.
func TestAttackGraphQLDeliveriesCost(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	s := testgw.NewWith(t, testgw.Options{DynamoDB: []func(*dynamodb.Options){rec.Option()}})
	sentRecord(t, s, "erin", inbox.ChannelSMS, channel.ProviderTwilio, "SM0001")
	tok := s.Token(tenant, "erin")
	aliases := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, " d%d: deliveries { channel status }", i)
		}
		return b.String()
	}
	for name, q := range map[string]string{
		"a page of 100":             `{ viewer { inbox(first: 100) { nodes { id deliveries { channel } } } } }`,
		"10 with 6 aliases":         `{ viewer { inbox(first: 10) { nodes { id` + aliases(6) + ` } } } }`,
		"aliased inboxes of 10 × 5": `{ viewer { a: inbox(first: 10) { nodes { deliveries { channel } } } b: inbox(first: 10) { nodes { deliveries { channel } } } c: inbox(first: 10) { nodes { deliveries { channel } } } d: inbox(first: 10) { nodes { deliveries { channel } } } e: inbox(first: 10) { nodes { deliveries { channel } } } } }`,
	} {
		rec.Reset()
		r := s.Post(tok, q, nil)
		if len(r.Errors) == 0 || !strings.Contains(strings.ToLower(r.Errors[0].Message+fmt.Sprint(r.Codes())), "complex") {
			t.Errorf("%s: answered without a complexity error: %+v", name, r.Errors)
		}
		if n := rec.Count("Query"); n != 0 {
			t.Errorf("%s: %d Queries before the refusal", name, n)
		}
	}
	rec.Reset()
	var data struct {
		Viewer struct {
			Inbox struct {
				Nodes []map[string]any `json:"nodes"`
			} `json:"inbox"`
		} `json:"viewer"`
	}
	s.MustData(tok, `{ viewer { inbox(first: 10) { nodes { id`+aliases(3)+` } } } }`, nil, &data)
	if len(data.Viewer.Inbox.Nodes) != 1 {
		t.Fatalf("nodes: %v", data.Viewer.Inbox.Nodes)
	}
	if n := rec.Count("Query"); n != 1+3 {
		t.Errorf("%d Queries (%v) for 3 aliases of one notification's deliveries, want 4", n, rec.Ops())
	}
}

// TestAttackDevicesConcurrentRegistrations: 20 devices registered at once by the user's
// own token leave exactly inbox.MaxDevices, the newest, each answered 201; tokens with
// '#', '/' or 4096 bytes are devices like any other (unregistered by their path-escaped
// token), control characters, 5 KB and unknown platforms are refused, and another
// user's id is forbidden.
func TestAttackDevicesConcurrentRegistrations(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	tok := s.Token(tenant, "fay")
	path := "/v1/users/fay/devices"
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = call(t, s, http.MethodPost, path, tok, nil, map[string]any{"token": fmt.Sprintf("tok-%02d", i), "platform": "fcm"}).Status
		})
	}
	wg.Wait()
	for i, st := range statuses {
		if st != 201 {
			t.Errorf("registration %d: %d", i, st)
		}
	}
	devs, err := s.Store.Devices(t.Context(), inbox.Viewer{TenantID: tenant, UserID: "fay"})
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != inbox.MaxDevices {
		t.Fatalf("%d devices after 20 registrations, want %d", len(devs), inbox.MaxDevices)
	}
	for _, tk := range []string{"a#b#c", "x/y", strings.Repeat("z", inbox.MaxDeviceTokenBytes)} {
		decode[gen.Device](t, call(t, s, http.MethodPost, path, tok, nil, map[string]any{"token": tk, "platform": "apns"}), 201)
		if a := call(t, s, http.MethodDelete, path+"/"+url.PathEscape(tk), tok, nil, nil); a.Status != 204 {
			t.Errorf("unregister %.20q: %d %s", tk, a.Status, a.Body)
		}
	}
	for _, body := range []map[string]any{
		{"token": "a\nb", "platform": "fcm"}, {"token": strings.Repeat("z", 5000), "platform": "fcm"}, {"token": "ok", "platform": "wns"},
	} {
		if a := call(t, s, http.MethodPost, path, tok, nil, body); a.Status != 400 && a.Status != 413 {
			t.Errorf("%.30v: %d", body, a.Status)
		}
	}
	expectProblem(t, call(t, s, http.MethodPost, "/v1/users/gus/devices", tok, nil, map[string]any{"token": "t", "platform": "fcm"}), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodDelete, "/v1/users/gus/devices/t", tok, nil, nil), 403, "FORBIDDEN")
	after, err := s.Store.Devices(t.Context(), inbox.Viewer{TenantID: tenant, UserID: "fay"})
	if err != nil || len(after) != inbox.MaxDevices-1 {
		t.Fatalf("devices after a registration evicting one, and three removals: %d, %v", len(after), err)
	}
}
