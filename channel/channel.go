// Package channel delivers one notification through one provider: the Channel interface
// and its adapters (email over SMTP, push through FCM HTTP v1 and APNs, SMS through
// Twilio's Messages API, webhooks signed the Standard Webhooks way). In-app delivery is
// the inbox write itself (store.Send) and has no adapter here.
//
// An adapter sends exactly one request to its provider per Send and classifies the
// answer (Error): the caller (package delivery) owns retries, backoff, rate limits and
// the delivery record, so an adapter never retries by itself.
package channel

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Provider names, as delivery records and the REST status report them.
const (
	ProviderSMTP    = "smtp"
	ProviderFCM     = "fcm"
	ProviderAPNs    = "apns"
	ProviderTwilio  = "twilio"
	ProviderWebhook = "webhook"
	ProviderSlack   = "slack"
)

// Platforms of a push device (REST `platform`).
const (
	PlatformAPNs = "apns"
	PlatformFCM  = "fcm"
)

// Message is one delivery of one notification to one address. Which fields an adapter
// reads depends on its channel (see each field).
type Message struct {
	// TenantID, UserID and NotificationID name the notification; Key names its delivery
	// record ("EMAIL", "SMS", "WEBHOOK", "PUSH#{deviceId}").
	TenantID, UserID, NotificationID, Key string
	// Attempt counts sends of this record, 1 on the first.
	Attempt int
	// IdempotencyKey is the same on every attempt of one record (derived from tenant,
	// notification and Key): adapters send it where the provider honours one (the
	// webhook's webhook-id, the email's Message-ID, APNs' apns-id).
	IdempotencyKey string
	// To is the address: an email address, an E.164 phone number, a device token, or the
	// tenant's webhook URL.
	To string
	// Platform is the push device's platform (PlatformAPNs or PlatformFCM).
	Platform string
	// Subject, Text and HTML are an email's parts (HTML may be empty: text only).
	Subject, Text, HTML string
	// Title and Body are a push notification's, Text is an SMS's.
	Title, Body string
	// Data is extra key/value data of a push message (FCM data, APNs custom keys).
	Data map[string]string
	// Payload is a webhook's JSON body; Secret the tenant's signing secret.
	Payload []byte
	Secret  string
	// Unsubscribe is an email's one-click unsubscribe URL (https: or http:; RFC 8058):
	// set, the email carries List-Unsubscribe and List-Unsubscribe-Post; "" none.
	Unsubscribe string
	// CallbackRef is an opaque reference the provider echoes in its callbacks (Twilio's
	// StatusCallback URL, SendGrid's unique arguments): package delivery's record ref.
	CallbackRef string
}

// Result is a provider's acceptance of a Message.
type Result struct {
	// Provider is one of the Provider* names.
	Provider string
	// MessageID is the provider's id of the message (Twilio's sid, FCM's name, APNs'
	// apns-id, the email's Message-ID, the webhook's webhook-id); "" when it gave none.
	MessageID string
}

// Channel is one provider adapter. Send makes one attempt and returns the provider's
// acceptance, or an error: an *Error when the provider answered or the attempt timed
// out (see Kind), any other error being treated as transient. Send honours ctx's
// deadline and cancellation. Implementations are safe for concurrent use.
type Channel interface {
	// Provider names the adapter (a Provider* name).
	Provider() string
	Send(ctx context.Context, m Message) (Result, error)
}

// Kind classifies a failed send.
type Kind int

const (
	// Transient: a 5xx, a 429, a timeout or a broken connection; the same message may
	// succeed later (RetryAfter, when the provider said when).
	Transient Kind = iota
	// Permanent: the provider refused the message itself (a 4xx other than 429, a bad
	// address, a rejected recipient); retrying cannot help.
	Permanent
	// Unregistered: the device token is no longer valid (FCM UNREGISTERED, APNs 410
	// Unregistered); the device is to be removed. Permanent for the message.
	Unregistered
)

// String returns "transient", "permanent" or "unregistered".
func (k Kind) String() string {
	switch k {
	case Permanent:
		return "permanent"
	case Unregistered:
		return "unregistered"
	}
	return "transient"
}

// Error is a failed send as a provider answered it.
type Error struct {
	Provider string
	Kind     Kind
	// Status is the HTTP status (or SMTP reply code) the provider answered; 0 when none
	// (a timeout, a broken connection).
	Status int
	// Code is the provider's error code ("UNREGISTERED", "BadDeviceToken", "21211", ...)
	// when it gave one.
	Code string
	// RetryAfter is the wait the provider asked for (Retry-After), 0 when none.
	RetryAfter time.Duration
	// Config is set when the provider refused the gateway's own credentials (a revoked or
	// wrong token): no message will pass until an operator fixes the configuration.
	Config bool
	// Suppress is set when the provider refused the address itself for good: an SMTP 5xx
	// reply to RCPT TO with an enhanced code naming the recipient's mailbox (5.1.x, 5.2.1:
	// unknown or disabled; not a relay's or a policy's 5.7.x), Twilio's
	// 21610 (the number replied STOP). Package delivery puts such an address on the
	// tenant's suppression list, so later sends skip it without calling the provider.
	Suppress bool
	// Err is the underlying error or the provider's message.
	Err error
}

// Error returns "provider: kind status code: message".
func (e *Error) Error() string {
	s := e.Provider + ": " + e.Kind.String()
	if e.Status != 0 {
		s += fmt.Sprintf(" %d", e.Status)
	}
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Classify returns err's kind and the wait a provider asked for: an *Error's Kind and
// RetryAfter; Transient and 0 for any other error (a bug or a local failure is retried,
// bounded by the caller).
func Classify(err error) (Kind, time.Duration) {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind, e.RetryAfter
	}
	return Transient, 0
}
