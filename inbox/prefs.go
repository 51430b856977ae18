package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ChannelSwitches says which channels are on, by channel (SwitchChannels names): a
// resolved set (Preferences, TenantPreferences) has every switch channel; one missing is
// off. Treat a ChannelSwitches as a value: Over and Clone copy, nothing else changes one
// in place.
type ChannelSwitches map[string]bool

// AllOn returns switches with every SwitchChannels channel on.
func AllOn() ChannelSwitches {
	sw := make(ChannelSwitches, len(SwitchChannels))
	for _, c := range SwitchChannels {
		sw[c] = true
	}
	return sw
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

// Limits of preferences.
const (
	// MaxMutedTargets is how many targets one user may have muted at once.
	MaxMutedTargets = 100
	// MaxCategoryUpdates is how many categories one update may set.
	MaxCategoryUpdates = 50
	// maxZoneBytes bounds an IANA time zone name (the longest is 32 bytes).
	maxZoneBytes = 64
	// maxLocaleBytes bounds a BCP 47 tag.
	maxLocaleBytes = 64
)

// SwitchChanges are channel switches of which only some are set, by channel
// (SwitchChannels names): a channel missing is left as it is (in an update) or as the
// next less specific level says (in defaults).
type SwitchChanges map[string]bool

// IsZero reports whether no channel is set.
func (c SwitchChanges) IsZero() bool { return len(c) == 0 }

// Over returns a copy of base with the channels set in c replaced by c's values.
func (c SwitchChanges) Over(base ChannelSwitches) ChannelSwitches {
	out := make(ChannelSwitches, len(base)+len(c))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range c {
		out[k] = v
	}
	return out
}

// Set returns a copy of c with channel set to on.
func (c SwitchChanges) Set(channel string, on bool) SwitchChanges {
	out := make(SwitchChanges, len(c)+1)
	for k, v := range c {
		out[k] = v
	}
	out[channel] = on
	return out
}

// anyOff reports whether c turns some channel off.
func (c SwitchChanges) anyOff() bool {
	for _, v := range c {
		if !v {
			return true
		}
	}
	return false
}

// CategorySwitches are the channel switches set for one category.
type CategorySwitches struct {
	Category string
	Channels SwitchChanges
}

// OwnPreferences are what a user set themselves, as stored: every field left unset (nil,
// empty) takes the tenant's default (see TenantPreferences.Resolve).
type OwnPreferences struct {
	Channels SwitchChanges
	// Categories are the user's per-category switches, by category.
	Categories map[string]SwitchChanges
	// MutedCategories are the categories opted out of with the v1 API: in-app off for
	// them unless Categories says otherwise.
	MutedCategories []string
	MutedTargets    []ProfileRef
	QuietHours      *QuietHours
	Timezone        string
	Locale          string
}

// TenantPreferences are a tenant's defaults: what a user has until they set their own,
// and the categories nobody may opt out of.
type TenantPreferences struct {
	// Channels are the default channel switches (every channel on, as
	// DefaultTenantPreferences has them, unless the tenant says otherwise).
	Channels ChannelSwitches
	// Categories are default switches of some categories; channels left nil follow the
	// user's (or the default) global switches.
	Categories []CategorySwitches
	QuietHours *QuietHours
	Timezone   string
	Locale     string
	// Critical categories always deliver: their switches are forced on and a user can
	// neither turn them off nor mute their notifications away.
	Critical []string
}

// DefaultTenantPreferences are the defaults of a tenant that configured none: every
// channel on, nothing critical.
func DefaultTenantPreferences() TenantPreferences {
	return TenantPreferences{Channels: AllOn()}
}

// IsCritical reports whether category is one of the tenant's critical categories.
func (d TenantPreferences) IsCritical(category string) bool {
	return category != "" && slices.Contains(d.Critical, category)
}

// Resolve returns the effective preferences of a user who set own. Each channel of a
// category is the most specific setting there is: the user's switch for the category
// (or, from the v1 API, in-app off for a muted category), the tenant's default for the
// category, the user's global switch, the tenant's global default. Critical categories
// are listed with every channel on. Categories are sorted by name; every category that
// the tenant or the user named is listed.
func (d TenantPreferences) Resolve(own OwnPreferences) Preferences {
	p := Preferences{
		Channels:     own.Channels.Over(d.Channels),
		MutedTargets: slices.Clone(own.MutedTargets),
		QuietHours:   d.QuietHours,
		Timezone:     d.Timezone,
		Locale:       d.Locale,
	}
	if own.QuietHours != nil {
		p.QuietHours = own.QuietHours
	}
	if own.Timezone != "" {
		p.Timezone = own.Timezone
	}
	if own.Locale != "" {
		p.Locale = own.Locale
	}
	names := map[string]bool{}
	for _, c := range d.Categories {
		names[c.Category] = true
	}
	for c := range own.Categories {
		names[c] = true
	}
	for _, c := range own.MutedCategories {
		names[c] = true
	}
	for _, c := range d.Critical {
		names[c] = true
	}
	for _, c := range slices.Sorted(maps.Keys(names)) {
		p.Categories = append(p.Categories, d.category(own, p.Channels, c))
	}
	return p
}

// category resolves the switches of one category over the user's effective global
// switches global.
func (d TenantPreferences) category(own OwnPreferences, global ChannelSwitches, category string) CategoryPreference {
	if d.IsCritical(category) {
		return CategoryPreference{Category: category, Critical: true,
			Channels: AllOn()}
	}
	sw := global
	for _, c := range d.Categories {
		if c.Category == category {
			sw = c.Channels.Over(sw)
		}
	}
	if slices.Contains(own.MutedCategories, category) {
		sw = SwitchChanges{ChannelInApp: false}.Over(sw)
	}
	sw = own.Categories[category].Over(sw)
	return CategoryPreference{Category: category, Channels: sw}
}

// ChannelsFor returns the switches that apply to a notification of category ("" for
// none): the category's own when it has some, the global ones otherwise.
func (p Preferences) ChannelsFor(category string) ChannelSwitches {
	if category != "" {
		for _, c := range p.Categories {
			if c.Category == category {
				return c.Channels
			}
		}
	}
	return p.Channels
}

// Critical reports whether category is listed as critical.
func (p Preferences) Critical(category string) bool {
	for _, c := range p.Categories {
		if c.Category == category {
			return c.Critical
		}
	}
	return false
}

// PreferencesUpdate is a partial change of a user's preferences (updatePreferences):
// what is left unset keeps its value.
type PreferencesUpdate struct {
	Channels SwitchChanges
	// Categories set per-category switches; a category not listed keeps its switches.
	Categories []CategorySwitches
	// QuietHours, when not nil, replaces the quiet hours; ClearQuietHours removes them.
	QuietHours      *QuietHours
	ClearQuietHours bool
	// Timezone and Locale, when not nil, replace the stored value; "" clears it.
	Timezone *string
	Locale   *string
	// MuteTargets and UnmuteTargets are targets (TargetKind and ID set) to mute and to
	// unmute; a target may not be in both.
	MuteTargets   []ProfileRef
	UnmuteTargets []ProfileRef
}

// IsZero reports whether u changes nothing.
func (u PreferencesUpdate) IsZero() bool {
	return u.Channels.IsZero() && len(u.Categories) == 0 && u.QuietHours == nil && !u.ClearQuietHours &&
		u.Timezone == nil && u.Locale == nil && len(u.MuteTargets) == 0 && len(u.UnmuteTargets) == 0
}

// Validate checks u on its own (the tenant's rules are checked by
// TenantPreferences.CheckUpdate): at most MaxCategoryUpdates categories, each a valid
// id and listed once; quiet hours "HH:MM" (24 h) with start and end different, not both
// set and cleared; a timezone that is an IANA name (time.LoadLocation; "Local" is not
// one); a locale that is a well-formed BCP 47 tag; at most MaxMutedTargets targets to
// mute and to unmute, each with a valid kind and id, none in both lists.
// Errors are BAD_USER_INPUT.
func (u PreferencesUpdate) Validate() error {
	if len(u.Categories) > MaxCategoryUpdates {
		return Errorf(CodeBadUserInput, "categories takes at most %d categories", MaxCategoryUpdates)
	}
	seen := map[string]bool{}
	for _, c := range u.Categories {
		if err := CheckID("category", c.Category); err != nil {
			return err
		}
		if seen[c.Category] {
			return Errorf(CodeBadUserInput, "category %q is listed twice", c.Category)
		}
		seen[c.Category] = true
	}
	if u.QuietHours != nil {
		if u.ClearQuietHours {
			return Errorf(CodeBadUserInput, "quietHours cannot be both set and cleared")
		}
		if err := u.QuietHours.Validate(); err != nil {
			return err
		}
	}
	if u.Timezone != nil && *u.Timezone != "" {
		if err := CheckTimezone(*u.Timezone); err != nil {
			return err
		}
	}
	if u.Locale != nil && *u.Locale != "" {
		if err := CheckLocale(*u.Locale); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		name string
		refs []ProfileRef
	}{{"muteTargets", u.MuteTargets}, {"unmuteTargets", u.UnmuteTargets}} {
		if len(l.refs) > MaxMutedTargets {
			return Errorf(CodeBadUserInput, "%s takes at most %d targets", l.name, MaxMutedTargets)
		}
		for _, r := range l.refs {
			if err := CheckID(l.name+" kind", r.TargetKind); err != nil {
				return err
			}
			if err := CheckID(l.name+" id", r.ID); err != nil {
				return err
			}
		}
	}
	for _, r := range u.MuteTargets {
		if slices.Contains(u.UnmuteTargets, r) {
			return Errorf(CodeBadUserInput, "a target cannot be both muted and unmuted")
		}
	}
	return nil
}

// CheckUpdate checks u against the tenant's rules: no channel of a critical category
// may be turned off (BAD_USER_INPUT naming the category).
func (d TenantPreferences) CheckUpdate(u PreferencesUpdate) error {
	for _, c := range u.Categories {
		if d.IsCritical(c.Category) && c.Channels.anyOff() {
			return Errorf(CodeBadUserInput, "category %q is critical: its channels cannot be turned off", c.Category)
		}
	}
	return nil
}

// Validate checks both ends are "HH:MM" (00:00..23:59) and differ (BAD_USER_INPUT).
func (q QuietHours) Validate() error {
	for _, s := range []string{q.Start, q.End} {
		if !validClock(s) {
			return Errorf(CodeBadUserInput, "quietHours: %q is not a time of day HH:MM (00:00 to 23:59)", s)
		}
	}
	if q.Start == q.End {
		return Errorf(CodeBadUserInput, "quietHours: start and end must differ")
	}
	return nil
}

// validClock reports whether s is "HH:MM", 00:00 to 23:59.
func validClock(s string) bool {
	if len(s) != 5 || s[2] != ':' {
		return false
	}
	for _, i := range []int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	h, m := int(s[0]-'0')*10+int(s[1]-'0'), int(s[3]-'0')*10+int(s[4]-'0')
	return h < 24 && m < 60
}

// CheckTimezone reports whether name is an IANA time zone name that time.LoadLocation
// knows (package app embeds time/tzdata, so this does not depend on the host), "UTC"
// included and "Local" (the server's zone) not. BAD_USER_INPUT otherwise.
func CheckTimezone(name string) error {
	if name == "" || name == "Local" || len(name) > maxZoneBytes {
		return Errorf(CodeBadUserInput, "timezone %q is not an IANA time zone name", name)
	}
	if _, err := time.LoadLocation(name); err != nil {
		return Errorf(CodeBadUserInput, "timezone %q is not an IANA time zone name", name)
	}
	return nil
}

// CheckLocale reports whether tag is a well-formed BCP 47 language tag (RFC 5646
// syntax: language, then optional script, region, variants, extensions and private use,
// separated by '-'). Whether its subtags are registered is checked by the store, which
// also canonicalizes it. BAD_USER_INPUT otherwise.
func CheckLocale(tag string) error {
	bad := Errorf(CodeBadUserInput, "locale %q is not a BCP 47 language tag (e.g. de-DE)", tag)
	if tag == "" || len(tag) > maxLocaleBytes {
		return bad
	}
	parts := strings.Split(tag, "-")
	isAlpha := func(s string) bool {
		for _, r := range s {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
				return false
			}
		}
		return true
	}
	isDigit := func(s string) bool {
		for _, r := range s {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	isAlnum := func(s string) bool {
		for _, r := range s {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
				return false
			}
		}
		return true
	}
	// language: 2..3 letters (or 5..8, registered long ones).
	if l := len(parts[0]); !isAlpha(parts[0]) || l < 2 || l > 8 || l == 4 {
		return bad
	}
	i := 1
	if i < len(parts) && len(parts[i]) == 4 && isAlpha(parts[i]) { // script
		i++
	}
	if i < len(parts) && (len(parts[i]) == 2 && isAlpha(parts[i]) || len(parts[i]) == 3 && isDigit(parts[i])) { // region
		i++
	}
	for i < len(parts) { // variants, extensions, private use
		p := parts[i]
		switch {
		case len(p) == 1 && isAlnum(p):
			// A singleton needs at least one subtag of 2..8 (1..8 for private use "x").
			min := 2
			if p == "x" || p == "X" {
				min = 1
			}
			i++
			n := 0
			for i < len(parts) && len(parts[i]) >= min && len(parts[i]) <= 8 && isAlnum(parts[i]) {
				i++
				n++
			}
			if n == 0 {
				return bad
			}
		case isAlnum(p) && (len(p) >= 5 && len(p) <= 8 || len(p) == 4 && p[0] >= '0' && p[0] <= '9'):
			i++
		default:
			return bad
		}
	}
	return nil
}

// switchesJSON is SwitchChanges in JSON by switch name ({"inApp": true, "sms": false}),
// every channel optional; an unknown name is an error.
type switchesJSON SwitchChanges

// UnmarshalJSON reads switches by their ChannelSpec.Switch names.
func (s *switchesJSON) UnmarshalJSON(b []byte) error {
	var m map[string]*bool
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	out := switchesJSON{}
	for name, v := range m {
		c := ChannelBySwitch(name)
		if c == "" {
			return fmt.Errorf("json: unknown field %q", name)
		}
		if v != nil {
			out[c] = *v
		}
	}
	*s = out
	return nil
}

func (s switchesJSON) changes() SwitchChanges {
	return SwitchChanges(s)
}

// ParseTenantPreferences reads a tenant's defaults from JSON of the GraphQL Preferences
// shape, e.g. {"channels": {"sms": false}, "categories": [{"category": "marketing",
// "channels": {"inApp": false}}], "quietHours": {"start": "22:00", "end": "07:00"},
// "timezone": "Europe/Berlin", "locale": "de-DE"} (every field optional; a channel left
// out is on; "" is no JSON: the built-in defaults), and the critical categories. It
// refuses unknown fields, muted targets, and anything Validate would refuse.
func ParseTenantPreferences(js string, critical []string) (TenantPreferences, error) {
	d := DefaultTenantPreferences()
	for _, c := range critical {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if err := CheckID("critical category", c); err != nil {
			return d, err
		}
		if !slices.Contains(d.Critical, c) {
			d.Critical = append(d.Critical, c)
		}
	}
	if strings.TrimSpace(js) == "" {
		return d, nil
	}
	var in struct {
		Channels   switchesJSON `json:"channels"`
		Categories []struct {
			Category string       `json:"category"`
			Channels switchesJSON `json:"channels"`
		} `json:"categories"`
		QuietHours *struct {
			Start string `json:"start"`
			End   string `json:"end"`
		} `json:"quietHours"`
		Timezone string `json:"timezone"`
		Locale   string `json:"locale"`
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return d, fmt.Errorf("default preferences: %w", err)
	}
	d.Channels = in.Channels.changes().Over(d.Channels)
	u := PreferencesUpdate{}
	for _, c := range in.Categories {
		u.Categories = append(u.Categories, CategorySwitches{Category: c.Category, Channels: c.Channels.changes()})
	}
	if in.QuietHours != nil {
		u.QuietHours = &QuietHours{Start: in.QuietHours.Start, End: in.QuietHours.End}
	}
	if in.Timezone != "" {
		u.Timezone = &in.Timezone
	}
	if in.Locale != "" {
		u.Locale = &in.Locale
	}
	if err := u.Validate(); err != nil {
		return d, fmt.Errorf("default preferences: %w", err)
	}
	if u.QuietHours != nil && in.Timezone == "" {
		return d, errors.New("default preferences: quietHours need a timezone")
	}
	d.Categories, d.QuietHours, d.Timezone, d.Locale = u.Categories, u.QuietHours, in.Timezone, in.Locale
	return d, nil
}

// legacySwitchNames are the JSON names of the channel switches when they were a struct
// (InApp, Email, Push, SMS): stored tenant settings written then still hold them.
var legacySwitchNames = map[string]string{"InApp": ChannelInApp, "Email": ChannelEmail, "Push": ChannelPush, "SMS": ChannelSMS}

// storedSwitchName is the JSON name a switch of channel is stored by: its field name in
// the struct the switches were (legacySwitchNames), which the release before reads (a
// rolling deploy runs it beside this one, a rollback goes back to it; it read no
// "IN_APP"), or the channel's name for a channel added since.
func storedSwitchName(channel string) string {
	for name, c := range legacySwitchNames {
		if c == channel {
			return name
		}
	}
	return channel
}

// marshalSwitches writes switches by storedSwitchName (nil: null).
func marshalSwitches(m map[string]bool) ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	out := make(map[string]bool, len(m))
	for c, on := range m {
		out[storedSwitchName(c)] = on
	}
	return json.Marshal(out)
}

