package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTwilioURL is Twilio's REST API origin.
const DefaultTwilioURL = "https://api.twilio.com"

// TwilioConfig configures NewTwilio.
type TwilioConfig struct {
	// AccountSID ("AC...") and AuthToken authenticate (HTTP basic auth).
	AccountSID, AuthToken string
	// From is the sender: an E.164 number, an alphanumeric sender id, or a Messaging
	// Service sid ("MG...", sent as MessagingServiceSid).
	From string
	// BaseURL is Twilio's origin; "" means DefaultTwilioURL.
	BaseURL string
	// StatusCallbackBase, when set, is the URL Twilio calls back with the message's status
	// (INBOX_PUBLIC_URL + "/v1/webhooks/provider/twilio"): each message's StatusCallback is
	// StatusCallbackBase + "?ref=" + Message.CallbackRef + "&ts=" + unix seconds (no
	// callback for a Message without a CallbackRef).
	StatusCallbackBase string
	// Client makes the requests; nil means a new http.Client.
	Client *http.Client
	// Timeout bounds one Send when > 0; ctx's deadline applies as well.
	Timeout time.Duration
	// Now is the clock of the callback's ts; nil means time.Now.
	Now func() time.Time
}

// NewTwilio returns the Twilio SMS adapter: one form POST
// {BaseURL}/2010-04-01/Accounts/{AccountSID}/Messages.json per Send with To = Message.To
// (E.164), Body = Message.Text, From or MessagingServiceSid, and StatusCallback (see
// TwilioConfig.StatusCallbackBase).
//
// Answers: 201 → Result.MessageID is the message sid ("SM..."). 400 (21211 invalid To,
// 21614 not a mobile number, 21610 unsubscribed, 21408 region not enabled, ...), 401
// (20003: wrong credentials, a configuration error), 403 and 404 → Permanent, with
// Twilio's code as Error.Code; 429 (20429, with Retry-After) and 5xx → Transient.
// Timeouts and connection failures → Transient. Twilio's Messages API takes no
// idempotency key: the delivery record's state guards against a second send.
func NewTwilio(cfg TwilioConfig) (Channel, error) {
	if cfg.AccountSID == "" || cfg.AuthToken == "" || cfg.From == "" {
		return nil, errors.New("channel: Twilio needs an account sid, an auth token and a sender (From)")
	}
	base := strings.TrimSuffix(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultTwilioURL
	}
	if u, err := url.Parse(base); err != nil || u.Host == "" {
		return nil, fmt.Errorf("channel: Twilio base URL %q is not an absolute URL", base)
	}
	if cfg.StatusCallbackBase != "" {
		if u, err := url.Parse(cfg.StatusCallbackBase); err != nil || u.Host == "" {
			return nil, fmt.Errorf("channel: Twilio status callback %q is not an absolute URL", cfg.StatusCallbackBase)
		}
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &twilio{
		cfg:    cfg,
		url:    base + "/2010-04-01/Accounts/" + url.PathEscape(cfg.AccountSID) + "/Messages.json",
		client: client,
		now:    now,
	}, nil
}

type twilio struct {
	cfg    TwilioConfig
	url    string
	client *http.Client
	now    func() time.Time
}

// Provider returns ProviderTwilio.
func (tw *twilio) Provider() string { return ProviderTwilio }

// twilioAnswer is the part of Twilio's answers the adapter reads: a message resource
// (sid) or an error document (code, message, more_info, status).
type twilioAnswer struct {
	Sid     string `json:"sid"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// TwilioStatusCallback returns the StatusCallback URL for a callback ref at t:
// base?ref=...&ts=... ("&" when base already has a query).
func TwilioStatusCallback(base, ref string, t time.Time) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "ref=" + url.QueryEscape(ref) + "&ts=" + strconv.FormatInt(t.Unix(), 10)
}

// Send sends m.Text to m.To (see NewTwilio).
func (tw *twilio) Send(ctx context.Context, m Message) (Result, error) {
	ctx, cancel := withTimeout(ctx, tw.cfg.Timeout)
	defer cancel()
	if m.To == "" {
		return Result{}, &Error{Provider: ProviderTwilio, Kind: Permanent, Code: "21604", Err: errors.New("no phone number")}
	}
	form := url.Values{"To": {m.To}, "Body": {m.Text}}
	if strings.HasPrefix(tw.cfg.From, "MG") {
		form.Set("MessagingServiceSid", tw.cfg.From)
	} else {
		form.Set("From", tw.cfg.From)
	}
	if tw.cfg.StatusCallbackBase != "" && m.CallbackRef != "" {
		form.Set("StatusCallback", TwilioStatusCallback(tw.cfg.StatusCallbackBase, m.CallbackRef, tw.now()))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tw.url, strings.NewReader(form.Encode()))
	if err != nil {
		return Result{}, &Error{Provider: ProviderTwilio, Kind: Permanent, Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(tw.cfg.AccountSID, tw.cfg.AuthToken)
	resp, err := tw.client.Do(req)
	if err != nil {
		return Result{}, providerTransportError(ProviderTwilio, err)
	}
	defer resp.Body.Close()
	raw, err := readProviderBody(resp.Body)
	if err != nil && resp.StatusCode/100 != 2 {
		return Result{}, providerTransportError(ProviderTwilio, err)
	}
	var ans twilioAnswer
	_ = json.Unmarshal(raw, &ans) // an unreadable body leaves the status alone to decide
	if resp.StatusCode/100 == 2 {
		// Accepted (201 Created): even without a readable sid the message is on its way,
		// so it is reported sent, never sent again.
		return Result{Provider: ProviderTwilio, MessageID: ans.Sid}, nil
	}
	return Result{}, classifyTwilio(resp.StatusCode, ans, providerRetryAfter(resp.Header, tw.now()))
}

// classifyTwilio maps a Twilio error answer onto an *Error (see NewTwilio).
func classifyTwilio(status int, ans twilioAnswer, retryAfter time.Duration) *Error {
	msg := ans.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := &Error{Provider: ProviderTwilio, Status: status, Err: errors.New(msg)}
	if ans.Code != 0 {
		e.Code = strconv.Itoa(ans.Code)
	}
	switch {
	case status == http.StatusTooManyRequests || status >= 500:
		e.Kind, e.RetryAfter = Transient, retryAfter
	case status >= 400:
		e.Kind = Permanent
		// 21610: the recipient replied STOP; Twilio refuses every message to them.
		e.Suppress = ans.Code == 21610
	default:
		e.Kind = Transient
	}
	return e
}
