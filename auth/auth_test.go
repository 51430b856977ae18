package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/inbox"
)

var (
	testSecret = []byte("0123456789abcdef0123456789abcdef")
	otherKey   = []byte("fedcba9876543210fedcba9876543210")
	testNow    = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
)

// newTestVerifier returns a Verifier over testSecret whose clock is testNow.
func newTestVerifier(t *testing.T, cfg Config) *Verifier {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	cfg.Clock = clockwork.NewFakeClockAt(testNow)
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// signRaw signs claims with method and key, bypassing Sign's checks.
func signRaw(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// base returns valid claims for testNow, with overrides applied (a nil value deletes).
func base(overrides jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{
		"sub":    "u1",
		"tenant": "acme",
		"scope":  "inbox:write inbox:read",
		"iat":    testNow.Add(-time.Minute).Unix(),
		"exp":    testNow.Add(time.Hour).Unix(),
	}
	for k, v := range overrides {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func TestNewVerifierRejectsShortSecret(t *testing.T) {
	if _, err := NewVerifier(Config{Secret: []byte("short")}); err == nil {
		t.Fatal("NewVerifier with a 5-byte secret: want error")
	}
	if _, err := NewVerifier(Config{Secret: testSecret[:31]}); err == nil {
		t.Fatal("NewVerifier with a 31-byte secret: want error")
	}
	if _, err := NewVerifier(Config{Secret: testSecret, Leeway: -time.Second}); err == nil {
		t.Fatal("NewVerifier with a negative leeway: want error")
	}
}

func TestVerify(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	hs := jwt.SigningMethodHS256
	withIssAud := Config{Issuer: "https://issuer.example", Audience: "inbox-gateway"}

	tests := []struct {
		name    string
		cfg     Config
		token   func(t *testing.T) string
		want    Claims
		wantErr string // substring of the UNAUTHENTICATED message; "" = success
	}{
		{
			name:  "valid",
			token: func(t *testing.T) string { return signRaw(t, hs, testSecret, base(nil)) },
			want: Claims{TenantID: "acme", UserID: "u1", Scopes: []string{"inbox:write", "inbox:read"},
				ExpiresAt: testNow.Add(time.Hour)},
		},
		{
			name:  "tenant defaults",
			token: func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"tenant": nil})) },
			want: Claims{TenantID: DefaultTenant, UserID: "u1", Scopes: []string{"inbox:write", "inbox:read"},
				ExpiresAt: testNow.Add(time.Hour)},
		},
		{
			name:  "scope absent",
			token: func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"scope": nil})) },
			want:  Claims{TenantID: "acme", UserID: "u1", ExpiresAt: testNow.Add(time.Hour)},
		},
		{
			name: "scope with extra spaces",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"scope": "  a   b\tc "}))
			},
			want: Claims{TenantID: "acme", UserID: "u1", Scopes: []string{"a", "b", "c"}, ExpiresAt: testNow.Add(time.Hour)},
		},
		{
			name: "scope as array",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"scope": []string{"a", "b"}}))
			},
			want: Claims{TenantID: "acme", UserID: "u1", Scopes: []string{"a", "b"}, ExpiresAt: testNow.Add(time.Hour)},
		},
		{
			name: "scope of wrong type",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"scope": 42}))
			},
			wantErr: "token claim scope must be a string or an array of strings",
		},
		{
			name: "expired",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"exp": testNow.Add(-time.Second).Unix()}))
			},
			wantErr: "token expired",
		},
		{
			name: "expired within leeway",
			cfg:  Config{Leeway: time.Minute},
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"exp": testNow.Add(-30 * time.Second).Unix()}))
			},
			want: Claims{TenantID: "acme", UserID: "u1", Scopes: []string{"inbox:write", "inbox:read"},
				ExpiresAt: testNow.Add(-30 * time.Second)},
		},
		{
			name:    "missing exp",
			token:   func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"exp": nil})) },
			wantErr: "token has no expiry",
		},
		{
			name: "not valid yet",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"nbf": testNow.Add(time.Minute).Unix()}))
			},
			wantErr: "token not valid yet",
		},
		{
			name: "issued in the future",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"iat": testNow.Add(time.Minute).Unix()}))
			},
			wantErr: "token issued in the future",
		},
		{
			name:    "wrong secret",
			token:   func(t *testing.T) string { return signRaw(t, hs, otherKey, base(nil)) },
			wantErr: "invalid token signature",
		},
		{
			name: "expired and wrong secret reports the signature",
			token: func(t *testing.T) string {
				return signRaw(t, hs, otherKey, base(jwt.MapClaims{"exp": testNow.Add(-time.Hour).Unix()}))
			},
			wantErr: "invalid token signature",
		},
		{
			name: "alg none",
			token: func(t *testing.T) string {
				return signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, base(nil))
			},
			wantErr: "unsupported token algorithm",
		},
		{
			name: "alg none with a forged HS256 signature part",
			token: func(t *testing.T) string {
				good := signRaw(t, hs, testSecret, base(nil))
				none := signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, base(nil))
				return strings.TrimSuffix(none, ".") + good[strings.LastIndex(good, "."):]
			},
			wantErr: "unsupported token algorithm",
		},
		{
			name:    "HS512",
			token:   func(t *testing.T) string { return signRaw(t, jwt.SigningMethodHS512, testSecret, base(nil)) },
			wantErr: "unsupported token algorithm",
		},
		{
			name:    "RS256",
			token:   func(t *testing.T) string { return signRaw(t, jwt.SigningMethodRS256, rsaKey, base(nil)) },
			wantErr: "unsupported token algorithm",
		},
		{
			name:    "missing sub",
			token:   func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"sub": nil})) },
			wantErr: "token has no subject",
		},
		{
			name:    "empty sub",
			token:   func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"sub": ""})) },
			wantErr: "token has no subject",
		},
		{
			name:    "sub with '#'",
			token:   func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"sub": "u#1"})) },
			wantErr: "not a valid user id",
		},
		{
			name: "tenant with '#'",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"tenant": "acme#U#victim"}))
			},
			wantErr: "not a valid tenant id",
		},
		{
			name:    "empty tenant",
			token:   func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"tenant": ""})) },
			wantErr: "not a valid tenant id",
		},
		{
			name:    "tenant of wrong type",
			token:   func(t *testing.T) string { return signRaw(t, hs, testSecret, base(jwt.MapClaims{"tenant": 7})) },
			wantErr: "token claim tenant must be a string",
		},
		{
			name: "iss and aud match",
			cfg:  withIssAud,
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"iss": "https://issuer.example", "aud": []string{"other", "inbox-gateway"}}))
			},
			want: Claims{TenantID: "acme", UserID: "u1", Scopes: []string{"inbox:write", "inbox:read"},
				ExpiresAt: testNow.Add(time.Hour)},
		},
		{
			name: "wrong iss",
			cfg:  withIssAud,
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"iss": "https://evil.example", "aud": "inbox-gateway"}))
			},
			wantErr: "token issuer (iss) not accepted",
		},
		{
			name: "missing iss",
			cfg:  withIssAud,
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"aud": "inbox-gateway"}))
			},
			wantErr: "token has no issuer",
		},
		{
			name: "wrong aud",
			cfg:  withIssAud,
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"iss": "https://issuer.example", "aud": "billing"}))
			},
			wantErr: "token audience (aud) not accepted",
		},
		{
			name: "missing aud",
			cfg:  withIssAud,
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"iss": "https://issuer.example"}))
			},
			wantErr: "token has no audience",
		},
		{
			name: "iss and aud ignored when not configured",
			token: func(t *testing.T) string {
				return signRaw(t, hs, testSecret, base(jwt.MapClaims{"iss": "anyone", "aud": "anything"}))
			},
			want: Claims{TenantID: "acme", UserID: "u1", Scopes: []string{"inbox:write", "inbox:read"},
				ExpiresAt: testNow.Add(time.Hour)},
		},
		{name: "empty", token: func(*testing.T) string { return "" }, wantErr: "missing bearer token"},
		{name: "garbage", token: func(*testing.T) string { return "not.a.jwt" }, wantErr: "malformed token"},
		{name: "two parts", token: func(*testing.T) string { return "abc.def" }, wantErr: "malformed token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newTestVerifier(t, tt.cfg)
			tok := tt.token(t)
			got, err := v.Verify(tok)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if !claimsEqual(got, tt.want) {
					t.Fatalf("Verify = %+v, want %+v", got, tt.want)
				}
				return
			}
			checkUnauthenticated(t, err, tt.wantErr)
			if tok != "" && strings.Contains(err.Error(), tok) {
				t.Errorf("error %q echoes the token", err)
			}
		})
	}
}

