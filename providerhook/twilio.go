package providerhook

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	twilio "github.com/twilio/twilio-go/client"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/inbox"
)

// TwilioSignatureHeader is the header of a Twilio request's signature.
const TwilioSignatureHeader = "X-Twilio-Signature"

// DefaultTwilioMaxAge is how long after the send a status callback is accepted: `ts`, the
// send time the Twilio adapter puts in the StatusCallback URL (and so under the
// signature), older than this is refused as a replay. Delivery and read receipts come
// within hours; a week leaves room for a provider's retries and an outage.
const DefaultTwilioMaxAge = 7 * 24 * time.Hour

// Bounds of a Twilio status callback (Twilio.Limits): a form of a dozen or two short
// fields (MessageSid, MessageStatus, ErrorCode, From, To, AccountSid, ...), well under
// 2 KiB. The bounds leave room for the fields Twilio adds over time, and keep the
// signature check of a hostile callback (which copies the URL once per field) under a
// few MB of copying.
const (
	// TwilioMaxBodyBytes bounds a status callback's body (16 KiB).
	TwilioMaxBodyBytes = 16 << 10
	// TwilioMaxFields bounds a status callback's form fields.
	TwilioMaxFields = 64
)

// maxAhead is how far in the future a signed timestamp may be (clock skew between
// instances and the provider).
const maxAhead = time.Minute

// TwilioConfig configures NewTwilio.
type TwilioConfig struct {
	// AuthToken is the account's auth token (INBOX_TWILIO_AUTH_TOKEN): Twilio signs its
	// requests with it.
	AuthToken string
	// PublicURL is the gateway's URL as Twilio calls it (INBOX_PUBLIC_URL, e.g.
	// https://inbox.example.com): the signature covers PublicURL + path + query, the
	// StatusCallback URL the Twilio adapter gave.
	PublicURL string
	// MaxAge is how old `ts` may be (0: DefaultTwilioMaxAge).
	MaxAge time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Twilio is the Hook of Twilio's message status callbacks: a form POST (MessageSid,
// MessageStatus, ErrorCode, ...) to the StatusCallback URL
// {PublicURL}/v1/webhooks/provider/twilio?ref={delivery ref}&ts={unix seconds}, signed in
// X-Twilio-Signature (HMAC-SHA1 of the URL and the sorted form parameters, keyed with
// the auth token), checked with twilio-go's RequestValidator.
//
// MessageStatus delivered is DELIVERED, read (WhatsApp/RCS read receipts) OPENED,
// undelivered and failed FAILED (with the ErrorCode); queued, sending, sent, accepted,
// scheduled and others report nothing.
type Twilio struct {
	validator twilio.RequestValidator
	public    string
	maxAge    time.Duration
	now       func() time.Time
}

var _ Hook = (*Twilio)(nil)

// NewTwilio returns the Twilio hook. Errors: no auth token, or a PublicURL that is not an
// absolute http(s) URL without query or fragment.
func NewTwilio(c TwilioConfig) (*Twilio, error) {
	if c.AuthToken == "" {
		return nil, errors.New("providerhook: twilio: an auth token is required")
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("providerhook: twilio: the public URL must be an absolute http(s) URL without query (INBOX_PUBLIC_URL)")
	}
	maxAge := c.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultTwilioMaxAge
	}
	return &Twilio{validator: twilio.NewRequestValidator(c.AuthToken), public: strings.TrimRight(c.PublicURL, "/"),
		maxAge: maxAge, now: clock(c.Now)}, nil
}

// Name returns NameTwilio.
func (*Twilio) Name() string { return NameTwilio }

// Limits are a status callback's: a body of at most TwilioMaxBodyBytes in at most
// TwilioMaxFields fields, a query of at most MaxQueryBytes.
func (*Twilio) Limits() Limits {
	return Limits{BodyBytes: TwilioMaxBodyBytes, QueryBytes: MaxQueryBytes, Fields: TwilioMaxFields}
}

// CallbackURL returns the URL Twilio signs for a request to r's path and query: the
// public URL, then the path and query as received.
func (t *Twilio) CallbackURL(r *http.Request) string {
	u := t.public + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	return u
}

// Events checks the callback against Limits, then the signature over CallbackURL(r) and
// the form body, then `ts` (not older than MaxAge, not ahead), and returns the callback's
// event (none for an untracked status, or a ref that names no SMS record).
func (t *Twilio) Events(r *http.Request, body []byte) ([]inbox.ProviderEvent, error) {
	if err := t.Limits().Check(r, body); err != nil {
		return nil, err
	}
	sig := r.Header.Get(TwilioSignatureHeader)
	if sig == "" {
		return nil, unauthenticated("the callback has no %s header", TwilioSignatureHeader)
	}
	if len(sig) > MaxSignatureBytes {
		return nil, unauthenticated("the callback's signature does not verify")
	}
	if !t.validator.ValidateBody(t.CallbackURL(r), body, sig) {
		return nil, unauthenticated("the callback's signature does not verify")
	}
	q := r.URL.Query()
	ts, err := strconv.ParseInt(q.Get("ts"), 10, 64)
	if err != nil {
		return nil, unauthenticated("the callback URL has no send time (ts)")
	}
	now := t.now()
	sent := time.Unix(ts, 0)
	if now.Sub(sent) > t.maxAge || sent.Sub(now) > maxAhead {
		return nil, unauthenticated("the callback's send time is outside the accepted window (a replay)")
	}
	ref, err := inbox.ParseDeliveryRef(q.Get("ref"))
	if err != nil {
		return nil, err
	}
	if ref.Key != inbox.ChannelSMS {
		// Twilio sends the gateway's SMS only: a ref of another record is not its to
		// report on (a record settled unconfirmed names no provider to guard it).
		return []inbox.ProviderEvent{}, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "the callback body is not a form")
	}
	status := twilioStatus(firstOf(form, "MessageStatus", "SmsStatus"))
	if status == "" {
		return []inbox.ProviderEvent{}, nil
	}
	ev := inbox.ProviderEvent{Ref: ref, Provider: channel.ProviderTwilio, MessageID: firstOf(form, "MessageSid", "SmsSid"),
		Status: status, At: now}
	if status == inbox.DeliveryFailed {
		ev.Error = "twilio: " + firstOf(form, "MessageStatus", "SmsStatus")
		if code := form.Get("ErrorCode"); code != "" {
			ev.Error += " (error " + code + ")"
		}
		ev.Error = clip(ev.Error)
	}
	return []inbox.ProviderEvent{ev}, nil
}

// twilioStatus maps a MessageStatus onto a delivery status ("" for one not tracked).
func twilioStatus(s string) string {
	switch s {
	case "delivered":
		return inbox.DeliveryDelivered
	case "read":
		return inbox.DeliveryOpened
	case "undelivered", "failed":
		return inbox.DeliveryFailed
	}
	return ""
}

// firstOf returns the first non-empty value of keys in form.
func firstOf(form url.Values, keys ...string) string {
	for _, k := range keys {
		if v := form.Get(k); v != "" {
			return v
		}
	}
	return ""
}
