package store_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	_ "time/tzdata" // as package main: zones do not depend on the host

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

func sptr(s string) *string           { return &s }
func tref(id string) inbox.ProfileRef { return inbox.ProfileRef{TargetKind: "issue", ID: id} }

// tenantPrefs are the defaults of the tests' tenant: SMS off, marketing email off,
// "security" critical.
func tenantPrefs(string) inbox.TenantPreferences {
	d := inbox.DefaultTenantPreferences()
	d.Channels[inbox.ChannelSMS] = false
	d.Categories = []inbox.CategorySwitches{{Category: "marketing", Channels: inbox.SwitchChanges{inbox.ChannelEmail: false}}}
	d.Critical = []string{"security"}
	d.Locale = "en-US"
	return d
}

// warmSettings reads the tenant's settings into the store's cache (as the first
// preferences read or send of a tenant does), so that the operations recorded after it
// are those of an instance that knows them; it resets the recorder.
func warmSettings(t *testing.T, f *fixture) {
	t.Helper()
	if _, err := f.s.TenantSettings(context.Background(), f.tenant); err != nil {
		t.Fatal(err)
	}
	f.rec.Reset()
}

// assertNoWrite fails when ops holds a write.
func assertNoWrite(t *testing.T, what string, ops []string) {
	t.Helper()
	for _, op := range ops {
		if op != "GetItem" && op != "Query" && op != "BatchGetItem" {
			t.Errorf("%s: wrote with %s", what, op)
		}
	}
}

func TestPreferencesTenantDefaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t, store.WithTenantPreferences(tenantPrefs))
	ctx := context.Background()
	warmSettings(t, f)
	p, err := f.s.Preferences(ctx, f.viewer("a"))
	if err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"GetItem"}) {
		t.Errorf("ops %v, want one GetItem", ops)
	}
	want := inbox.Preferences{
		Channels: switchesOn(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSlack),
		Categories: []inbox.CategoryPreference{
			{Category: "marketing", Channels: switchesOn(inbox.ChannelInApp, inbox.ChannelPush, inbox.ChannelSlack)},
			{Category: "security", Critical: true, Channels: switchesOn(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack)},
		},
		Locale: "en-US",
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
	// A store without defaults: every channel on, nothing else.
	g := newFixture(t)
	p, err = g.s.Preferences(ctx, g.viewer("a"))
	if err != nil || !reflect.DeepEqual(p, inbox.Preferences{Channels: switchesOn(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack)}) {
		t.Fatalf("no defaults: %+v %v", p, err)
	}
}

// Each update is one UpdateItem; fields it leaves out keep their value; the user's own
// settings overlay the tenant's defaults.
func TestUpdatePreferencesPartial(t *testing.T) {
	t.Parallel()
	f := newFixture(t, store.WithTenantPreferences(tenantPrefs))
	ctx := context.Background()
	v := f.viewer("a")
	warmSettings(t, f)
	steps := []inbox.PreferencesUpdate{
		{Channels: inbox.SwitchChanges{inbox.ChannelEmail: false, inbox.ChannelSMS: true}},
		{Categories: []inbox.CategorySwitches{{Category: "marketing", Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}, {Category: "social", Channels: inbox.SwitchChanges{inbox.ChannelPush: false}}}},
		{QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"}, Timezone: sptr("Europe/Berlin")},
		{Locale: sptr("de-de")},
		{Categories: []inbox.CategorySwitches{{Category: "marketing", Channels: inbox.SwitchChanges{inbox.ChannelEmail: true}}}},
	}
	var p inbox.Preferences
	for i, u := range steps {
		f.rec.Reset()
		var err error
		if p, err = f.s.UpdatePreferences(ctx, v, u); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if ops := f.rec.Ops(); !slices.Equal(ops, []string{"UpdateItem"}) {
			t.Errorf("step %d: ops %v, want one UpdateItem", i, ops)
		}
	}
	want := inbox.Preferences{
		Channels: switchesOn(inbox.ChannelInApp, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack),
		Categories: []inbox.CategoryPreference{
			{Category: "marketing", Channels: switchesOn(inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack)},
			{Category: "security", Critical: true, Channels: switchesOn(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack)},
			{Category: "social", Channels: switchesOn(inbox.ChannelInApp, inbox.ChannelSMS, inbox.ChannelSlack)},
		},
		QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"},
		Timezone:   "Europe/Berlin",
		Locale:     "de-DE",
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("after updates\ngot  %+v\nwant %+v", p, want)
	}
	if got, err := f.s.Preferences(ctx, v); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back: %+v %v", got, err)
	}
	// Clearing: quiet hours and the zone together; the locale falls back to the tenant's.
	p, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{ClearQuietHours: true, Timezone: sptr(""), Locale: sptr("")})
	if err != nil || p.QuietHours != nil || p.Timezone != "" || p.Locale != "en-US" || !maps.Equal(p.Channels, want.Channels) {
		t.Fatalf("clear: %+v %v", p, err)
	}
	// Another user of the tenant is untouched.
	if o, _ := f.s.Preferences(ctx, f.viewer("b")); o.Channels[inbox.ChannelEmail] != true || len(o.Categories) != 2 {
		t.Fatalf("other user: %+v", o)
	}
}

func TestUpdatePreferencesRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, store.WithTenantPreferences(tenantPrefs))
	ctx := context.Background()
	v := f.viewer("a")
	for name, u := range map[string]inbox.PreferencesUpdate{
		"critical off":     {Categories: []inbox.CategorySwitches{{Category: "security", Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}}},
		"quiet 25:00":      {QuietHours: &inbox.QuietHours{Start: "25:00", End: "07:00"}, Timezone: sptr("UTC")},
		"bad zone":         {Timezone: sptr("Mars/Olympus")},
		"unknown locale":   {Locale: sptr("qq-ZZ")},
		"malformed locale": {Locale: sptr("en_US")},
		"bad target":       {MuteTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "a#b"}}},
	} {
		f.rec.Reset()
		if _, err := f.s.UpdatePreferences(ctx, v, u); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v", name, err)
		}
		assertNoWrite(t, name, f.rec.Ops())
	}
	// Quiet hours need a timezone: none stored, none given, none from the tenant.
	if _, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"}}); inbox.ErrorCode(err) != inbox.CodeBadUserInput ||
		!strings.Contains(err.Error(), "need a timezone") {
		t.Fatalf("quiet hours without a zone: %v", err)
	}
	if _, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"}, Timezone: sptr("Asia/Tokyo")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{Timezone: sptr("")}); inbox.ErrorCode(err) != inbox.CodeBadUserInput ||
		!strings.Contains(err.Error(), "cannot be cleared") {
		t.Fatalf("clearing the zone under quiet hours: %v", err)
	}
	// With a zone stored, quiet hours alone are fine.
	p, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{QuietHours: &inbox.QuietHours{Start: "23:00", End: "06:00"}})
	if err != nil || p.Timezone != "Asia/Tokyo" || *p.QuietHours != (inbox.QuietHours{Start: "23:00", End: "06:00"}) {
		t.Fatalf("quiet hours with a stored zone: %+v %v", p, err)
	}
	// Turning a critical category on is no refusal (it is on anyway).
	if _, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{Categories: []inbox.CategorySwitches{{Category: "security", Channels: inbox.SwitchChanges{inbox.ChannelSMS: true}}}}); err != nil {
		t.Fatal(err)
	}
}

