package channel_test

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

const rawSecret = "tenant-secret-0123456789"

func hookMsg(url, secret string) channel.Message {
	return channel.Message{
		TenantID: "t1", UserID: "u1", NotificationID: "n1", Key: "WEBHOOK", Attempt: 1,
		IdempotencyKey: "dDEjbjEjV0VCSE9PSw", To: url, Secret: secret,
		Payload: []byte(`{"type":"notification.created","timestamp":"2026-01-02T03:04:05Z","data":{"id":"n1"}}`),
	}
}

func TestWebhookSignedDelivery(t *testing.T) {
	t.Parallel()
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	for name, secret := range map[string]string{"raw secret": rawSecret, "whsec secret": whsec} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			recv, url := channeltest.StartWebhook(t, secret)
			ch := channel.NewWebhook(channel.WebhookConfig{})
			if ch.Provider() != channel.ProviderWebhook {
				t.Fatalf("provider %q", ch.Provider())
			}
			m := hookMsg(url, secret)
			before := time.Now().Unix()
			res, err := ch.Send(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			if res.Provider != channel.ProviderWebhook || res.MessageID != m.IdempotencyKey {
				t.Fatalf("result %+v", res)
			}
			m.Attempt = 2
			if _, err := ch.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			reqs := recv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			for _, r := range reqs {
				if r.VerifyErr != nil {
					t.Fatalf("signature refused by the library: %v", r.VerifyErr)
				}
				if r.Method != http.MethodPost || string(r.Body) != string(m.Payload) {
					t.Fatalf("%s body %q", r.Method, r.Body)
				}
				h := r.Header
				if h.Get("webhook-id") != m.IdempotencyKey || h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "inbox-gateway-webhooks" {
					t.Fatalf("headers %v", h)
				}
				if ts, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64); ts < before || ts > time.Now().Unix() {
					t.Fatalf("webhook-timestamp %q", h.Get("webhook-timestamp"))
				}
				if !strings.HasPrefix(h.Get("webhook-signature"), "v1,") {
					t.Fatalf("webhook-signature %q", h.Get("webhook-signature"))
				}
			}
			// the same key on every attempt (the receiver's dedupe key)
			if reqs[0].Header.Get("webhook-id") != reqs[1].Header.Get("webhook-id") {
				t.Fatal("webhook-id differs between attempts")
			}
		})
	}
}

func TestWebhookSignatureIsTheLibrarys(t *testing.T) {
	t.Parallel()
	// a receiver keyed with another secret refuses (401): a permanent failure
	recv, url := channeltest.StartWebhook(t, "another-secret-0123456789")
	_, err := channel.NewWebhook(channel.WebhookConfig{}).Send(context.Background(), hookMsg(url, rawSecret))
	wantErr(t, err, channel.Permanent, 401, "")
	reqs := recv.Requests()
	if len(reqs) != 1 || reqs[0].VerifyErr == nil {
		t.Fatalf("requests %+v", reqs)
	}
	// and the signature header checks out with the library's own raw-key verifier
	wh, _ := standardwebhooks.NewWebhookRaw([]byte(rawSecret))
	if err := wh.Verify(reqs[0].Body, reqs[0].Header); err != nil {
		t.Fatalf("library Verify: %v", err)
	}
}

func TestWebhookAnswers(t *testing.T) {
	t.Parallel()
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name   string
		resp   channeltest.WebhookResponse
		kind   channel.Kind
		code   string
		after  time.Duration // want RetryAfter within [after-2s, after]
		status int
	}{
		{"201 ok", channeltest.WebhookResponse{Status: 201}, -1, "", 0, 201},
		{"204 ok", channeltest.WebhookResponse{Status: 204}, -1, "", 0, 204},
		{"400", channeltest.WebhookResponse{Status: 400, Body: "bad payload"}, channel.Permanent, "", 0, 400},
		{"404", channeltest.WebhookResponse{Status: 404}, channel.Permanent, "", 0, 404},
		{"410 gone", channeltest.WebhookResponse{Status: 410}, channel.Permanent, "gone", 0, 410},
		{"301 not followed", channeltest.WebhookResponse{Status: 301}, channel.Permanent, "", 0, 301},
		{"408", channeltest.WebhookResponse{Status: 408}, channel.Transient, "", 0, 408},
		{"429 retry-after seconds", channeltest.WebhookResponse{Status: 429, RetryAfter: "7"}, channel.Transient, "", 7 * time.Second, 429},
		{"429 without retry-after", channeltest.WebhookResponse{Status: 429}, channel.Transient, "", 0, 429},
		{"500", channeltest.WebhookResponse{Status: 500}, channel.Transient, "", 0, 500},
		{"503 retry-after date", channeltest.WebhookResponse{Status: 503, RetryAfter: date}, channel.Transient, "", 90 * time.Second, 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			recv, url := channeltest.StartWebhook(t, rawSecret)
			recv.Respond(c.resp)
			_, err := channel.NewWebhook(channel.WebhookConfig{}).Send(context.Background(), hookMsg(url, rawSecret))
			if c.kind < 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			e := wantErr(t, err, c.kind, c.status, c.code)
			if e.RetryAfter > c.after || e.RetryAfter < c.after-2*time.Second {
				t.Fatalf("RetryAfter %v, want about %v", e.RetryAfter, c.after)
			}
			if _, ra := channel.Classify(err); ra != e.RetryAfter {
				t.Fatalf("Classify RetryAfter %v", ra)
			}
			if c.resp.Body != "" && !strings.Contains(e.Error(), c.resp.Body) {
				t.Fatalf("error %q does not quote the body", e)
			}
		})
	}
}

