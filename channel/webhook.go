package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// WebhookConfig configures NewWebhook.
type WebhookConfig struct {
	// Client sends the requests; nil: a client of its own (pooled keep-alive connections,
	// redirects not followed). A given client's CheckRedirect is kept as it is.
	Client *http.Client
	// Timeout bounds one Send, response included; DefaultTimeout when 0. A shorter ctx
	// deadline wins.
	Timeout time.Duration
	// UserAgent is the User-Agent header; "inbox-gateway-webhooks" when "".
	UserAgent string
	// PublicOnly, with Client nil, makes the adapter's own client refuse to connect to
	// an address that is not a public unicast one (loopback, private, shared, link-local,
	// unspecified, multicast: see PublicAddr), checked on the address dialled after name
	// resolution, so a name resolving there is refused too; such a send fails Permanent
	// with Code "address". Webhook URLs are set by tenants: without it a tenant can make
	// the gateway POST to services on its own host or network and read the start of their
	// answers in the record's error. The client then uses no proxy from the environment
	// (the proxy, not the receiver, would be the address checked).
	PublicOnly bool
	// WrapTransport, with Client nil, wraps the adapter's own client's transport (the
	// gateway's tracing: telemetry.Transport); nil leaves it as it is.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// maxWebhookResponse bounds how much of a receiver's answer is read (and discarded,
// so the connection can be reused); maxErrorBody how much of it an error quotes.
const (
	maxWebhookResponse = 64 << 10
	maxErrorBody       = 256
	maxRetryAfter      = 24 * time.Hour
)

type webhook struct {
	client    *http.Client
	timeout   time.Duration
	userAgent string
}

// NewWebhook returns the webhook adapter: it POSTs Message.Payload (JSON) to Message.To
// signed the Standard Webhooks way with Message.Secret, through the Standard Webhooks
// library: webhook-id = Message.IdempotencyKey (the same on every attempt, so the
// receiver can drop a duplicate), webhook-timestamp = the attempt's Unix seconds,
// webhook-signature = "v1,<base64 HMAC-SHA256 of id.timestamp.body>". A secret with the
// "whsec_" prefix is the base64 of the key (the Standard Webhooks form); any other
// secret is used as is: its UTF-8 bytes are the HMAC key (the receiver verifies with
// NewWebhookRaw([]byte(secret)) or its equivalent). Result.MessageID is the webhook-id.
//
// Errors (*Error, Provider "webhook"): any 2xx is success; 429, 408 and 5xx are
// Transient, with RetryAfter from a Retry-After header (seconds or an HTTP date, at most
// 24h); 410 is Permanent with Code "gone" (the receiver says the endpoint is gone) and
// any other status (3xx included: redirects are not followed) Permanent; a timeout
// (Code "timeout") or a connection failure is Transient; a missing URL, secret or
// idempotency key, or a malformed "whsec_" secret, is Permanent; so is an address
// refused by PublicOnly (Code "address"). At most 64 KiB of the answer is read.
func NewWebhook(cfg WebhookConfig) Channel {
	w := &webhook{client: cfg.Client, timeout: cfg.Timeout, userAgent: cfg.UserAgent}
	if w.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		if cfg.PublicOnly {
			d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: publicOnly}
			tr.DialContext = d.DialContext
			tr.Proxy = nil
		}
		var rt http.RoundTripper = tr
		if cfg.WrapTransport != nil {
			rt = cfg.WrapTransport(tr)
		}
		w.client = &http.Client{
			Transport:     rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if w.timeout <= 0 {
		w.timeout = DefaultTimeout
	}
	if w.userAgent == "" {
		w.userAgent = "inbox-gateway-webhooks"
	}
	return w
}

// Provider returns ProviderWebhook.
func (w *webhook) Provider() string { return ProviderWebhook }

// Send makes one signed POST of m.Payload to m.To (see NewWebhook).
func (w *webhook) Send(ctx context.Context, m Message) (Result, error) {
	perm := func(code string, err error) (Result, error) {
		return Result{}, &Error{Provider: ProviderWebhook, Kind: Permanent, Code: code, Err: err}
	}
	u, err := url.Parse(m.To)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return perm("url", fmt.Errorf("webhook url %q is not an http(s) URL", m.To))
	}
	if m.IdempotencyKey == "" {
		return perm("message", errors.New("no idempotency key (webhook-id)"))
	}
	signer, err := webhookSigner(m.Secret)
	if err != nil {
		return perm("secret", err)
	}
	now := time.Now()
	sig, err := signer.Sign(m.IdempotencyKey, now, m.Payload)
	if err != nil {
		return perm("secret", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Payload))
	if err != nil {
		return perm("url", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", w.userAgent)
	req.Header.Set(standardwebhooks.HeaderWebhookID, m.IdempotencyKey)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)

	resp, err := w.client.Do(req)
	if _, refused := errors.AsType[*addressError](err); refused {
		return perm("address", err)
	}
	if err != nil {
		e := &Error{Provider: ProviderWebhook, Kind: Transient, Err: err}
		var ne net.Error
		if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
			e.Code = "timeout"
		}
		return Result{}, e
	}
	defer resp.Body.Close()
	// the answer is read (bounded) so the connection can be reused; a failure reading it
	// changes nothing: the status decides
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxWebhookResponse))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return Result{Provider: ProviderWebhook, MessageID: m.IdempotencyKey}, nil
	}
	e := &Error{Provider: ProviderWebhook, Kind: Permanent, Status: resp.StatusCode, Err: statusError(resp, body)}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		e.Kind = Transient
		e.RetryAfter = RetryAfter(resp.Header.Get("Retry-After"), now)
	case resp.StatusCode == http.StatusGone:
		e.Code = "gone"
	}
	return Result{}, e
}

