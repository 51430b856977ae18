package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/inbox"
)

// ScopeSend is the scope a caller needs to send notifications (and, over REST, to start
// broadcasts and read statuses). A token with it is a service token.
const ScopeSend = "notifications:send"

// ScopeAdmin is the scope of the REST administration endpoints (templates, segments,
// users' profiles, preferences and devices). A token with it is a service token.
const ScopeAdmin = "notifications:admin"

// DefaultTenant is the tenant of a token without a tenant claim.
const DefaultTenant = "default"

// MinSecretBytes is the shortest HS256 secret NewVerifier accepts (256 bits, the size of
// the HMAC-SHA256 output, as RFC 7518 section 3.2 requires).
const MinSecretBytes = 32

// Config configures a Verifier. At least one of Secret and JWKSURL is required.
type Config struct {
	// Secret, when set, is the HS256 key, at least MinSecretBytes long: HS256 tokens are
	// verified with it and with nothing else, and Sign signs with it. Unset, HS256 tokens
	// are refused.
	Secret []byte
	// JWKSURL, when set, is the JSON Web Key Set whose public keys verify RS256 and ES256
	// tokens (and nothing else): https, or http for a loopback host. Unset, RS256 and
	// ES256 tokens are refused.
	JWKSURL string
	// JWKSRefresh is how often the key set is fetched in the background
	// (DefaultJWKSRefresh when zero).
	JWKSRefresh time.Duration
	// JWKSMinRefresh is the shortest interval between two fetches caused by a token whose
	// kid is not in the set (DefaultJWKSMinRefresh when zero). Such a token waits for a
	// fetch at most JWKSFetchTimeout; within the interval it fails at once.
	JWKSMinRefresh time.Duration
	// JWKSFetchTimeout bounds one fetch (DefaultJWKSFetchTimeout when zero).
	JWKSFetchTimeout time.Duration
	// JWKSMaxBytes bounds the key set's body (DefaultJWKSMaxBytes when zero).
	JWKSMaxBytes int64
	// JWKSClient fetches the key set; nil means a client of its own. Its Timeout and
	// body size are bounded by the settings above either way.
	JWKSClient *http.Client
	// Log receives failed key set fetches; nil means slog.Default().
	Log *slog.Logger
	// Issuer, when non-empty, is required as the token's iss and set by Sign.
	Issuer string
	// Audience, when non-empty, must be one of the token's aud values and is set by Sign.
	Audience string
	// Leeway is the clock skew tolerated when checking exp, nbf and iat.
	Leeway time.Duration
	// Clock is the verifier's clock: it checks exp, nbf and iat, and Sign's iat and exp
	// are read from it. The transports end a long-lived connection (WebSocket, SSE) when
	// its token expires on the same clock (Verifier.Clock), so a test that advances it
	// sees a token expire and its connections end with no wait. Nil means the wall clock.
	Clock clockwork.Clock
}

// Claims is what a verified token says about its caller: a user (a user token), or a
// backend service (a service token: its scopes include ScopeSend or ScopeAdmin) that has
// no user and acts for its tenant.
type Claims struct {
	// TenantID is the tenant claim, DefaultTenant when the token has none.
	TenantID string
	// Subject is the sub claim: the user of a user token, the service of a service token.
	// Sign uses UserID when it is empty.
	Subject string
	// UserID is the viewer's user: the sub claim of a user token, empty for a service
	// token.
	UserID string
	// Scopes are the space-separated values of the scope claim, in token order.
	Scopes []string
	// ExpiresAt is the exp claim.
	ExpiresAt time.Time
	// ValidUntil is the last instant the verifier accepts the token: ExpiresAt plus its
	// leeway. Long-lived connections (WebSocket, SSE) end then. Zero in claims that were
	// not verified.
	ValidUntil time.Time
}

