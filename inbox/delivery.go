package inbox

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Push platforms of a device (Device.Platform; the REST `platform`).
const (
	PlatformAPNs = "apns"
	PlatformFCM  = "fcm"
)

// MaxDevices is the most push devices a user has: registering one more evicts the
// oldest (by CreatedAt).
const MaxDevices = 10

// MaxDeviceTokenBytes is the longest device token accepted (APNs tokens are 64 hex
// characters, FCM registration tokens about 160 bytes).
const MaxDeviceTokenBytes = 4096

// Device is a user's push device: the provider's token for it on Platform.
type Device struct {
	// ID is DeviceID(Platform, Token): 16 hex characters.
	ID string
	// Token is the APNs device token or FCM registration token.
	Token string
	// Platform is PlatformAPNs or PlatformFCM.
	Platform string
	// CreatedAt is when the device was (first) registered.
	CreatedAt time.Time
}

// DeviceID returns the id of the device with token on platform: the first 16 hex
// characters of sha256(platform + ":" + token).
func DeviceID(platform, token string) string {
	sum := sha256.Sum256([]byte(platform + ":" + token))
	return hex.EncodeToString(sum[:8])
}

// ValidPlatform reports whether p is PlatformAPNs or PlatformFCM.
func ValidPlatform(p string) bool { return p == PlatformAPNs || p == PlatformFCM }

// CheckDevice checks a device registration (BAD_USER_INPUT naming the field): token
// 1..MaxDeviceTokenBytes bytes of valid UTF-8 without spaces or control characters,
// platform PlatformAPNs or PlatformFCM.
func CheckDevice(token, platform string) error {
	if !ValidPlatform(platform) {
		return Errorf(CodeBadUserInput, "platform must be %q or %q", PlatformAPNs, PlatformFCM)
	}
	if token == "" || len(token) > MaxDeviceTokenBytes || !utf8.ValidString(token) {
		return Errorf(CodeBadUserInput, "token must be 1..%d bytes of UTF-8", MaxDeviceTokenBytes)
	}
	for _, r := range token {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return Errorf(CodeBadUserInput, "token must not contain spaces or control characters")
		}
	}
	return nil
}

// IsDeviceID reports whether s has the shape of a device id (16 lowercase hex characters).
func IsDeviceID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// DeliveryKey returns the key of a notification's delivery record on channel: the
// channel itself, or for a push to a device "PUSH#" + deviceID (deviceID "" for a
// skipped push: "PUSH"). The scheduler's deliver task carries it as its Token.
func DeliveryKey(channel, deviceID string) string {
	if channel == ChannelPush && deviceID != "" {
		return ChannelPush + "#" + deviceID
	}
	return channel
}

// ParseDeliveryKey splits a delivery record key (DeliveryKey) into its channel and
// device id ("" but for "PUSH#{deviceId}"). Errors: BAD_USER_INPUT when key is none of
// the Channels nor "PUSH#" and a device id.
func ParseDeliveryKey(key string) (channel, deviceID string, err error) {
	if ValidChannel(key) {
		return key, "", nil
	}
	if id, ok := strings.CutPrefix(key, ChannelPush+"#"); ok && IsDeviceID(id) {
		return ChannelPush, id, nil
	}
	return "", "", Errorf(CodeBadUserInput, "unknown delivery key %q", key)
}

// DeliveryRef names one delivery record: the tenant, the notification (the id its status
// is under) and the record's key (DeliveryKey).
type DeliveryRef struct {
	TenantID, NotificationID, Key string
}

// String returns r as an opaque token for providers to echo back (status callbacks):
// base64url without padding of tenant#notification#key.
func (r DeliveryRef) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(r.TenantID + "#" + r.NotificationID + "#" + r.Key))
}

// ParseDeliveryRef parses what DeliveryRef.String returned. Errors: BAD_USER_INPUT when
// s is not base64url, has not three parts, an id fails CheckID or the key ParseDeliveryKey.
func ParseDeliveryRef(s string) (DeliveryRef, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) > 4*MaxIDBytes {
		return DeliveryRef{}, Errorf(CodeBadUserInput, "malformed delivery ref")
	}
	parts := strings.SplitN(string(b), "#", 3)
	if len(parts) != 3 {
		return DeliveryRef{}, Errorf(CodeBadUserInput, "malformed delivery ref")
	}
	r := DeliveryRef{TenantID: parts[0], NotificationID: parts[1], Key: parts[2]}
	if err := r.Check(); err != nil {
		return DeliveryRef{}, err
	}
	return r, nil
}