// webhookSigner returns the Standard Webhooks signer of secret (see NewWebhook).
func webhookSigner(secret string) (*standardwebhooks.Webhook, error) {
	if secret == "" {
		return nil, errors.New("no webhook secret")
	}
	if strings.HasPrefix(secret, "whsec_") {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, errors.New("webhook secret: whsec_ secret is not base64")
		}
		return wh, nil
	}
	return standardwebhooks.NewWebhookRaw([]byte(secret))
}

// statusError describes a non-2xx answer: its status and the start of its body.
func statusError(resp *http.Response, body []byte) error {
	s := strings.TrimSpace(string(body))
	if len(s) > maxErrorBody {
		s = strings.ToValidUTF8(s[:maxErrorBody], "") + "…"
	}
	if s == "" {
		return fmt.Errorf("receiver answered %s", resp.Status)
	}
	return fmt.Errorf("receiver answered %s: %s", resp.Status, s)
}

// RetryAfter parses a Retry-After header value (delay seconds or an HTTP date, relative
// to now) into a wait between 0 and 24 hours; 0 when absent or malformed.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// addressError is the dial error of a webhook to an address that is not public
// (WebhookConfig.PublicOnly).
type addressError struct{ addr string }

func (e *addressError) Error() string {
	return fmt.Sprintf("webhook address %s is not a public address (loopback, private, link-local and the like are refused)", e.addr)
}

// publicOnly is the net.Dialer Control of WebhookConfig.PublicOnly: it refuses a
// connection to an address PublicAddr does not accept.
func publicOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return &addressError{addr: address}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !PublicAddr(ip) {
		return &addressError{addr: host}
	}
	return nil
}

// sharedAddrs are address ranges that are not public but that netip's predicates do not
// name: "this network" (RFC 791), shared address space (carrier-grade NAT, RFC 6598),
// benchmarking (RFC 2544), IPv4 reserved (RFC 1112) and IPv6 NAT64 (RFC 6052, which
// reaches IPv4 private addresses through a translator).
var sharedAddrs = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// PublicAddr reports whether ip is a public unicast address a tenant's webhook may reach
// (WebhookConfig.PublicOnly): not loopback, private (RFC 1918, RFC 4193), link-local,
// unspecified, multicast, nor one of the shared or reserved ranges above; an IPv4-mapped
// IPv6 address is judged as its IPv4 address.
func PublicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range sharedAddrs {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}