func TestWebhookBoundedResponseRead(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		chunk := strings.Repeat("x", 1<<10)
		for range 10 << 10 { // 10 MiB unless the client stops reading
			if _, err := w.Write([]byte(chunk)); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	start := time.Now()
	_, err := channel.NewWebhook(channel.WebhookConfig{}).Send(context.Background(), hookMsg(srv.URL, rawSecret))
	e := wantErr(t, err, channel.Transient, 500, "")
	if n := len(e.Error()); n > 400 {
		t.Fatalf("error is %d bytes long", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestWebhookTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("receiver holds its answer", func(t *testing.T) {
		t.Parallel()
		recv, url := channeltest.StartWebhook(t, rawSecret)
		recv.Respond(channeltest.WebhookResponse{Hold: true})
		start := time.Now()
		_, err := channel.NewWebhook(channel.WebhookConfig{Timeout: 300 * time.Millisecond}).Send(context.Background(), hookMsg(url, rawSecret))
		wantErr(t, err, channel.Transient, 0, "timeout")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
		if reqs := recv.Requests(); len(reqs) != 1 || reqs[0].VerifyErr != nil {
			t.Fatalf("requests %+v", reqs)
		}
	})
	t.Run("ctx deadline", func(t *testing.T) {
		t.Parallel()
		silent := channeltest.StartSilent(t)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := channel.NewWebhook(channel.WebhookConfig{}).Send(ctx, hookMsg("http://"+silent.Addr()+"/hook", rawSecret))
		wantErr(t, err, channel.Transient, 0, "timeout")
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		_, err = channel.NewWebhook(channel.WebhookConfig{}).Send(context.Background(), hookMsg("http://"+addr+"/hook", rawSecret))
		wantErr(t, err, channel.Transient, 0, "")
	})
}

func TestWebhookRefusesBadMessages(t *testing.T) {
	t.Parallel()
	recv, url := channeltest.StartWebhook(t, rawSecret)
	ch := channel.NewWebhook(channel.WebhookConfig{})
	noKey := hookMsg(url, rawSecret)
	noKey.IdempotencyKey = ""
	cases := map[string]struct {
		m    channel.Message
		code string
	}{
		"ftp url":       {hookMsg("ftp://example.com/x", rawSecret), "url"},
		"no url":        {hookMsg("", rawSecret), "url"},
		"no secret":     {hookMsg(url, ""), "secret"},
		"bad whsec":     {hookMsg(url, "whsec_***"), "secret"},
		"no idempotent": {noKey, "message"},
	}
	for name, c := range cases {
		_, err := ch.Send(context.Background(), c.m)
		t.Run(name, func(t *testing.T) { wantErr(t, err, channel.Permanent, 0, c.code) })
	}
	if n := len(recv.Requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":          0,
		"0":         0,
		"-5":        0,
		"12":        12 * time.Second,
		" 3 ":       3 * time.Second,
		"999999999": 24 * time.Hour,
		"soon":      0,
		now.Add(time.Minute).Format(http.TimeFormat):    time.Minute,
		now.Add(-time.Minute).Format(http.TimeFormat):   0,
		now.Add(48 * time.Hour).Format(http.TimeFormat): 24 * time.Hour,
	} {
		if got := channel.RetryAfter(v, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
