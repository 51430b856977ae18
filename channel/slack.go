package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultSlackURL is the Slack Web API's base URL.
const DefaultSlackURL = "https://slack.com/api"

// SlackConfig configures NewSlack.
type SlackConfig struct {
	// BotToken is the bot token ("xoxb-…") sent as Authorization: Bearer: printable
	// ASCII without spaces (a token read from a file with its line break is refused).
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
// "channel:ts"; once the answer said "ok": true the message is sent, however long the
// rest of the answer (it echoes the message) and even if it is cut (readSlackAnswer).
// {"ok": false, "error"} classifies by the error: ratelimited (with HTTP
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
	if i := strings.IndexFunc(cfg.BotToken, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
		// Not sent at all (an invalid header) or never Slack's: every send would fail.
		// The error says where, never what the token is.
		return nil, fmt.Errorf("channel: Slack's bot token has a space, a line break or another character no token has (byte %d of %d)", i+1, len(cfg.BotToken))
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
	ans, err := readSlackAnswer(resp.Body)
	switch {
	case resp.StatusCode == http.StatusOK && ans.OK:
		// Slack said the message is posted: whatever follows in the answer (cut, or too
		// long to read), a retry would post it twice.
		return Result{Provider: ProviderSlack, MessageID: ans.Channel + ":" + ans.TS}, nil
	case err != nil && resp.StatusCode == http.StatusOK && !errors.Is(err, errNotSlackJSON):
		return Result{}, providerTransportError(ProviderSlack, err)
	}
	return Result{}, classifySlack(resp.StatusCode, ans, providerRetryAfter(resp.Header, s.now()))
}

// maxSlackAnswer bounds what is read of one Web API answer. chat.postMessage's answer
// echoes the message posted ("message": its text, up to 40,000 characters, each up to
// 12 bytes once escaped, and the blocks Slack made of it), so it is well over
// maxProviderBody for a long message; the fields the adapter reads come before it in
// Slack's answers, and reading stops once they are known.
const maxSlackAnswer = 1 << 20

// errNotSlackJSON is readSlackAnswer's error for an answer that is not a JSON object
// with "ok" (a proxy's page, a cut body).
var errNotSlackJSON = errors.New("not the Web API's JSON")

// readSlackAnswer reads the fields of a Web API answer the adapter needs ("ok",
// "error", "channel", "ts") as a stream, at most maxSlackAnswer bytes, skipping the
// others. It stops as soon as the answer is known: "ok" true with channel and ts, or
// "ok" false with the error. An answer cut after "ok" (and the fields after it that were
// read) returns them with the error: "ok" true means the message was posted. A body
// that is no JSON object with "ok" is errNotSlackJSON; a failed read that error.
func readSlackAnswer(body io.Reader) (slackAnswer, error) {
	var ans slackAnswer
	rd := &endAtError{r: io.LimitReader(body, maxSlackAnswer)}
	seenOK := false
	known := func() bool {
		return seenOK && (ans.OK && ans.Channel != "" && ans.TS != "" || !ans.OK && ans.Error != "")
	}
	fail := func(err error) (slackAnswer, error) {
		if rd.err != nil {
			err = rd.err
		}
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errNotSlackJSON
		}
		if !seenOK {
			return slackAnswer{}, err
		}
		return ans, err
	}
	dec := json.NewDecoder(rd)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		if err == nil {
			err = errNotSlackJSON
		}
		return fail(err)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		var dst any
		switch t {
		case "ok":
			dst = &ans.OK
		case "error":
			dst = &ans.Error
		case "channel":
			dst = &ans.Channel
		case "ts":
			dst = &ans.TS
		default:
			dst = &json.RawMessage{}
		}
		if err := dec.Decode(dst); err != nil {
			return fail(err)
		}
		if t == "ok" {
			seenOK = true
		}
		if known() {
			return ans, nil
		}
	}
	if !seenOK {
		return fail(errNotSlackJSON)
	}
	return ans, nil
}

// endAtError ends its reader at the first error: the error is kept (err) and the JSON
// decoder sees the end of the input, so a value complete before a cut is still read.
type endAtError struct {
	r   io.Reader
	err error
}

func (e *endAtError) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err, err = err, io.EOF
	}
	return n, err
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
