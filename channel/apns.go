package channel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sideshow/apns2"
	"github.com/sideshow/apns2/payload"
	"github.com/sideshow/apns2/token"
)

// DefaultAPNsURL is APNs' production origin (the sandbox is https://api.sandbox.push.apple.com).
const DefaultAPNsURL = apns2.HostProduction

// apnsIDSpace is the UUID namespace of apns-id values derived from idempotency keys.
var apnsIDSpace = uuid.MustParse("6f1c2b0e-7d3a-4c55-9e0b-2f4a8d1c3e57")

// APNsConfig configures NewAPNs.
type APNsConfig struct {
	// KeyPEM is the token-auth signing key: Apple's .p8 file (a PKCS#8 EC P-256 key).
	KeyPEM []byte
	// KeyID is the key's id (the JWT's kid), TeamID the developer team (its iss).
	KeyID, TeamID string
	// Topic is the app's bundle id (apns-topic).
	Topic string
	// BaseURL is APNs' origin; "" means DefaultAPNsURL.
	BaseURL string
	// Client makes the requests and must speak HTTP/2 (an http.Transport with
	// ForceAttemptHTTP2, or x/net/http2's Transport); nil means apns2's own HTTP/2 client.
	Client *http.Client
	// Timeout bounds one Send (its one token-refresh retry included) when > 0; ctx's
	// deadline applies as well.
	Timeout time.Duration
}

// NewAPNs returns the APNs adapter (github.com/sideshow/apns2 over HTTP/2 with token
// auth: an ES256 JWT with kid = KeyID and iss = TeamID, reused for 50 minutes). One POST
// {BaseURL}/3/device/{Message.To} per Send, an alert (Title, Body) with Data as custom
// keys, apns-push-type alert, priority 10, and apns-id = a UUID (v5) derived from
// Message.IdempotencyKey, the same on every attempt.
//
// Answers: 200 → Result.MessageID is the apns-id. 403 ExpiredProviderToken → the JWT is
// signed again and the push retried once within the Send (APNs refused the first, so
// nothing is sent twice). 410 (Unregistered, ExpiredToken) and 400 BadDeviceToken →
// Unregistered; 429 (TooManyRequests, TooManyProviderTokenUpdates) and 5xx → Transient;
// other 4xx (InvalidProviderToken, BadTopic, DeviceTokenNotForTopic, PayloadTooLarge, a
// second ExpiredProviderToken ...) → Permanent. Timeouts and connection failures → Transient.
func NewAPNs(cfg APNsConfig) (Channel, error) {
	key, err := token.AuthKeyFromBytes(cfg.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("channel: APNs key: %w", err)
	}
	if cfg.KeyID == "" || cfg.TeamID == "" || cfg.Topic == "" {
		return nil, errors.New("channel: APNs needs a key id, a team id and a topic")
	}
	base := strings.TrimSuffix(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultAPNsURL
	}
	if u, err := url.Parse(base); err != nil || u.Host == "" {
		return nil, fmt.Errorf("channel: APNs base URL %q is not an absolute URL", base)
	}
	tok := &token.Token{AuthKey: key, KeyID: cfg.KeyID, TeamID: cfg.TeamID}
	if _, err := tok.Generate(); err != nil {
		return nil, fmt.Errorf("channel: APNs token: %w", err)
	}
	client := apns2.NewTokenClient(tok)
	client.Host = base
	if cfg.Client != nil {
		client.HTTPClient = cfg.Client
	}
	return &apns{client: client, topic: cfg.Topic, timeout: cfg.Timeout}, nil
}

type apns struct {
	client  *apns2.Client
	topic   string
	timeout time.Duration
}

// Provider returns ProviderAPNs.
func (a *apns) Provider() string { return ProviderAPNs }

// APNsID returns the apns-id sent for an idempotency key: a name-based (SHA-1, v5) UUID,
// "" for "" (APNs then assigns one).
func APNsID(idempotencyKey string) string {
	if idempotencyKey == "" {
		return ""
	}
	return uuid.NewSHA1(apnsIDSpace, []byte(idempotencyKey)).String()
}

// Send pushes m (see NewAPNs).
func (a *apns) Send(ctx context.Context, m Message) (Result, error) {
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	if m.To == "" {
		return Result{}, &Error{Provider: ProviderAPNs, Kind: Permanent, Code: apns2.ReasonMissingDeviceToken, Err: errors.New("no device token")}
	}
	p := payload.NewPayload().AlertTitle(m.Title).AlertBody(m.Body)
	for k, v := range m.Data {
		if k != "aps" {
			p.Custom(k, v)
		}
	}
	n := &apns2.Notification{
		ApnsID:      APNsID(m.IdempotencyKey),
		DeviceToken: m.To,
		Topic:       a.topic,
		Priority:    apns2.PriorityHigh,
		PushType:    apns2.PushTypeAlert,
		Payload:     p,
	}
	bearer := a.client.Token.GenerateIfExpired()
	res, err := a.client.PushWithContext(ctx, n)
	if err == nil && res.StatusCode == http.StatusForbidden && res.Reason == apns2.ReasonExpiredProviderToken {
		a.refresh(bearer)
		res, err = a.client.PushWithContext(ctx, n)
	}
	if err != nil {
		return Result{}, providerTransportError(ProviderAPNs, err)
	}
	if res.StatusCode == http.StatusOK {
		id := res.ApnsID
		if id == "" {
			id = n.ApnsID
		}
		return Result{Provider: ProviderAPNs, MessageID: id}, nil
	}
	return Result{}, classifyAPNs(res.StatusCode, res.Reason)
}

// refresh signs a new provider token unless another Send already replaced the refused
// one (APNs refuses more than one new token per 20 minutes with TooManyProviderTokenUpdates).
func (a *apns) refresh(refused string) {
	t := a.client.Token
	t.Lock()
	defer t.Unlock()
	if t.Bearer == refused {
		_, _ = t.Generate() // cannot fail: NewAPNs signed one with the same key
	}
}

// classifyAPNs maps an APNs error answer onto an *Error (see NewAPNs).
func classifyAPNs(status int, reason string) *Error {
	msg := reason
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := &Error{Provider: ProviderAPNs, Status: status, Code: reason, Err: errors.New(msg)}
	switch {
	case status == http.StatusGone, status == http.StatusBadRequest && reason == apns2.ReasonBadDeviceToken:
		e.Kind = Unregistered
	case status == http.StatusTooManyRequests, status >= 500:
		e.Kind = Transient
	case status >= 400:
		e.Kind = Permanent
	default:
		e.Kind = Transient
	}
	return e
}