// Check checks r's parts (BAD_USER_INPUT): the ids with CheckID, the key with
// ParseDeliveryKey.
func (r DeliveryRef) Check() error {
	if err := CheckID("tenant", r.TenantID); err != nil {
		return err
	}
	if err := CheckID("notification id", r.NotificationID); err != nil {
		return err
	}
	_, _, err := ParseDeliveryKey(r.Key)
	return err
}

// DeliveryJob is a claimed delivery record: what the deliver worker sends.
type DeliveryJob struct {
	Ref    DeliveryRef
	UserID string
	// Channel is the record's channel (ChannelEmail, ChannelPush, ChannelSMS, ChannelWebhook).
	Channel string
	// Attempt counts this claim (1 = the first); the record's later updates are
	// conditioned on it.
	Attempt int
	// To is the address: an email address, an E.164 number, a device token; "" for a
	// webhook (its URL and secret come from the tenant's settings at delivery time).
	To string
	// Platform and DeviceID are the push device's (PlatformAPNs or PlatformFCM).
	Platform, DeviceID string
	// Subject, Text and HTML are an email's (SMS: Text only).
	Subject, Text, HTML string
	// Title and Body are a push notification's.
	Title, Body string
	// Payload is a webhook's JSON body: {"type","timestamp","data":{...notification}}.
	Payload []byte
	// Category and TargetKind/TargetID are the notification's (for the preferences'
	// re-check at delivery time); Deferred is true when quiet hours deferred the record.
	Category, TargetKind, TargetID string
	Deferred                       bool
}

// ProviderEvent is what a provider reported about a delivery (a status callback).
type ProviderEvent struct {
	Ref DeliveryRef
	// Provider is the reporting provider, as the record names it (a channel provider name).
	Provider string
	// MessageID is the provider's message id, "" when the event carries none.
	MessageID string
	// Status is DeliveryDelivered, DeliveryFailed or DeliveryOpened.
	Status string
	// Error is the provider's reason for a failure.
	Error string
	// At is when it happened (zero: when it is applied).
	At time.Time
	// Suppress, when set, is the address the event puts on the tenant's suppression
	// list (a hard bounce, a drop, a spam complaint). An event with Suppress and no
	// Status (a spam complaint) changes no record.
	Suppress *Suppression
}

// Content returns what r says on channel: the template's part for it when it has one,
// else the channel's fallback from the in-app title and body (ChannelSpec.Fallback: an
// email's subject is the title and its text the body; a push shows both; an SMS or a
// Slack message the title, then the body on a line of its own, escaped for Slack). A
// channel without a part (in-app, webhook) has the zero Content.
func (r Rendered) Content(channel string) Content {
	if c, ok := r.Parts[channel]; ok {
		return c
	}
	if s, ok := Spec(channel); ok && s.Fallback != nil {
		return s.Fallback(r.Title, r.Body)
	}
	return Content{}
}

// ClaimOutcome is what ClaimDelivery found.
type ClaimOutcome int

const (
	// ClaimOK: the record was QUEUED and unclaimed; it is now claimed for the job's Attempt.
	ClaimOK ClaimOutcome = iota
	// ClaimDone: the record is not QUEUED (sent, failed, skipped) or is gone: nothing to do.
	ClaimDone
	// ClaimBusy: another attempt holds a live claim (its lease has not expired).
	ClaimBusy
	// ClaimOrphaned: a claim expired without an outcome: a worker stopped during the
	// provider call or before recording it. The job (with the orphaned claim's Attempt)
	// is returned for DeliveryUnconfirmed; it must not be sent again.
	ClaimOrphaned
)

// String names o ("ok", "done", "busy", "orphaned").
func (o ClaimOutcome) String() string {
	switch o {
	case ClaimOK:
		return "ok"
	case ClaimDone:
		return "done"
	case ClaimBusy:
		return "busy"
	case ClaimOrphaned:
		return "orphaned"
	}
	return fmt.Sprintf("ClaimOutcome(%d)", int(o))
}

// ErrClaimLost is returned (wrapped; test with errors.Is) by DeliverySent, DeliveryRetry,
// DeliveryFailed and DeliveryUnconfirmed when the record is no longer QUEUED under the
// given attempt's claim: another run recorded an outcome, or the claim was taken over as
// orphaned. Nothing was written.
var ErrClaimLost = errors.New("store: the delivery record is no longer claimed by this attempt")
