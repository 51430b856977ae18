package channel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

func newFCM(t *testing.T, srv *channeltest.FCM, timeout time.Duration) channel.Channel {
	t.Helper()
	ch, err := channel.NewFCM(channel.FCMConfig{CredentialsJSON: srv.Credentials, BaseURL: srv.URL, Timeout: timeout})
	if err != nil {
		t.Fatalf("NewFCM: %v", err)
	}
	return ch
}

func pushMessage(to string) channel.Message {
	return channel.Message{
		TenantID: "t1", UserID: "u1", NotificationID: "n1", Key: "PUSH#0123456789abcdef", Attempt: 1,
		IdempotencyKey: "t1/n1/PUSH#0123456789abcdef", To: to,
		Title: "Build finished", Body: "main is green", Data: map[string]string{"notificationId": "n1"},
	}
}

// wantError asserts err is an *channel.Error of kind k with the given status and code.
func wantError(t *testing.T, err error, k channel.Kind, status int, code string) *channel.Error {
	t.Helper()
	var e *channel.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *channel.Error", err, err)
	}
	if e.Kind != k || e.Status != status || e.Code != code {
		t.Fatalf("error %v: kind %v status %d code %q, want %v %d %q", e, e.Kind, e.Status, e.Code, k, status, code)
	}
	if kind, _ := channel.Classify(err); kind != k {
		t.Fatalf("Classify(%v) = %v, want %v", err, kind, k)
	}
	return e
}

