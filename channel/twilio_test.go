package channel_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

func newTwilio(t *testing.T, srv *channeltest.Twilio, mut func(*channel.TwilioConfig)) channel.Channel {
	t.Helper()
	cfg := channel.TwilioConfig{
		AccountSID: srv.AccountSID, AuthToken: srv.AuthToken, From: srv.From,
		BaseURL: srv.URL, Timeout: 5 * time.Second,
	}
	if mut != nil {
		mut(&cfg)
	}
	ch, err := channel.NewTwilio(cfg)
	if err != nil {
		t.Fatalf("NewTwilio: %v", err)
	}
	return ch
}

func smsMessage(to string) channel.Message {
	return channel.Message{
		TenantID: "t1", UserID: "u1", NotificationID: "n1", Key: "SMS", Attempt: 1,
		IdempotencyKey: "t1/n1/SMS", To: to, Text: "Build finished\nmain is green", CallbackRef: "dDEjbjEjU01T",
	}
}

func TestTwilioSendSuccess(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewTwilio(t)
	at := time.Unix(1_760_000_000, 0)
	ch := newTwilio(t, srv, func(c *channel.TwilioConfig) {
		c.StatusCallbackBase = "https://inbox.example.com/v1/webhooks/provider/twilio"
		c.Now = func() time.Time { return at }
	})
	if ch.Provider() != channel.ProviderTwilio {
		t.Fatalf("Provider() = %q", ch.Provider())
	}
	res, err := ch.Send(context.Background(), smsMessage("+14155550100"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if res.Provider != channel.ProviderTwilio || !strings.HasPrefix(res.MessageID, "SM") || res.MessageID != r.Sid || r.Status != 201 {
		t.Fatalf("result %+v, server answered %d %s", res, r.Status, r.Sid)
	}
	if r.User != srv.AccountSID || r.Password != srv.AuthToken {
		t.Fatalf("basic auth %q:%q", r.User, r.Password)
	}
	if r.Path != "/2010-04-01/Accounts/"+srv.AccountSID+"/Messages.json" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Fatalf("path %s content type %q", r.Path, r.Header.Get("Content-Type"))
	}
	want := url.Values{
		"To": {"+14155550100"}, "From": {srv.From}, "Body": {"Build finished\nmain is green"},
		"StatusCallback": {"https://inbox.example.com/v1/webhooks/provider/twilio?ref=dDEjbjEjU01T&ts=1760000000"},
	}
	if r.Form.Encode() != want.Encode() {
		t.Fatalf("form\n got %s\nwant %s", r.Form.Encode(), want.Encode())
	}
}

// A Messaging Service sid is sent as MessagingServiceSid; without a callback base (or a
// ref) no StatusCallback.
func TestTwilioMessagingServiceNoCallback(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewTwilio(t)
	ch := newTwilio(t, srv, func(c *channel.TwilioConfig) { c.From = "MG0123456789abcdef0123456789abcdef" })
	if _, err := ch.Send(context.Background(), smsMessage("+14155550100")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	withBase := newTwilio(t, srv, func(c *channel.TwilioConfig) { c.StatusCallbackBase = "https://inbox.example.com/cb" })
	m := smsMessage("+14155550100")
	m.CallbackRef = ""
	if _, err := withBase.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := srv.Requests()
	f := reqs[0].Form
	if f.Get("MessagingServiceSid") != "MG0123456789abcdef0123456789abcdef" || f.Has("From") || f.Has("StatusCallback") {
		t.Fatalf("form %v", f)
	}
	if reqs[1].Form.Has("StatusCallback") {
		t.Fatalf("StatusCallback without a ref: %v", reqs[1].Form)
	}
}

func TestTwilioStatusCallbackURL(t *testing.T) {
	t.Parallel()
	at := time.Unix(42, 0)
	if got := channel.TwilioStatusCallback("https://x.test/cb", "a+b/c", at); got != "https://x.test/cb?ref=a%2Bb%2Fc&ts=42" {
		t.Errorf("got %s", got)
	}
	if got := channel.TwilioStatusCallback("https://x.test/cb?k=1", "r", at); got != "https://x.test/cb?k=1&ref=r&ts=42" {
		t.Errorf("got %s", got)
	}
}

func TestTwilioDocumentedErrors(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewTwilio(t)
	ch := newTwilio(t, srv, nil)
	for _, tc := range []struct {
		answer     channeltest.TwilioAnswer
		kind       channel.Kind
		status     int
		code       string
		retryAfter time.Duration
	}{
		{channeltest.TwilioError(21211), channel.Permanent, 400, "21211", 0},
		{channeltest.TwilioError(21614), channel.Permanent, 400, "21614", 0},
		{channeltest.TwilioError(21610), channel.Permanent, 400, "21610", 0},
		{channeltest.TwilioError(21408), channel.Permanent, 400, "21408", 0},
		{channeltest.TwilioError(20003), channel.Permanent, 401, "20003", 0},
		{channeltest.TwilioError(20404), channel.Permanent, 404, "20404", 0},
		{channeltest.TwilioAnswer{Status: 429, Code: 20429, RetryAfter: "12"}, channel.Transient, 429, "20429", 12 * time.Second},
		{channeltest.TwilioError(20429), channel.Transient, 429, "20429", 0},
		{channeltest.TwilioError(20500), channel.Transient, 500, "20500", 0},
		{channeltest.TwilioError(20503), channel.Transient, 503, "20503", 0},
		{channeltest.TwilioAnswer{Status: 502}, channel.Transient, 502, "", 0},
	} {
		t.Run(tc.code, func(t *testing.T) {
			srv.Queue(tc.answer)
			_, err := ch.Send(context.Background(), smsMessage("+14155550100"))
			e := wantError(t, err, tc.kind, tc.status, tc.code)
			if e.Provider != channel.ProviderTwilio || e.RetryAfter != tc.retryAfter {
				t.Fatalf("error %v: provider %q retryAfter %v", e, e.Provider, e.RetryAfter)
			}
			// 21610: the number replied STOP; only it suppresses the address.
			if e.Suppress != (tc.code == "21610") {
				t.Fatalf("error %v: Suppress %v", e, e.Suppress)
			}
		})
	}
}

// The server's own checks: an invalid To is 21211 (permanent), wrong credentials 20003.
func TestTwilioServerChecks(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewTwilio(t)
	ch := newTwilio(t, srv, nil)
	_, err := ch.Send(context.Background(), smsMessage("555-0100"))
	wantError(t, err, channel.Permanent, 400, "21211")

	wrong := newTwilio(t, srv, func(c *channel.TwilioConfig) { c.AuthToken = "not-the-token" })
	_, err = wrong.Send(context.Background(), smsMessage("+14155550100"))
	if e := wantError(t, err, channel.Permanent, 401, "20003"); !strings.Contains(e.Error(), "Authenticate") {
		t.Fatalf("error %v", e)
	}
	if reqs := srv.Requests(); reqs[1].Password != "not-the-token" || reqs[1].Status != 401 {
		t.Fatalf("request %+v", reqs[1])
	}
}

func TestTwilioTimeout(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewTwilio(t)
	ch := newTwilio(t, srv, func(c *channel.TwilioConfig) { c.Timeout = 300 * time.Millisecond })
	srv.Queue(channeltest.TwilioAnswer{Hang: true})
	start := time.Now()
	_, err := ch.Send(context.Background(), smsMessage("+14155550100"))
	wantError(t, err, channel.Transient, 0, "")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Send took %v", d)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests", n)
	}
}

func TestNewTwilioRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]channel.TwilioConfig{
		"no sid":       {AuthToken: "x", From: "+1"},
		"no token":     {AccountSID: "AC1", From: "+1"},
		"no from":      {AccountSID: "AC1", AuthToken: "x"},
		"bad base":     {AccountSID: "AC1", AuthToken: "x", From: "+1", BaseURL: "api.twilio.com"},
		"bad callback": {AccountSID: "AC1", AuthToken: "x", From: "+1", StatusCallbackBase: "/v1/webhooks"},
	} {
		if _, err := channel.NewTwilio(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
