package app

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/smtpcatch"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/telemetry"
	"github.com/inboxgw/gateway/unsub"
)

// Bounds of the delivery settings.
const (
	// MaxRate bounds INBOX_RATE_* (sends per second per instance).
	MaxRate = 1e6
	// MaxDeliveryAttempts bounds INBOX_DELIVERY_ATTEMPTS.
	MaxDeliveryAttempts = 100
	// devEmailFrom is the sender of dev mode's mail when INBOX_EMAIL_FROM is unset.
	devEmailFrom = "Inbox Gateway <inbox@localhost>"
	// DevMailPath is where dev mode serves the mail its SMTP catcher received.
	DevMailPath = "/dev/mail"
	// TwilioCallbackPath is where Twilio's status callbacks come (under INBOX_PUBLIC_URL).
	TwilioCallbackPath = "/v1/webhooks/provider/twilio"
)

// ChannelConfigs are the settings of channels that bring their own (a struct per
// channel, embedded in Config: its variables are Config's). Each field's env tag names
// its variable and its help tag describes it in the usage.
type ChannelConfigs struct {
	// Slack (DESIGN.md "Slack (v3)").
	Slack SlackSettings
}

// SlackSettings configure the Slack channel: direct messages from a bot.
type SlackSettings struct {
	// BotToken is the bot token ("xoxb-…": chat.postMessage to the recipient's
	// slackUserId); unset, Slack has no provider.
	BotToken string `env:"INBOX_SLACK_BOT_TOKEN" help:"Slack (direct messages): the bot token, xoxb-... with chat:write (unset: no Slack)"`
	// URL is the Web API's base URL.
	URL string `env:"INBOX_SLACK_URL" envDefault:"https://slack.com/api" help:"Slack Web API base URL"`
	// Rate: chat.postMessage allows about one message a second per conversation and
	// bursts across conversations; this bounds the bot's sends.
	Rate float64 `env:"INBOX_RATE_SLACK" envDefault:"20" help:"Slack sends per second per instance"`
}

// checkChannels checks the channel settings (see README "Channels"): each provider is
// either fully configured or not at all, URLs are http(s), bounds hold.
func (c *Config) checkChannels() error {
	if c.SMTPURL != "" {
		u, err := url.Parse(c.SMTPURL)
		if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
			return fmt.Errorf("configuration: INBOX_SMTP_URL must be smtp://[user:pass@]host[:port] or smtps://..., not %q", redactURL(c.SMTPURL))
		}
		if c.EmailFrom == "" {
			return fmt.Errorf("configuration: INBOX_EMAIL_FROM is required with INBOX_SMTP_URL")
		}
	}
	if c.EmailFrom != "" {
		if _, err := mail.ParseAddress(c.EmailFrom); err != nil {
			return fmt.Errorf("configuration: INBOX_EMAIL_FROM: %w", err)
		}
	}
	if c.Dev && c.SMTPURL == "" {
		if _, _, err := net.SplitHostPort(c.DevSMTPAddr); err != nil {
			return fmt.Errorf("configuration: INBOX_DEV_SMTP_ADDR: %w", err)
		}
	}
	for _, u := range []struct{ name, v string }{
		{"INBOX_FCM_URL", c.FCMURL}, {"INBOX_APNS_URL", c.APNsURL}, {"INBOX_TWILIO_URL", c.TwilioURL}, {"INBOX_SLACK_URL", c.Slack.URL}, {"INBOX_PUBLIC_URL", c.PublicURL},
	} {
		if u.v == "" && u.name == "INBOX_PUBLIC_URL" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.RawQuery != "" || p.Fragment != "" {
			return fmt.Errorf("configuration: %s must be an http(s) URL without query, not %q", u.name, redactURL(u.v))
		}
	}
	c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	if c.UnsubscribeSecret != "" && len(c.UnsubscribeSecret) < unsub.MinSecretBytes {
		return fmt.Errorf("configuration: INBOX_UNSUBSCRIBE_SECRET must be at least %d bytes", unsub.MinSecretBytes)
	}
	apns := []string{c.APNsKey, c.APNsKeyID, c.APNsTeamID, c.APNsTopic}
	if set := countSet(apns...); set != 0 && set != len(apns) {
		return fmt.Errorf("configuration: APNs needs INBOX_APNS_KEY, INBOX_APNS_KEY_ID, INBOX_APNS_TEAM_ID and INBOX_APNS_TOPIC together")
	}
	if set := countSet(c.TwilioAccountSID, c.TwilioFrom); set != 0 && (set != 2 || c.TwilioAuthToken == "") {
		return fmt.Errorf("configuration: Twilio needs INBOX_TWILIO_ACCOUNT_SID, INBOX_TWILIO_AUTH_TOKEN and INBOX_TWILIO_FROM together")
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"INBOX_RATE_EMAIL", c.RateEmail}, {"INBOX_RATE_PUSH", c.RatePush}, {"INBOX_RATE_SMS", c.RateSMS}, {"INBOX_RATE_WEBHOOK", c.RateWebhook}, {"INBOX_RATE_SLACK", c.Slack.Rate}} {
		if !(r.v > 0 && r.v <= MaxRate) || math.IsNaN(r.v) {
			return fmt.Errorf("configuration: %s must be above 0 and at most %g sends a second, not %g", r.name, float64(MaxRate), r.v)
		}
	}
	if c.DeliveryAttempts < 1 || c.DeliveryAttempts > MaxDeliveryAttempts {
		return fmt.Errorf("configuration: INBOX_DELIVERY_ATTEMPTS must be between 1 and %d, not %d", MaxDeliveryAttempts, c.DeliveryAttempts)
	}
	return checkDurations([]durationBound{
		{"INBOX_DELIVERY_BACKOFF", c.DeliveryBackoff, 10 * time.Millisecond, 24 * time.Hour},
		{"INBOX_DELIVERY_TIMEOUT", c.DeliveryTimeout, 100 * time.Millisecond, 5 * time.Minute},
		{"INBOX_CALLBACK_MAX_AGE", c.CallbackMaxAge, 10 * time.Second, 24 * time.Hour},
	})
}

