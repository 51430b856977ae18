package channel_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

func newSlack(t *testing.T, srv *channeltest.Slack, mut func(*channel.SlackConfig)) channel.Channel {
	t.Helper()
	cfg := channel.SlackConfig{BotToken: srv.Token, BaseURL: srv.URL, Timeout: 5 * time.Second}
	if mut != nil {
		mut(&cfg)
	}
	ch, err := channel.NewSlack(cfg)
	if err != nil {
		t.Fatalf("NewSlack: %v", err)
	}
	return ch
}

func slackMessage(to string) channel.Message {
	return channel.Message{TenantID: "t1", UserID: "u1", NotificationID: "n1", Key: "SLACK", Attempt: 1,
		IdempotencyKey: "t1/n1/SLACK", To: to, Text: "*Build finished*\nmain is green"}
}

// One POST /chat.postMessage: the bearer token, JSON {channel, text}; the message id is
// channel:ts of Slack's answer.
func TestSlackSendSuccess(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewSlack(t)
	ch := newSlack(t, srv, nil)
	if ch.Provider() != channel.ProviderSlack {
		t.Fatalf("Provider() = %q", ch.Provider())
	}
	res, err := ch.Send(context.Background(), slackMessage("U024BE7LH"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if !r.OK || res.Provider != channel.ProviderSlack || res.MessageID != r.PostedChannel+":"+r.PostedTS {
		t.Fatalf("result %+v, server answered %+v", res, r)
	}
	if r.Token != srv.Token || r.Header.Get("Authorization") != "Bearer "+srv.Token ||
		r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("headers %v", r.Header)
	}
	if r.Channel != "U024BE7LH" || r.Text != "*Build finished*\nmain is green" {
		t.Fatalf("channel %q text %q", r.Channel, r.Text)
	}
}

// Every error class Slack documents, as the adapter classifies it: transient (retry,
// with Slack's Retry-After), permanent, and permanent because the gateway's token is
// unusable (Config).
func TestSlackDocumentedErrors(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewSlack(t)
	ch := newSlack(t, srv, nil)
	for _, tc := range []struct {
		answer     channeltest.SlackAnswer
		kind       channel.Kind
		status     int
		code       string
		config     bool
		retryAfter time.Duration
	}{
		{channeltest.SlackRateLimited(30), channel.Transient, 429, "ratelimited", false, 30 * time.Second},
		{channeltest.SlackAnswer{Error: "ratelimited"}, channel.Transient, 200, "ratelimited", false, 0},
		{channeltest.SlackAnswer{Status: 429}, channel.Transient, 429, "", false, 0},
		{channeltest.SlackAnswer{Status: 500}, channel.Transient, 500, "", false, 0},
		{channeltest.SlackAnswer{Status: 503, RetryAfter: "4"}, channel.Transient, 503, "", false, 4 * time.Second},
		{channeltest.SlackAnswer{Error: "internal_error"}, channel.Transient, 200, "internal_error", false, 0},
		{channeltest.SlackAnswer{Error: "service_unavailable"}, channel.Transient, 200, "service_unavailable", false, 0},
		{channeltest.SlackAnswer{Error: "request_timeout"}, channel.Transient, 200, "request_timeout", false, 0},
		{channeltest.SlackAnswer{Error: "fatal_error"}, channel.Transient, 200, "fatal_error", false, 0},
		{channeltest.SlackAnswer{Error: "channel_not_found"}, channel.Permanent, 200, "channel_not_found", false, 0},
		{channeltest.SlackAnswer{Error: "user_not_found"}, channel.Permanent, 200, "user_not_found", false, 0},
		{channeltest.SlackAnswer{Error: "is_archived"}, channel.Permanent, 200, "is_archived", false, 0},
		{channeltest.SlackAnswer{Error: "msg_too_long"}, channel.Permanent, 200, "msg_too_long", false, 0},
		{channeltest.SlackAnswer{Error: "no_text"}, channel.Permanent, 200, "no_text", false, 0},
		{channeltest.SlackAnswer{Error: "invalid_blocks"}, channel.Permanent, 200, "invalid_blocks", false, 0},
		{channeltest.SlackAnswer{Error: "invalid_auth"}, channel.Permanent, 200, "invalid_auth", true, 0},
		{channeltest.SlackAnswer{Error: "not_authed"}, channel.Permanent, 200, "not_authed", true, 0},
		{channeltest.SlackAnswer{Error: "token_revoked"}, channel.Permanent, 200, "token_revoked", true, 0},
		{channeltest.SlackAnswer{Error: "account_inactive"}, channel.Permanent, 200, "account_inactive", true, 0},
		{channeltest.SlackAnswer{Status: 401}, channel.Permanent, 401, "", true, 0},
		// A 200 without the Web API's JSON (a proxy's page): not known to be posted.
		{channeltest.SlackAnswer{Body: "<html>captive portal</html>"}, channel.Transient, 200, "", false, 0},
	} {
		t.Run(tc.code+"/"+statusName(tc.status), func(t *testing.T) {
			srv.Queue(tc.answer)
			_, err := ch.Send(context.Background(), slackMessage("U024BE7LH"))
			e := wantError(t, err, tc.kind, tc.status, tc.code)
			if e.Provider != channel.ProviderSlack || e.Config != tc.config || e.RetryAfter != tc.retryAfter {
				t.Fatalf("error %v: provider %q config %v retryAfter %v", e, e.Provider, e.Config, e.RetryAfter)
			}
		})
	}
}

func statusName(status int) string { return strconv.Itoa(status) }

// The server's own checks, through the adapter: a wrong or revoked token is a
// configuration error, a user that does not exist or no address is permanent, and
// nothing is posted for a message without an address.
func TestSlackServerChecks(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewSlack(t)
	srv.Users = map[string]bool{"U024BE7LH": true}
	ch := newSlack(t, srv, nil)
	_, err := ch.Send(context.Background(), slackMessage("U0NOBODY"))
	wantError(t, err, channel.Permanent, 200, "user_not_found")
	_, err = ch.Send(context.Background(), slackMessage(""))
	wantError(t, err, channel.Permanent, 0, "channel_not_found")
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests; a message without a Slack user id must not be posted", n)
	}
	wrong := newSlack(t, srv, func(c *channel.SlackConfig) { c.BotToken = "xoxb-not-the-token" })
	_, err = wrong.Send(context.Background(), slackMessage("U024BE7LH"))
	if e := wantError(t, err, channel.Permanent, 200, "invalid_auth"); !e.Config {
		t.Fatalf("a wrong token is a configuration error: %v", e)
	}
	srv.Revoke()
	_, err = ch.Send(context.Background(), slackMessage("U024BE7LH"))
	if e := wantError(t, err, channel.Permanent, 200, "token_revoked"); !e.Config {
		t.Fatalf("a revoked token is a configuration error: %v", e)
	}
}

