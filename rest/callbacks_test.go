package rest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/providerhook/providerhooktest"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

const (
	twilioToken = "twilio-auth-token-for-the-callback-tests"
	// publicURL is the gateway's URL as providers call it (a proxy in front of the test
	// server): Twilio signs it, whatever address the request then reaches.
	publicURL = "https://inbox.example.com"
)

// newCallbackServer starts the gateway with Twilio's and SendGrid's callbacks configured
// (sendGridKey's public half verifies SendGrid's).
func newCallbackServer(t *testing.T, sendGridKey providerhooktest.SendGridKey) *testgw.Server {
	t.Helper()
	return testgw.NewConfig(t, func(c *app.Config) {
		c.PublicURL, c.TwilioAuthToken = publicURL, twilioToken
		c.SendGridWebhookKey, c.CallbackMaxAge = sendGridKey.Public, 10*time.Minute
	})
}

// queuedRecord sends user a notification through a template with an SMS and an email part
// (the user has a phone and an address) and returns the ref of its record of key, QUEUED
// once the notification's status exists.
func queuedRecord(t *testing.T, s *testgw.Server, user, key string) inbox.DeliveryRef {
	t.Helper()
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/code", admin, nil, map[string]any{"locale": "en",
		"title": "Your code", "body": "{{ code }}", "sms": map[string]any{"text": "Code {{ code }}"},
		"email": map[string]any{"subject": "Your code", "text": "Code {{ code }}"}}), 200)
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/"+user, admin, nil, map[string]any{"phone": "+4915112345678", "email": user + "@example.com"}), 200)
	acc := decode[gen.Accepted](t, send(t, s, svc, "code-"+user+"-"+key, map[string]any{"recipientUserId": user, "type": "otp",
		"template": "code", "data": map[string]any{"code": "123456"}}), 202)
	ref := inbox.DeliveryRef{TenantID: tenant, NotificationID: *acc.NotificationId, Key: key}
	testgw.WaitFor(t, 30*time.Second, "the notification's status", func() bool {
		_, err := s.Store.Status(t.Context(), tenant, ref.NotificationID)
		return err == nil
	})
	return ref
}

// sentRecord is queuedRecord's record, then claimed and recorded sent by provider as
// messageID, as the delivery worker does.
func sentRecord(t *testing.T, s *testgw.Server, user, key, provider, messageID string) inbox.DeliveryRef {
	t.Helper()
	ref := queuedRecord(t, s, user, key)
	job, outcome, err := s.Store.ClaimDelivery(t.Context(), ref, time.Minute)
	if err != nil || outcome != inbox.ClaimOK {
		t.Fatalf("claim %s: %v (outcome %v)", key, err, outcome)
	}
	if err := s.Store.DeliverySent(t.Context(), ref, job.Attempt, provider, messageID); err != nil {
		t.Fatal(err)
	}
	return ref
}

// record reads ref's record through GET /v1/notifications/{id}/status.
func record(t *testing.T, s *testgw.Server, ref inbox.DeliveryRef) gen.DeliveryRecord {
	t.Helper()
	st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+ref.NotificationID+"/status",
		s.Token(tenant, "svc", rest.ScopeSend), nil, nil), 200)
	for _, c := range st.Channels {
		if c.Key == ref.Key {
			return c
		}
	}
	t.Fatalf("no record %s in %s", ref.Key, mustJSON(t, st))
	return gen.DeliveryRecord{}
}

// twilioCallback posts a Twilio status callback for ref sent at sent; sign: the auth
// token to sign with ("" unsigned).
func twilioCallback(t *testing.T, s *testgw.Server, ref inbox.DeliveryRef, sent time.Time, sign string, form url.Values) answer {
	t.Helper()
	path := "/v1/webhooks/provider/twilio?ref=" + ref.String() + "&ts=" + strconv.FormatInt(sent.Unix(), 10)
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if sign != "" {
		h["X-Twilio-Signature"] = providerhooktest.TwilioSignature(sign, publicURL+path, form)
	}
	return call(t, s, http.MethodPost, path, "", h, form.Encode())
}