// MarshalJSON writes the switches as stored tenant settings keep them: by the names the
// release before reads (storedSwitchName); UnmarshalJSON reads them back.
func (s ChannelSwitches) MarshalJSON() ([]byte, error) { return marshalSwitches(s) }

// MarshalJSON writes the switches set as stored tenant settings keep them (see
// ChannelSwitches.MarshalJSON).
func (c SwitchChanges) MarshalJSON() ([]byte, error) { return marshalSwitches(c) }

// switchesFromJSON reads a JSON object of switches by channel name or legacy field name;
// null values are left out.
func switchesFromJSON(b []byte) (map[string]bool, error) {
	var m map[string]*bool
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, nil
	}
	out := make(map[string]bool, len(m))
	for k, v := range m {
		if c, ok := legacySwitchNames[k]; ok {
			k = c
		}
		if v != nil && ValidChannel(k) {
			out[k] = *v
		}
	}
	return out, nil
}

// UnmarshalJSON reads switches stored as JSON (tenant settings): by channel name, or by
// the field names of the struct they once were ({"InApp": true, ...}). A switch channel
// the JSON leaves out is on: a channel added since the switches were stored starts on,
// as DefaultTenantPreferences has every channel.
func (s *ChannelSwitches) UnmarshalJSON(b []byte) error {
	m, err := switchesFromJSON(b)
	if err != nil {
		return err
	}
	if m == nil {
		*s = nil
		return nil
	}
	*s = SwitchChanges(m).Over(AllOn())
	return nil
}

// UnmarshalJSON reads partial switches stored as JSON: by channel name, or by the field
// names of the struct they once were, where null was a channel not set.
func (c *SwitchChanges) UnmarshalJSON(b []byte) error {
	m, err := switchesFromJSON(b)
	if err != nil {
		return err
	}
	*c = m
	return nil
}