func TestFCMSendSuccess(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewFCM(t)
	ch := newFCM(t, srv, 5*time.Second)
	if ch.Provider() != channel.ProviderFCM {
		t.Fatalf("Provider() = %q", ch.Provider())
	}
	ctx := context.Background()
	res, err := ch.Send(ctx, pushMessage("device-token-1"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if res.Provider != channel.ProviderFCM || !strings.HasPrefix(res.MessageID, "projects/inbox-test/messages/") {
		t.Fatalf("result %+v", res)
	}
	if _, err := ch.Send(ctx, pushMessage("device-token-2")); err != nil {
		t.Fatalf("second Send: %v", err)
	}

	toks := srv.TokenRequests()
	if len(toks) != 1 {
		t.Fatalf("%d token requests, want 1 (the access token is reused)", len(toks))
	}
	tr := toks[0]
	if tr.Err != "" || tr.Status != 200 || tr.GrantType != channeltest.FCMGrantType || tr.KeyID != srv.KeyID {
		t.Fatalf("token request %+v", tr)
	}
	if tr.Claims["iss"] != srv.ClientEmail || tr.Claims["aud"] != srv.TokenURL || tr.Claims["scope"] != channel.FCMScope {
		t.Fatalf("assertion claims %v", tr.Claims)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d send requests, want 2", len(reqs))
	}
	r := reqs[0]
	if r.Status != 200 || r.Path != "/v1/projects/inbox-test/messages:send" {
		t.Fatalf("request %s answered %d", r.Path, r.Status)
	}
	if a := r.Header.Get("Authorization"); !strings.HasPrefix(a, "Bearer ya29.") || a != reqs[1].Header.Get("Authorization") {
		t.Fatalf("Authorization %q / %q", a, reqs[1].Header.Get("Authorization"))
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	if r.Token != "device-token-1" || r.Title != "Build finished" || r.Body != "main is green" || r.Data["notificationId"] != "n1" {
		t.Fatalf("message %+v", r)
	}
	var body map[string]map[string]any
	if err := json.Unmarshal(r.Raw, &body); err != nil || len(body) != 1 || body["message"] == nil {
		t.Fatalf("body %s: %v", r.Raw, err)
	}
}

func TestFCMDocumentedErrors(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewFCM(t)
	ch := newFCM(t, srv, 5*time.Second)
	for _, tc := range []struct {
		answer     channeltest.FCMAnswer
		kind       channel.Kind
		status     int
		retryAfter time.Duration
	}{
		{channeltest.FCMError("UNREGISTERED"), channel.Unregistered, 404, 0},
		{channeltest.FCMError("INVALID_ARGUMENT"), channel.Permanent, 400, 0},
		{channeltest.FCMError("SENDER_ID_MISMATCH"), channel.Permanent, 403, 0},
		{channeltest.FCMError("THIRD_PARTY_AUTH_ERROR"), channel.Permanent, 401, 0},
		{withRetryAfter(channeltest.FCMError("QUOTA_EXCEEDED"), "37"), channel.Transient, 429, 37 * time.Second},
		{withRetryAfter(channeltest.FCMError("UNAVAILABLE"), "5"), channel.Transient, 503, 5 * time.Second},
		{channeltest.FCMError("UNAVAILABLE"), channel.Transient, 503, 0},
		{channeltest.FCMError("INTERNAL"), channel.Transient, 500, 0},
		{channeltest.FCMError("UNSPECIFIED_ERROR"), channel.Transient, 500, 0},
		{channeltest.FCMAnswer{Status: 404}, channel.Permanent, 404, 0},
	} {
		code := tc.answer.ErrorCode
		if code == "" {
			code = "NOT_FOUND" // Google's status when FCM gives no errorCode
		}
		t.Run(code, func(t *testing.T) {
			srv.Queue(tc.answer)
			_, err := ch.Send(context.Background(), pushMessage("tok"))
			e := wantError(t, err, tc.kind, tc.status, code)
			if e.Provider != channel.ProviderFCM || e.RetryAfter != tc.retryAfter {
				t.Fatalf("error %v: provider %q retryAfter %v, want %v", e, e.Provider, e.RetryAfter, tc.retryAfter)
			}
			if _, ra := channel.Classify(err); ra != tc.retryAfter {
				t.Fatalf("Classify retryAfter %v", ra)
			}
		})
	}
}

func withRetryAfter(a channeltest.FCMAnswer, v string) channeltest.FCMAnswer {
	a.RetryAfter = v
	return a
}

// A refused access token (401 UNAUTHENTICATED without an FCM errorCode) is transient and
// dropped: the next Send fetches a new one.
func TestFCMRefusedAccessTokenIsRefetched(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewFCM(t)
	ch := newFCM(t, srv, 5*time.Second)
	ctx := context.Background()
	if _, err := ch.Send(ctx, pushMessage("tok")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	srv.RevokeTokens()
	_, err := ch.Send(ctx, pushMessage("tok"))
	wantError(t, err, channel.Transient, 401, "UNAUTHENTICATED")
	if _, err := ch.Send(ctx, pushMessage("tok")); err != nil {
		t.Fatalf("Send after refusal: %v", err)
	}
	if n := len(srv.TokenRequests()); n != 2 {
		t.Fatalf("%d token requests, want 2", n)
	}
}

func TestFCMTokenEndpointErrors(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewFCM(t)
	ch := newFCM(t, srv, 5*time.Second)
	ctx := context.Background()

	srv.QueueToken(channeltest.FCMAnswer{Status: 503, ErrorCode: "temporarily_unavailable", RetryAfter: "3"})
	_, err := ch.Send(ctx, pushMessage("tok"))
	if e := wantError(t, err, channel.Transient, 503, "temporarily_unavailable"); e.RetryAfter != 3*time.Second {
		t.Fatalf("retryAfter %v", e.RetryAfter)
	}
	srv.QueueToken(channeltest.FCMAnswer{Status: 401, ErrorCode: "invalid_client"})
	_, err = ch.Send(ctx, pushMessage("tok"))
	wantError(t, err, channel.Permanent, 401, "invalid_client")
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d send requests without a token", n)
	}
	// The endpoint recovers: the failed fetches cached nothing.
	if _, err := ch.Send(ctx, pushMessage("tok")); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

// Credentials signed with a key the token endpoint does not know are refused
// (invalid_grant): permanent, nothing sent.
func TestFCMWrongKeyIsPermanent(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewFCM(t)
	other := channeltest.NewFCM(t)
	var creds map[string]string
	if err := json.Unmarshal(other.Credentials, &creds); err != nil {
		t.Fatal(err)
	}
	creds["token_uri"], creds["client_email"], creds["private_key_id"] = srv.TokenURL, srv.ClientEmail, srv.KeyID
	raw, _ := json.Marshal(creds)
	ch, err := channel.NewFCM(channel.FCMConfig{CredentialsJSON: raw, BaseURL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.Send(context.Background(), pushMessage("tok"))
	wantError(t, err, channel.Permanent, 400, "invalid_grant")
	toks := srv.TokenRequests()
	if len(toks) != 1 || !strings.Contains(toks[0].Err, "signature") {
		t.Fatalf("token requests %+v", toks)
	}
	if len(srv.Requests()) != 0 {
		t.Fatal("sent without a token")
	}
}

func TestFCMTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("send", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.NewFCM(t)
		ch := newFCM(t, srv, 300*time.Millisecond)
		srv.Queue(channeltest.FCMAnswer{Hang: true})
		start := time.Now()
		_, err := ch.Send(context.Background(), pushMessage("tok"))
		wantError(t, err, channel.Transient, 0, "")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("Send took %v with a 300ms timeout", d)
		}
		if !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("error %v", err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Fatalf("%d send requests", n)
		}
	})
	t.Run("token", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.NewFCM(t)
		ch := newFCM(t, srv, 300*time.Millisecond)
		srv.QueueToken(channeltest.FCMAnswer{Hang: true})
		_, err := ch.Send(context.Background(), pushMessage("tok"))
		wantError(t, err, channel.Transient, 0, "")
		if len(srv.Requests()) != 0 {
			t.Fatal("sent without a token")
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.NewFCM(t)
		ch := newFCM(t, srv, 0)
		srv.Queue(channeltest.FCMAnswer{Hang: true})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := ch.Send(ctx, pushMessage("tok"))
		wantError(t, err, channel.Transient, 0, "")
	})
}

func TestNewFCMRejectsBadCredentials(t *testing.T) {
	t.Parallel()
	for _, creds := range []string{``, `{"type":"authorized_user"}`, `{"type":"service_account","token_uri":"http://x/token"}`} {
		if _, err := channel.NewFCM(channel.FCMConfig{CredentialsJSON: []byte(creds)}); err == nil {
			t.Errorf("NewFCM(%s) accepted", creds)
		}
	}
}

// Concurrent Sends share one token fetch.
func TestFCMConcurrentSendsFetchOneToken(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewFCM(t)
	ch := newFCM(t, srv, 5*time.Second)
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := ch.Send(context.Background(), pushMessage(fmt.Sprintf("tok-%d", i)))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	if got := len(srv.TokenRequests()); got != 1 {
		t.Fatalf("%d token requests for %d concurrent sends, want 1", got, n)
	}
	if got := len(srv.Requests()); got != n {
		t.Fatalf("%d send requests, want %d", got, n)
	}
}