func TestMuteUnmuteTargets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("a")
	p, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{MuteTargets: []inbox.ProfileRef{tref("2"), tref("1"), tref("1")}})
	if err != nil || !slices.Equal(p.MutedTargets, []inbox.ProfileRef{tref("1"), tref("2")}) {
		t.Fatalf("mute: %+v %v", p.MutedTargets, err)
	}
	// Mute and unmute in one call: the unmute is a second UpdateItem.
	f.rec.Reset()
	p, err = f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{MuteTargets: []inbox.ProfileRef{tref("3")}, UnmuteTargets: []inbox.ProfileRef{tref("1"), tref("9")}})
	if err != nil || !slices.Equal(p.MutedTargets, []inbox.ProfileRef{tref("2"), tref("3")}) {
		t.Fatalf("mute+unmute: %+v %v", p.MutedTargets, err)
	}
	if n := f.rec.Count("UpdateItem"); n != 2 {
		t.Errorf("mute+unmute took %d UpdateItem", n)
	}
	p, err = f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{UnmuteTargets: []inbox.ProfileRef{tref("2"), tref("3")}})
	if err != nil || len(p.MutedTargets) != 0 {
		t.Fatalf("unmute all: %+v %v", p.MutedTargets, err)
	}
	// At most 100: 100 fit, one more is refused and nothing of that call is written.
	var hundred []inbox.ProfileRef
	for i := range inbox.MaxMutedTargets {
		hundred = append(hundred, tref(fmt.Sprintf("t%03d", i)))
	}
	if p, err = f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{MuteTargets: hundred}); err != nil || len(p.MutedTargets) != 100 {
		t.Fatalf("100 mutes: %d %v", len(p.MutedTargets), err)
	}
	_, err = f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{MuteTargets: []inbox.ProfileRef{tref("one-more")}, Locale: sptr("fr")})
	if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "at most 100 muted targets") {
		t.Fatalf("101st mute: %v", err)
	}
	if p, _ = f.s.Preferences(ctx, v); len(p.MutedTargets) != 100 || p.Locale != "" {
		t.Fatalf("a refused update wrote: %d targets, locale %q", len(p.MutedTargets), p.Locale)
	}
	// Muting again targets muted already takes no room.
	p, err = f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{MuteTargets: hundred[:3], Locale: sptr("fr")})
	if err != nil || len(p.MutedTargets) != 100 || p.Locale != "fr" {
		t.Fatalf("muting again at the bound: %d %q %v", len(p.MutedTargets), p.Locale, err)
	}
	_, err = f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{MuteTargets: []inbox.ProfileRef{hundred[0], tref("one-more")}})
	if inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("one new among muted ones at the bound: %v", err)
	}
}

