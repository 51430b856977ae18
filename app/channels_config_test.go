package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/inbox"
)

// The channel settings of issue 11 have their defaults, and each bad value or partial
// provider configuration is refused naming its variable.
func TestChannelConfigDefaultsAndBounds(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.DeliveryAttempts != delivery.DefaultAttempts || cfg.DeliveryBackoff != delivery.DefaultBackoff || cfg.DeliveryTimeout != delivery.DefaultTimeout ||
		cfg.RateEmail != 100 || cfg.RatePush != 500 || cfg.RateSMS != 10 || cfg.RateWebhook != 100 || cfg.CallbackMaxAge != 10*time.Minute ||
		cfg.DevSMTPAddr != "127.0.0.1:1025" || cfg.FCMURL != "https://fcm.googleapis.com" || cfg.APNsURL != "https://api.push.apple.com" ||
		cfg.TwilioURL != "https://api.twilio.com" || cfg.SMTPURL != "" || cfg.Slack.URL != "https://slack.com/api" || cfg.Slack.Rate != 20 ||
		cfg.Slack.BotToken != "" {
		t.Errorf("defaults = %+v", cfg)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"INBOX_SMTP_URL": "http://mail.example.com"}, "INBOX_SMTP_URL"},
		{map[string]string{"INBOX_SMTP_URL": "smtp://"}, "INBOX_SMTP_URL"},
		{map[string]string{"INBOX_SMTP_URL": "smtp://mail.example.com:587"}, "INBOX_EMAIL_FROM"},
		{map[string]string{"INBOX_EMAIL_FROM": "not an address"}, "INBOX_EMAIL_FROM"},
		{map[string]string{"INBOX_DEV": "1", "INBOX_DEV_SMTP_ADDR": "nowhere"}, "INBOX_DEV_SMTP_ADDR"},
		{map[string]string{"INBOX_FCM_URL": "ftp://fcm.example"}, "INBOX_FCM_URL"},
		{map[string]string{"INBOX_APNS_URL": "https://api.push.apple.com?x=1"}, "INBOX_APNS_URL"},
		{map[string]string{"INBOX_PUBLIC_URL": "inbox.example.com"}, "INBOX_PUBLIC_URL"},
		{map[string]string{"INBOX_APNS_KEY": "key.p8", "INBOX_APNS_KEY_ID": "K"}, "INBOX_APNS_TEAM_ID"},
		{map[string]string{"INBOX_TWILIO_ACCOUNT_SID": "AC1", "INBOX_TWILIO_FROM": "+15550001111"}, "INBOX_TWILIO_AUTH_TOKEN"},
		{map[string]string{"INBOX_TWILIO_ACCOUNT_SID": "AC1", "INBOX_TWILIO_AUTH_TOKEN": "tok"}, "INBOX_TWILIO_FROM"},
		{map[string]string{"INBOX_RATE_EMAIL": "0"}, "INBOX_RATE_EMAIL"},
		{map[string]string{"INBOX_RATE_SMS": "NaN"}, "INBOX_RATE_SMS"},
		{map[string]string{"INBOX_RATE_PUSH": "2e6"}, "INBOX_RATE_PUSH"},
		{map[string]string{"INBOX_RATE_SLACK": "-1"}, "INBOX_RATE_SLACK"},
		{map[string]string{"INBOX_SLACK_URL": "slack.com/api"}, "INBOX_SLACK_URL"},
		{map[string]string{"INBOX_DELIVERY_ATTEMPTS": "0"}, "INBOX_DELIVERY_ATTEMPTS"},
		{map[string]string{"INBOX_DELIVERY_ATTEMPTS": "101"}, "INBOX_DELIVERY_ATTEMPTS"},
		{map[string]string{"INBOX_DELIVERY_BACKOFF": "1ms"}, "INBOX_DELIVERY_BACKOFF"},
		{map[string]string{"INBOX_DELIVERY_TIMEOUT": "10m"}, "INBOX_DELIVERY_TIMEOUT"},
		{map[string]string{"INBOX_CALLBACK_MAX_AGE": "1s"}, "INBOX_CALLBACK_MAX_AGE"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: err = %v, want one naming %s", tc.env, err, tc.want)
			}
		})
	}
	t.Setenv("INBOX_PUBLIC_URL", "https://inbox.example.com/")
	t.Setenv("INBOX_SMTP_URL", "smtps://user:pass@mail.example.com")
	t.Setenv("INBOX_EMAIL_FROM", "Acme <no-reply@acme.example>")
	cfg, err = LoadConfig()
	if err != nil || cfg.PublicURL != "https://inbox.example.com" {
		t.Fatalf("a full email configuration: %v, public URL %q", err, cfg.PublicURL)
	}
}

