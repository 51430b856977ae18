package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultSlackURL is the Slack Web API's base URL.
const DefaultSlackURL = "https://slack.com/api"

// SlackConfig configures NewSlack.
type SlackConfig struct {
	// BotToken is the bot token ("xoxb-…") sent as Authorization: Bearer.
	BotToken string
	// BaseURL is the Web API's base URL; "" means DefaultSlackURL.
	BaseURL string
	// Client makes the requests; nil means a new http.Client.
	Client *http.Client
	// Timeout bounds one Send when > 0; ctx's deadline applies as well.
	Timeout time.Duration
	// Now is the clock a Retry-After date is read against; nil means time.Now.
	Now func() time.Time
}

// NewSlack returns the Slack adapter: one POST {BaseURL}/chat.postMessage per Send with
// Authorization: Bearer BotToken and the JSON {"channel": Message.To (the recipient's
// Slack user id: the message goes to their direct messages with the bot), "text":
// Message.Text (mrkdwn)}.
//
// Slack answers HTTP 200 with {"ok": true, "channel", "ts"}: Result.MessageID is
// "channel:ts". {"ok": false, "error"} classifies by the error: ratelimited (with HTTP
// 429 and Retry-After), internal_error, fatal_error, service_unavailable and
// request_timeout are Transient, as are HTTP 429 and 5xx; invalid_auth, not_authed,
// token_revoked, account_inactive and the like are Permanent with Error.Config set (the
// gateway's credentials are wrong: an operator must act); every other error
// (channel_not_found, user_not_found, is_archived, msg_too_long, no_text,
// invalid_blocks, ...) is Permanent. Error.Code is Slack's error string. Timeouts and
// connection failures are Transient. chat.postMessage takes no idempotency key: the
// delivery record's claim guards against a second send.
func NewSlack(cfg SlackConfig) (Channel, error) {
	if cfg.BotToken == "" {
		return nil, errors.New("channel: Slack needs a bot token (xoxb-…)")
	}
	base := strings.TrimSuffix(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultSlackURL
	}
	if u, err := url.Parse(base); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("channel: Slack base URL %q is not an absolute http(s) URL", base)
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &slack{cfg: cfg, url: base + "/chat.postMessage", client: client, now: now}, nil
}

type slack struct {
	cfg    SlackConfig
	url    string
	client *http.Client
	now    func() time.Time
}

// Provider returns ProviderSlack.
func (s *slack) Provider() string { return ProviderSlack }

// slackAnswer is the part of a Web API answer the adapter reads.
type slackAnswer struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// slackTransient are the Web API errors after which the same message may succeed later.
var slackTransient = map[string]bool{
	"ratelimited": true, "internal_error": true, "fatal_error": true,
	"service_unavailable": true, "request_timeout": true,
}

// slackConfig are the Web API errors that say the gateway's token cannot be used.
var slackConfig = map[string]bool{
	"invalid_auth": true, "not_authed": true, "token_revoked": true, "token_expired": true,
	"account_inactive": true, "no_permission": true, "missing_scope": true, "not_allowed_token_type": true,
	"ekm_access_denied": true, "team_access_not_granted": true,
}

// Send posts m.Text to m.To (see NewSlack).
func (s *slack) Send(ctx context.Context, m Message) (Result, error) {
	ctx, cancel := withTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if m.To == "" {
		return Result{}, &Error{Provider: ProviderSlack, Kind: Permanent, Code: "channel_not_found", Err: errors.New("no Slack user id")}
	}
	body, err := json.Marshal(map[string]string{"channel": m.To, "text": m.Text})
	if err != nil {
		return Result{}, &Error{Provider: ProviderSlack, Kind: Permanent, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return Result{}, &Error{Provider: ProviderSlack, Kind: Permanent, Err: err}
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+s.cfg.BotToken)
	resp, err := s.client.Do(req)
	if err != nil {
		return Result{}, providerTransportError(ProviderSlack, err)
	}
	defer resp.Body.Close()
	raw, err := readProviderBody(resp.Body)
	if err != nil && resp.StatusCode == http.StatusOK {
		return Result{}, providerTransportError(ProviderSlack, err)
	}
	var ans slackAnswer
	jerr := json.Unmarshal(raw, &ans)
	if resp.StatusCode == http.StatusOK && jerr == nil && ans.OK {
		return Result{Provider: ProviderSlack, MessageID: ans.Channel + ":" + ans.TS}, nil
	}
	return Result{}, classifySlack(resp.StatusCode, ans, providerRetryAfter(resp.Header, s.now()))
}

// classifySlack maps an answer that is not {"ok": true} onto an *Error (see NewSlack).
func classifySlack(status int, ans slackAnswer, retryAfter time.Duration) *Error {
	e := &Error{Provider: ProviderSlack, Status: status, Code: ans.Error}
	msg := ans.Error
	if msg == "" {
		msg = http.StatusText(status)
	}
	e.Err = errors.New(msg)
	switch {
	case status == http.StatusTooManyRequests || status >= 500 || slackTransient[ans.Error]:
		e.Kind, e.RetryAfter = Transient, retryAfter
	case slackConfig[ans.Error] || status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind, e.Config = Permanent, true
	case status == http.StatusOK && ans.Error == "":
		// 200 without the Web API's JSON (a proxy's page, a cut body): not known to be
		// posted, so the delivery worker may try again.
		e.Kind, e.Err = Transient, errors.New("an answer that is not the Web API's JSON")
	default:
		e.Kind = Permanent
	}
	return e
}
