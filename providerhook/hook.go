package providerhook

import (
	"bytes"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/inboxgw/gateway/inbox"
)

// Names of the providers, as the {name} of POST /v1/webhooks/provider/{name}.
const (
	NameTwilio   = "twilio"
	NameSendGrid = "sendgrid"
)

// MaxBodyBytes is the largest body any provider's Limits allow (1 MiB, SendGrid's batches
// of events); a Twilio status callback is a small form (TwilioLimits).
const MaxBodyBytes = 1 << 20

// MaxQueryBytes bounds a callback URL's query string (2 KiB), whichever the provider: the
// only query the gateway puts in a callback URL is Twilio's ?ref=…&ts=… (a ref is at most
// 4·inbox.MaxIDBytes = 1,024 characters), to which Twilio may add bodySHA256 (64 hex
// digits).
const MaxQueryBytes = 2 << 10

// MaxSignatureBytes bounds a signature header's value (256 bytes): base64 of an
// HMAC-SHA1 (Twilio) is 28 characters, of a DER ECDSA P-256 signature (SendGrid) at most
// 96. A longer one is refused as UNAUTHENTICATED before it is decoded.
const MaxSignatureBytes = 256

// MaxEvents bounds the events of one callback (a SendGrid batch); a longer batch is
// refused with BAD_USER_INPUT.
const MaxEvents = 1000

// Limits bound one provider's callbacks so that an unauthenticated one costs time linear
// in an input that is itself small: a callback over any of them is refused before its
// signature is checked (a signature check that builds its string from every form field,
// as twilio-go's does, copies the URL once per field: tens of CPU-seconds for 1 MiB of
// fields behind a long query). Package rest checks the request (CheckRequest) before it
// reads the body and reads at most BodyBytes; Events checks both again (Check) before
// anything else, so that a Hook is safe whoever calls it.
type Limits struct {
	// BodyBytes is the largest body, in bytes (PAYLOAD_TOO_LARGE, 413, over it).
	BodyBytes int64
	// QueryBytes is the longest query string (the request URL's raw query, without "?"),
	// in bytes (BAD_REQUEST, 400, over it).
	QueryBytes int
	// Fields is the most fields of a form body, counted as its "&"-separated parts
	// (BAD_REQUEST, 400, over it); 0: the body is not a form and is not counted.
	Fields int
}

// CheckRequest refuses r when its query string is over QueryBytes (BAD_REQUEST) or its
// declared length (Content-Length) over BodyBytes (PAYLOAD_TOO_LARGE): what can be
// known before the body is read. It costs nothing that grows with the request.
func (l Limits) CheckRequest(r *http.Request) error {
	if len(r.URL.RawQuery) > l.QueryBytes {
		return inbox.Errorf(inbox.CodeBadRequest, "the callback URL's query string is %d bytes, over %d", len(r.URL.RawQuery), l.QueryBytes)
	}
	if r.ContentLength > l.BodyBytes {
		return inbox.Errorf(inbox.CodePayloadTooLarge, "the callback body is %d bytes, over %d", r.ContentLength, l.BodyBytes)
	}
	return nil
}

// Check refuses the callback r with body as CheckRequest does, and also when body is over
// BodyBytes (PAYLOAD_TOO_LARGE) or, for a form, has more than Fields fields
// (BAD_REQUEST). One pass over the query and the body.
func (l Limits) Check(r *http.Request, body []byte) error {
	if err := l.CheckRequest(r); err != nil {
		return err
	}
	if int64(len(body)) > l.BodyBytes {
		return inbox.Errorf(inbox.CodePayloadTooLarge, "the callback body is %d bytes, over %d", len(body), l.BodyBytes)
	}
	if l.Fields > 0 && len(body) > 0 {
		if n := bytes.Count(body, []byte("&")) + 1; n > l.Fields {
			return inbox.Errorf(inbox.CodeBadRequest, "the callback body has %d form fields, over %d", n, l.Fields)
		}
	}
	return nil
}

// Hook authenticates and parses one provider's callbacks.
type Hook interface {
	// Name is the provider's path name (NameTwilio, NameSendGrid).
	Name() string
	// Limits are the bounds of the provider's callbacks.
	Limits() Limits
	// Events authenticates the callback r, whose whole body is body (r.Body is not read),
	// and returns the delivery events it reports, in order; none for a callback whose
	// events are all of kinds the gateway does not track. Errors are *inbox.Error:
	// BAD_REQUEST or PAYLOAD_TOO_LARGE for a callback over Limits (checked first, before
	// any signature work), UNAUTHENTICATED for a missing, wrong or expired signature
	// (checked next: nothing of the body is trusted before), BAD_USER_INPUT for a signed
	// body that cannot be read.
	Events(r *http.Request, body []byte) ([]inbox.ProviderEvent, error)
}

// unauthenticated is the error of a callback whose signature is missing, wrong or too old.
func unauthenticated(format string, args ...any) error {
	return inbox.Errorf(inbox.CodeUnauthenticated, format, args...)
}

// clock returns now, or time.Now when now is nil.
func clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// MaxErrorBytes bounds the error text an event carries (a provider's bounce reason may
// quote a whole SMTP conversation).
const MaxErrorBytes = 512

// clip cuts s to at most MaxErrorBytes bytes, at a character boundary.
func clip(s string) string {
	if len(s) <= MaxErrorBytes {
		return s
	}
	s = s[:MaxErrorBytes]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