func TestTwilioCallbacksChangeARecordOnlyWhenSigned(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newCallbackServer(t, key)
	ref := sentRecord(t, s, "alice", inbox.ChannelSMS, channel.ProviderTwilio, "SM0001")
	if r := record(t, s, ref); r.Status != gen.DeliveryRecordStatusSent || deref(r.ProviderMessageId) != "SM0001" || deref(r.Provider) != "twilio" || r.UpdatedAt == nil {
		t.Fatalf("sent record: %s", mustJSON(t, r))
	}
	delivered := url.Values{"MessageSid": {"SM0001"}, "MessageStatus": {"delivered"}, "AccountSid": {"AC1"}, "To": {"+4915112345678"}}
	now := time.Now()
	unchanged := func(what string) {
		t.Helper()
		if r := record(t, s, ref); r.Status != gen.DeliveryRecordStatusSent || r.DeliveredAt != nil {
			t.Fatalf("after %s: %s", what, mustJSON(t, r))
		}
	}
	for name, a := range map[string]answer{
		"unsigned":              twilioCallback(t, s, ref, now, "", delivered),
		"signed with another":   twilioCallback(t, s, ref, now, "not-the-auth-token", delivered),
		"replayed after 8 days": twilioCallback(t, s, ref, now.Add(-8*24*time.Hour), twilioToken, delivered),
	} {
		expectProblem(t, a, 401, "UNAUTHENTICATED")
		if !strings.HasPrefix(a.Header.Get("WWW-Authenticate"), "Signature") {
			t.Errorf("%s: WWW-Authenticate %q", name, a.Header.Get("WWW-Authenticate"))
		}
		unchanged(name)
	}
	// A signed callback whose body was changed on the way.
	path := "/v1/webhooks/provider/twilio?ref=" + ref.String() + "&ts=" + strconv.FormatInt(now.Unix(), 10)
	forged := url.Values{"MessageSid": {"SM0001"}, "MessageStatus": {"failed"}}
	expectProblem(t, call(t, s, http.MethodPost, path, "", map[string]string{"Content-Type": "application/x-www-form-urlencoded",
		"X-Twilio-Signature": providerhooktest.TwilioSignature(twilioToken, publicURL+path, delivered)}, forged.Encode()), 401, "UNAUTHENTICATED")
	unchanged("a changed body")
	// Signed, about another message of the provider: accepted, nothing changes.
	other := url.Values{"MessageSid": {"SM0002"}, "MessageStatus": {"delivered"}}
	if res := decode[gen.ProviderCallbackResult](t, twilioCallback(t, s, ref, now, twilioToken, other), 200); res.Events != 1 || res.Applied != 0 {
		t.Fatalf("another message: %+v", res)
	}
	unchanged("another message's callback")
	// Signed, an untracked status: accepted, nothing to apply.
	if res := decode[gen.ProviderCallbackResult](t, twilioCallback(t, s, ref, now, twilioToken, url.Values{"MessageSid": {"SM0001"}, "MessageStatus": {"sent"}}), 200); res.Events != 0 || res.Applied != 0 {
		t.Fatalf("sent status: %+v", res)
	}
	unchanged("an untracked status")

	// Signed and fresh: SENT → DELIVERED.
	if res := decode[gen.ProviderCallbackResult](t, twilioCallback(t, s, ref, now.Add(-time.Hour), twilioToken, delivered), 200); res.Events != 1 || res.Applied != 1 {
		t.Fatalf("delivered: %+v", res)
	}
	r := record(t, s, ref)
	if r.Status != gen.DeliveryRecordStatusDelivered || r.DeliveredAt == nil || deref(r.ProviderMessageId) != "SM0001" {
		t.Fatalf("delivered record: %s", mustJSON(t, r))
	}
	// The same callback again (Twilio retries) changes nothing; a late "sent" neither.
	if res := decode[gen.ProviderCallbackResult](t, twilioCallback(t, s, ref, now, twilioToken, delivered), 200); res.Applied != 0 {
		t.Fatalf("repeated: %+v", res)
	}
	// A failure after delivery (undelivered with an error code) moves it to FAILED.
	failed := url.Values{"MessageSid": {"SM0001"}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30005"}}
	if res := decode[gen.ProviderCallbackResult](t, twilioCallback(t, s, ref, now, twilioToken, failed), 200); res.Applied != 1 {
		t.Fatalf("undelivered: %+v", res)
	}
	if r := record(t, s, ref); r.Status != gen.DeliveryRecordStatusFailed || !strings.Contains(deref(r.Error), "30005") {
		t.Fatalf("failed record: %s", mustJSON(t, r))
	}
	// A signed callback for a record that does not exist: accepted (providers retry
	// anything else), nothing written.
	ghost := inbox.DeliveryRef{TenantID: tenant, NotificationID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Key: inbox.ChannelSMS}
	if res := decode[gen.ProviderCallbackResult](t, twilioCallback(t, s, ghost, now, twilioToken, delivered), 200); res.Events != 1 || res.Applied != 0 {
		t.Fatalf("no such record: %+v", res)
	}
	if _, err := s.Store.Status(t.Context(), tenant, ghost.NotificationID); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Fatalf("a callback for no record wrote one: %v", err)
	}
}

