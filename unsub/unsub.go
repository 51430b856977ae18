// Package unsub signs and checks the tokens of RFC 8058 one-click unsubscribe links.
//
// Every non-critical email the gateway sends carries
//
//	List-Unsubscribe: <{INBOX_PUBLIC_URL}/v1/unsubscribe?t={token}>
//	List-Unsubscribe-Post: List-Unsubscribe=One-Click
//
// The token names one (tenant, user, category, channel) and is signed with HMAC-SHA256
// under the gateway's unsubscribe secret, so a link opts out exactly the recipient and
// category it was sent for: a changed byte, another tenant's token or one signed under
// another secret is refused (ErrInvalid). Tokens carry no expiry: RFC 8058 asks that a
// link keep working, and replaying one only repeats the same opt-out (idempotent).
package unsub

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strings"

	"github.com/inboxgw/gateway/inbox"
)

// MinSecretBytes is the shortest secret a Signer accepts (256 bits, HMAC-SHA256's
// key size).
const MinSecretBytes = 32

// MaxTokenBytes bounds a token before anything of it is decoded: four ids of at most
// 256 bytes each, JSON-encoded (without HTML escaping) and base64url'd, and the MAC fit
// within it unless the ids are of characters JSON must escape (Token then refuses).
const MaxTokenBytes = 2048

// ErrInvalid is a token that is malformed, too long, or not signed by this Signer.
var ErrInvalid = errors.New("unsub: invalid token")

// Claims is what a token names: the recipient, the notification category and the
// channel the link opts out of.
type Claims struct {
	TenantID string `json:"t"`
	UserID   string `json:"u"`
	Category string `json:"c"`
	Channel  string `json:"ch"`
}

// Signer signs and verifies tokens under one secret. The zero Signer is unusable: use
// New.
type Signer struct {
	key []byte
}

// New returns a Signer over secret (at least MinSecretBytes bytes). Errors: a shorter
// secret.
func New(secret []byte) (*Signer, error) {
	if len(secret) < MinSecretBytes {
		return nil, errors.New("unsub: the unsubscribe secret must be at least 32 bytes")
	}
	return &Signer{key: append([]byte(nil), secret...)}, nil
}

// Token returns the signed token of c: base64url(JSON of c) "." base64url(HMAC-SHA256).
// Errors: BAD_USER_INPUT when an id of c fails inbox.CheckID (the category may be ""),
// or when the token would be over MaxTokenBytes (which Verify refuses).
func (s *Signer) Token(c Claims) (string, error) {
	if err := check(c); err != nil {
		return "", err
	}
	// Without HTML escaping: an id of '<', '>' or '&' would take six bytes a character
	// and its token overrun MaxTokenBytes.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return "", err
	}
	p := base64.RawURLEncoding.EncodeToString(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	tok := p + "." + base64.RawURLEncoding.EncodeToString(s.mac(p))
	if len(tok) > MaxTokenBytes {
		// Verify would refuse it: no link rather than one that answers 400.
		return "", inbox.Errorf(inbox.CodeBadUserInput, "the unsubscribe token would be over %d bytes", MaxTokenBytes)
	}
	return tok, nil
}

// Verify returns the claims of token when this Signer signed it. Errors: ErrInvalid.
func (s *Signer) Verify(token string) (Claims, error) {
	if len(token) > MaxTokenBytes {
		return Claims{}, ErrInvalid
	}
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return Claims{}, ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(p)) {
		return Claims{}, ErrInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var c Claims
	if err := json.Unmarshal(b, &c); err != nil || check(c) != nil {
		return Claims{}, ErrInvalid
	}
	return c, nil
}

// URL is the one-click link of c under base (the gateway's public URL, e.g.
// "https://notify.example.com"): {base}/v1/unsubscribe?t={token}.
func (s *Signer) URL(base string, c Claims) (string, error) {
	t, err := s.Token(c)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(base, "/") + "/v1/unsubscribe?t=" + url.QueryEscape(t), nil
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("inbox-unsubscribe-v1\x00"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

func check(c Claims) error {
	for _, f := range []struct{ name, v string }{{"tenant", c.TenantID}, {"user", c.UserID}, {"channel", c.Channel}} {
		if err := inbox.CheckID(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Category != "" {
		return inbox.CheckID("category", c.Category)
	}
	return nil
}
