package inbox

// Channels a notification can be delivered through.
const (
	ChannelInApp   = "IN_APP"
	ChannelEmail   = "EMAIL"
	ChannelPush    = "PUSH"
	ChannelSMS     = "SMS"
	ChannelWebhook = "WEBHOOK"
)

// ChannelSwitches says which channels are on.
type ChannelSwitches struct {
	InApp bool
	Email bool
	Push  bool
	SMS   bool
}

// CategoryPreference is the channel switches of one category. Critical categories are
// set by the tenant: a user cannot opt out of them (their switches are forced on).
type CategoryPreference struct {
	Category string
	Critical bool
	Channels ChannelSwitches
}

// QuietHours is a daily window, "HH:MM" to "HH:MM" (24 h) in the preferences' Timezone;
// End before Start wraps past midnight.
type QuietHours struct {
	Start string
	End   string
}

// Preferences are a user's notification preferences: their own where set, the tenant's
// defaults otherwise.
type Preferences struct {
	// Channels apply to every category without its own switches.
	Channels   ChannelSwitches
	Categories []CategoryPreference
	// MutedTargets are the targets (threads) the user muted.
	MutedTargets []ProfileRef
	QuietHours   *QuietHours
	// Timezone is an IANA name ("" when unset); Locale a BCP 47 tag.
	Timezone string
	Locale   string
}