// countSet counts the non-empty values.
func countSet(vs ...string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}

// burst is a rate limit's burst: one second's sends, at least 1.
func burst(perSecond float64) int { return max(1, int(math.Ceil(perSecond))) }

// deliveryChannels builds the provider adapters cfg configures, each behind its rate
// limit. In dev mode without INBOX_SMTP_URL, email goes to devSMTP (the catcher's
// address; "" leaves email off). Files named by cfg (FCM credentials, APNs key) are read
// here: an unreadable or invalid one is an error naming its variable.
func deliveryChannels(cfg Config, devSMTP string, tr *telemetry.Tracing) (*channel.Registry, error) {
	chs := channel.NewRegistry()
	// Each provider request inside a task's trace is a client span (telemetry.Transport).
	client := &http.Client{Transport: telemetry.Transport(tr, http.DefaultTransport.(*http.Transport).Clone())}
	smtpURL, from := cfg.SMTPURL, cfg.EmailFrom
	if smtpURL == "" && devSMTP != "" {
		smtpURL = "smtp://" + devSMTP
		if from == "" {
			from = devEmailFrom
		}
	}
	if smtpURL != "" {
		email, err := channel.NewEmail(channel.EmailConfig{URL: smtpURL, From: from, SendGrid: cfg.SMTPSendGrid, Timeout: cfg.DeliveryTimeout})
		if err != nil {
			return nil, fmt.Errorf("INBOX_SMTP_URL: %w", err)
		}
		chs.Register(inbox.ChannelEmail, "", channel.Limit(email, cfg.RateEmail, burst(cfg.RateEmail)))
	}
	// The webhook adapter's own client: it never follows a redirect (a tenant's URL
	// answering 3xx is not a way to reach another host), and outside dev mode it
	// connects to public addresses only unless INBOX_WEBHOOK_ALLOW_PRIVATE (a tenant's URL
	// is no way to the gateway's own host or network either).
	chs.Register(inbox.ChannelWebhook, "", channel.Limit(channel.NewWebhook(channel.WebhookConfig{Timeout: cfg.DeliveryTimeout,
		PublicOnly:    !cfg.Dev && !cfg.WebhookAllowPrivate,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return telemetry.Transport(tr, rt) }}),
		cfg.RateWebhook, burst(cfg.RateWebhook)))
	if cfg.FCMCredentials != "" {
		js, err := os.ReadFile(cfg.FCMCredentials)
		if err != nil {
			return nil, fmt.Errorf("INBOX_FCM_CREDENTIALS: %w", err)
		}
		fcm, err := channel.NewFCM(channel.FCMConfig{CredentialsJSON: js, BaseURL: cfg.FCMURL, Client: client, Timeout: cfg.DeliveryTimeout})
		if err != nil {
			return nil, fmt.Errorf("INBOX_FCM_CREDENTIALS: %w", err)
		}
		chs.Register(inbox.ChannelPush, inbox.PlatformFCM, channel.Limit(fcm, cfg.RatePush, burst(cfg.RatePush)))
	}
	if cfg.APNsKey != "" {
		pem, err := os.ReadFile(cfg.APNsKey)
		if err != nil {
			return nil, fmt.Errorf("INBOX_APNS_KEY: %w", err)
		}
		// APNs needs HTTP/2: apns2's own client.
		apns, err := channel.NewAPNs(channel.APNsConfig{KeyPEM: pem, KeyID: cfg.APNsKeyID, TeamID: cfg.APNsTeamID,
			Topic: cfg.APNsTopic, BaseURL: cfg.APNsURL, Timeout: cfg.DeliveryTimeout})
		if err != nil {
			return nil, fmt.Errorf("INBOX_APNS_KEY: %w", err)
		}
		chs.Register(inbox.ChannelPush, inbox.PlatformAPNs, channel.Limit(apns, cfg.RatePush, burst(cfg.RatePush)))
	}
	if cfg.TwilioAccountSID != "" {
		callbacks := ""
		if cfg.PublicURL != "" {
			callbacks = cfg.PublicURL + TwilioCallbackPath
		}
		tw, err := channel.NewTwilio(channel.TwilioConfig{AccountSID: cfg.TwilioAccountSID, AuthToken: cfg.TwilioAuthToken,
			From: cfg.TwilioFrom, BaseURL: cfg.TwilioURL, StatusCallbackBase: callbacks, Client: client, Timeout: cfg.DeliveryTimeout})
		if err != nil {
			return nil, fmt.Errorf("INBOX_TWILIO_*: %w", err)
		}
		chs.Register(inbox.ChannelSMS, "", channel.Limit(tw, cfg.RateSMS, burst(cfg.RateSMS)))
	}
	if sc := cfg.Slack; sc.BotToken != "" {
		sl, err := channel.NewSlack(channel.SlackConfig{BotToken: sc.BotToken, BaseURL: sc.URL, Client: client, Timeout: cfg.DeliveryTimeout})
		if err != nil {
			return nil, fmt.Errorf("INBOX_SLACK_*: %w", err)
		}
		chs.Register(inbox.ChannelSlack, "", channel.Limit(sl, sc.Rate, burst(sc.Rate)))
	}
	return chs, nil
}