// claimsEqual compares claims, treating nil and empty scopes alike; a want without a
// Subject expects the UserID as the subject.
func claimsEqual(got, want Claims) bool {
	return got.TenantID == want.TenantID && got.UserID == want.UserID && got.Subject == cmpOr(want.Subject, want.UserID) &&
		got.ExpiresAt.Equal(want.ExpiresAt) && slices.Equal(got.Scopes, want.Scopes)
}

// checkUnauthenticated fails unless err is an UNAUTHENTICATED *inbox.Error whose message
// contains want.
func checkUnauthenticated(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error containing %q, got nil", want)
	}
	var e *inbox.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *inbox.Error", err, err)
	}
	if e.Code != inbox.CodeUnauthenticated {
		t.Errorf("code = %q, want %q", e.Code, inbox.CodeUnauthenticated)
	}
	if !strings.Contains(e.Message, want) {
		t.Errorf("message = %q, want it to contain %q", e.Message, want)
	}
	if strings.Contains(strings.ToLower(e.Message), "jwt") || strings.Contains(e.Message, "crypto") {
		t.Errorf("message %q leaks library internals", e.Message)
	}
}

func TestSignRoundTrip(t *testing.T) {
	for _, cfg := range []Config{{}, {Issuer: "iss", Audience: "aud"}} {
		v := newTestVerifier(t, cfg)
		user := Claims{TenantID: "acme", UserID: "u-1", Scopes: []string{"inbox:read", "other"}}
		tok, err := v.Sign(user, time.Hour)
		if err != nil {
			t.Fatalf("Sign: %v", err)
		}
		got, err := v.Verify(tok)
		if err != nil {
			t.Fatalf("Verify(Sign()): %v", err)
		}
		user.ExpiresAt = testNow.Add(time.Hour)
		if !claimsEqual(got, user) {
			t.Fatalf("round trip = %+v, want %+v", got, user)
		}
		if !got.HasScope("other") || got.HasScope("inbox") || got.IsService() {
			t.Errorf("HasScope/IsService wrong for %v", got.Scopes)
		}
		if vw, err := got.User(); err != nil || vw != (inbox.Viewer{TenantID: "acme", UserID: "u-1"}) || got.Viewer() != vw {
			t.Errorf("User = %+v, %v; Viewer = %+v", vw, err, got.Viewer())
		}

		// A service token: sub names the service, there is no user.
		svc := Claims{TenantID: "acme", Subject: "billing", Scopes: []string{ScopeSend, "other"}}
		tok, err = v.Sign(svc, time.Hour)
		if err != nil {
			t.Fatalf("Sign: %v", err)
		}
		gotSvc, err := v.Verify(tok)
		if err != nil {
			t.Fatalf("Verify(Sign(service)): %v", err)
		}
		svc.ExpiresAt = testNow.Add(time.Hour)
		if !claimsEqual(gotSvc, svc) || !gotSvc.IsService() || !gotSvc.HasScope(ScopeSend) {
			t.Fatalf("service round trip = %+v, want %+v", gotSvc, svc)
		}
		if _, err := gotSvc.User(); inbox.ErrorCode(err) != inbox.CodeForbidden {
			t.Errorf("User() of a service token: %v, want FORBIDDEN", err)
		}

		// The claims on the wire: iat, exp, and iss/aud when configured.
		var raw jwt.MapClaims
		if _, _, err := jwt.NewParser().ParseUnverified(tok, &raw); err != nil {
			t.Fatal(err)
		}
		if raw["iat"] != float64(testNow.Unix()) || raw["scope"] != ScopeSend+" other" || raw["sub"] != "billing" {
			t.Errorf("wire claims = %v", raw)
		}
		if cfg.Issuer != "" && (raw["iss"] != cfg.Issuer || raw["aud"] == nil) {
			t.Errorf("wire claims lack iss/aud: %v", raw)
		}
		if cfg.Issuer == "" && (raw["iss"] != nil || raw["aud"] != nil) {
			t.Errorf("wire claims have unconfigured iss/aud: %v", raw)
		}
	}
}