// Viewer returns the caller as the domain's Viewer; its UserID is empty for a service
// token. Code that acts for a user calls User instead.
func (c Claims) Viewer() inbox.Viewer {
	return inbox.Viewer{TenantID: c.TenantID, UserID: c.UserID}
}

// HasScope reports whether the token granted scope s (exact, case-sensitive match).
func (c Claims) HasScope(s string) bool {
	return slices.Contains(c.Scopes, s)
}

// IsService reports whether the token is a service token: its scopes include ScopeSend or
// ScopeAdmin. A service token has no user (UserID is empty).
func (c Claims) IsService() bool {
	return isService(c.Scopes)
}

// isService reports whether scopes make a service token.
func isService(scopes []string) bool {
	return slices.Contains(scopes, ScopeSend) || slices.Contains(scopes, ScopeAdmin)
}

// User returns the user the token names as the domain's Viewer, or an *inbox.Error with
// code FORBIDDEN for a service token (it has no user: a viewer's inbox, preferences and
// subscriptions are a user's own) and UNAUTHENTICATED for claims without a user.
func (c Claims) User() (inbox.Viewer, error) {
	if c.IsService() {
		return inbox.Viewer{}, inbox.Errorf(inbox.CodeForbidden, "a service token (scope %s or %s) has no user", ScopeSend, ScopeAdmin)
	}
	if c.UserID == "" {
		return inbox.Viewer{}, unauthenticated("token names no user")
	}
	return inbox.Viewer{TenantID: c.TenantID, UserID: c.UserID}, nil
}

// Verifier verifies the gateway's tokens (HS256 with the configured secret, RS256 and
// ES256 with the keys of the configured JWKS) and signs HS256 ones. It is safe for
// concurrent use; Close stops its background key set refresh.
type Verifier struct {
	secret   []byte
	jwks     *jwksKeys
	issuer   string
	audience string
	clock    clockwork.Clock
	leeway   time.Duration
	parser   *jwt.Parser
	algs     string // the accepted algorithms, for error messages
}

