package auth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// signRawJSON signs the header and payload JSON documents as they are, HS256 over key:
// what a hostile issuer (or a buggy one) can put in a token that jwt.MapClaims would
// normalise away.
func signRawJSON(t *testing.T, key []byte, header, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(signing, key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return signing + "." + enc.EncodeToString(sig)
}

// TestVerifyStrict: each token is signed with the right key and is valid in every other
// respect, and each must be UNAUTHENTICATED (issue 8, item 9).
func TestVerifyStrict(t *testing.T) {
	const hdr = `{"alg":"HS256","typ":"JWT"}`
	exp := testNow.Add(time.Hour).Unix()
	iat := testNow.Add(-time.Minute).Unix()
	payload := func(overrides map[string]string) string {
		fields := map[string]string{
			"sub":    `"u1"`,
			"tenant": `"acme"`,
			"scope":  `"a b"`,
			"iat":    jsonInt(iat),
			"exp":    jsonInt(exp),
		}
		for k, v := range overrides {
			if v == "" {
				delete(fields, k)
			} else {
				fields[k] = v
			}
		}
		s := "{"
		for k, v := range fields {
			if len(s) > 1 {
				s += ","
			}
			s += `"` + k + `":` + v
		}
		return s + "}"
	}
	v := newTestVerifier(t, Config{})
	// The baseline token is accepted: each case below differs from it in one thing.
	if _, err := v.Verify(signRawJSON(t, testSecret, hdr, payload(nil))); err != nil {
		t.Fatalf("baseline token: %v", err)
	}
	if c, err := v.Verify(signRawJSON(t, testSecret, hdr, payload(map[string]string{"tenant": ""}))); err != nil || c.TenantID != DefaultTenant {
		t.Fatalf("absent tenant: %+v, %v (want the default tenant)", c, err)
	}
	cases := []struct {
		name, header, payload, want string
	}{
		{"exp as a string", hdr, payload(map[string]string{"exp": `"` + jsonInt(exp) + `"`}), "exp"},
		{"iat as a string", hdr, payload(map[string]string{"iat": `"` + jsonInt(iat) + `"`}), "iat"},
		{"nbf as a string", hdr, payload(map[string]string{"nbf": `"` + jsonInt(iat) + `"`}), "nbf"},
		{"exp null", hdr, payload(map[string]string{"exp": `null`}), "exp"},
		{"exp as an array", hdr, payload(map[string]string{"exp": `[` + jsonInt(exp) + `]`}), "exp"},
		{"unknown crit header", `{"alg":"HS256","typ":"JWT","crit":["x-unknown"],"x-unknown":1}`, payload(nil), "crit"},
		{"empty crit header", `{"alg":"HS256","typ":"JWT","crit":[]}`, payload(nil), "crit"},
		{"crit naming a registered header", `{"alg":"HS256","typ":"JWT","crit":["exp"]}`, payload(nil), "crit"},
		{"tenant null", hdr, payload(map[string]string{"tenant": `null`}), "tenant"},
		{"tenant a number", hdr, payload(map[string]string{"tenant": `7`}), "tenant"},
		{"tenant an object", hdr, payload(map[string]string{"tenant": `{"id":"acme"}`}), "tenant"},
		{"sub a number", hdr, payload(map[string]string{"sub": `42`}), "sub"},
		{"sub null", hdr, payload(map[string]string{"sub": `null`}), "sub"},
		{"sub an array", hdr, payload(map[string]string{"sub": `["u1"]`}), "sub"},
		{"scope a number", hdr, payload(map[string]string{"scope": `42`}), "scope"},
		{"scope null", hdr, payload(map[string]string{"scope": `null`}), "scope"},
		{"scope an object", hdr, payload(map[string]string{"scope": `{"a":true}`}), "scope"},
		{"scope an array with a number", hdr, payload(map[string]string{"scope": `["a",1]`}), "scope"},
		{"iss a number", hdr, payload(map[string]string{"iss": `1`}), "iss"},
		{"aud a number", hdr, payload(map[string]string{"aud": `1`}), "aud"},
	}
	// A signature with stray bits after its last byte decodes to the same bytes: only
	// strict base64url decoding (jwt.WithStrictDecoding) refuses it.
	t.Run("non-canonical base64url", func(t *testing.T) {
		tok := signRawJSON(t, testSecret, hdr, payload(nil))
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, tok[len(tok)-1])
		tok = tok[:len(tok)-1] + string(alphabet[last|1]) // 32 bytes: the low 4 bits are padding
		_, err := v.Verify(tok)
		checkUnauthenticated(t, err, "malformed token")
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(signRawJSON(t, testSecret, tc.header, tc.payload))
			checkUnauthenticated(t, err, tc.want)
		})
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
