package inbox_test

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	_ "time/tzdata" // as package main: zones do not depend on the host

	"github.com/inboxgw/gateway/inbox"
)

func str(s string) *string { return &s }

// only returns switches with every switch channel listed on and the others off.
func only(on ...string) inbox.ChannelSwitches {
	sw := inbox.ChannelSwitches{}
	for _, c := range inbox.SwitchChannels {
		sw[c] = slices.Contains(on, c)
	}
	return sw
}

// The most specific setting wins per channel: user category, v1 muted category, tenant
// category, user global, tenant global; critical categories are forced on.
func TestResolveOverlay(t *testing.T) {
	d := inbox.TenantPreferences{
		Channels:   only(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelSlack),
		Categories: []inbox.CategorySwitches{{Category: "marketing", Channels: inbox.SwitchChanges{inbox.ChannelEmail: false}}},
		Timezone:   "Europe/Berlin", Locale: "de-DE",
		Critical: []string{"security"},
	}
	own := inbox.OwnPreferences{
		Channels:        inbox.SwitchChanges{inbox.ChannelPush: true, inbox.ChannelEmail: false},
		Categories:      map[string]inbox.SwitchChanges{"social": {inbox.ChannelSMS: true}, "security": {inbox.ChannelInApp: false}},
		MutedCategories: []string{"digest"},
		Locale:          "fr",
	}
	p := d.Resolve(own)
	all := inbox.AllOn()
	want := inbox.Preferences{
		Channels: only(inbox.ChannelInApp, inbox.ChannelPush, inbox.ChannelSlack),
		Categories: []inbox.CategoryPreference{
			{Category: "digest", Channels: only(inbox.ChannelPush, inbox.ChannelSlack)},
			{Category: "marketing", Channels: only(inbox.ChannelInApp, inbox.ChannelPush, inbox.ChannelSlack)},
			{Category: "security", Critical: true, Channels: all},
			{Category: "social", Channels: only(inbox.ChannelInApp, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack)},
		},
		Timezone: "Europe/Berlin", Locale: "fr",
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
	// Nothing of the user's: the tenant's defaults.
	if p := d.Resolve(inbox.OwnPreferences{}); !maps.Equal(p.Channels, d.Channels) || p.Locale != "de-DE" || len(p.Categories) != 2 {
		t.Fatalf("defaults: %+v", p)
	}
}

func TestPreferencesUpdateValidate(t *testing.T) {
	ok := []inbox.PreferencesUpdate{
		{},
		{QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:30"}, Timezone: str("America/New_York")},
		{Timezone: str("UTC"), Locale: str("de-DE")},
		{Timezone: str(""), Locale: str("")},
		{Locale: str("zh-Hant-TW")}, {Locale: str("sr-Latn-RS-u-nu-latn")}, {Locale: str("en-x-pirate")}, {Locale: str("es-419")},
		{MuteTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "1"}}, UnmuteTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "2"}}},
	}
	for _, u := range ok {
		if err := u.Validate(); err != nil {
			t.Errorf("%+v: %v", u, err)
		}
	}
	bad := map[string]inbox.PreferencesUpdate{
		"25:00":         {QuietHours: &inbox.QuietHours{Start: "25:00", End: "07:00"}},
		"7:00":          {QuietHours: &inbox.QuietHours{Start: "22:00", End: "7:00"}},
		"24:00":         {QuietHours: &inbox.QuietHours{Start: "24:00", End: "07:00"}},
		"equal":         {QuietHours: &inbox.QuietHours{Start: "07:00", End: "07:00"}},
		"set and clear": {QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"}, ClearQuietHours: true},
		"zone":          {Timezone: str("Mars/Olympus")},
		"Local":         {Timezone: str("Local")},
		"path zone":     {Timezone: str("../etc/passwd")},
		"locale":        {Locale: str("english please")},
		"locale dash":   {Locale: str("de-")},
		"locale x":      {Locale: str("de-x")},
		"category":      {Categories: []inbox.CategorySwitches{{Category: "a#b"}}},
		"twice":         {Categories: []inbox.CategorySwitches{{Category: "a"}, {Category: "a"}}},
		"target":        {MuteTargets: []inbox.ProfileRef{{ID: "1"}}},
		"both":          {MuteTargets: []inbox.ProfileRef{{TargetKind: "i", ID: "1"}}, UnmuteTargets: []inbox.ProfileRef{{TargetKind: "i", ID: "1"}}},
		"101 mutes":     {MuteTargets: make([]inbox.ProfileRef, 101)},
	}
	for name, u := range bad {
		if err := u.Validate(); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v", name, err)
		}
	}
	d := inbox.TenantPreferences{Critical: []string{"security"}}
	if err := d.CheckUpdate(inbox.PreferencesUpdate{Categories: []inbox.CategorySwitches{{Category: "security", Channels: inbox.SwitchChanges{inbox.ChannelEmail: false}}}}); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("critical off: %v", err)
	}
	if err := d.CheckUpdate(inbox.PreferencesUpdate{Categories: []inbox.CategorySwitches{{Category: "security", Channels: inbox.SwitchChanges{inbox.ChannelEmail: true}}}}); err != nil {
		t.Errorf("critical on: %v", err)
	}
}

func TestParseTenantPreferences(t *testing.T) {
	d, err := inbox.ParseTenantPreferences(`{"channels": {"sms": false}, "categories": [{"category": "marketing", "channels": {"inApp": false}}],
		"quietHours": {"start": "22:00", "end": "07:00"}, "timezone": "Europe/Berlin", "locale": "de-DE"}`, []string{"security", " billing", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := inbox.TenantPreferences{
		Channels:   only(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSlack),
		Categories: []inbox.CategorySwitches{{Category: "marketing", Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}},
		QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"}, Timezone: "Europe/Berlin", Locale: "de-DE",
		Critical: []string{"security", "billing"},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %+v\nwant %+v", d, want)
	}
	if d, err := inbox.ParseTenantPreferences("", nil); err != nil || !reflect.DeepEqual(d, inbox.DefaultTenantPreferences()) {
		t.Fatalf("empty: %+v %v", d, err)
	}
	for _, js := range []string{`{"mutedTargets": []}`, `{"timezone": "Nowhere/Else"}`, `{"quietHours": {"start": "22:00", "end": "07:00"}}`, `[`} {
		if _, err := inbox.ParseTenantPreferences(js, nil); err == nil {
			t.Errorf("%s: accepted", js)
		}
	}
}