// NewVerifier returns a Verifier for cfg. It fails when neither a secret nor a JWKS URL is
// given, the secret is shorter than MinSecretBytes, the JWKS URL is not https (or http
// for a loopback host), or a duration or size is negative. With a JWKS URL it fetches the
// key set once before returning (at most JWKSFetchTimeout) and refreshes it until Close;
// a fetch that fails is logged, not returned: RS256 and ES256 tokens fail
// UNAUTHENTICATED until the endpoint answers.
func NewVerifier(cfg Config) (*Verifier, error) {
	if len(cfg.Secret) == 0 && cfg.JWKSURL == "" {
		return nil, errors.New("auth: a JWT secret or a JWKS URL is required")
	}
	if len(cfg.Secret) > 0 && len(cfg.Secret) < MinSecretBytes {
		return nil, fmt.Errorf("auth: JWT secret must be at least %d bytes, got %d", MinSecretBytes, len(cfg.Secret))
	}
	if cfg.Leeway < 0 {
		return nil, errors.New("auth: JWT leeway must not be negative")
	}
	if cfg.JWKSRefresh < 0 || cfg.JWKSMinRefresh < 0 || cfg.JWKSFetchTimeout < 0 || cfg.JWKSMaxBytes < 0 {
		return nil, errors.New("auth: JWKS durations and size must not be negative")
	}
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	var algs []string
	if len(cfg.Secret) > 0 {
		algs = append(algs, jwt.SigningMethodHS256.Alg())
	}
	if cfg.JWKSURL != "" {
		algs = append(algs, jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg())
	}
	opts := []jwt.ParserOption{
		// Only what is configured: "none" and every other algorithm are refused before
		// any key is looked up.
		jwt.WithValidMethods(algs),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(clock.Now),
		// Base64url exactly as RFC 7515 writes it: no padding, no stray trailing bits.
		jwt.WithStrictDecoding(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v := &Verifier{
		leeway:   cfg.Leeway,
		secret:   bytes.Clone(cfg.Secret),
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		clock:    clock,
		parser:   jwt.NewParser(opts...),
		algs:     strings.Join(algs, ", "),
	}
	if cfg.JWKSURL != "" {
		log := cfg.Log
		if log == nil {
			log = slog.Default()
		}
		keys, err := newJWKSKeys(jwksOptions{
			url:          cfg.JWKSURL,
			refresh:      cmpOr(cfg.JWKSRefresh, DefaultJWKSRefresh),
			minRefresh:   cmpOr(cfg.JWKSMinRefresh, DefaultJWKSMinRefresh),
			fetchTimeout: cmpOr(cfg.JWKSFetchTimeout, DefaultJWKSFetchTimeout),
			maxBytes:     cmpOr(cfg.JWKSMaxBytes, DefaultJWKSMaxBytes),
			client:       cfg.JWKSClient,
			log:          log,
		})
		if err != nil {
			return nil, err
		}
		v.jwks = keys
	}
	return v, nil
}

// cmpOr returns v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Close stops the background refresh of the key set (nothing without a JWKS URL). A
// closed Verifier still verifies with the keys it holds.
func (v *Verifier) Close() {
	if v.jwks != nil {
		v.jwks.close()
	}
}

// Clock returns the verifier's clock (Config.Clock, or the wall clock): the one a token's
// ValidUntil is on, so a connection that ends at its token's expiry times it with this
// clock.
func (v *Verifier) Clock() clockwork.Clock { return v.clock }

// CanSign reports whether Sign works: it needs the HS256 secret.
func (v *Verifier) CanSign() bool { return len(v.secret) > 0 }

// errAlgorithm refuses a token whose alg is none of the configured ones (the parser
// refuses it first; this guards the key lookup on its own).
var errAlgorithm = errors.New("algorithm not accepted")

// key returns the key that verifies t: the secret for HS256, a JWKS public key for RS256
// and ES256, never one for the other family (no algorithm confusion: an HS256 token
// signed with a public key's bytes is checked against the secret only).
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errCriticalHeader
	}
	switch t.Method.Alg() {
	case jwt.SigningMethodHS256.Alg():
		if len(v.secret) == 0 {
			return nil, errAlgorithm
		}
		return v.secret, nil
	case jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg():
		if v.jwks == nil {
			return nil, errAlgorithm
		}
		return v.jwks.key(t)
	}
	return nil, errAlgorithm
}

// tokenClaims is the JSON shape of the token's payload.
type tokenClaims struct {
	jwt.RegisteredClaims
	// Tenant is a pointer so that a present but empty tenant is rejected rather than
	// silently defaulted.
	Tenant *string    `json:"tenant,omitempty"`
	Scope  scopeClaim `json:"scope,omitempty"`
}

// UnmarshalJSON decodes the payload after checking the JSON type of every claim the
// gateway reads: exp, iat and nbf must be numbers (jwt.NumericDate also takes a string
// holding a number, which RFC 7519 section 2 does not allow), sub, iss, jti and tenant
// strings, aud and scope a string or an array of strings. A present tenant of another type,
// null included, is an error: only an absent tenant means DefaultTenant. A wrong type is a
// *claimTypeError, which Verify reports as UNAUTHENTICATED naming the claim.
func (tc *tokenClaims) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return &claimTypeError{msg: "token payload is not a JSON object"}
	}
	for name, v := range raw {
		if err := checkClaimType(name, v); err != nil {
			return err
		}
	}
	type plain tokenClaims // without this method
	return json.Unmarshal(b, (*plain)(tc))
}

// claimTypeError is a claim of the wrong JSON type; msg is client-safe.
type claimTypeError struct{ msg string }

func (e *claimTypeError) Error() string { return e.msg }

