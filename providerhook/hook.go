package providerhook

import (
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

// MaxBodyBytes bounds a callback's body (1 MiB): SendGrid posts batches of events, a
// Twilio status callback is a small form.
const MaxBodyBytes = 1 << 20

// MaxEvents bounds the events of one callback (a SendGrid batch); a longer batch is
// refused with BAD_USER_INPUT.
const MaxEvents = 1000

// Hook authenticates and parses one provider's callbacks.
type Hook interface {
	// Name is the provider's path name (NameTwilio, NameSendGrid).
	Name() string
	// Events authenticates the callback r, whose whole body (at most MaxBodyBytes) is
	// body (r.Body is not read), and returns the delivery events it reports, in order;
	// none for a callback whose events are all of kinds the gateway does not track.
	// Errors are *inbox.Error: UNAUTHENTICATED for a missing, wrong or expired signature
	// (checked first: nothing of the body is trusted before), BAD_USER_INPUT for a signed
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
