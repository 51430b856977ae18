package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// claimsEcho is the handler behind the middleware under test: it answers 200 with the
// claims it finds in the context, or 204 when there are none.
var claimsEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, ok := FromContext(r.Context())
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c)
})

// serve runs one request through v's middleware with the given Authorization values.
func serve(t *testing.T, v *Verifier, accept string, authorization ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(`{"query":"{__typename}"}`))
	for _, a := range authorization {
		req.Header.Add("Authorization", a)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	v.Middleware(claimsEcho).ServeHTTP(rec, req)
	return rec
}

func TestMiddlewarePassesThroughWithoutHeader(t *testing.T) {
	v := newTestVerifier(t, Config{})
	for _, auth := range [][]string{nil, {""}, {"   "}} {
		rec := serve(t, v, "", auth...)
		if rec.Code != http.StatusNoContent {
			t.Errorf("Authorization %q: status = %d, want 204 (passed through without claims)", auth, rec.Code)
		}
	}
}

func TestMiddlewareGoodToken(t *testing.T) {
	v := newTestVerifier(t, Config{Issuer: "iss", Audience: "aud"})
	tok, err := v.Sign(Claims{TenantID: "acme", UserID: "alice", Scopes: []string{ScopeSend}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(t, v, "", "Bearer "+tok)
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
	}
	var got Claims
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.TenantID != "acme" || got.Subject != "alice" || got.UserID != "" || !got.HasScope(ScopeSend) ||
		!got.ExpiresAt.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("claims in context = %+v", got)
	}
}

func TestMiddlewareRejectsBadTokens(t *testing.T) {
	v := newTestVerifier(t, Config{})
	expired, err := v.Sign(Claims{UserID: "u1", ExpiresAt: testNow.Add(-time.Minute)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrongKey := signRaw(t, jwt.SigningMethodHS256, otherKey, base(nil))
	none := signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, base(nil))
	good, err := v.Sign(Claims{UserID: "u1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		auth     []string
		accept   string
		wantMsg  string
		wantType string
	}{
		{"expired", []string{"Bearer " + expired}, "", "token expired", "application/json"},
		{"wrong secret", []string{"Bearer " + wrongKey}, "application/json", "invalid token signature", "application/json"},
		{"alg none", []string{"Bearer " + none}, "", "unsupported token algorithm", "application/json"},
		{"garbage", []string{"Bearer nope"}, "", "malformed token", "application/json"},
		{"basic scheme", []string{"Basic dTpw"}, "", "unsupported authorization scheme", "application/json"},
		{"two headers", []string{"Bearer " + good, "Bearer " + good}, "", "more than one Authorization header", "application/json"},
		{"graphql-response accepted", []string{"Bearer " + expired},
			"application/graphql-response+json, application/json;q=0.9", "token expired", "application/graphql-response+json"},
		{"graphql-response refused", []string{"Bearer " + expired},
			"application/graphql-response+json;q=0, application/json", "token expired", "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(t, v, tt.accept, tt.auth...)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401; body %s", rec.Code, rec.Body)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType+";") {
				t.Errorf("Content-Type = %q, want %s", ct, tt.wantType)
			}
			var body struct {
				Data   any `json:"data"`
				Errors []struct {
					Message    string `json:"message"`
					Extensions struct {
						Code string `json:"code"`
					} `json:"extensions"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if len(body.Errors) != 1 || body.Data != nil {
				t.Fatalf("body = %s, want exactly one error and no data", rec.Body)
			}
			e := body.Errors[0]
			if e.Extensions.Code != "UNAUTHENTICATED" || !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("error = %+v, want UNAUTHENTICATED %q", e, tt.wantMsg)
			}
		})
	}
}
