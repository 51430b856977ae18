package providerhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/inbox"
)

// DefaultSendGridMaxAge is how old a SendGrid callback's signed timestamp may be
// (INBOX_CALLBACK_MAX_AGE's default): SendGrid signs each POST when it sends it, so an
// older one is a replay.
const DefaultSendGridMaxAge = 10 * time.Minute

// SendGridRefArg is the unique argument that carries the delivery ref: the email adapter
// sends X-SMTPAPI: {"unique_args":{"inbox_ref":"<ref>"}}, and SendGrid echoes it as a
// member of every event of that mail.
const SendGridRefArg = "inbox_ref"

// SendGridConfig configures NewSendGrid.
type SendGridConfig struct {
	// PublicKey is the event webhook's verification key (INBOX_SENDGRID_WEBHOOK_KEY), as
	// SendGrid shows it: base64 of the DER (PKIX) ECDSA P-256 public key.
	PublicKey string
	// MaxAge is how old the signed timestamp may be (0: DefaultSendGridMaxAge); it may
	// also be at most a minute ahead.
	MaxAge time.Duration
	// Provider is the provider the email delivery records name (the email adapter's:
	// "" is channel.ProviderSMTP): events are applied only to records of that provider.
	Provider string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// SendGrid is the Hook of SendGrid's signed event webhook: a JSON array of events,
// signed in X-Twilio-Email-Event-Webhook-Signature (ECDSA P-256 over SHA-256 of the
// timestamp header followed by the body), with the time in
// X-Twilio-Email-Event-Webhook-Timestamp; checked with sendgrid-go's
// helpers/eventwebhook.
//
// Events delivered are DELIVERED, open and click OPENED, bounce and dropped FAILED (with
// the reason), each at its timestamp when plausible (see MaxEventAge), else at the time
// the callback came; processed, deferred, spamreport, unsubscribe and others report
// nothing, nor do events without an inbox_ref (mail the gateway did not send).
type SendGrid struct {
	key      *ecdsa.PublicKey
	maxAge   time.Duration
	provider string
	now      func() time.Time
}

var _ Hook = (*SendGrid)(nil)

// NewSendGrid returns the SendGrid hook. Errors: a key that is not base64 of a DER ECDSA
// P-256 public key.
func NewSendGrid(c SendGridConfig) (*SendGrid, error) {
	key, err := sendGridKey(c.PublicKey)
	if err != nil {
		return nil, err
	}
	maxAge := c.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultSendGridMaxAge
	}
	provider := c.Provider
	if provider == "" {
		provider = channel.ProviderSMTP
	}
	return &SendGrid{key: key, maxAge: maxAge, provider: provider, now: clock(c.Now)}, nil
}

// sendGridKey parses the verification key. It does what eventwebhook's
// ConvertPublicKeyBase64ToECDSA does, and checks the key's type and curve where that
// function would panic on a key of another type.
func sendGridKey(b64 string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, errors.New("providerhook: sendgrid: the webhook key is not base64 (INBOX_SENDGRID_WEBHOOK_KEY)")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("providerhook: sendgrid: the webhook key is not a DER public key (INBOX_SENDGRID_WEBHOOK_KEY)")
	}
	key, ok := pub.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, errors.New("providerhook: sendgrid: the webhook key is not an ECDSA P-256 key (INBOX_SENDGRID_WEBHOOK_KEY)")
	}
	return key, nil
}

// Name returns NameSendGrid.
func (*SendGrid) Name() string { return NameSendGrid }

// Limits are a batch's: a body of at most MaxBodyBytes (SendGrid posts a batch when it
// reaches 768 KB, or every 30 seconds), a query of at most MaxQueryBytes; the body is
// JSON, its events (at most MaxEvents) are counted once the signature holds. Everything
// done before then (a SHA-256 of the body, one ECDSA verification) is linear in the body.
func (*SendGrid) Limits() Limits {
	return Limits{BodyBytes: MaxBodyBytes, QueryBytes: MaxQueryBytes}
}

// sendGridEvent is the part of an event the hook reads.
type sendGridEvent struct {
	Ref       string `json:"inbox_ref"`
	Event     string `json:"event"`
	MessageID string `json:"sg_message_id"`
	// Timestamp is read by eventTime: whatever it holds, the event is not lost for it.
	Timestamp json.RawMessage `json:"timestamp"`
	Reason    string          `json:"reason"`
	// Email is the recipient's address; Type a bounce's kind ("bounce" hard, "blocked"
	// soft: only a hard bounce suppresses).
	Email string `json:"email"`
	Type  string `json:"type"`
}

// MaxEventAge is how old an event's own time (SendGrid's "timestamp", Unix seconds) may
// be and still be taken as the time it happened: SendGrid posts events within seconds
// and retries a failed post for up to 72 hours.
const MaxEventAge = 7 * 24 * time.Hour