// checkClaimType checks the JSON type of one claim the gateway reads (see
// tokenClaims.UnmarshalJSON); other claims pass.
func checkClaimType(name string, v json.RawMessage) error {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return &claimTypeError{msg: "token claim " + name + " is empty"}
	}
	isString := v[0] == '"'
	switch name {
	case "exp", "iat", "nbf":
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return &claimTypeError{msg: "token claim " + name + " must be a number (seconds since the epoch)"}
		}
	case "sub", "iss", "jti", "tenant":
		if !isString {
			return &claimTypeError{msg: "token claim " + name + " must be a string"}
		}
	case "aud", "scope":
		if isString {
			return nil
		}
		var list []json.RawMessage
		if v[0] != '[' || json.Unmarshal(v, &list) != nil {
			return &claimTypeError{msg: "token claim " + name + " must be a string or an array of strings"}
		}
		for _, e := range list {
			if e = bytes.TrimSpace(e); len(e) == 0 || e[0] != '"' {
				return &claimTypeError{msg: "token claim " + name + " must be a string or an array of strings"}
			}
		}
	}
	return nil
}

// errCriticalHeader refuses a token with a crit header: RFC 7515 section 4.1.11 requires
// rejecting a token whose crit names an extension the recipient does not understand, and
// the gateway understands none (golang-jwt/jwt/v5 ignores crit altogether).
var errCriticalHeader = errors.New("crit header")

// scopeClaim is the scope claim: a space-separated string (RFC 8693 section 4.2). A JSON
// array of strings is accepted as well, since some issuers emit one.
type scopeClaim []string

// MarshalJSON encodes the scopes as one space-separated string.
func (s scopeClaim) MarshalJSON() ([]byte, error) {
	return json.Marshal(strings.Join(s, " "))
}

// UnmarshalJSON decodes a space-separated string or an array of strings.
func (s *scopeClaim) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = strings.Fields(str)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("scope must be a string")
	}
	var out []string
	for _, v := range list {
		out = append(out, strings.Fields(v)...)
	}
	*s = out
	return nil
}

// unauthenticated returns the UNAUTHENTICATED error with msg.
func unauthenticated(msg string) error {
	return &inbox.Error{Code: inbox.CodeUnauthenticated, Message: msg}
}

// Verify checks token and returns its claims. Every failure is an *inbox.Error with code
// UNAUTHENTICATED.
func (v *Verifier) Verify(token string) (Claims, error) {
	if token == "" {
		return Claims{}, unauthenticated("missing bearer token")
	}
	var tc tokenClaims
	parsed, err := v.parser.ParseWithClaims(token, &tc, v.key)
	if err != nil {
		return Claims{}, v.mapError(parsed, &tc, err)
	}
	if tc.Subject == "" {
		return Claims{}, unauthenticated("token has no subject (sub)")
	}
	if inbox.CheckID("sub", tc.Subject) != nil {
		return Claims{}, unauthenticated("token subject (sub) is not a valid user id")
	}
	tenant := DefaultTenant
	if tc.Tenant != nil {
		tenant = *tc.Tenant
		if inbox.CheckID("tenant", tenant) != nil {
			return Claims{}, unauthenticated("token tenant is not a valid tenant id")
		}
	}
	c := Claims{
		TenantID:   tenant,
		Subject:    tc.Subject,
		Scopes:     []string(tc.Scope),
		ExpiresAt:  tc.ExpiresAt.Time,
		ValidUntil: tc.ExpiresAt.Time.Add(v.leeway),
	}
	if !c.IsService() {
		c.UserID = tc.Subject
	}
	return c, nil
}

