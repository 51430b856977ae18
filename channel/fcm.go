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
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/jwt"
)

// FCMScope is the OAuth2 scope of FCM HTTP v1's send.
const FCMScope = "https://www.googleapis.com/auth/firebase.messaging"

// DefaultFCMURL is FCM's origin.
const DefaultFCMURL = "https://fcm.googleapis.com"

// FCMConfig configures NewFCM.
type FCMConfig struct {
	// CredentialsJSON is a Google service-account key file (type "service_account"):
	// client_email and private_key sign the OAuth2 JWT assertion, token_uri is where the
	// access token is fetched (tests point it at a local server), project_id names the
	// FCM project unless ProjectID is set.
	CredentialsJSON []byte
	// ProjectID overrides the credentials' project_id.
	ProjectID string
	// BaseURL is FCM's origin (scheme://host[:port]); "" means DefaultFCMURL.
	BaseURL string
	// Client makes the token and the send requests; nil means a new http.Client.
	Client *http.Client
	// Timeout bounds one Send, the token fetch included, when > 0 (ctx's deadline
	// applies as well). A token fetch still running when a Send gives up goes on in the
	// background, bounded by Timeout (30s when 0), and serves the next Send.
	Timeout time.Duration
}

// NewFCM returns the FCM HTTP v1 adapter: one POST {BaseURL}/v1/projects/{project}/messages:send
// per Send, with an OAuth2 access token from the service account (fetched from token_uri,
// reused until it expires, one fetch at a time). Message.To is the
// registration token, Title and Body the notification, Data the data payload (as is).
//
// Answers: 200 → Result.MessageID is FCM's message name ("projects/p/messages/..."). Errors
// by FCM's errorCode (the FcmError detail; the status when none): UNREGISTERED →
// Unregistered; INVALID_ARGUMENT, SENDER_ID_MISMATCH, THIRD_PARTY_AUTH_ERROR → Permanent;
// QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL → Transient with Retry-After; otherwise 429 and
// 5xx Transient, 401 (the access token refused: it is dropped and fetched again on the next
// Send) Transient, other 4xx Permanent. A token endpoint answering 4xx (bad credentials)
// → Permanent, 429/5xx → Transient. Timeouts and connection failures → Transient.
func NewFCM(cfg FCMConfig) (Channel, error) {
	conf, err := google.JWTConfigFromJSON(cfg.CredentialsJSON, FCMScope)
	if err != nil {
		return nil, fmt.Errorf("channel: FCM credentials: %w", err)
	}
	project := cfg.ProjectID
	if project == "" {
		var f struct {
			ProjectID string `json:"project_id"`
		}
		if err := json.Unmarshal(cfg.CredentialsJSON, &f); err != nil {
			return nil, fmt.Errorf("channel: FCM credentials: %w", err)
		}
		project = f.ProjectID
	}
	if project == "" {
		return nil, errors.New("channel: FCM credentials have no project_id and no ProjectID is set")
	}
	if conf.TokenURL == "" {
		return nil, errors.New("channel: FCM credentials have no token_uri")
	}
	base := strings.TrimSuffix(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultFCMURL
	}
	if _, err := url.Parse(base); err != nil {
		return nil, fmt.Errorf("channel: FCM base URL: %w", err)
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{}
	}
	tokenClient := *client
	if tokenClient.Timeout == 0 {
		tokenClient.Timeout = cfg.Timeout
		if tokenClient.Timeout == 0 {
			tokenClient.Timeout = 30 * time.Second
		}
	}
	return &fcm{
		client:  client,
		sendURL: base + "/v1/projects/" + url.PathEscape(project) + "/messages:send",
		timeout: cfg.Timeout,
		tokens: &fcmTokens{
			conf: conf,
			ctx:  context.WithValue(context.Background(), oauth2.HTTPClient, &tokenClient),
		},
	}, nil
}

type fcm struct {
	client  *http.Client
	sendURL string
	timeout time.Duration
	tokens  *fcmTokens
}

// Provider returns ProviderFCM.
func (f *fcm) Provider() string { return ProviderFCM }

// fcmMessage is FCM HTTP v1's send body: {"message": {...}}.
type fcmMessage struct {
	Message struct {
		Token        string            `json:"token"`
		Notification *fcmNotification  `json:"notification,omitempty"`
		Data         map[string]string `json:"data,omitempty"`
	} `json:"message"`
}

type fcmNotification struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
}

// fcmErrorBody is Google's error document; FCM's own code is in the FcmError detail.
type fcmErrorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type      string `json:"@type"`
			ErrorCode string `json:"errorCode"`
		} `json:"details"`
	} `json:"error"`
}

