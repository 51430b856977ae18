package inbox

import (
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Delivery statuses of one (notification, channel) record (DESIGN.md "Channels and
// delivery"). A record that quiet hours defer stays DeliveryQueued with DeferredUntil set.
const (
	DeliveryQueued    = "QUEUED"
	DeliverySent      = "SENT"
	DeliveryDelivered = "DELIVERED"
	DeliveryFailed    = "FAILED"
	DeliveryOpened    = "OPENED"
	DeliverySkipped   = "SKIPPED"
)

// Reasons a channel of a notification is skipped (ChannelStatus.Reason with
// DeliverySkipped). Quiet hours are no skip: they defer (ChannelStatus.DeferredUntil).
const (
	// ReasonNotInTemplate: the template (or, without one, the send: in-app only) does not
	// define the channel.
	ReasonNotInTemplate = "not_in_template"
	// ReasonNotInHint: the send's channels hint leaves the channel out.
	ReasonNotInHint = "not_in_hint"
	// ReasonMuted: the recipient muted the notification's target.
	ReasonMuted = "muted"
	// ReasonOptedOut: the recipient's global switch of the channel is off.
	ReasonOptedOut = "opted_out"
	// ReasonCategoryOptedOut: the channel is off for the notification's category only.
	ReasonCategoryOptedOut = "category_opted_out"
	// ReasonNoEmail, ReasonNoPhone, ReasonNoDevice: the recipient's profile has no email
	// address, no phone number, no push device.
	ReasonNoEmail  = "no_email"
	ReasonNoPhone  = "no_phone"
	ReasonNoDevice = "no_device"
	// ReasonNoWebhook: the tenant's settings have no webhook URL.
	ReasonNoWebhook = "no_webhook"
	// ReasonNoProvider: no channel adapter delivers the channel (yet).
	ReasonNoProvider = "no_provider"
	// ReasonDeviceMoved: another user of the tenant registered the push device's token
	// after the send (a device belongs to one user; its pushes stay with them).
	ReasonDeviceMoved = "device_moved"
	// ReasonActor: the recipient is the send's actor, left out of a send to several
	// recipients or a segment (SendInput.LeaveOut) unless it asked for includeActor.
	ReasonActor = "actor"
	// ReasonThrottled: the recipient had the send's throttle limit of notifications of its
	// key in the current window already (SendInput.Throttle).
	ReasonThrottled = "throttled"
	// ReasonBatchAbandoned: a batch's close could not be written (its content became
	// invalid while it was open, e.g. its expiry passed): the batch closed with no
	// notification (a batch's status summary only).
	ReasonBatchAbandoned = "batch_abandoned"
	// ReasonSuppressed: the recipient's address of the channel is on the tenant's
	// suppression list (a hard bounce, a drop, a spam complaint, an SMS STOP): the
	// provider is not called.
	ReasonSuppressed = "suppressed"
)

// Suppression is an address on a tenant's suppression list: sends skip it with
// ReasonSuppressed.
type Suppression struct {
	// Channel is ChannelEmail or ChannelSMS; Address the normalized address
	// (NormalizeAddress).
	Channel, Address string
	// Reason is why it was added: "bounce", "dropped", "spamreport" (SendGrid events),
	// "smtp_5xx" (an SMTP server refused the recipient), "sms_stop" (Twilio 21610),
	// "manual".
	Reason string
	// Detail is the provider's words, clipped (may be "").
	Detail    string
	CreatedAt time.Time
}

// MaxAddressBytes bounds a suppressed address (an email address is at most 254 bytes).
const MaxAddressBytes = 320

// SuppressibleChannel reports whether channel's addresses can be suppressed (EMAIL, SMS).
func SuppressibleChannel(channel string) bool {
	return channel == ChannelEmail || channel == ChannelSMS
}

// NormalizeAddress returns the form addr of channel takes on the suppression list: an
// email address trimmed and lower-cased in ASCII only (so a bounce of Kim@Example.com
// suppresses kim@example.com; Unicode case mapping would fold the Kelvin sign U+212A
// onto 'k', and a bounce of "\u212Aim@example.com" suppress another mailbox), a phone
// number trimmed. Errors: BAD_USER_INPUT for a channel that cannot be suppressed, an
// empty address, one over MaxAddressBytes or with control characters or '#'.
func NormalizeAddress(channel, addr string) (string, error) {
	if !SuppressibleChannel(channel) {
		return "", Errorf(CodeBadUserInput, "channel must be EMAIL or SMS")
	}
	a := strings.TrimSpace(addr)
	if channel == ChannelEmail {
		a = asciiLower(a)
	}
	if a == "" || len(a) > MaxAddressBytes || !utf8.ValidString(a) || strings.ContainsAny(a, "#") ||
		strings.IndexFunc(a, unicode.IsControl) >= 0 {
		return "", Errorf(CodeBadUserInput, "address must be 1..%d bytes of UTF-8 without '#' or control characters", MaxAddressBytes)
	}
	return a, nil
}

// Summary statuses of a notification for one recipient (NotificationStatus.Status).
const (
	// NotificationWritten: the notification is in the recipient's inbox.
	NotificationWritten = "written"
	// NotificationSkipped: in-app was skipped (see NotificationStatus.Reason); other
	// channels may still deliver.
	NotificationSkipped = "skipped"
)

// ProviderInbox is the provider of in-app deliveries: the inbox itself.
const ProviderInbox = "inbox"

// NotificationStatus is what a send decided and what happened since, for one recipient's
// notification (GET /v1/notifications/{id}/status).
type NotificationStatus struct {
	ID     string
	UserID string
	// Status is NotificationWritten or NotificationSkipped; Reason is in-app's skip reason.
	Status    string
	Reason    string
	CreatedAt time.Time
	// Channels are the delivery records of the channels the send considered, in
	// Channels order (push: one per device, by key).
	Channels []ChannelStatus
}

// ChannelStatus is one delivery record of a notification: one per channel, one per
// device for push.
type ChannelStatus struct {
	Channel string
	// Key is the record's key (DeliveryKey): the channel, or "PUSH#{deviceId}".
	Key string
	// DeviceID is the push device's id ("" for other channels and a skipped push).
	DeviceID string
	Provider string
	// ProviderMessageID is the provider's id of the message once sent ("" before).
	ProviderMessageID string
	// Status is one of the Delivery* values.
	Status   string
	Attempts int
	// SentAt and DeliveredAt are zero until then.
	SentAt      time.Time
	DeliveredAt time.Time
	// DeferredUntil is when a record deferred by quiet hours is due (zero: not deferred).
	DeferredUntil time.Time
	Error         string
	// Reason says why a DeliverySkipped record was skipped (a Reason* value).
	Reason string
	// OpenedAt is when the provider reported the message opened (zero: not yet).
	OpenedAt time.Time
	// UpdatedAt is the record's last change.
	UpdatedAt time.Time
}

// SkipCounts count skipped recipients by channel, then by reason (Reason* values):
// SkipCounts[ChannelEmail][ReasonNoEmail] recipients had no email address.
type SkipCounts map[string]map[string]int

// Add counts one recipient skipped on channel for reason.
func (c SkipCounts) Add(channel, reason string) {
	if c[channel] == nil {
		c[channel] = map[string]int{}
	}
	c[channel][reason]++
}

// Channel returns how many recipients were skipped on channel, whatever the reason.
func (c SkipCounts) Channel(channel string) int {
	n := 0
	for _, k := range c[channel] {
		n += k
	}
	return n
}

// UserProfile is what a recipient's channels need (PUT /v1/users/{id}): every field
// optional ("" means none).
type UserProfile struct {
	// Addresses are the recipient's addresses by the channels' ChannelSpec.AddressKey
	// ("email": an address such as "ada@example.com", "phone": an E.164 number, ...);
	// a key missing or "" means none. Each is checked by its channel's ValidAddress.
	Addresses map[string]string
	// Locale is a BCP 47 tag; Timezone an IANA zone name.
	Locale   string
	Timezone string
}

// Address returns p's address of the AddressKey key ("" for none).
func (p UserProfile) Address(key string) string { return p.Addresses[key] }

// Validate checks p (BAD_USER_INPUT naming the field): each address by its channel's
// ChannelSpec.ValidAddress (in Channels order), no address under a key no channel
// registers, Locale well formed (CheckLocale), Timezone an IANA name (CheckTimezone).
func (p UserProfile) Validate() error {
	for _, s := range channelSpecs {
		if v := p.Addresses[s.AddressKey]; s.AddressKey != "" && v != "" && s.ValidAddress != nil {
			if err := s.ValidAddress(v); err != nil {
				return err
			}
		}
	}
	for k, v := range p.Addresses {
		if v != "" && !slices.Contains(AddressKeys, k) {
			return Errorf(CodeBadUserInput, "%q is no channel's address", k)
		}
	}
	if p.Locale != "" {
		if err := CheckLocale(p.Locale); err != nil {
			return err
		}
	}
	if p.Timezone != "" {
		if err := CheckTimezone(p.Timezone); err != nil {
			return err
		}
	}
	return nil
}

// TenantSettings are one tenant's settings (PUT /v1/tenant/settings). A tenant without
// stored settings has the gateway's configured defaults (INBOX_DEFAULT_PREFERENCES,
// INBOX_CRITICAL_CATEGORIES, INBOX_RETENTION) and no webhook.
type TenantSettings struct {
	// Preferences are the tenant's preference defaults and critical categories; nil: the
	// configured defaults.
	Preferences *TenantPreferences
	// WebhookURL receives the tenant's WEBHOOK deliveries (absolute https, or http for
	// localhost); "" turns the channel off. WebhookSecret signs them (required with a URL).
	WebhookURL    string
	WebhookSecret string
	// Retention is how long a notification sent without expiresAt stays; nil: the
	// configured retention; 0: until deleted.
	Retention *time.Duration
}

// Limits of tenant settings.
const (
	maxWebhookURLBytes    = 2048
	maxWebhookSecretBytes = 256
	minWebhookSecretBytes = 16
)

// Validate checks s (BAD_USER_INPUT): the preferences as ParseTenantPreferences would
// (categories valid ids listed once, quiet hours with a timezone, critical categories
// valid ids), the webhook URL absolute https (http only for localhost) of at most 2048
// bytes and with a secret of 16..256 printable bytes, no secret without a URL, a retention
// from 0 to MaxSnooze.
func (s TenantSettings) Validate() error {
	if p := s.Preferences; p != nil {
		u := PreferencesUpdate{Categories: p.Categories, QuietHours: p.QuietHours}
		if p.Timezone != "" {
			u.Timezone = &p.Timezone
		}
		if p.Locale != "" {
			u.Locale = &p.Locale
		}
		if err := u.Validate(); err != nil {
			return err
		}
		if p.QuietHours != nil && p.Timezone == "" {
			return Errorf(CodeBadUserInput, "quietHours need a timezone")
		}
		for _, c := range p.Critical {
			if err := CheckID("critical category", c); err != nil {
				return err
			}
		}
	}
	if s.WebhookURL != "" {
		u, err := url.Parse(s.WebhookURL)
		local := err == nil && (u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1" || u.Hostname() == "::1")
		if err != nil || len(s.WebhookURL) > maxWebhookURLBytes || !u.IsAbs() || u.Host == "" || u.User != nil ||
			!(u.Scheme == "https" || u.Scheme == "http" && local) {
			return Errorf(CodeBadUserInput, "webhookUrl must be an absolute https URL (http only for localhost) of at most %d bytes", maxWebhookURLBytes)
		}
		if n := len(s.WebhookSecret); n < minWebhookSecretBytes || n > maxWebhookSecretBytes || !printable(s.WebhookSecret) {
			return Errorf(CodeBadUserInput, "webhookSecret must be %d..%d printable characters", minWebhookSecretBytes, maxWebhookSecretBytes)
		}
	} else if s.WebhookSecret != "" {
		return Errorf(CodeBadUserInput, "webhookSecret needs a webhookUrl")
	}
	if s.Retention != nil && (*s.Retention < 0 || *s.Retention > MaxSnooze) {
		return Errorf(CodeBadUserInput, "retention must be from 0 to %d days", int(MaxSnooze.Hours()/24))
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters or spaces.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// asciiLower is s with its ASCII letters lower-cased, every other byte as it is.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