// eventTime is when the event happened: its timestamp (Unix seconds, an integer or,
// tolerated, a fraction) when that is plausible, that is within [now-MaxEventAge,
// now+maxAhead]; else now, the time it is received. The signature vouches that SendGrid
// sent the event, not that its clock field makes sense: a timestamp that is missing, not
// a number, zero, negative, far ahead (year 9999, 1e18 seconds), too large for any
// integer, or long past would otherwise put a time on the record that no status can show
// (years past 9999 have no RFC 3339 form) or that did not happen.
func eventTime(raw json.RawMessage, now time.Time) time.Time {
	lit := strings.TrimSpace(string(raw))
	var t time.Time
	if secs, err := strconv.ParseInt(lit, 10, 64); err == nil {
		t = time.Unix(secs, 0)
	} else if f, err := strconv.ParseFloat(lit, 64); err == nil && f > 0 && f < 1e12 {
		// Within 1e12 seconds (year 33658) the float converts to an int64 exactly
		// enough; anything larger is implausible anyway.
		t = time.UnixMilli(int64(f * 1000))
	} else {
		return now
	}
	if t.Before(now.Add(-MaxEventAge)) || t.After(now.Add(maxAhead)) {
		return now
	}
	return t
}

// Events checks the callback against Limits, the timestamp (not older than MaxAge, at
// most a minute ahead) and the signature, then reads the batch: at most MaxEvents
// events. An event that cannot be read, or whose inbox_ref is malformed, is left out
// rather than failing the batch (its signature holds: SendGrid sent it, and would only
// retry it); so is one whose ref names no EMAIL record.
func (s *SendGrid) Events(r *http.Request, body []byte) ([]inbox.ProviderEvent, error) {
	if err := s.Limits().Check(r, body); err != nil {
		return nil, err
	}
	sig := r.Header.Get(eventwebhook.VerificationHTTPHeader)
	ts := r.Header.Get(eventwebhook.TimestampHTTPHeader)
	if sig == "" || ts == "" {
		return nil, unauthenticated("the callback has no %s and %s headers", eventwebhook.VerificationHTTPHeader, eventwebhook.TimestampHTTPHeader)
	}
	if len(sig) > MaxSignatureBytes {
		return nil, unauthenticated("the callback's signature does not verify")
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, unauthenticated("the callback's timestamp is not a number")
	}
	now := s.now()
	signed := time.Unix(secs, 0)
	if now.Sub(signed) > s.maxAge || signed.Sub(now) > maxAhead {
		return nil, unauthenticated("the callback's timestamp is outside the accepted window (a replay)")
	}
	if ok, err := eventwebhook.VerifySignature(s.key, body, sig, ts); err != nil || !ok {
		return nil, unauthenticated("the callback's signature does not verify")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "the callback body is not a JSON array of events")
	}
	if len(raw) > MaxEvents {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "the callback has %d events, over %d", len(raw), MaxEvents)
	}
	out := []inbox.ProviderEvent{}
	for _, js := range raw {
		var e sendGridEvent
		if json.Unmarshal(js, &e) != nil || e.Ref == "" {
			continue
		}
		status := sendGridStatus(e.Event)
		if status == "" && !suppressing(e) {
			continue // untracked (processed, deferred, ...), or a complaint naming no address
		}
		ref, err := inbox.ParseDeliveryRef(e.Ref)
		if err != nil || ref.Key != inbox.ChannelEmail {
			// SendGrid sends the gateway's email only: a ref of another record is not
			// its to report on (a record settled unconfirmed names no provider to guard it).
			continue
		}
		// MessageID stays empty: the record holds the Message-ID the gateway sent over
		// SMTP, and sg_message_id is SendGrid's own id, so they never match; the ref
		// alone names the record.
		ev := inbox.ProviderEvent{Ref: ref, Provider: s.provider, Status: status, At: eventTime(e.Timestamp, now)}
		if status == inbox.DeliveryFailed {
			ev.Error = "sendgrid: " + e.Event
			if e.Reason != "" {
				ev.Error += ": " + e.Reason
			}
			ev.Error = clip(ev.Error)
		}
		if suppressing(e) {
			ev.Suppress = &inbox.Suppression{Channel: inbox.ChannelEmail, Address: e.Email, Reason: e.Event, Detail: clip(e.Reason)}
		}
		out = append(out, ev)
	}
	return out, nil
}

// suppressing reports whether e puts its address on the suppression list: a hard
// bounce (not a "blocked" one, which is temporary), a drop (SendGrid dropped it, often
// because the address bounced before), a spam complaint; only with an address.
func suppressing(e sendGridEvent) bool {
	if e.Email == "" {
		return false
	}
	switch e.Event {
	case "bounce":
		return e.Type != "blocked"
	case "dropped", "spamreport":
		return true
	}
	return false
}

// sendGridStatus maps an event name onto a delivery status ("" for one not tracked).
func sendGridStatus(event string) string {
	switch event {
	case "delivered":
		return inbox.DeliveryDelivered
	case "open", "click":
		return inbox.DeliveryOpened
	case "bounce", "dropped":
		return inbox.DeliveryFailed
	}
	return ""
}