// Send makes one send request (after a token fetch when no valid token is cached).
func (f *fcm) Send(ctx context.Context, m Message) (Result, error) {
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	if m.To == "" {
		return Result{}, &Error{Provider: ProviderFCM, Kind: Permanent, Err: errors.New("no registration token")}
	}
	tok, err := f.tokens.get(ctx)
	if err != nil {
		return Result{}, classifyTokenError(err)
	}
	var body fcmMessage
	body.Message.Token = m.To
	if m.Title != "" || m.Body != "" {
		body.Message.Notification = &fcmNotification{Title: m.Title, Body: m.Body}
	}
	body.Message.Data = m.Data
	raw, err := json.Marshal(body)
	if err != nil {
		return Result{}, &Error{Provider: ProviderFCM, Kind: Permanent, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.sendURL, bytes.NewReader(raw))
	if err != nil {
		return Result{}, &Error{Provider: ProviderFCM, Kind: Permanent, Err: err}
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := f.client.Do(req)
	if err != nil {
		return Result{}, providerTransportError(ProviderFCM, err)
	}
	defer resp.Body.Close()
	answer, err := readProviderBody(resp.Body)
	if err != nil {
		return Result{}, providerTransportError(ProviderFCM, err)
	}
	if resp.StatusCode == http.StatusOK {
		var ok struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(answer, &ok); err != nil || ok.Name == "" {
			// FCM accepted the message (200) but its answer is unreadable: the message is
			// sent; report it without an id rather than send it again.
			return Result{Provider: ProviderFCM}, nil
		}
		return Result{Provider: ProviderFCM, MessageID: ok.Name}, nil
	}
	e := classifyFCM(resp.StatusCode, answer, providerRetryAfter(resp.Header, time.Now()))
	if resp.StatusCode == http.StatusUnauthorized && e.Code != "THIRD_PARTY_AUTH_ERROR" {
		f.tokens.drop(tok)
	}
	return Result{}, e
}

// classifyFCM maps an FCM error answer onto an *Error (see NewFCM).
func classifyFCM(status int, answer []byte, retryAfter time.Duration) *Error {
	var doc fcmErrorBody
	_ = json.Unmarshal(answer, &doc) // a body that is no error document leaves the status alone to decide
	code := doc.Error.Status
	for _, d := range doc.Error.Details {
		if strings.HasSuffix(d.Type, "google.firebase.fcm.v1.FcmError") && d.ErrorCode != "" {
			code = d.ErrorCode
		}
	}
	msg := doc.Error.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := &Error{Provider: ProviderFCM, Status: status, Code: code, Err: errors.New(msg)}
	switch code {
	case "UNREGISTERED":
		e.Kind = Unregistered
	case "INVALID_ARGUMENT", "SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR":
		e.Kind = Permanent
	case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL":
		e.Kind, e.RetryAfter = Transient, retryAfter
	default:
		switch {
		case status == http.StatusTooManyRequests || status >= 500:
			e.Kind, e.RetryAfter = Transient, retryAfter
		case status == http.StatusUnauthorized && code != "THIRD_PARTY_AUTH_ERROR":
			// Our access token was refused (expired early, revoked): the next Send fetches
			// another one.
			e.Kind = Transient
		case status >= 400:
			e.Kind = Permanent
		default:
			// A 1xx/3xx answer is no acceptance: not sent, try again later.
			e.Kind = Transient
		}
	}
	return e
}

// classifyTokenError maps a failed access-token fetch onto an *Error: the token endpoint's
// 4xx (bad or revoked credentials, a clock far off) is Permanent, its 429/5xx and any
// failure to get an answer Transient.
func classifyTokenError(err error) *Error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		st := re.Response.StatusCode
		code, desc := re.ErrorCode, re.ErrorDescription
		if code == "" {
			// The JWT flow leaves the OAuth2 error document (RFC 6749 §5.2) in Body.
			var doc struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			if json.Unmarshal(re.Body, &doc) == nil {
				code, desc = doc.Error, doc.Description
			}
		}
		if desc == "" {
			desc = http.StatusText(st)
		}
		e := &Error{Provider: ProviderFCM, Status: st, Code: code, Err: fmt.Errorf("access token refused: %s", desc)}
		if st == http.StatusTooManyRequests || st >= 500 {
			e.Kind = Transient
			e.RetryAfter = providerRetryAfter(re.Response.Header, time.Now())
		} else {
			e.Kind = Permanent
		}
		return e
	}
	return providerTransportError(ProviderFCM, fmt.Errorf("access token: %w", err))
}

// fcmTokens caches the service account's access token. One fetch runs at a time; a Send
// waits for it within its own ctx (the oauth2 JWT flow does not take a per-call context,
// so a fetch runs in its own goroutine bounded by the token client's timeout).
type fcmTokens struct {
	conf *jwt.Config
	ctx  context.Context // carries the token HTTP client (oauth2.HTTPClient)

	mu       sync.Mutex
	tok      *oauth2.Token
	fetching *tokenFetch
}

type tokenFetch struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

// get returns a valid access token, fetching one when none is cached.
func (c *fcmTokens) get(ctx context.Context) (*oauth2.Token, error) {
	c.mu.Lock()
	if c.tok.Valid() {
		tok := c.tok
		c.mu.Unlock()
		return tok, nil
	}
	f := c.fetching
	if f == nil {
		f = &tokenFetch{done: make(chan struct{})}
		c.fetching = f
		go c.fetch(f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *fcmTokens) fetch(f *tokenFetch) {
	// A fresh source per fetch: conf.TokenSource reuses its token until expiry, which
	// would defeat drop.
	tok, err := c.conf.TokenSource(c.ctx).Token()
	if err == nil && tok.AccessToken == "" {
		tok, err = nil, errors.New("oauth2: token endpoint answered no access_token")
	}
	c.mu.Lock()
	f.tok, f.err = tok, err
	if err == nil {
		c.tok = tok
	}
	c.fetching = nil
	c.mu.Unlock()
	close(f.done)
}

// drop forgets tok when it is still the cached token (FCM refused it).
func (c *fcmTokens) drop(tok *oauth2.Token) {
	c.mu.Lock()
	if c.tok == tok {
		c.tok = nil
	}
	c.mu.Unlock()
}
