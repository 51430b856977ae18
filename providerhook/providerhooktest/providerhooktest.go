// Package providerhooktest signs provider callbacks as the providers do, for tests of
// package providerhook and of the gateway's POST /v1/webhooks/provider/{name}: Twilio's
// X-Twilio-Signature (HMAC-SHA1, keyed with the auth token, of the URL followed by the
// form parameters sorted by name, each name followed by its value; base64) and SendGrid's
// signed event webhook (ECDSA P-256 over SHA-256 of the timestamp followed by the body,
// an ASN.1 DER signature in base64). The tests check these signers against the
// providers' published examples.
package providerhooktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// TwilioSignature returns the X-Twilio-Signature of a POST of form to callbackURL (the
// full URL Twilio calls, query included) for an account with authToken. Of a parameter
// given more than once, the first value counts (as Twilio's validators read it).
func TwilioSignature(authToken, callbackURL string, form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Written into the MAC as it goes: signing a large form costs time linear in it.
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(callbackURL))
	for _, k := range keys {
		mac.Write([]byte(k))
		mac.Write([]byte(form.Get(k)))
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SendGridKey is a key pair of the signed event webhook: Private signs, Public is the
// verification key as SendGrid shows it (base64 of the DER PKIX public key).
type SendGridKey struct {
	Private *ecdsa.PrivateKey
	Public  string
}

// NewSendGridKey returns a fresh P-256 key pair.
func NewSendGridKey() (SendGridKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return SendGridKey{}, err
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return SendGridKey{}, err
	}
	return SendGridKey{Private: priv, Public: base64.StdEncoding.EncodeToString(der)}, nil
}

// Sign returns the X-Twilio-Email-Event-Webhook-Signature and -Timestamp headers' values
// of body sent at t.
func (k SendGridKey) Sign(body []byte, t time.Time) (signature, timestamp string, err error) {
	timestamp = strconv.FormatInt(t.Unix(), 10)
	sum := sha256.Sum256(append([]byte(timestamp), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k.Private, sum[:])
	if err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(sig), timestamp, nil
}
