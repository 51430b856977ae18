package channel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

const apnsDevice = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"

func newAPNs(t *testing.T, srv *channeltest.APNs, timeout time.Duration) channel.Channel {
	t.Helper()
	ch, err := channel.NewAPNs(channel.APNsConfig{
		KeyPEM: srv.KeyPEM, KeyID: srv.KeyID, TeamID: srv.TeamID, Topic: srv.Topic,
		BaseURL: srv.URL, Client: srv.Client(), Timeout: timeout,
	})
	if err != nil {
		t.Fatalf("NewAPNs: %v", err)
	}
	return ch
}

func TestAPNsSendSuccess(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewAPNs(t)
	ch := newAPNs(t, srv, 5*time.Second)
	if ch.Provider() != channel.ProviderAPNs {
		t.Fatalf("Provider() = %q", ch.Provider())
	}
	m := pushMessage(apnsDevice)
	res, err := ch.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	wantID := channel.APNsID(m.IdempotencyKey)
	if u, err := uuid.Parse(wantID); err != nil || u.Version() != 5 {
		t.Fatalf("APNsID %q: %v", wantID, err)
	}
	if res.Provider != channel.ProviderAPNs || res.MessageID != wantID {
		t.Fatalf("result %+v, want apns-id %s", res, wantID)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Status != 200 || r.Proto != "HTTP/2.0" || r.DeviceToken != apnsDevice {
		t.Fatalf("request %s %s answered %d %s", r.Proto, r.DeviceToken, r.Status, r.Reason)
	}
	// The JWT verified with the public key on the server; its header and claims:
	if r.TokenErr != "" || r.JWTHeader["alg"] != "ES256" || r.JWTHeader["kid"] != srv.KeyID || r.Claims["iss"] != srv.TeamID {
		t.Fatalf("provider token: err %q header %v claims %v", r.TokenErr, r.JWTHeader, r.Claims)
	}
	iat, err := r.Claims.GetIssuedAt()
	if err != nil || time.Since(iat.Time) > time.Minute {
		t.Fatalf("iat %v: %v", iat, err)
	}
	h := r.Header
	if h.Get("apns-topic") != srv.Topic || h.Get("apns-id") != wantID || h.Get("apns-push-type") != "alert" || h.Get("apns-priority") != "10" {
		t.Fatalf("headers %v", h)
	}
	aps, _ := r.Payload["aps"].(map[string]any)
	alert, _ := aps["alert"].(map[string]any)
	if alert["title"] != "Build finished" || alert["body"] != "main is green" || r.Payload["notificationId"] != "n1" {
		t.Fatalf("payload %s", r.Raw)
	}

	// The same idempotency key gives the same apns-id on every attempt; the token is reused.
	m.Attempt = 2
	if res2, err := ch.Send(context.Background(), m); err != nil || res2.MessageID != wantID {
		t.Fatalf("second Send: %+v %v", res2, err)
	}
	other := pushMessage(apnsDevice)
	other.IdempotencyKey = "t1/n2/PUSH#0123456789abcdef"
	if res3, err := ch.Send(context.Background(), other); err != nil || res3.MessageID == wantID {
		t.Fatalf("other key: %+v %v", res3, err)
	}
	reqs = srv.Requests()
	if reqs[1].Bearer != reqs[0].Bearer || reqs[2].Bearer != reqs[0].Bearer {
		t.Fatal("the provider token was not reused")
	}
}

func TestAPNsDocumentedErrors(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewAPNs(t)
	ch := newAPNs(t, srv, 5*time.Second)
	for _, tc := range []struct {
		reason string
		kind   channel.Kind
		status int
	}{
		{"BadDeviceToken", channel.Unregistered, 400},
		{"Unregistered", channel.Unregistered, 410},
		{"ExpiredToken", channel.Unregistered, 410},
		{"InvalidProviderToken", channel.Permanent, 403},
		{"BadTopic", channel.Permanent, 400},
		{"DeviceTokenNotForTopic", channel.Permanent, 400},
		{"PayloadTooLarge", channel.Permanent, 413},
		{"TooManyRequests", channel.Transient, 429},
		{"TooManyProviderTokenUpdates", channel.Transient, 429},
		{"InternalServerError", channel.Transient, 500},
		{"ServiceUnavailable", channel.Transient, 503},
		{"Shutdown", channel.Transient, 503},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			srv.Queue(channeltest.APNsError(tc.reason))
			_, err := ch.Send(context.Background(), pushMessage(apnsDevice))
			if e := wantError(t, err, tc.kind, tc.status, tc.reason); e.Provider != channel.ProviderAPNs {
				t.Fatalf("provider %q", e.Provider)
			}
		})
	}
	if n := len(srv.Requests()); n != 12 {
		t.Fatalf("%d requests, want one per error (no retries)", n)
	}
}

