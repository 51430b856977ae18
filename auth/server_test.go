package auth_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
)

// The gateway's whole HTTP surface with a verifier of both families: RS256 and ES256
// tokens from a local JWKS next to the harness's HS256 ones; service tokens send and are
// refused a viewer.
func TestJWKSTokensThroughTheServer(t *testing.T) {
	t.Parallel()
	k := auth.TestKeys()
	jwks := auth.NewJWKSServer(t, auth.RSAJWK("rsa-1", "RS256", "sig", k.RSA1), auth.ECJWK(t, "ec-1", "ES256", k.EC1))
	v, err := auth.NewVerifier(auth.Config{Secret: testgw.Secret, Leeway: 30 * time.Second, JWKSURL: jwks.URL,
		JWKSMinRefresh: 50 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	s := testgw.NewWith(t, testgw.Options{Verifier: v})

	alice := auth.SignKid(t, jwt.SigningMethodRS256, "rsa-1", k.RSA1, auth.ClaimsNow(jwt.MapClaims{"tenant": "t1", "sub": "alice"}))
	billing := auth.SignKid(t, jwt.SigningMethodES256, "ec-1", k.EC1,
		auth.ClaimsNow(jwt.MapClaims{"tenant": "t1", "sub": "billing", "scope": auth.ScopeSend}))
	admin := auth.SignKid(t, jwt.SigningMethodES256, "ec-1", k.EC1,
		auth.ClaimsNow(jwt.MapClaims{"tenant": "t1", "sub": "console", "scope": auth.ScopeAdmin}))

	// An ES256 service token sends; the RS256 user token reads what it sent, and so does
	// the same user's HS256 token.
	if res := s.Send(billing, s.SendInput("invoice ready", "alice")); res.Accepted != 1 {
		t.Fatalf("ES256 service send: %+v", res)
	}
	s.ExpectUnread(alice, 1, "alice (RS256) after the ES256 service's send")
	s.ExpectUnread(s.Token("t1", "alice"), 1, "alice (HS256)")
	if res := s.Send(s.ServiceToken("t1", "ops"), s.SendInput("hs256 service", "alice")); res.Accepted != 1 {
		t.Fatalf("HS256 service send: %+v", res)
	}
	s.ExpectUnread(alice, 2, "alice after the HS256 service's send")

	// Service tokens have no user: viewer fields are FORBIDDEN, as is sending without
	// notifications:send.
	for name, tok := range map[string]string{"send": billing, "admin": admin, "hs256": s.ServiceToken("t1", "ops")} {
		r := s.ExpectError(tok, `{ viewer { unreadCount } }`, nil, "FORBIDDEN")
		if !strings.Contains(r.Errors[0].Message, "service token") {
			t.Errorf("%s: viewer refused with %q", name, r.Errors[0].Message)
		}
		s.ExpectError(tok, `{ node(id: "Tm90aWZpY2F0aW9uOjAx") { id } }`, nil, "FORBIDDEN")
		s.ExpectError(tok, `mutation { markAllRead { unreadCount } }`, nil, "FORBIDDEN")
	}
	s.ExpectError(admin, testgw.SendMutation, map[string]any{"in": s.SendInput("x", "alice")}, "FORBIDDEN")
	s.ExpectError(alice, testgw.SendMutation, map[string]any{"in": s.SendInput("x", "bob")}, "FORBIDDEN")

	// A subscription with a service token is refused; with the RS256 user token it runs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := s.DialWS(ctx, "graphql-transport-ws")
	ws.Init(billing)
	ws.Subscribe("1", `subscription { unreadCount }`)
	// gqlgen reports a subscription resolver's error as a result with errors and no data.
	if m := ws.Next(); (m.Type != "error" && m.Type != "next") || !strings.Contains(string(m.Payload), `"code":"FORBIDDEN"`) ||
		strings.Contains(string(m.Payload), `"data":{`) {
		t.Errorf("service token's subscription: got %s %s, want FORBIDDEN without data", m.Type, m.Payload)
	}
	user := s.DialWS(ctx, "graphql-transport-ws")
	user.Init(alice)
	user.Subscribe("1", `subscription { unreadCount }`)
	if n := user.NextCount("1"); n != 2 {
		t.Errorf("alice's unreadCount subscription starts at %d, want 2", n)
	}

	// Refused whole with 401: an unknown kid, an HS256 token keyed with the public key,
	// alg none, an expired token.
	der, err := x509.MarshalPKIXPublicKey(&k.RSA1.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	for name, tok := range map[string]string{
		"unknown kid":                     auth.SignKid(t, jwt.SigningMethodRS256, "rsa-2", k.RSA2, auth.ClaimsNow(jwt.MapClaims{"tenant": "t1"})),
		"HS256 keyed with the public key": auth.SignKid(t, jwt.SigningMethodHS256, "rsa-1", pemKey, auth.ClaimsNow(jwt.MapClaims{"tenant": "t1"})),
		"alg none":                        auth.SignKid(t, jwt.SigningMethodNone, "rsa-1", jwt.UnsafeAllowNoneSignatureType, auth.ClaimsNow(nil)),
		"expired": auth.SignKid(t, jwt.SigningMethodRS256, "rsa-1", k.RSA1,
			auth.ClaimsNow(jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})),
	} {
		r := s.Post(tok, `{ viewer { unreadCount } }`, nil)
		if r.Status != http.StatusUnauthorized || len(r.Errors) != 1 || r.Errors[0].Code() != "UNAUTHENTICATED" {
			t.Errorf("%s: HTTP %d, errors %+v; want 401 UNAUTHENTICATED", name, r.Status, r.Errors)
		}
	}

	// Rotation: the issuer publishes rsa-2; its tokens verify once the set is fetched
	// again (the first try above spent the rate limit's slot, so wait out the interval).
	jwks.SetKeys(auth.RSAJWK("rsa-1", "RS256", "sig", k.RSA1), auth.RSAJWK("rsa-2", "RS256", "sig", k.RSA2))
	time.Sleep(60 * time.Millisecond)
	rotated := auth.SignKid(t, jwt.SigningMethodRS256, "rsa-2", k.RSA2, auth.ClaimsNow(jwt.MapClaims{"tenant": "t1", "sub": "alice"}))
	var data struct {
		Viewer struct{ UnreadCount int } `json:"viewer"`
	}
	s.MustData(rotated, `{ viewer { unreadCount } }`, nil, &data)
	if data.Viewer.UnreadCount != 2 {
		t.Errorf("alice under the rotated key: unreadCount %d, want 2", data.Viewer.UnreadCount)
	}
}