func TestSignDefaultsAndErrors(t *testing.T) {
	v := newTestVerifier(t, Config{})

	tok, err := v.Sign(Claims{UserID: "u1", ExpiresAt: testNow.Add(time.Minute)}, 0)
	if err != nil {
		t.Fatalf("Sign with ExpiresAt: %v", err)
	}
	got, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.TenantID != DefaultTenant || !got.ExpiresAt.Equal(testNow.Add(time.Minute)) || len(got.Scopes) != 0 {
		t.Errorf("Verify = %+v", got)
	}

	for name, c := range map[string]Claims{
		"no user":          {TenantID: "t"},
		"user with #":      {UserID: "a#b"},
		"tenant with #":    {UserID: "u", TenantID: "t#"},
		"scope with space": {UserID: "u", Scopes: []string{"a b"}},
		"empty scope":      {UserID: "u", Scopes: []string{""}},
	} {
		if _, err := v.Sign(c, time.Hour); err == nil {
			t.Errorf("Sign(%s): want error", name)
		}
	}
	if _, err := v.Sign(Claims{UserID: "u"}, 0); err == nil {
		t.Error("Sign without ttl or ExpiresAt: want error")
	}
	if _, err := v.Sign(Claims{UserID: "u", ExpiresAt: testNow.Add(time.Hour)}, -time.Hour); err == nil {
		t.Error("Sign with negative ttl: want error")
	}
}