// The server's own checks answer with APNs' reasons too: a malformed device token is
// BadDeviceToken (Unregistered), a key the server does not know InvalidProviderToken.
func TestAPNsServerChecks(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewAPNs(t)
	ch := newAPNs(t, srv, 5*time.Second)
	_, err := ch.Send(context.Background(), pushMessage("not-a-device-token"))
	wantError(t, err, channel.Unregistered, 400, "BadDeviceToken")

	other := channeltest.NewAPNs(t)
	wrongKey, err := channel.NewAPNs(channel.APNsConfig{
		KeyPEM: other.KeyPEM, KeyID: srv.KeyID, TeamID: srv.TeamID, Topic: srv.Topic,
		BaseURL: srv.URL, Client: srv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrongKey.Send(context.Background(), pushMessage(apnsDevice))
	wantError(t, err, channel.Permanent, 403, "InvalidProviderToken")
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(last.TokenErr, "signature") {
		t.Fatalf("token error %q", last.TokenErr)
	}
}

// ExpiredProviderToken: the JWT is signed again and the push retried once in the Send.
func TestAPNsExpiredProviderTokenRefreshedOnce(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewAPNs(t)
	ch := newAPNs(t, srv, 5*time.Second)
	srv.Queue(channeltest.APNsError("ExpiredProviderToken"))
	res, err := ch.Send(context.Background(), pushMessage(apnsDevice))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Status != 403 || reqs[1].Status != 200 {
		t.Fatalf("requests %+v", reqs)
	}
	if reqs[0].Bearer == reqs[1].Bearer || reqs[1].TokenErr != "" {
		t.Fatal("the retry did not carry a newly signed token")
	}
	if reqs[0].Header.Get("apns-id") != reqs[1].Header.Get("apns-id") || res.MessageID != reqs[1].ApnsID {
		t.Fatalf("apns-id changed across the retry: %q %q", reqs[0].Header.Get("apns-id"), reqs[1].Header.Get("apns-id"))
	}
	// Later sends use the new token.
	if _, err := ch.Send(context.Background(), pushMessage(apnsDevice)); err != nil {
		t.Fatal(err)
	}
	if reqs = srv.Requests(); reqs[2].Bearer != reqs[1].Bearer {
		t.Fatal("the refreshed token was not kept")
	}

	// Refused twice: one retry only, then permanent.
	srv.Queue(channeltest.APNsError("ExpiredProviderToken"), channeltest.APNsError("ExpiredProviderToken"))
	_, err = ch.Send(context.Background(), pushMessage(apnsDevice))
	wantError(t, err, channel.Permanent, 403, "ExpiredProviderToken")
	if n := len(srv.Requests()); n != 5 {
		t.Fatalf("%d requests, want 5", n)
	}
}

func TestAPNsTimeout(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewAPNs(t)
	ch := newAPNs(t, srv, 300*time.Millisecond)
	srv.Queue(channeltest.APNsAnswer{Hang: true})
	start := time.Now()
	_, err := ch.Send(context.Background(), pushMessage(apnsDevice))
	wantError(t, err, channel.Transient, 0, "")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Send took %v", d)
	}
	// The connection stays usable after the abandoned stream.
	if _, err := ch.Send(context.Background(), pushMessage(apnsDevice)); err != nil {
		t.Fatalf("Send after timeout: %v", err)
	}
}

func TestNewAPNsRejectsBadConfig(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewAPNs(t)
	for name, cfg := range map[string]channel.APNsConfig{
		"no key":   {KeyID: "k", TeamID: "t", Topic: "x"},
		"not PEM":  {KeyPEM: []byte("nope"), KeyID: "k", TeamID: "t", Topic: "x"},
		"no topic": {KeyPEM: srv.KeyPEM, KeyID: "k", TeamID: "t"},
		"bad URL":  {KeyPEM: srv.KeyPEM, KeyID: "k", TeamID: "t", Topic: "x", BaseURL: "no-scheme"},
	} {
		if _, err := channel.NewAPNs(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
