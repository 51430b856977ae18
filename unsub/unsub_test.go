package unsub_test

import (
	"strings"
	"testing"

	"github.com/inboxgw/gateway/unsub"
)

func signer(t *testing.T, b byte) *unsub.Signer {
	t.Helper()
	s, err := unsub.New([]byte(strings.Repeat(string(b), 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenRoundTripAndRefusals(t *testing.T) {
	s, other := signer(t, 'a'), signer(t, 'b')
	c := unsub.Claims{TenantID: "acme", UserID: "kim", Category: "news", Channel: "EMAIL"}
	tok, err := s.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Verify(tok); err != nil || got != c {
		t.Fatalf("verify: %+v %v", got, err)
	}
	noCat := unsub.Claims{TenantID: "acme", UserID: "kim", Channel: "EMAIL"}
	if tok2, err := s.Token(noCat); err != nil {
		t.Fatal(err)
	} else if got, err := s.Verify(tok2); err != nil || got != noCat {
		t.Fatalf("no category: %+v %v", got, err)
	}
	payload, sig, _ := strings.Cut(tok, ".")
	// Another tenant's claims under the same signature, a flipped byte, another
	// secret, truncation, garbage: all refused.
	forged, _ := other.Token(unsub.Claims{TenantID: "evil", UserID: "kim", Category: "news", Channel: "EMAIL"})
	fp, _, _ := strings.Cut(forged, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	for name, bad := range map[string]string{
		"another secret":           forged,
		"another payload, our sig": fp + "." + sig,
		"payload byte flipped":     flip(payload, 3) + "." + sig,
		"signature byte flipped":   payload + "." + flip(sig, 5),
		"no signature":             payload,
		"empty":                    "",
		"dot only":                 ".",
		"truncated signature":      payload + "." + sig[:10],
		"too long":                 strings.Repeat("A", unsub.MaxTokenBytes+1),
		"not base64":               "!!!." + sig,
	} {
		if _, err := s.Verify(bad); err != unsub.ErrInvalid {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	for _, c := range []unsub.Claims{{UserID: "kim", Channel: "EMAIL"}, {TenantID: "a#b", UserID: "kim", Channel: "EMAIL"}, {TenantID: "acme", UserID: "kim"}} {
		if _, err := s.Token(c); err == nil {
			t.Errorf("token of %+v signed", c)
		}
	}
	if _, err := unsub.New(make([]byte, 31)); err == nil {
		t.Error("a 31-byte secret accepted")
	}
	u, err := s.URL("https://notify.example.com/", c)
	if err != nil || !strings.HasPrefix(u, "https://notify.example.com/v1/unsubscribe?t=") {
		t.Fatalf("URL: %q %v", u, err)
	}
}

// TestEveryTokenSignedVerifies: Token never signs a token that Verify refuses. Ids of
// up to inbox.MaxIDBytes made of characters encoding/json escapes ('<', '>', '&' as
// \u003c, six bytes for one) made a token over MaxTokenBytes: the email carried a
// one-click link that answered 400. Such ids now sign a token that verifies, and claims
// that cannot fit (U+2028, escaped whatever the options) are refused at signing, so the
// email carries no link rather than a dead one.
func TestEveryTokenSignedVerifies(t *testing.T) {
	s := signer(t, 'a')
	long := func(r string) string { return strings.Repeat(r, 256/len(r)) }
	for name, c := range map[string]unsub.Claims{
		"ampersands": {TenantID: long("&"), UserID: long("<"), Category: long(">"), Channel: "EMAIL"},
		"plain":      {TenantID: long("t"), UserID: long("u"), Category: long("c"), Channel: "EMAIL"},
		"u2028":      {TenantID: long("\u2028"), UserID: long("\u2029"), Category: long("\u2028"), Channel: "EMAIL"},
	} {
		tok, err := s.Token(c)
		if err != nil {
			if name != "u2028" {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if got, err := s.Verify(tok); err != nil || got != c {
			t.Errorf("%s: a %d-byte token signed, Verify: %v", name, len(tok), err)
		}
	}
}