func TestFromHeader(t *testing.T) {
	v := newTestVerifier(t, Config{})
	tok, err := v.Sign(Claims{TenantID: "acme", UserID: "u1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Bearer " + tok, "bearer " + tok, "BEARER  " + tok, " Bearer " + tok + " "} {
		c, err := v.FromHeader(h)
		if err != nil {
			t.Errorf("FromHeader(%q): %v", h[:10], err)
			continue
		}
		if c.UserID != "u1" || c.TenantID != "acme" {
			t.Errorf("FromHeader = %+v", c)
		}
	}
	for h, want := range map[string]string{
		"":               "missing bearer token",
		"Bearer":         "missing bearer token",
		"Bearer ":        "missing bearer token",
		"Basic dTpw":     "unsupported authorization scheme",
		tok:              "unsupported authorization scheme",
		"Bearer garbage": "malformed token",
	} {
		_, err := v.FromHeader(h)
		checkUnauthenticated(t, err, want)
	}
}

func TestContext(t *testing.T) {
	ctx := t.Context()
	if _, ok := FromContext(ctx); ok {
		t.Fatal("FromContext on a bare context: ok = true")
	}
	want := Claims{TenantID: "t", Subject: "u", UserID: "u", Scopes: []string{"inbox:read"}}
	got, ok := FromContext(WithClaims(ctx, want))
	if !ok || !claimsEqual(got, want) {
		t.Fatalf("FromContext = %+v, %v", got, ok)
	}
}