func TestSendGridCallbacksChangeARecordOnlyWhenSigned(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newCallbackServer(t, key)
	ref := sentRecord(t, s, "bob", inbox.ChannelEmail, channel.ProviderSMTP, "<m1@inbox.example.com>")
	now := time.Now()
	batch := func(events ...string) []byte {
		var evs []map[string]any
		for i, e := range events {
			evs = append(evs, map[string]any{"inbox_ref": ref.String(), "event": e, "email": "bob@example.com",
				"sg_message_id": "sg.1", "timestamp": now.Unix() - int64(len(events)-i), "category": []string{"otp"}})
		}
		b, err := json.Marshal(evs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	post := func(body []byte, signedAt time.Time, k providerhooktest.SendGridKey, sign bool) answer {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json"}
		if sign {
			sig, ts, err := k.Sign(body, signedAt)
			if err != nil {
				t.Fatal(err)
			}
			h["X-Twilio-Email-Event-Webhook-Signature"], h["X-Twilio-Email-Event-Webhook-Timestamp"] = sig, ts
		}
		return call(t, s, http.MethodPost, "/v1/webhooks/provider/sendgrid", "", h, body)
	}
	unchanged := func(what string) {
		t.Helper()
		if r := record(t, s, ref); r.Status != gen.DeliveryRecordStatusSent || r.DeliveredAt != nil || r.OpenedAt != nil {
			t.Fatalf("after %s: %s", what, mustJSON(t, r))
		}
	}
	body := batch("processed", "delivered", "open")
	otherKey, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	expectProblem(t, post(body, now, key, false), 401, "UNAUTHENTICATED")
	unchanged("unsigned")
	expectProblem(t, post(body, now, otherKey, true), 401, "UNAUTHENTICATED")
	unchanged("signed with another key")
	expectProblem(t, post(body, now.Add(-11*time.Minute), key, true), 401, "UNAUTHENTICATED")
	unchanged("replayed after the maximum age")

	res := decode[gen.ProviderCallbackResult](t, post(body, now, key, true), 200)
	if res.Events != 2 || res.Applied != 2 {
		t.Fatalf("delivered+open: %+v", res)
	}
	r := record(t, s, ref)
	if r.Status != gen.DeliveryRecordStatusOpened || r.DeliveredAt == nil || r.OpenedAt == nil || deref(r.ProviderMessageId) != "<m1@inbox.example.com>" {
		t.Fatalf("opened record: %s", mustJSON(t, r))
	}
	// Never backwards: a late "delivered" changes nothing.
	if res := decode[gen.ProviderCallbackResult](t, post(batch("delivered"), now, key, true), 200); res.Applied != 0 {
		t.Fatalf("late delivered: %+v", res)
	}
	if r := record(t, s, ref); r.Status != gen.DeliveryRecordStatusOpened {
		t.Fatalf("after a late delivered: %s", mustJSON(t, r))
	}
}

func TestProviderCallbackRoutes(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newCallbackServer(t, key)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	expectProblem(t, call(t, s, http.MethodPost, "/v1/webhooks/provider/nope", "", jsonCT, `[]`), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/webhooks/provider/twilio", "", nil, nil), 405, "BAD_REQUEST")
	// A bearer token is no signature.
	expectProblem(t, call(t, s, http.MethodPost, "/v1/webhooks/provider/sendgrid", s.Token(tenant, "svc", rest.ScopeSend, rest.ScopeAdmin), jsonCT, `[]`), 401, "UNAUTHENTICATED")
	// Over the body limit, before any signature is checked.
	big := "[" + strings.Repeat(`{"event":"processed"},`, rest.MaxCallbackBytes/20) + `{}]`
	sig, ts, err := key.Sign([]byte(big), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	expectProblem(t, call(t, s, http.MethodPost, "/v1/webhooks/provider/sendgrid", "", map[string]string{"Content-Type": "application/json",
		"X-Twilio-Email-Event-Webhook-Signature": sig, "X-Twilio-Email-Event-Webhook-Timestamp": ts}, big), 413, "PAYLOAD_TOO_LARGE")
	// A gateway without provider settings has no callbacks: 404 for each.
	bare := newServer(t)
	for _, p := range []string{"twilio", "sendgrid"} {
		expectProblem(t, call(t, bare, http.MethodPost, "/v1/webhooks/provider/"+p, "", jsonCT, `[]`), 404, "NOT_FOUND")
	}
}

// Every callback route holds callbacks to its provider's limits before their signature
// is checked, signed or not, and answers a problem with the limit's code: a Twilio body
// over 16 KiB or of more than 64 fields, a query over 2 KiB, a SendGrid batch over 1 MiB.
// The attack's own callback (1 MiB in ~9,900 fields and a bogus signature; a 512 KiB
// query) cost ~9 CPU-seconds each before the limits. A genuine callback at Twilio's
// limits is still accepted.
func TestProviderCallbackLimitsOnEveryRoute(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newCallbackServer(t, key)
	ghost := inbox.DeliveryRef{TenantID: tenant, NotificationID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Key: inbox.ChannelSMS}
	form := func(fields, valueBytes int) url.Values {
		f := url.Values{"MessageSid": {"SM0001"}, "MessageStatus": {"delivered"}}
		for i := len(f); i < fields; i++ {
			f.Set("F"+strconv.Itoa(i), strings.Repeat("x", valueBytes))
		}
		return f
	}
	twilio := func(f url.Values, queryBytes int, sign bool) answer {
		t.Helper()
		path := "/v1/webhooks/provider/twilio?ref=" + ghost.String() + "&ts=" + strconv.FormatInt(time.Now().Unix(), 10)
		if pad := queryBytes - (len(path) - strings.IndexByte(path, '?') - 1) - len("&pad="); pad > 0 {
			path += "&pad=" + strings.Repeat("p", pad)
		}
		sig := "bm90LWEtc2lnbmF0dXJlLWF0LWFsbA=="
		if sign {
			sig = providerhooktest.TwilioSignature(twilioToken, publicURL+path, f)
		}
		return call(t, s, http.MethodPost, path, "", map[string]string{"Content-Type": "application/x-www-form-urlencoded",
			"X-Twilio-Signature": sig}, f.Encode())
	}
	for _, c := range []struct {
		name          string
		form          url.Values
		query, status int
		code          string
	}{
		{"body over 16 KiB", form(10, 2<<10), 0, 413, "PAYLOAD_TOO_LARGE"},
		{"body 1 MiB in 9,900 fields", form(9900, 100), 0, 413, "PAYLOAD_TOO_LARGE"},
		{"65 fields", form(65, 0), 0, 400, "BAD_REQUEST"},
		{"query over 2 KiB", form(5, 0), 2<<10 + 1, 400, "BAD_REQUEST"},
		{"query 512 KiB", form(5, 0), 512 << 10, 400, "BAD_REQUEST"},
	} {
		for _, sign := range []bool{false, true} {
			start := time.Now()
			expectProblem(t, twilio(c.form, c.query, sign), c.status, c.code)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("twilio %s (signed %v): answered after %v", c.name, sign, d)
			}
		}
	}
	// At the limits, genuine: accepted (its ref names no record: nothing applied).
	f := form(64, 0)
	f.Set("F63", strings.Repeat("y", 16<<10-len(f.Encode())))
	if len(f.Encode()) != 16<<10 {
		t.Fatalf("fixture: %d bytes", len(f.Encode()))
	}
	if res := decode[gen.ProviderCallbackResult](t, twilio(f, 2<<10, true), 200); res.Events != 1 || res.Applied != 0 {
		t.Fatalf("callback at the limits: %+v", res)
	}

	sendgrid := func(query string, body []byte, sign bool) answer {
		t.Helper()
		sig, ts, err := key.Sign(body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !sign {
			sig = "MEUCIQDbogus"
		}
		return call(t, s, http.MethodPost, "/v1/webhooks/provider/sendgrid"+query, "", map[string]string{"Content-Type": "application/json",
			"X-Twilio-Email-Event-Webhook-Signature": sig, "X-Twilio-Email-Event-Webhook-Timestamp": ts}, body)
	}
	small := []byte(`[{"event":"processed"}]`)
	over := []byte("[" + strings.Repeat(`{"event":"processed"},`, rest.MaxCallbackBytes/20) + `{}]`)
	for _, sign := range []bool{false, true} {
		expectProblem(t, sendgrid("", over, sign), 413, "PAYLOAD_TOO_LARGE")
		expectProblem(t, sendgrid("?"+strings.Repeat("q", 2<<10+1), small, sign), 400, "BAD_REQUEST")
	}
	if res := decode[gen.ProviderCallbackResult](t, sendgrid("?"+strings.Repeat("q", 2<<10-1), small, true), 200); res.Events != 0 {
		t.Fatalf("sendgrid with a 2 KiB query: %+v", res)
	}
}

// A validly signed SendGrid event whose timestamp is implausible (year 10000, 1e18
// seconds, over int64, negative) counts as of its arrival, one with fractional seconds
// as of its time; each is applied and the status keeps answering 200. A year-10000
// event once made GET /v1/notifications/{id}/status answer 500 for good; one whose
// timestamp was not an int64 was dropped.
func TestSendGridEventTimesKeepTheStatusReadable(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newCallbackServer(t, key)
	minuteAgo := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i, c := range []struct {
		name, timestamp string
		at              time.Time // zero: the time the callback came
	}{
		{"year 10000", "253402300800", time.Time{}},
		{"1e18 seconds", "1000000000000000000", time.Time{}},
		{"over int64", "99999999999999999999", time.Time{}},
		{"negative", "-5", time.Time{}},
		{"fractional seconds", strconv.FormatInt(minuteAgo.Unix(), 10) + ".5", minuteAgo.Add(500 * time.Millisecond)},
	} {
		ref := sentRecord(t, s, "times"+strconv.Itoa(i), inbox.ChannelEmail, channel.ProviderSMTP, "<t@inbox.example.com>")
		body := []byte(`[{"inbox_ref":"` + ref.String() + `","event":"delivered","timestamp":` + c.timestamp + `}]`)
		before := time.Now().Add(-time.Second)
		sig, ts, err := key.Sign(body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		res := decode[gen.ProviderCallbackResult](t, call(t, s, http.MethodPost, "/v1/webhooks/provider/sendgrid", "", map[string]string{
			"Content-Type": "application/json", "X-Twilio-Email-Event-Webhook-Signature": sig, "X-Twilio-Email-Event-Webhook-Timestamp": ts}, body), 200)
		if res.Events != 1 || res.Applied != 1 {
			t.Errorf("%s: %+v, want the event applied", c.name, res)
			continue
		}
		r := record(t, s, ref) // 200, or the test fails
		switch {
		case r.Status != gen.DeliveryRecordStatusDelivered || r.DeliveredAt == nil:
			t.Errorf("%s: record %s", c.name, mustJSON(t, r))
		case c.at.IsZero() && (r.DeliveredAt.Before(before) || r.DeliveredAt.After(time.Now().Add(time.Second))):
			t.Errorf("%s: delivered at %v, want the callback's arrival", c.name, *r.DeliveredAt)
		case !c.at.IsZero() && !r.DeliveredAt.Equal(c.at):
			t.Errorf("%s: delivered at %v, want %v", c.name, *r.DeliveredAt, c.at)
		}
	}
}