// mapError turns a jwt error into a client-safe UNAUTHENTICATED error. The library's own
// text is never shown: it may quote claim values or name internal details.
func (v *Verifier) mapError(parsed *jwt.Token, tc *tokenClaims, err error) error {
	var typeErr *claimTypeError
	switch {
	case errors.As(err, &typeErr):
		return unauthenticated(typeErr.msg)
	case errors.Is(err, errCriticalHeader):
		return unauthenticated("token has critical header parameters (crit) the gateway does not support")
	case errors.Is(err, errAlgorithm):
		return unauthenticated("unsupported token algorithm (want " + v.algs + ")")
	case errors.Is(err, errUnknownKey):
		return unauthenticated("token signing key (kid) not found")
	case errors.Is(err, errKeyUnusable):
		return unauthenticated("token signing key (kid) not usable for its algorithm")
	case errors.Is(err, errKeyType):
		return unauthenticated("token signing key (kid) does not fit its algorithm")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthenticated("malformed token")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if parsed != nil && parsed.Method != nil && !strings.Contains(", "+v.algs+", ", ", "+parsed.Method.Alg()+", ") {
			return unauthenticated("unsupported token algorithm (want " + v.algs + ")")
		}
		return unauthenticated("invalid token signature")
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return unauthenticated("unverifiable token")
	case errors.Is(err, jwt.ErrTokenExpired):
		return unauthenticated("token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return unauthenticated("token not valid yet")
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return unauthenticated("token issued in the future")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return unauthenticated("token issuer (iss) not accepted")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return unauthenticated("token audience (aud) not accepted")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		switch {
		case tc.ExpiresAt == nil:
			return unauthenticated("token has no expiry (exp)")
		case v.issuer != "" && tc.Issuer == "":
			return unauthenticated("token has no issuer (iss)")
		case v.audience != "" && len(tc.Audience) == 0:
			return unauthenticated("token has no audience (aud)")
		}
		return unauthenticated("token is missing a required claim")
	}
	return unauthenticated("invalid token")
}

// Sign returns an HS256 token for c that Verify accepts: sub is c.Subject, or c.UserID
// when Subject is empty (with ScopeSend or ScopeAdmin in c.Scopes the token is a service
// token and sub names the service), tenant is
// c.TenantID (omitted when empty, which Verify reads as DefaultTenant), scope is c.Scopes
// joined by spaces, iat is now, and exp is now+ttl, or c.ExpiresAt when ttl is zero; iss
// and aud are set when configured. It fails when the Verifier has no secret, the ids
// would not pass Verify, or neither ttl nor c.ExpiresAt is given.
func (v *Verifier) Sign(c Claims, ttl time.Duration) (string, error) {
	if len(v.secret) == 0 {
		return "", errors.New("auth: sign: no HS256 secret configured")
	}
	sub := cmpOr(c.Subject, c.UserID)
	if err := inbox.CheckID("user", sub); err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	if c.TenantID != "" {
		if err := inbox.CheckID("tenant", c.TenantID); err != nil {
			return "", fmt.Errorf("auth: sign: %w", err)
		}
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r < 0x21 || r == 0x7f }) {
			return "", fmt.Errorf("auth: sign: scope %q must be non-empty printable text without spaces", s)
		}
	}
	now := v.clock.Now()
	exp := c.ExpiresAt
	switch {
	case ttl > 0:
		exp = now.Add(ttl)
	case ttl < 0 || exp.IsZero():
		return "", errors.New("auth: sign: a positive ttl or an ExpiresAt is required")
	}
	tc := tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   sub,
			Issuer:    v.issuer,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
		Scope: scopeClaim(c.Scopes),
	}
	if v.audience != "" {
		tc.Audience = jwt.ClaimStrings{v.audience}
	}
	if c.TenantID != "" {
		tenant := c.TenantID
		tc.Tenant = &tenant
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, tc).SignedString(v.secret)
	if err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	return s, nil
}

// FromHeader verifies the token of an Authorization header value "Bearer <token>" (the
// scheme is case-insensitive, RFC 9110 section 11.1). It is also how WebSocket and SSE
// connections authenticate with the Authorization value of their connection_init payload.
func (v *Verifier) FromHeader(value string) (Claims, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return Claims{}, unauthenticated("missing bearer token")
	}
	scheme, token, _ := strings.Cut(value, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return Claims{}, unauthenticated("unsupported authorization scheme (want Bearer)")
	}
	return v.Verify(strings.TrimSpace(token))
}
