package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/inboxgw/gateway/inbox"
)

// keySet holds the test keys.
type keySet struct {
	RSA1, RSA2, RSASmall *rsa.PrivateKey
	EC1, EC384           *ecdsa.PrivateKey
}

// testKeys are generated once: RSA generation is slow.
var testKeys = sync.OnceValue(func() keySet {
	var (
		k   keySet
		err error
	)
	must := func(e error) {
		if e != nil {
			panic(e)
		}
	}
	k.RSA1, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.RSA2, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.RSASmall, err = rsa.GenerateKey(rand.Reader, 1024)
	must(err)
	k.EC1, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.EC384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	must(err)
	return k
})

var b64 = base64.RawURLEncoding

// rsaJWK is the public JWK of key (RFC 7518 section 6.3), written by hand so that the
// test does not trust the library to encode what it decodes; alg and use only when set.
func rsaJWK(kid, alg, use string, key *rsa.PrivateKey) map[string]any {
	m := map[string]any{"kty": "RSA", "kid": kid,
		"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes())}
	if alg != "" {
		m["alg"] = alg
	}
	if use != "" {
		m["use"] = use
	}
	return m
}

// ecJWK is the public JWK of key (RFC 7518 section 6.2), from its uncompressed point.
func ecJWK(t testing.TB, kid, alg string, key *ecdsa.PrivateKey) map[string]any {
	t.Helper()
	pt, err := key.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	size := (len(pt) - 1) / 2
	crv := map[int]string{32: "P-256", 48: "P-384"}[size]
	m := map[string]any{"kty": "EC", "kid": kid, "crv": crv,
		"x": b64.EncodeToString(pt[1 : 1+size]), "y": b64.EncodeToString(pt[1+size:])}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

// jwksServer is a local JWKS endpoint: it serves keys (replaceable), counts its fetches,
// and answers 503 while down.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []map[string]any
	pad     int // bytes of an extra member of the set
	down    bool
	fetches atomic.Int64
}

func newJWKSServer(t *testing.T, keys ...map[string]any) *jwksServer {
	t.Helper()
	s := &jwksServer{keys: keys}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		down, keys, pad := s.down, s.keys, s.pad
		s.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		body := map[string]any{"keys": keys}
		if pad > 0 {
			body["x-pad"] = strings.Repeat("x", pad) // read by the decoder, unlike trailing space
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// SetKeys replaces the keys the server publishes.
func (s *jwksServer) SetKeys(keys ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

func (s *jwksServer) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// newJWKSVerifier returns a Verifier of the JWKS at url (and testSecret unless cfg has
// its own or noSecret), closed when the test ends.
func newJWKSVerifier(t *testing.T, url string, cfg Config) *Verifier {
	t.Helper()
	cfg.JWKSURL = url
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	t.Cleanup(v.Close)
	return v
}

// claimsNow returns valid claims for now, with overrides applied (a nil value deletes).
func claimsNow(overrides jwt.MapClaims) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"sub": "alice", "tenant": "acme", "scope": "inbox:read",
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range overrides {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// signKid signs claims with method and key under header kid ("" for none).
func signKid(t testing.TB, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func TestJWKSVerifiesRS256AndES256(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t, rsaJWK("rsa-1", "RS256", "sig", k.RSA1), ecJWK(t, "ec-1", "", k.EC1))
	v := newJWKSVerifier(t, srv.URL, Config{Secret: testSecret})

	rs := signKid(t, jwt.SigningMethodRS256, "rsa-1", k.RSA1, claimsNow(nil))
	got, err := v.Verify(rs)
	if err != nil {
		t.Fatalf("RS256: %v", err)
	}
	if got.UserID != "alice" || got.Subject != "alice" || got.TenantID != "acme" || got.IsService() {
		t.Errorf("RS256 claims = %+v", got)
	}
	es := signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(jwt.MapClaims{"sub": "billing", "scope": ScopeSend}))
	got, err = v.Verify(es)
	if err != nil {
		t.Fatalf("ES256: %v", err)
	}
	if !got.IsService() || got.Subject != "billing" || got.UserID != "" {
		t.Errorf("ES256 service claims = %+v", got)
	}
	// Without a kid, any key of the set that fits the algorithm.
	if _, err := v.Verify(signKid(t, jwt.SigningMethodES256, "", k.EC1, claimsNow(nil))); err != nil {
		t.Errorf("ES256 without kid: %v", err)
	}
	// HS256 beside them, with the secret.
	if _, err := v.Verify(signKid(t, jwt.SigningMethodHS256, "", testSecret, claimsNow(nil))); err != nil {
		t.Errorf("HS256 beside the JWKS: %v", err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1 (at start; the keys are cached)", n)
	}
}

func TestJWKSRefusesConfusionAndForeignAlgorithms(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t,
		rsaJWK("rsa-1", "RS256", "sig", k.RSA1),
		rsaJWK("rsa-noalg", "", "", k.RSA2),
		rsaJWK("rsa-enc", "", "enc", k.RSA2),
		rsaJWK("rsa-small", "", "", k.RSASmall),
		ecJWK(t, "ec-1", "ES256", k.EC1),
		ecJWK(t, "ec-384", "", k.EC384),
		map[string]any{"kty": "oct", "kid": "oct-1", "k": b64.EncodeToString(testSecret)},
	)
	both := newJWKSVerifier(t, srv.URL, Config{Secret: testSecret})
	jwksOnly := newJWKSVerifier(t, srv.URL, Config{})
	secretOnly, err := NewVerifier(Config{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}

	// The public key in the encodings an attacker would try as an HMAC secret.
	der, err := x509.MarshalPKIXPublicKey(&k.RSA1.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	jwkJSON, err := json.Marshal(rsaJWK("rsa-1", "RS256", "sig", k.RSA1))
	if err != nil {
		t.Fatal(err)
	}
	none := signKid(t, jwt.SigningMethodNone, "rsa-1", jwt.UnsafeAllowNoneSignatureType, claimsNow(nil))
	// A kid that is not a string.
	numKid := jwt.NewWithClaims(jwt.SigningMethodRS256, claimsNow(nil))
	numKid.Header["kid"] = 7
	numKidTok, err := numKid.SignedString(k.RSA1)
	if err != nil {
		t.Fatal(err)
	}

	type tc struct {
		name    string
		v       *Verifier
		token   string
		wantErr string
	}
	tests := []tc{
		{"none", both, none, "unsupported token algorithm"},
		{"none without kid", jwksOnly, signKid(t, jwt.SigningMethodNone, "", jwt.UnsafeAllowNoneSignatureType, claimsNow(nil)), "unsupported token algorithm"},
		{"HS256 signed with the PEM public key", both, signKid(t, jwt.SigningMethodHS256, "rsa-1", pemKey, claimsNow(nil)), "invalid token signature"},
		{"HS256 signed with the DER public key", both, signKid(t, jwt.SigningMethodHS256, "rsa-1", der, claimsNow(nil)), "invalid token signature"},
		{"HS256 signed with the JWK JSON", both, signKid(t, jwt.SigningMethodHS256, "rsa-1", jwkJSON, claimsNow(nil)), "invalid token signature"},
		{"HS256 signed with the modulus", both, signKid(t, jwt.SigningMethodHS256, "rsa-1", k.RSA1.N.Bytes(), claimsNow(nil)), "invalid token signature"},
		{"HS256 with a JWKS only", jwksOnly, signKid(t, jwt.SigningMethodHS256, "oct-1", testSecret, claimsNow(nil)), "unsupported token algorithm (want RS256, ES256)"},
		{"HS256 naming an oct JWK", jwksOnly, signKid(t, jwt.SigningMethodHS256, "oct-1", testSecret, claimsNow(nil)), "unsupported token algorithm"},
		{"RS256 with a secret only", secretOnly, signKid(t, jwt.SigningMethodRS256, "rsa-1", k.RSA1, claimsNow(nil)), "unsupported token algorithm"},
		{"RS256 naming an EC key", both, signKid(t, jwt.SigningMethodRS256, "ec-1", k.RSA1, claimsNow(nil)), "signing key (kid) not usable"},
		{"RS256 naming an EC key without alg", both, signKid(t, jwt.SigningMethodRS256, "ec-384", k.RSA1, claimsNow(nil)), "does not fit"},
		{"ES256 naming an RSA key", both, signKid(t, jwt.SigningMethodES256, "rsa-noalg", k.EC1, claimsNow(nil)), "does not fit"},
		{"ES256 naming the RS256 key", both, signKid(t, jwt.SigningMethodES256, "rsa-1", k.EC1, claimsNow(nil)), "not usable"},
		{"RS256 naming the oct key", both, signKid(t, jwt.SigningMethodRS256, "oct-1", k.RSA1, claimsNow(nil)), "does not fit"},
		{"RS256 naming an encryption key", both, signKid(t, jwt.SigningMethodRS256, "rsa-enc", k.RSA2, claimsNow(nil)), "not usable"},
		{"RS256 with a 1024-bit key", both, signKid(t, jwt.SigningMethodRS256, "rsa-small", k.RSASmall, claimsNow(nil)), "does not fit"},
		// Signed by the P-256 key: the lookup refuses the P-384 key it names before any
		// signature is checked (the library will not sign ES256 with P-384).
		{"ES256 naming a P-384 key", both, signKid(t, jwt.SigningMethodES256, "ec-384", k.EC1, claimsNow(nil)), "does not fit"},
		{"ES384", both, signKid(t, jwt.SigningMethodES384, "ec-384", k.EC384, claimsNow(nil)), "unsupported token algorithm"},
		{"RS384", both, signKid(t, jwt.SigningMethodRS384, "rsa-1", k.RSA1, claimsNow(nil)), "unsupported token algorithm"},
		{"PS256", both, signKid(t, jwt.SigningMethodPS256, "rsa-1", k.RSA1, claimsNow(nil)), "unsupported token algorithm"},
		{"RS256 signed by another key", both, signKid(t, jwt.SigningMethodRS256, "rsa-1", k.RSA2, claimsNow(nil)), "invalid token signature"},
		{"RS256 expired", both, signKid(t, jwt.SigningMethodRS256, "rsa-1", k.RSA1, claimsNow(jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})), "token expired"},
		{"RS256 without exp", both, signKid(t, jwt.SigningMethodRS256, "rsa-1", k.RSA1, claimsNow(jwt.MapClaims{"exp": nil})), "no expiry"},
		{"ES256 without sub", both, signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(jwt.MapClaims{"sub": nil})), "no subject"},
		{"RS256 with a numeric kid", both, numKidTok, "not found"},
	}
	// A token accepted by one verifier proves the refusals above are about what they name.
	if _, err := both.Verify(signKid(t, jwt.SigningMethodRS256, "rsa-noalg", k.RSA2, claimsNow(nil))); err != nil {
		t.Fatalf("RS256 under a JWK without alg: %v", err)
	}
	for _, tt := range tests {
		_, err := tt.v.Verify(tt.token)
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		var e *inbox.Error
		if !errors.As(err, &e) || e.Code != inbox.CodeUnauthenticated || !strings.Contains(e.Message, tt.wantErr) {
			t.Errorf("%s: error %v, want UNAUTHENTICATED containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestJWKSIssuerAndAudience(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t, ecJWK(t, "ec-1", "ES256", k.EC1))
	v := newJWKSVerifier(t, srv.URL, Config{Issuer: "https://idp.example", Audience: "inbox"})
	sign := func(c jwt.MapClaims) string { return signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(c)) }
	if _, err := v.Verify(sign(jwt.MapClaims{"iss": "https://idp.example", "aud": []string{"other", "inbox"}})); err != nil {
		t.Fatalf("matching iss and aud: %v", err)
	}
	for name, c := range map[string]jwt.MapClaims{
		"token issuer (iss) not accepted":   {"iss": "https://evil.example", "aud": "inbox"},
		"token has no issuer (iss)":         {"aud": "inbox"},
		"token audience (aud) not accepted": {"iss": "https://idp.example", "aud": "other"},
		"token has no audience (aud)":       {"iss": "https://idp.example"},
	} {
		_, err := v.Verify(sign(c))
		checkUnauthenticated(t, err, name)
	}
}

func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t, rsaJWK("2024", "RS256", "sig", k.RSA1))
	v := newJWKSVerifier(t, srv.URL, Config{JWKSMinRefresh: 50 * time.Millisecond, JWKSRefresh: time.Hour})
	old := signKid(t, jwt.SigningMethodRS256, "2024", k.RSA1, claimsNow(nil))
	next := signKid(t, jwt.SigningMethodRS256, "2025", k.RSA2, claimsNow(nil))
	if _, err := v.Verify(old); err != nil {
		t.Fatalf("current key: %v", err)
	}
	// The issuer publishes the next key beside the old one and starts signing with it:
	// its first token makes the gateway fetch the set again.
	srv.SetKeys(rsaJWK("2024", "RS256", "sig", k.RSA1), rsaJWK("2025", "RS256", "sig", k.RSA2))
	before := srv.fetches.Load()
	if _, err := v.Verify(next); err != nil {
		t.Fatalf("new kid after rotation: %v", err)
	}
	if n := srv.fetches.Load() - before; n != 1 {
		t.Errorf("the new kid cost %d fetches, want 1", n)
	}
	if _, err := v.Verify(old); err != nil {
		t.Errorf("old key while still published: %v", err)
	}
	if _, err := v.Verify(next); err != nil || srv.fetches.Load()-before != 1 {
		t.Errorf("the new key again: %v, fetches %d (want it cached)", err, srv.fetches.Load()-before)
	}

	// The old key is withdrawn; once the set is fetched again its tokens fail. A fetch
	// happens on the next unknown kid (after the rate limit's interval).
	srv.SetKeys(rsaJWK("2025", "RS256", "sig", k.RSA2))
	time.Sleep(60 * time.Millisecond)
	_, err := v.Verify(signKid(t, jwt.SigningMethodRS256, "2026", k.RSA1, claimsNow(nil)))
	checkUnauthenticated(t, err, "signing key (kid) not found")
	_, err = v.Verify(old)
	checkUnauthenticated(t, err, "signing key (kid) not found")
	if _, err := v.Verify(next); err != nil {
		t.Errorf("current key after the withdrawal: %v", err)
	}
}

func TestJWKSBackgroundRefresh(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t, ecJWK(t, "a", "", k.EC1))
	v := newJWKSVerifier(t, srv.URL, Config{JWKSRefresh: 50 * time.Millisecond, JWKSMinRefresh: time.Hour})
	tok := signKid(t, jwt.SigningMethodES256, "a", k.EC1, claimsNow(nil))
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	// A withdrawn key stops verifying without any unknown kid: the periodic fetch.
	srv.SetKeys(ecJWK(t, "b", "", k.EC1))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := v.Verify(tok); err != nil {
			checkUnauthenticated(t, err, "not found")
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a withdrawn key still verifies after 5 s of 50 ms refreshes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJWKSUnknownKidFloodIsBounded(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t, rsaJWK("real", "RS256", "sig", k.RSA1))
	v := newJWKSVerifier(t, srv.URL, Config{JWKSMinRefresh: time.Hour, JWKSFetchTimeout: 2 * time.Second})
	start := time.Now()
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for i := range 500 {
		wg.Go(func() {
			tok := signKid(t, jwt.SigningMethodRS256, fmt.Sprintf("forged-%d", i), k.RSA1, claimsNow(nil))
			if _, err := v.Verify(tok); err == nil {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 0 {
		t.Errorf("%d forged kids accepted", accepted.Load())
	}
	// One fetch at start, at most one for the whole flood.
	if n := srv.fetches.Load(); n > 2 {
		t.Errorf("500 unknown kids caused %d fetches, want at most 2", n)
	}
	// Refused at once, not queued behind the rate limit.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the flood took %v", d)
	}
	// The real key still verifies from the cache.
	if _, err := v.Verify(signKid(t, jwt.SigningMethodRS256, "real", k.RSA1, claimsNow(nil))); err != nil {
		t.Errorf("the real key during the flood: %v", err)
	}
}

func TestJWKSDownAtStart(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t, ecJWK(t, "ec-1", "ES256", k.EC1))
	srv.setDown(true)
	v := newJWKSVerifier(t, srv.URL, Config{Secret: testSecret, JWKSMinRefresh: 100 * time.Millisecond})
	tok := signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(nil))
	_, err := v.Verify(tok)
	checkUnauthenticated(t, err, "signing key (kid) not found")
	// HS256 works meanwhile.
	if _, err := v.Verify(signKid(t, jwt.SigningMethodHS256, "", testSecret, claimsNow(nil))); err != nil {
		t.Errorf("HS256 while the JWKS is down: %v", err)
	}
	srv.setDown(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err = v.Verify(tok); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the JWKS answers again but the token still fails: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// An endpoint that refuses connections at start: the verifier starts at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	begin := time.Now()
	closed := newJWKSVerifier(t, "http://"+addr+"/jwks", Config{})
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("NewVerifier with a refused JWKS took %v", d)
	}
	_, err = closed.Verify(tok)
	checkUnauthenticated(t, err, "not found")
}

func TestJWKSFetchBounds(t *testing.T) {
	t.Parallel()
	k := testKeys()
	// A body over the limit fails the fetch: no key from it.
	big := newJWKSServer(t, ecJWK(t, "ec-1", "ES256", k.EC1))
	big.pad = 64 << 10
	v := newJWKSVerifier(t, big.URL, Config{JWKSMaxBytes: 32 << 10, JWKSMinRefresh: time.Hour})
	_, err := v.Verify(signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(nil)))
	checkUnauthenticated(t, err, "not found")
	// The same set within the limit is read.
	v = newJWKSVerifier(t, big.URL, Config{JWKSMaxBytes: 128 << 10})
	if _, err := v.Verify(signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(nil))); err != nil {
		t.Fatalf("a set within the limit: %v", err)
	}

	// An endpoint that never answers: start and lookups end on the fetch timeout. The
	// server answers no request before cleanup, so a call that returns was ended by the
	// client giving up (the server sees each request abandoned); without the timeout the
	// calls would never return and the test would fail on go test's own deadline. No
	// bound on the wall clock: how fast the machine is has no say here. (It waited for
	// the server to see the request abandoned too, which proves nothing more and hung
	// once for 5 minutes: when the server notices a closed connection is not the
	// client's timeout.)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	slow := newJWKSVerifier(t, hang.URL, Config{JWKSFetchTimeout: 200 * time.Millisecond, JWKSMinRefresh: 10 * time.Millisecond})
	_, err = slow.Verify(signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(nil)))
	checkUnauthenticated(t, err, "not found")
}

func TestNewVerifierJWKSConfig(t *testing.T) {
	t.Parallel()
	if _, err := NewVerifier(Config{}); err == nil {
		t.Error("neither secret nor JWKS: want error")
	}
	for _, u := range []string{"http://idp.example/jwks", "ftp://127.0.0.1/jwks", "/jwks", "127.0.0.1:80"} {
		if _, err := NewVerifier(Config{JWKSURL: u}); err == nil {
			t.Errorf("JWKS URL %q: want error", u)
		}
	}
	if _, err := NewVerifier(Config{JWKSURL: "http://127.0.0.1:1/jwks", JWKSMinRefresh: -time.Second}); err == nil {
		t.Error("negative JWKSMinRefresh: want error")
	}
	srv := newJWKSServer(t)
	v := newJWKSVerifier(t, srv.URL, Config{})
	if v.CanSign() {
		t.Error("CanSign without a secret")
	}
	if _, err := v.Sign(Claims{UserID: "u"}, time.Hour); err == nil {
		t.Error("Sign without a secret: want error")
	}
	if err := checkJWKSURL("https://idp.example/.well-known/jwks.json"); err != nil {
		t.Error(err)
	}
	if err := checkJWKSURL("http://localhost:8080/jwks"); err != nil {
		t.Error(err)
	}
}

func TestJWKSRedirects(t *testing.T) {
	t.Parallel()
	k := testKeys()
	srv := newJWKSServer(t, ecJWK(t, "ec-1", "ES256", k.EC1))
	to := func(target string) *httptest.Server {
		r := httptest.NewServer(http.RedirectHandler(target, http.StatusFound))
		t.Cleanup(r.Close)
		return r
	}
	tok := signKid(t, jwt.SigningMethodES256, "ec-1", k.EC1, claimsNow(nil))
	// To another loopback server: followed.
	if _, err := newJWKSVerifier(t, to(srv.URL).URL, Config{}).Verify(tok); err != nil {
		t.Errorf("redirect to a loopback http JWKS: %v", err)
	}
	// To plain http elsewhere: refused, no key.
	_, err := newJWKSVerifier(t, to("http://idp.example/jwks").URL, Config{JWKSMinRefresh: time.Hour}).Verify(tok)
	checkUnauthenticated(t, err, "not found")
	// Too many hops.
	hop := srv.URL
	for range maxJWKSRedirects + 1 {
		hop = to(hop).URL
	}
	_, err = newJWKSVerifier(t, hop, Config{JWKSMinRefresh: time.Hour}).Verify(tok)
	checkUnauthenticated(t, err, "not found")
}
