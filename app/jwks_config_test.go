package app

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// INBOX_JWKS_URL and INBOX_JWKS_REFRESH: the refresh has a default and bounds; a JWKS may
// replace the HS256 secret outside dev mode (then the cursor key must be given, and the
// token command, which signs HS256, has nothing to sign with); without either the gateway
// refuses to start.
func TestJWKSConfig(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil || cfg.JWKSRefresh != 15*time.Minute || cfg.JWKSURL != "" {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	for _, v := range []string{"1s", "25h", "0s"} {
		t.Setenv("INBOX_JWKS_REFRESH", v)
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "INBOX_JWKS_REFRESH") {
			t.Errorf("INBOX_JWKS_REFRESH=%s: %v", v, err)
		}
	}

	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	defer jwks.Close()
	log := slog.New(slog.DiscardHandler)
	base := Config{JWKSRefresh: time.Minute}

	if _, err := newVerifier(base, log); err == nil || !strings.Contains(err.Error(), "INBOX_JWKS_URL") {
		t.Errorf("neither secret nor JWKS: %v", err)
	}
	jwksOnly := base
	jwksOnly.JWKSURL = jwks.URL
	v, err := newVerifier(jwksOnly, log)
	if err != nil {
		t.Fatalf("JWKS without a secret: %v", err)
	}
	v.Close()
	if v.CanSign() {
		t.Error("a JWKS-only verifier signs")
	}
	if _, err := cursorKey(jwksOnly); err == nil || !strings.Contains(err.Error(), "INBOX_CURSOR_SECRET") {
		t.Errorf("cursor key without a JWT secret: %v", err)
	}
	jwksOnly.CursorSecret = strings.Repeat("c", 32)
	if _, err := cursorKey(jwksOnly); err != nil {
		t.Errorf("cursor key with INBOX_CURSOR_SECRET: %v", err)
	}
	var out strings.Builder
	if err := tokenCommand(jwksOnly, []string{"--user", "u"}, &out); err == nil {
		t.Errorf("token without a secret printed %q", out.String())
	}
	bad := base
	bad.JWTSecret, bad.JWKSURL = strings.Repeat("s", 32), "http://idp.example/jwks"
	if _, err := newVerifier(bad, log); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("plain http JWKS elsewhere than loopback: %v", err)
	}
}
