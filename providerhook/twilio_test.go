package providerhook_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/providerhook"
	"github.com/inboxgw/gateway/providerhook/providerhooktest"
)

const (
	authToken = "twilio-auth-token-0123456789abcdef"
	publicURL = "https://inbox.example.com"
)

var ref = inbox.DeliveryRef{TenantID: "acme", NotificationID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Key: inbox.ChannelSMS}

// The test signer agrees with Twilio's published example (twilio-go's validator test:
// auth token 12345, that URL and those parameters), so the hook is tested against
// signatures as Twilio makes them.
func TestTwilioSignerMatchesTwilioExample(t *testing.T) {
	t.Parallel()
	form := url.Values{"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"},
		"Caller": {"+14158675309"}, "From": {"+14158675309"}, "ReasonConferenceEnded": {"test"}, "Reason": {"Participant"}}
	if got := providerhooktest.TwilioSignature("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", form); got != "vOEb5UThFn24KEfnOFLQY2AE5FY=" {
		t.Fatalf("signature %s", got)
	}
}

// twilioCallback is a status callback for ref sent at sent, signed with token over the
// URL under base ("" headers: unsigned).
func twilioCallback(t *testing.T, token, base string, sent time.Time, form url.Values) *http.Request {
	t.Helper()
	path := "/v1/webhooks/provider/twilio?ref=" + ref.String() + "&ts=" + strconv.FormatInt(sent.Unix(), 10)
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		r.Header.Set(providerhook.TwilioSignatureHeader, providerhooktest.TwilioSignature(token, base+path, form))
	}
	return r
}

func newTwilio(t testing.TB, now time.Time) *providerhook.Twilio {
	t.Helper()
	tw, err := providerhook.NewTwilio(providerhook.TwilioConfig{AuthToken: authToken, PublicURL: publicURL + "/", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return tw
}

func statusForm(status string) url.Values {
	return url.Values{"MessageSid": {"SM0123456789abcdef0123456789abcdef"}, "MessageStatus": {status}, "SmsStatus": {status},
		"AccountSid": {"AC0123"}, "From": {"+15005550006"}, "To": {"+4915112345678"}, "ApiVersion": {"2010-04-01"}}
}

func TestTwilioValidCallbacksMapStatuses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tw := newTwilio(t, now)
	for status, want := range map[string]string{
		"delivered": inbox.DeliveryDelivered, "read": inbox.DeliveryOpened,
		"undelivered": inbox.DeliveryFailed, "failed": inbox.DeliveryFailed,
		"sent": "", "queued": "", "sending": "", "accepted": "",
	} {
		form := statusForm(status)
		if want == inbox.DeliveryFailed {
			form.Set("ErrorCode", "30003")
		}
		body := []byte(form.Encode())
		evs, err := tw.Events(twilioCallback(t, authToken, publicURL, now.Add(-time.Hour), form), body)
		if err != nil {
			t.Fatalf("%s: %v", status, err)
		}
		if want == "" {
			if len(evs) != 0 {
				t.Errorf("%s: events %+v, want none", status, evs)
			}
			continue
		}
		if len(evs) != 1 {
			t.Fatalf("%s: events %+v", status, evs)
		}
		ev := evs[0]
		if ev.Ref != ref || ev.Status != want || ev.Provider != channel.ProviderTwilio || ev.MessageID != "SM0123456789abcdef0123456789abcdef" || ev.At.IsZero() {
			t.Errorf("%s: event %+v", status, ev)
		}
		if want == inbox.DeliveryFailed && !strings.Contains(ev.Error, "30003") {
			t.Errorf("%s: error %q lacks the code", status, ev.Error)
		}
		if want != inbox.DeliveryFailed && ev.Error != "" {
			t.Errorf("%s: error %q", status, ev.Error)
		}
	}
}

func TestTwilioRefusesUnsignedWrongAndReplayedCallbacks(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tw := newTwilio(t, now)
	form := statusForm("delivered")
	body := []byte(form.Encode())
	unauth := func(name string, r *http.Request, body []byte) {
		t.Helper()
		evs, err := tw.Events(r, body)
		if inbox.ErrorCode(err) != inbox.CodeUnauthenticated || evs != nil {
			t.Errorf("%s: %v %+v, want UNAUTHENTICATED", name, err, evs)
		}
	}
	unauth("unsigned", twilioCallback(t, "", publicURL, now, form), body)
	unauth("another account's token", twilioCallback(t, "another-token", publicURL, now, form), body)
	unauth("signed for another host", twilioCallback(t, authToken, "https://evil.example.com", now, form), body)
	// The body changed after signing: delivered signed, failed sent.
	unauth("body changed", twilioCallback(t, authToken, publicURL, now, form), []byte(statusForm("failed").Encode()))
	// The query changed after signing: another record's ref.
	r := twilioCallback(t, authToken, publicURL, now, form)
	other := inbox.DeliveryRef{TenantID: "acme", NotificationID: "01ARZ3NDEKTSV4RRFFQ69G5FAW", Key: inbox.ChannelSMS}
	r.URL.RawQuery = strings.Replace(r.URL.RawQuery, ref.String(), other.String(), 1)
	unauth("ref changed", r, body)
	// Replayed: a genuine signature over a send time older than 7 days; or ahead.
	unauth("replayed after 7 days", twilioCallback(t, authToken, publicURL, now.Add(-providerhook.DefaultTwilioMaxAge-time.Minute), form), body)
	unauth("send time ahead", twilioCallback(t, authToken, publicURL, now.Add(10*time.Minute), form), body)
	// Signed, but without a send time at all.
	path := "/v1/webhooks/provider/twilio?ref=" + ref.String()
	r = httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
	r.Header.Set(providerhook.TwilioSignatureHeader, providerhooktest.TwilioSignature(authToken, publicURL+path, form))
	unauth("no ts", r, body)
	// Just inside the window it is accepted.
	if evs, err := tw.Events(twilioCallback(t, authToken, publicURL, now.Add(-providerhook.DefaultTwilioMaxAge+time.Minute), form), body); err != nil || len(evs) != 1 {
		t.Errorf("6 days 23 h 59 min old: %v %+v", err, evs)
	}
}

func TestTwilioSignedButMalformedRef(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tw := newTwilio(t, now)
	form := statusForm("delivered")
	path := "/v1/webhooks/provider/twilio?ref=not-a-ref&ts=" + strconv.FormatInt(now.Unix(), 10)
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set(providerhook.TwilioSignatureHeader, providerhooktest.TwilioSignature(authToken, publicURL+path, form))
	if _, err := tw.Events(r, []byte(form.Encode())); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("malformed ref: %v, want BAD_USER_INPUT", err)
	}
}

func TestNewTwilioConfiguration(t *testing.T) {
	t.Parallel()
	for _, c := range []providerhook.TwilioConfig{
		{PublicURL: publicURL},
		{AuthToken: authToken},
		{AuthToken: authToken, PublicURL: "inbox.example.com"},
		{AuthToken: authToken, PublicURL: "ftp://inbox.example.com"},
		{AuthToken: authToken, PublicURL: "https://inbox.example.com/?x=1"},
	} {
		if _, err := providerhook.NewTwilio(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