// A provider that never answers costs at most the adapter's timeout, and is transient.
func TestSlackTimeout(t *testing.T) {
	t.Parallel()
	srv := channeltest.NewSlack(t)
	ch := newSlack(t, srv, func(c *channel.SlackConfig) { c.Timeout = 300 * time.Millisecond })
	srv.Queue(channeltest.SlackAnswer{Hang: true})
	_, err := ch.Send(context.Background(), slackMessage("U024BE7LH"))
	if e := wantError(t, err, channel.Transient, 0, ""); !strings.Contains(e.Error(), "timed out") {
		t.Fatalf("error %v", e)
	}
}

func TestNewSlackRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]channel.SlackConfig{
		"no token":       {BaseURL: "https://slack.com/api"},
		"relative base":  {BotToken: "xoxb-1", BaseURL: "slack.com/api"},
		"not http(s)":    {BotToken: "xoxb-1", BaseURL: "ftp://slack.com/api"},
		"no host at all": {BotToken: "xoxb-1", BaseURL: "https://"},
		// A token no request can carry (every send would fail as a transport error,
		// retried, never counted as the configuration's) or that is never Slack's.
		"line break":        {BotToken: "xoxb-secret-1\n"},
		"CRLF":              {BotToken: "xoxb-secret-1\r\n"},
		"leading space":     {BotToken: " xoxb-secret-1"},
		"inner space":       {BotToken: "xoxb-secret 1"},
		"NUL":               {BotToken: "xoxb-secret-1\x00"},
		"tab":               {BotToken: "xoxb-secret-1\t"},
		"non-ASCII":         {BotToken: "xoxb-sеcret-1"},
		"quoted in the env": {BotToken: "\"xoxb-secret-1\"\u00a0"},
	} {
		_, err := channel.NewSlack(cfg)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the token: %v", name, err)
		}
	}
}