// deliveryChannels builds what the configuration names: email (to the dev catcher's
// address in dev mode) and the webhook always, FCM, APNs and Twilio only when configured;
// an unreadable key file is an error naming its variable.
func TestDeliveryChannelsFromConfig(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	chs, err := deliveryChannels(cfg, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs := chs.Routes(); len(rs) != 1 || rs[0].Channel != inbox.ChannelWebhook || rs[0].Adapter.Provider() != channel.ProviderWebhook {
		t.Fatalf("the default configuration built %+v, want the webhook only", rs)
	}
	chs, err = deliveryChannels(cfg, "127.0.0.1:1025", nil)
	if err != nil || chs.Lookup(inbox.ChannelEmail, "") == nil || chs.Lookup(inbox.ChannelEmail, "").Provider() != channel.ProviderSMTP {
		t.Fatalf("dev mode's catcher: %+v, %v", chs, err)
	}

	twilio := cfg
	twilio.TwilioAccountSID, twilio.TwilioAuthToken, twilio.TwilioFrom = "AC123", "token", "+15550001111"
	if chs, err = deliveryChannels(twilio, "", nil); err != nil || chs.Lookup(inbox.ChannelSMS, "") == nil || chs.Lookup(inbox.ChannelSMS, "").Provider() != channel.ProviderTwilio {
		t.Fatalf("Twilio: %+v, %v", chs, err)
	}

	slack := cfg
	slack.Slack.BotToken = "xoxb-1-2-3"
	if chs, err = deliveryChannels(slack, "", nil); err != nil || chs.Lookup(inbox.ChannelSlack, "") == nil || chs.Lookup(inbox.ChannelSlack, "").Provider() != channel.ProviderSlack {
		t.Fatalf("Slack: %+v, %v", chs, err)
	}

	missing := cfg
	missing.FCMCredentials = filepath.Join(t.TempDir(), "absent.json")
	if _, err := deliveryChannels(missing, "", nil); err == nil || !strings.Contains(err.Error(), "INBOX_FCM_CREDENTIALS") {
		t.Fatalf("a missing FCM key file: %v", err)
	}
	bad := cfg
	bad.APNsKey = filepath.Join(t.TempDir(), "key.p8")
	if err := os.WriteFile(bad.APNsKey, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad.APNsKeyID, bad.APNsTeamID, bad.APNsTopic = "K", "T", "com.example.app"
	if _, err := deliveryChannels(bad, "", nil); err == nil || !strings.Contains(err.Error(), "INBOX_APNS_KEY") {
		t.Fatalf("an invalid APNs key: %v", err)
	}
}

// Dev mode without INBOX_SMTP_URL starts the catcher and serves what it caught at
// /dev/mail beside the gateway's handler; outside dev mode there is none.
func TestDevMailCatcher(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if d, err := startDevMail(cfg, log); err != nil || d != nil {
		t.Fatalf("outside dev mode: %v, %v", d, err)
	}
	cfg.Dev, cfg.DevSMTPAddr = true, "127.0.0.1:0"
	d, err := startDevMail(cfg, log)
	if err != nil || d == nil {
		t.Fatalf("dev mode: %v, %v", d, err)
	}
	defer d.close()
	chs, err := deliveryChannels(cfg, d.smtpAddr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := chs.Lookup(inbox.ChannelEmail, "").Send(ctx, channel.Message{TenantID: "t", NotificationID: "n", Key: "EMAIL", Attempt: 1,
		IdempotencyKey: "k1", To: "dev@example.com", Subject: "Dev hello", Text: "caught"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.with(http.NotFoundHandler()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + DevMailPath + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Dev hello") || !strings.Contains(string(body), "dev@example.com") {
		t.Fatalf("GET %s: %d %s", DevMailPath, resp.StatusCode, body)
	}
	if resp, err := http.Get(srv.URL + "/other"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("other paths go to the gateway's handler: %v %v", resp, err)
	}
}