// Categories opted out of with the v1 API read as in-app off; the user's own in-app
// switch for the category wins over it; v1 writes keep the v2 settings.
func TestV1MutedCategoriesCompatibility(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("a")
	if _, err := f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{Channels: inbox.SwitchChanges{inbox.ChannelPush: false}}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.SetMutedCategories(ctx, v, []string{"marketing", "digest"}); err != nil {
		t.Fatal(err)
	}
	p, err := f.s.Preferences(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if p.Channels[inbox.ChannelPush] || p.ChannelsFor("marketing")[inbox.ChannelInApp] || p.ChannelsFor("digest")[inbox.ChannelInApp] || !p.ChannelsFor("marketing")[inbox.ChannelEmail] || p.ChannelsFor("marketing")[inbox.ChannelPush] {
		t.Fatalf("v1 muted categories: %+v", p)
	}
	p, err = f.s.UpdatePreferences(ctx, v, inbox.PreferencesUpdate{Categories: []inbox.CategorySwitches{{Category: "digest", Channels: inbox.SwitchChanges{inbox.ChannelInApp: true}}}})
	if err != nil || !p.ChannelsFor("digest")[inbox.ChannelInApp] || p.ChannelsFor("marketing")[inbox.ChannelInApp] {
		t.Fatalf("own switch over v1: %+v %v", p, err)
	}
	if err := f.s.SetMutedCategories(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	if p, _ = f.s.Preferences(ctx, v); !p.ChannelsFor("marketing")[inbox.ChannelInApp] || p.Channels[inbox.ChannelPush] {
		t.Fatalf("v1 cleared: %+v", p)
	}
}

// A send skips the recipients whose preferences keep it out of their inbox (in-app off
// for the category or globally, the target muted) unless the category is critical,
// writes the others, and leaves every badge exact.
func TestSendEnforcesPreferences(t *testing.T) {
	t.Parallel()
	f := newFixture(t, store.WithTenantPreferences(tenantPrefs))
	ctx := context.Background()
	set := func(u string, upd inbox.PreferencesUpdate) {
		t.Helper()
		if _, err := f.s.UpdatePreferences(ctx, f.viewer(u), upd); err != nil {
			t.Fatal(err)
		}
	}
	set("optout", inbox.PreferencesUpdate{Categories: []inbox.CategorySwitches{{Category: "marketing", Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}}})
	set("muter", inbox.PreferencesUpdate{MuteTargets: []inbox.ProfileRef{tref("42")}})
	set("off", inbox.PreferencesUpdate{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}})
	if err := f.s.SetMutedCategories(ctx, f.viewer("v1"), []string{"marketing"}); err != nil {
		t.Fatal(err)
	}
	users := []string{"optout", "muter", "off", "v1", "plain"}
	send := func(key, category, target string) inbox.SendResult {
		t.Helper()
		in := inbox.SendInput{IdempotencyKey: key, Recipients: users, Type: "t", Category: category}
		if target != "" {
			in.Target = &inbox.Target{Kind: "issue", TargetID: target}
		}
		f.rec.Reset()
		res, err := writer(f.s).Send(ctx, f.tenant, in)
		if err != nil {
			t.Fatal(err)
		}
		// Every recipient's preferences and group in one BatchGetItem (a critical
		// category's: the groups alone); none for a replay (nobody left to write).
		want := 1
		if res.Duplicate {
			want = 0
		}
		if n := f.rec.Count("BatchGetItem"); n != want {
			t.Errorf("%s: %d BatchGetItem, want %d", key, n, want)
		}
		return res
	}
	got := map[string]int{}
	for _, c := range []struct {
		key, category, target string
		to                    []string
	}{
		{"m42", "marketing", "42", []string{"plain"}},
		{"m7", "marketing", "7", []string{"muter", "plain"}},
		{"s42", "social", "42", []string{"optout", "v1", "plain"}},
		{"none", "", "", []string{"optout", "muter", "v1", "plain"}},
		{"sec42", "security", "42", users},
	} {
		res := send(c.key, c.category, c.target)
		if res.Accepted != len(c.to) || len(res.NotificationIDs) != len(c.to) {
			t.Errorf("%s: accepted %d (%v), want %v", c.key, res.Accepted, res.NotificationIDs, c.to)
		}
		var delivered []string
		for _, d := range res.Delivered {
			delivered = append(delivered, d.UserID)
		}
		if !slices.Equal(delivered, c.to) {
			t.Errorf("%s: delivered to %v, want %v", c.key, delivered, c.to)
		}
		for _, u := range c.to {
			got[u]++
		}
		// A replay writes nothing more and answers the same.
		if again := send(c.key, c.category, c.target); !again.Duplicate || again.Accepted != len(c.to) {
			t.Errorf("%s replay: %+v", c.key, again)
		}
	}
	for _, u := range users {
		unread, count := f.unreadTruth(t, u)
		if unread != got[u] || count != got[u] {
			t.Errorf("%s: %d unread items, badge %d, want %d", u, unread, count, got[u])
		}
	}
}

// Category switches are bounded by the item's size: the update that would pass it is
// BAD_USER_INPUT, and what was set before stays.
func TestPreferencesItemSizeBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("a")
	all := inbox.SwitchChanges{inbox.ChannelInApp: false, inbox.ChannelEmail: false, inbox.ChannelPush: false, inbox.ChannelSMS: false}
	for call := 0; ; call++ {
		var u inbox.PreferencesUpdate
		for i := range inbox.MaxCategoryUpdates {
			u.Categories = append(u.Categories, inbox.CategorySwitches{Category: fmt.Sprintf("%03d-%03d-%s", call, i, strings.Repeat("c", 240)), Channels: all})
		}
		_, err := f.s.UpdatePreferences(ctx, v, u)
		if err == nil {
			if call > 20 {
				t.Fatal("no bound after 1,000 categories")
			}
			continue
		}
		if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "size limit") {
			t.Fatalf("call %d: %v", call, err)
		}
		p, err := f.s.Preferences(ctx, v)
		if err != nil || len(p.Categories) != call*inbox.MaxCategoryUpdates {
			t.Fatalf("after the refusal: %d categories, want %d (%v)", len(p.Categories), call*inbox.MaxCategoryUpdates, err)
		}
		return
	}
}

// switchesOn returns switches with the channels on listed on and every other switch
// channel off.
func switchesOn(on ...string) inbox.ChannelSwitches {
	sw := inbox.ChannelSwitches{}
	for _, c := range inbox.SwitchChannels {
		sw[c] = slices.Contains(on, c)
	}
	return sw
}
