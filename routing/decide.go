package routing

import (
	"slices"
	"strings"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Tenant is what of a tenant's configuration the routing decisions read: its stored
// settings over the gateway's configured defaults (the store builds it).
type Tenant struct {
	// Prefs are the tenant's default preferences: the switches a user who set none has,
	// the default quiet hours, zone and locale, and the critical categories.
	Prefs inbox.TenantPreferences
	// WebhookURL is the tenant's webhook endpoint; "" for none. With one, WEBHOOK is a
	// candidate channel of every send (Candidates).
	WebhookURL string
	// Retention is how long a notification lives when its send sets no expiresAt
	// (Expiry); 0: until it is deleted.
	Retention time.Duration
}

// Critical reports whether a notification of category is critical for t: it bypasses
// every opt-out, mute and quiet hours (what a recipient lacks still applies). "" is
// never critical.
func (t Tenant) Critical(category string) bool { return t.Prefs.IsCritical(category) }

// Recipient is what is known of one recipient of a send.
type Recipient struct {
	// ID is the recipient's user id ("" when unknown: LeaveOut then never applies).
	ID string
	// Own are the preferences the recipient set (zero: none). Decide ignores them for a
	// critical category, so a caller need not read them then.
	Own inbox.OwnPreferences
	// Profile is the recipient's channel profile: email address, phone number, locale
	// and time zone (zero: none).
	Profile inbox.UserProfile
	// Devices are the recipient's push devices, oldest first: PUSH is decided once per
	// device, in this order.
	Devices []inbox.Device
	// Suppressed are the channels whose address on Profile is on the tenant's
	// suppression list (inbox.Suppression), by channel; nil: none.
	Suppressed map[string]bool
}

// Decision is one delivery's outcome for one recipient: queued (at once, or deferred to
// the end of their quiet hours) or skipped with a reason.
type Decision struct {
	// Channel is one of inbox.Channels.
	Channel string
	// Key is the delivery record's key (inbox.DeliveryKey): the channel, or
	// "PUSH#{deviceId}" for one push device.
	Key string
	// Reason is why the channel is skipped (one of inbox's Reason constants); "" when
	// it is queued.
	Reason string
	// Deferred is when a queued delivery may go out (the end of the recipient's quiet
	// hours); the zero time: at once.
	Deferred time.Time
	// To is a queued delivery's address: the email address (EMAIL), the phone number
	// (SMS), the device token (PUSH); "" otherwise.
	To string
	// Device is a queued PUSH decision's device (an element of Recipient.Devices).
	Device *inbox.Device
}

// Queued reports whether d delivers (in-app: written at once; any other channel: queued
// for its delivery).
func (d Decision) Queued() bool { return d.Reason == "" }

// CheckChannels checks a send's template channels and hint: each lists at most
// 4×len(inbox.Channels) entries, all of them inbox.Channels. Errors: BAD_USER_INPUT
// naming the list ("templateChannels", "channels").
func CheckChannels(in inbox.SendInput) error {
	for _, l := range []struct {
		name string
		cs   []string
	}{{"templateChannels", in.TemplateChannels}, {"channels", in.Channels}} {
		if len(l.cs) > 4*len(inbox.Channels) {
			return inbox.Errorf(inbox.CodeBadUserInput, "%s lists too many channels", l.name)
		}
		for _, c := range l.cs {
			if !inbox.ValidChannel(c) {
				return inbox.Errorf(inbox.CodeBadUserInput, "%s: unknown channel %q (one of %s)", l.name, c, strings.Join(inbox.Channels, ", "))
			}
		}
	}
	return nil
}

// Candidates are the channels a send considers for every recipient, in inbox.Channels
// order: in-app, the template's, the hint's, and WEBHOOK when the tenant has a webhook
// URL (webhookURL non-empty). Each gets a record (Decide), skipped or not.
func Candidates(in inbox.SendInput, webhookURL string) []string {
	var out []string
	for _, c := range inbox.Channels {
		if c == inbox.ChannelInApp || slices.Contains(in.TemplateChannels, c) || slices.Contains(in.Channels, c) ||
			(c == inbox.ChannelWebhook && webhookURL != "") {
			out = append(out, c)
		}
	}
	return out
}

// InTemplate reports whether the send's template defines channel (TemplateChannels nil:
// no template, in-app only). WEBHOOK needs no template part (its body is the
// notification itself): every send defines it, and the tenant's webhook URL decides.
func InTemplate(in inbox.SendInput, channel string) bool {
	if channel == inbox.ChannelWebhook {
		return true
	}
	if in.TemplateChannels == nil {
		return channel == inbox.ChannelInApp
	}
	return slices.Contains(in.TemplateChannels, channel)
}

// InHint reports whether the send's hint lets channel through (Channels nil: every
// channel).
func InHint(in inbox.SendInput, channel string) bool {
	return in.Channels == nil || slices.Contains(in.Channels, channel)
}

// NeedsProfile reports whether a send may deliver a channel that needs what the
// recipient has (an address on their profile, ChannelSpec.AddressKey, or push devices;
// one of them in its template and its hint): only then do its decisions read the
// recipients' profiles and devices (Recipient.Profile, Recipient.Devices; the
// quiet-hours zone of a profile matters only for those channels too).
func NeedsProfile(in inbox.SendInput) bool {
	for _, c := range inbox.Channels {
		if s, _ := inbox.Spec(c); (s.AddressKey != "" || c == inbox.ChannelPush) && InTemplate(in, c) && InHint(in, c) {
			return true
		}
	}
	return false
}

// Decide returns the decisions of one recipient r of a send in, at now, under tenant t:
// one per candidate channel (Candidates; PUSH one per device), in-app always among them.
//
// Each candidate is checked in this order, the first that applies deciding it:
//   - the recipient is the one the send leaves out (its actor: inbox.SendInput.LeaveOut,
//     matched on Recipient.ID): inbox.ReasonActor, critical or not;
//   - not in the template (inbox.ReasonNotInTemplate), not in the hint (ReasonNotInHint);
//   - unless the category is critical (Tenant.Critical), the preferences (PrefsReason:
//     the target muted, ReasonMuted; the channel switched off globally, ReasonOptedOut,
//     or for the category only, ReasonCategoryOptedOut; the webhook has no switch);
//   - what the recipient lacks: the channel's address on their profile
//     (inbox.ChannelSpec.AddressKey: its NoAddress, e.g. no email address, ReasonNoEmail;
//     no phone number, ReasonNoPhone), the address on the tenant's suppression list
//     (ReasonSuppressed, critical or not: it bounced), no push device
//     (ReasonNoDevice), no tenant webhook URL (ReasonNoWebhook).
//
// A channel that passes is queued: PUSH once per device, keyed "PUSH#{deviceId}", in
// r.Devices' order, with the device's token as To; a channel with an address to it
// (the profile's address of its AddressKey: EMAIL to the email, SMS to the phone). Unless
// critical, a delivery of a quiet channel (ChannelSpec.Quiet: every one but in-app and
// the webhook, which goes to the tenant, not to the user) inside the recipient's quiet
// hours (their resolved preferences' window, in Zone(own, profile, tenant)) is deferred
// to the window's end (QuietUntil).
func Decide(in inbox.SendInput, t Tenant, r Recipient, now time.Time) []Decision {
	critical := t.Critical(in.Category)
	p := t.Prefs.Resolve(r.Own)
	target := targetRef(in.Target)
	var quietEnd time.Time
	if !critical {
		quietEnd = QuietUntil(now, p.QuietHours, Zone(r.Own.Timezone, r.Profile.Timezone, t.Prefs.Timezone))
	}
	var out []Decision
	for _, c := range Candidates(in, t.WebhookURL) {
		d := Decision{Channel: c, Key: c}
		spec, _ := inbox.Spec(c)
		prefs := ""
		if !critical {
			prefs = PrefsReason(p, in.Category, c, target)
		}
		switch {
		case in.LeaveOut != "" && r.ID == in.LeaveOut:
			d.Reason = inbox.ReasonActor
		case !InTemplate(in, c):
			d.Reason = inbox.ReasonNotInTemplate
		case !InHint(in, c):
			d.Reason = inbox.ReasonNotInHint
		case prefs != "":
			d.Reason = prefs
		case spec.AddressKey != "" && spec.Address(r.Profile) == "":
			d.Reason = spec.NoAddress
		case spec.AddressKey != "" && r.Suppressed[c]:
			d.Reason = inbox.ReasonSuppressed
		case c == inbox.ChannelPush && len(r.Devices) == 0:
			d.Reason = inbox.ReasonNoDevice
		case c == inbox.ChannelWebhook && t.WebhookURL == "":
			d.Reason = inbox.ReasonNoWebhook
		case spec.Quiet:
			d.Deferred = quietEnd
		}
		switch {
		case d.Reason != "":
		case spec.AddressKey != "":
			d.To = spec.Address(r.Profile)
		case c == inbox.ChannelPush:
			for i := range r.Devices {
				dev := &r.Devices[i]
				out = append(out, Decision{Channel: c, Key: inbox.DeliveryKey(c, dev.ID), Deferred: d.Deferred, To: dev.Token, Device: dev})
			}
			continue
		}
		out = append(out, d)
	}
	return out
}

// InApp returns the in-app decision among ds (Decide's). Decide always has one; ds
// without one (none decided) is in-app skipped with inbox.ReasonNotInTemplate. A
// recipient whose in-app decision is skipped gets no notification, only status records.
func InApp(ds []Decision) Decision {
	for _, d := range ds {
		if d.Channel == inbox.ChannelInApp {
			return d
		}
	}
	return Decision{Channel: inbox.ChannelInApp, Reason: inbox.ReasonNotInTemplate}
}

// PrefsReason is why the resolved preferences p keep channel from a notification of
// category ("" for none) about target (nil: none): inbox.ReasonMuted (the target is
// muted; every channel), ReasonOptedOut (the channel's global switch is off),
// ReasonCategoryOptedOut (on globally, off for the category), or "" when they let it
// through. The webhook has no switch (it goes to the tenant): only a mute keeps it. It
// knows nothing of critical categories: callers ask only for non-critical ones (Decide,
// Recheck).
func PrefsReason(p inbox.Preferences, category, channel string, target *inbox.ProfileRef) string {
	switch {
	case target != nil && slices.Contains(p.MutedTargets, *target):
		return inbox.ReasonMuted
	case channel == inbox.ChannelWebhook || SwitchOn(p.ChannelsFor(category), channel):
		return ""
	case !SwitchOn(p.Channels, channel):
		return inbox.ReasonOptedOut
	}
	return inbox.ReasonCategoryOptedOut
}

// Recheck decides again, when a queued delivery of channel is about to go out, whether
// its recipient's preferences (own, over t's defaults) still let it through: "" when
// they do or category is critical for t, else PrefsReason's reason. A delivery that
// waited (quiet hours, a retry) follows the preferences of its delivery time.
func Recheck(t Tenant, own inbox.OwnPreferences, category, channel string, target *inbox.ProfileRef) string {
	if t.Critical(category) {
		return ""
	}
	return PrefsReason(t.Prefs.Resolve(own), category, channel, target)
}

// SwitchOn returns sw's switch of channel; true for a channel without a switch
// (WEBHOOK: inbox.ChannelSpec.Switch "").
func SwitchOn(sw inbox.ChannelSwitches, channel string) bool {
	if s, ok := inbox.Spec(channel); ok && s.Switch == "" {
		return true
	}
	return sw[channel]
}

// targetRef is the mute key of a send's target (nil: none).
func targetRef(t *inbox.Target) *inbox.ProfileRef {
	if t == nil {
		return nil
	}
	return &inbox.ProfileRef{TargetKind: t.Kind, ID: t.TargetID}
}
