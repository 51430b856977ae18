package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// Defaults of the JWKS settings of Config.
const (
	// DefaultJWKSRefresh is how often the key set is fetched again in the background.
	DefaultJWKSRefresh = 15 * time.Minute
	// DefaultJWKSMinRefresh is the shortest interval between two fetches caused by tokens
	// with an unknown kid: a flood of forged kids costs at most one fetch per interval.
	DefaultJWKSMinRefresh = 30 * time.Second
	// DefaultJWKSFetchTimeout bounds one fetch of the key set (connect, headers and body).
	DefaultJWKSFetchTimeout = 5 * time.Second
	// DefaultJWKSMaxBytes bounds the body of the key set: a larger one fails the fetch.
	DefaultJWKSMaxBytes = 1 << 20
)

// maxJWKSRedirects bounds the redirects one fetch follows.
const maxJWKSRedirects = 3

// minRSABits is the shortest RSA modulus accepted for RS256 (RFC 7518 section 3.3).
const minRSABits = 2048

// Errors of the JWKS key lookup; Verify reports each as UNAUTHENTICATED with its own text.
var (
	// errUnknownKey: the kid is not in the key set, even after a refresh (or none was
	// allowed by the rate limit, or the JWKS endpoint does not answer).
	errUnknownKey = errors.New("unknown key id")
	// errKeyType: the key the kid names does not fit the token's alg (an RSA key for
	// ES256, a P-384 key, a symmetric key, an RSA key under 2048 bits).
	errKeyType = errors.New("key does not fit the algorithm")
	// errKeyUnusable: the JWK's own alg or use forbids verifying this token with it.
	errKeyUnusable = errors.New("key not usable for this token")
)

// jwksKeys verifies RS256 and ES256 signatures with the public keys of a remote JSON Web
// Key Set (RFC 7517), held by a github.com/MicahParks/jwkset HTTP client storage: the set is cached in memory, fetched again every refresh interval and when a
// token names an unknown kid (at most once per minRefresh), each fetch bounded in time
// and body size. A failed fetch keeps the keys it had; an endpoint down at start leaves
// the set empty until a later fetch succeeds.
type jwksKeys struct {
	ctx          context.Context
	cancel       context.CancelFunc
	storage      jwkset.Storage
	fetchTimeout time.Duration
}

// jwksOptions are the JWKS settings of Config with their defaults applied.
type jwksOptions struct {
	url          string
	refresh      time.Duration
	minRefresh   time.Duration
	fetchTimeout time.Duration
	maxBytes     int64
	client       *http.Client
	log          *slog.Logger
}

// checkJWKSURL accepts an absolute https URL, or http for a loopback host (a local
// identity provider or a test server): key sets fetched in the clear could be replaced on
// the way.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		// Not quoted: what did not parse may hold a password (url.Parse's error quotes it).
		return errors.New("auth: the JWKS URL is not an absolute URL (https://host/path)")
	}
	raw = u.Redacted() // the URL as errors show it: without its password
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("auth: JWKS URL %q must use https (http only for a loopback host)", raw)
	}
	return fmt.Errorf("auth: JWKS URL %q must be https", raw)
}

// newJWKSKeys starts the key source: one fetch now (its failure is logged, not returned,
// so the gateway starts while the endpoint is down) and a background refresh until
// close.
func newJWKSKeys(o jwksOptions) (*jwksKeys, error) {
	if err := checkJWKSURL(o.url); err != nil {
		return nil, err
	}
	client := o.client
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// A copy: the timeout bounds every fetch, the transport bounds the body.
	c := *client
	c.Timeout = o.fetchTimeout
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = limitedBodyTransport{base: base, max: o.maxBytes}
	// A redirect must meet the URL's own rule (no downgrade to plain http elsewhere).
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxJWKSRedirects {
			return fmt.Errorf("more than %d redirects", maxJWKSRedirects)
		}
		return checkJWKSURL(req.URL.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	logErr := func(ctx context.Context, err error) {
		o.log.WarnContext(ctx, "JWKS fetch failed", "url", o.url, "error", err)
	}
	remote, err := jwkset.NewStorageFromHTTP(o.url, jwkset.HTTPClientStorageOptions{
		Client:                    &c,
		Ctx:                       ctx,
		HTTPTimeout:               o.fetchTimeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshErrorHandler:       logErr,
		RefreshInterval:           o.refresh,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("auth: JWKS: %w", err)
	}
	storage, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs: map[string]jwkset.Storage{o.url: remote},
		// Zero: the limiter waits only within the lookup's own deadline (fetchTimeout),
		// so a kid arriving while the limit holds fails at once instead of queueing
		// for a later refresh.
		RateLimitWaitMax:  0,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(o.minRefresh), 1),
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("auth: JWKS: %w", err)
	}
	return &jwksKeys{ctx: ctx, cancel: cancel, storage: storage, fetchTimeout: o.fetchTimeout}, nil
}