// devMail is dev mode's SMTP catcher: the mail the gateway sent, served at DevMailPath.
type devMail struct {
	catcher *smtpcatch.Catcher
	addr    string
	// sends lists the recent sends' channels beside the mail (nil: none).
	sends smtpcatch.Sends
}

// startDevMail starts the catcher when cfg is in dev mode without INBOX_SMTP_URL (nil
// otherwise).
func startDevMail(cfg Config, log *slog.Logger) (*devMail, error) {
	if !cfg.Dev || cfg.SMTPURL != "" {
		return nil, nil
	}
	c := smtpcatch.New(smtpcatch.Config{})
	if err := c.Listen(cfg.DevSMTPAddr); err != nil {
		return nil, fmt.Errorf("dev mail catcher on INBOX_DEV_SMTP_ADDR %s (set INBOX_DEV_SMTP_ADDR to a free address or INBOX_SMTP_URL to a server): %w", cfg.DevSMTPAddr, err)
	}
	return &devMail{catcher: c, addr: c.Addr()}, nil
}

// close stops the catcher (nil: nothing).
func (d *devMail) close() {
	if d != nil {
		_ = d.catcher.Close()
	}
}

// smtpAddr is the catcher's address ("" for nil).
func (d *devMail) smtpAddr() string {
	if d == nil {
		return ""
	}
	return d.addr
}

// with serves the catcher's mail at DevMailPath beside h (h alone for nil).
func (d *devMail) with(h http.Handler) http.Handler {
	if d == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle(DevMailPath, telemetry.Routed(d.catcher.Handler(d.sends)))
	mux.Handle(DevMailPath+"/", telemetry.Routed(d.catcher.Handler(d.sends)))
	mux.Handle("/", h)
	return mux
}

// logChannels logs which channels have a provider (the others' records are SKIPPED
// no_provider).
func logChannels(log *slog.Logger, cfg Config, chs *channel.Registry) {
	args := []any{"attempts", cfg.DeliveryAttempts, "timeout", cfg.DeliveryTimeout}
	for _, r := range chs.Routes() {
		name := strings.ToLower(r.Channel)
		if r.Platform != "" {
			name += "." + r.Platform
		}
		args = append(args, name, r.Adapter.Provider())
	}
	log.Info("deliveries: channel providers (channels not named have none)", args...)
}