// close stops the background refresh.
func (k *jwksKeys) close() { k.cancel() }

// key returns the public key that verifies t, whose alg is RS256 or ES256: the key named
// by its kid (fetching the set again, within the rate limit, when the kid is unknown), or,
// for a token without a kid, every key of the set usable for the alg. A JWK whose own alg
// differs from the token's, or whose use is not "sig", is refused, and the key's type must
// fit the alg, so that no key of the set verifies a token of another family.
func (k *jwksKeys) key(t *jwt.Token) (any, error) {
	ctx, cancel := context.WithTimeout(k.ctx, k.fetchTimeout)
	defer cancel()
	alg := t.Method.Alg()
	kidValue, hasKid := t.Header["kid"]
	if !hasKid {
		all, err := k.storage.KeyReadAll(ctx)
		if err != nil {
			return nil, errUnknownKey
		}
		var fit jwt.VerificationKeySet
		for _, j := range all {
			if usable(j, alg) == nil {
				fit.Keys = append(fit.Keys, publicOf(j.Key()))
			}
		}
		if len(fit.Keys) == 0 {
			return nil, errUnknownKey
		}
		return fit, nil
	}
	kid, ok := kidValue.(string)
	if !ok || kid == "" {
		return nil, errUnknownKey
	}
	// Not found, a refresh refused by the rate limit, or a failed fetch: all mean the
	// gateway has no such key now.
	j, err := k.storage.KeyRead(ctx, kid)
	if err != nil {
		return nil, errUnknownKey
	}
	if err := usable(j, alg); err != nil {
		return nil, err
	}
	return publicOf(j.Key()), nil
}

// usable checks that the JWK j may verify a token of alg: its alg, when given, is alg;
// its use, when given, is "sig"; its key fits alg.
func usable(j jwkset.JWK, alg string) error {
	m := j.Marshal()
	if (m.ALG != "" && m.ALG.String() != alg) || (m.USE != "" && m.USE != jwkset.UseSig) {
		return errKeyUnusable
	}
	if !keyFits(alg, publicOf(j.Key())) {
		return errKeyType
	}
	return nil
}

// publicOf returns the public half of key when it is a private key (a set should publish
// only public keys; one that leaks a private key still verifies with its public half).
func publicOf(key any) any {
	if pk, ok := key.(interface{ Public() crypto.PublicKey }); ok {
		return pk.Public()
	}
	return key
}

// keyFits reports whether key is a public key of the family alg names: RSA of at least
// 2048 bits for RS256, ECDSA on P-256 for ES256.
func keyFits(alg string, key any) bool {
	switch alg {
	case jwt.SigningMethodRS256.Alg():
		k, ok := key.(*rsa.PublicKey)
		return ok && k.N.BitLen() >= minRSABits
	case jwt.SigningMethodES256.Alg():
		k, ok := key.(*ecdsa.PublicKey)
		return ok && k.Curve == elliptic.P256()
	}
	return false
}

// limitedBodyTransport fails a response whose body is longer than max bytes.
type limitedBodyTransport struct {
	base http.RoundTripper
	max  int64
}

// RoundTrip sends req through the base transport and bounds the response body.
func (t limitedBodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("JWKS response of %d bytes is over the %d-byte limit", resp.ContentLength, t.max)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

// errBodyTooLarge is the read error of a key set over the size limit.
var errBodyTooLarge = errors.New("JWKS response over the size limit")

// limitedBody reads at most left bytes, then fails with errBodyTooLarge (rather than
// io.EOF, which would let a truncated set parse).
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
