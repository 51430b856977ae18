package routing_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// now is the fixed clock of the decision tests: a Tuesday, 12:00 UTC (13:00 in Berlin,
// before its DST; 08:00 in New York, after its DST began on 8 March).
var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// Channel names, short for the tables.
const (
	inApp   = inbox.ChannelInApp
	email   = inbox.ChannelEmail
	push    = inbox.ChannelPush
	sms     = inbox.ChannelSMS
	webhook = inbox.ChannelWebhook
)

var (
	all    = []string{inApp, email, push, sms, webhook}
	issue  = &inbox.Target{Kind: "issue", TargetID: "42"}
	thread = inbox.ProfileRef{TargetKind: "issue", ID: "42"}
	both   = inbox.UserProfile{Addresses: map[string]string{"email": "x@example.com", "phone": "+4915112345678"}}
	twoDev = []inbox.Device{{ID: "d1", Token: "tok-1", Platform: inbox.PlatformFCM}, {ID: "d2", Token: "tok-2", Platform: inbox.PlatformAPNs}}
)

// tenant is the matrix's tenant: every channel on by default, default zone UTC,
// "security" critical, a webhook URL.
func tenant() routing.Tenant {
	p := inbox.DefaultTenantPreferences()
	p.Timezone = "UTC"
	p.Critical = []string{"security"}
	return routing.Tenant{Prefs: p, WebhookURL: "https://hooks.example.com/inbox"}
}

// recipients are the matrix's recipients:
//
//	full      email + phone, no preferences
//	bare      nothing: no profile, no preferences
//	emailoff  email + phone, email off globally
//	catoff    email + phone, email off for "social" only
//	muter     email + phone, issue 42 muted
//	quiet     email + phone, quiet hours 12:30-14:00 in their own zone Europe/Berlin
//	          (now 13:00 local, inside: ends 13:00Z)
//	night     email + phone, quiet hours 22:00-08:30 in the profile's zone only
//	          (America/New_York, now 08:00 local, past midnight: ends 12:30Z)
//	inappoff  email, in-app off globally
//	devices   email + phone, two push devices
//	quietdev  quiet's preferences, email + phone, two push devices
func recipients() map[string]routing.Recipient {
	quiet := inbox.OwnPreferences{QuietHours: &inbox.QuietHours{Start: "12:30", End: "14:00"}, Timezone: "Europe/Berlin"}
	return map[string]routing.Recipient{
		"full":     {Profile: both},
		"bare":     {},
		"emailoff": {Own: inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelEmail: false}}, Profile: both},
		"catoff":   {Own: inbox.OwnPreferences{Categories: map[string]inbox.SwitchChanges{"social": {inbox.ChannelEmail: false}}}, Profile: both},
		"muter":    {Own: inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}}, Profile: both},
		"quiet":    {Own: quiet, Profile: both},
		"night": {Own: inbox.OwnPreferences{QuietHours: &inbox.QuietHours{Start: "22:00", End: "08:30"}},
			Profile: inbox.UserProfile{Addresses: map[string]string{"email": "n@example.com", "phone": "+12125550100"}, Timezone: "America/New_York"}},
		"inappoff": {Own: inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}, Profile: inbox.UserProfile{Addresses: map[string]string{"email": "i@example.com"}}},
		"devices":  {Profile: both, Devices: twoDev},
		"quietdev": {Own: quiet, Profile: both, Devices: twoDev},
	}
}

// describe renders decisions as "KEY:OUTCOME ...", in their order: OUTCOME is Q
// (queued at once), Q@HH:MM (deferred to that UTC time on now's day) or the skip
// reason.
func describe(ds []routing.Decision) string {
	var out []string
	for _, d := range ds {
		o := d.Reason
		switch {
		case d.Queued() && d.Deferred.IsZero():
			o = "Q"
		case d.Queued() && d.Deferred.UTC().YearDay() == now.YearDay():
			o = "Q@" + d.Deferred.UTC().Format("15:04")
		case d.Queued():
			o = "Q@" + d.Deferred.UTC().Format(time.RFC3339)
		}
		out = append(out, d.Key+":"+o)
	}
	return strings.Join(out, " ")
}

// decideCase is one call of Decide and its decisions in describe's form.
type decideCase struct {
	name string
	in   inbox.SendInput
	tn   routing.Tenant
	r    routing.Recipient
	want string
}

// run checks every case.
func run(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, c := range cases {
		if got := describe(routing.Decide(c.in, c.tn, c.r, now)); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.name, got, c.want)
		}
	}
}

// The routing matrix: sends that differ in category (critical or not, none), template
// channels and hint, about a target or none, to recipients that differ in preferences
// (global and category opt-outs, a muted target, quiet hours in their own zone or their
// profile's, in-app off) and in what they have (email, phone, devices); the tenant has a
// webhook URL. Each cell is every decision of one recipient, in order.
func TestDecideMatrix(t *testing.T) {
	t.Parallel()
	run(t, matrixCases(t))
}

// matrixCases are TestDecideMatrix's cases: every send to every recipient.
func matrixCases(t *testing.T) []decideCase {
	t.Helper()
	rs := recipients()
	type sendCase struct {
		name     string
		category string
		target   *inbox.Target
		template []string
		hint     []string
		want     map[string]string // recipient -> decisions
	}
	social := map[string]string{
		"full":     "IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q",
		"bare":     "IN_APP:Q EMAIL:no_email PUSH:no_device SMS:no_phone WEBHOOK:Q",
		"emailoff": "IN_APP:Q EMAIL:opted_out PUSH:no_device SMS:Q WEBHOOK:Q",
		"catoff":   "IN_APP:Q EMAIL:category_opted_out PUSH:no_device SMS:Q WEBHOOK:Q",
		"muter":    "IN_APP:muted EMAIL:muted PUSH:muted SMS:muted WEBHOOK:muted",
		"quiet":    "IN_APP:Q EMAIL:Q@13:00 PUSH:no_device SMS:Q@13:00 WEBHOOK:Q",
		"night":    "IN_APP:Q EMAIL:Q@12:30 PUSH:no_device SMS:Q@12:30 WEBHOOK:Q",
		"inappoff": "IN_APP:opted_out EMAIL:Q PUSH:no_device SMS:no_phone WEBHOOK:Q",
		"devices":  "IN_APP:Q EMAIL:Q PUSH#d1:Q PUSH#d2:Q SMS:Q WEBHOOK:Q",
		"quietdev": "IN_APP:Q EMAIL:Q@13:00 PUSH#d1:Q@13:00 PUSH#d2:Q@13:00 SMS:Q@13:00 WEBHOOK:Q",
	}
	// No category: category switches do not apply (catoff gets email).
	uncategorized := maps.Clone(social)
	uncategorized["catoff"] = social["full"]
	// No target: nothing is muted.
	untargeted := maps.Clone(social)
	untargeted["muter"] = social["full"]
	// Critical: no opt-out, mute or quiet hours applies; what a recipient lacks still does.
	security := map[string]string{}
	for u := range rs {
		security[u] = social["full"]
	}
	security["bare"] = social["bare"]
	security["inappoff"] = "IN_APP:Q EMAIL:Q PUSH:no_device SMS:no_phone WEBHOOK:Q"
	security["devices"] = social["devices"]
	security["quietdev"] = social["devices"]
	// Without a template: in-app, and the tenant's webhook (it needs no template part).
	noTemplate := map[string]string{}
	for u := range rs {
		noTemplate[u] = "IN_APP:Q WEBHOOK:Q"
	}
	noTemplate["muter"] = "IN_APP:muted WEBHOOK:muted"
	noTemplate["inappoff"] = "IN_APP:opted_out WEBHOOK:Q"
	// A hint outside the (absent) template: email is considered and not in the
	// template; in-app and the webhook are left out by the hint, before preferences.
	outside := map[string]string{}
	for u := range rs {
		outside[u] = "IN_APP:not_in_hint EMAIL:not_in_template WEBHOOK:not_in_hint"
	}
	// Template [IN_APP EMAIL SMS], hint [IN_APP SMS]: email and the webhook are left
	// out by the hint, push is not considered at all.
	hinted := map[string]string{}
	for u, s := range social {
		f := map[string]string{}
		for _, part := range strings.Fields(s) {
			k, o, _ := strings.Cut(part, ":")
			f[k] = o
		}
		hinted[u] = "IN_APP:" + f[inApp] + " EMAIL:not_in_hint SMS:" + f[sms] + " WEBHOOK:not_in_hint"
	}
	// Template [EMAIL PUSH]: in-app is not in it (no notification for anyone); the
	// hint lets everything through.
	noInApp := map[string]string{
		"full":     "IN_APP:not_in_template EMAIL:Q PUSH:no_device WEBHOOK:Q",
		"bare":     "IN_APP:not_in_template EMAIL:no_email PUSH:no_device WEBHOOK:Q",
		"emailoff": "IN_APP:not_in_template EMAIL:opted_out PUSH:no_device WEBHOOK:Q",
		"catoff":   "IN_APP:not_in_template EMAIL:category_opted_out PUSH:no_device WEBHOOK:Q",
		"muter":    "IN_APP:not_in_template EMAIL:muted PUSH:muted WEBHOOK:muted",
		"quiet":    "IN_APP:not_in_template EMAIL:Q@13:00 PUSH:no_device WEBHOOK:Q",
		"night":    "IN_APP:not_in_template EMAIL:Q@12:30 PUSH:no_device WEBHOOK:Q",
		"inappoff": "IN_APP:not_in_template EMAIL:Q PUSH:no_device WEBHOOK:Q",
		"devices":  "IN_APP:not_in_template EMAIL:Q PUSH#d1:Q PUSH#d2:Q WEBHOOK:Q",
		"quietdev": "IN_APP:not_in_template EMAIL:Q@13:00 PUSH#d1:Q@13:00 PUSH#d2:Q@13:00 WEBHOOK:Q",
	}
	cases := []sendCase{
		{name: "social, every channel", category: "social", target: issue, template: all, want: social},
		{name: "no category, every channel", target: issue, template: all, want: uncategorized},
		{name: "social, no target", category: "social", template: all, want: untargeted},
		{name: "security (critical), every channel", category: "security", target: issue, template: all, want: security},
		{name: "no template", category: "social", target: issue, want: noTemplate},
		{name: "hint outside the template", category: "social", target: issue, hint: []string{email}, want: outside},
		{name: "hint narrows the template", category: "social", target: issue, template: []string{inApp, email, sms},
			hint: []string{inApp, sms}, want: hinted},
		{name: "template without in-app", category: "social", target: issue, template: []string{email, push}, want: noInApp},
		{name: "template without in-app, hint of every channel", category: "social", target: issue, template: []string{email, push},
			hint: all, want: func() map[string]string {
				w := map[string]string{}
				for u, s := range noInApp {
					// SMS is now a candidate (the hint names it), not in the template.
					w[u] = strings.Replace(s, " WEBHOOK:", " SMS:not_in_template WEBHOOK:", 1)
				}
				return w
			}()},
	}
	if len(cases[0].want) != len(rs) {
		t.Fatalf("the matrix covers %d recipients of %d", len(cases[0].want), len(rs))
	}
	var out []decideCase
	for _, c := range cases {
		in := inbox.SendInput{Type: "comment", Category: c.category, Target: c.target, TemplateChannels: c.template, Channels: c.hint}
		for _, u := range slices.Sorted(maps.Keys(rs)) {
			want, ok := c.want[u]
			if !ok {
				t.Fatalf("%s: no expectation for %s", c.name, u)
			}
			out = append(out, decideCase{c.name + " / " + u, in, tenant(), rs[u], want})
		}
	}
	return out
}

// One recipient at a time, where the tenant's configuration varies: the webhook URL,
// its default switches, category defaults and quiet hours, and where a recipient's
// quiet-hours zone comes from (their own, else their profile's, else the tenant's; an
// unknown zone or none at all defers nothing).
func TestDecideTenantAndZones(t *testing.T) {
	t.Parallel()
	run(t, tenantCases())
}

// tenantCases are TestDecideTenantAndZones's cases.
func tenantCases() []decideCase {
	every := inbox.SendInput{Type: "comment", Category: "social", Target: issue, TemplateChannels: all}
	noHook := tenant()
	noHook.WebhookURL = ""
	tenantQuiet := tenant()
	tenantQuiet.Prefs.QuietHours = &inbox.QuietHours{Start: "11:00", End: "12:15"} // UTC: ends 12:15Z
	berlinQuiet := &inbox.QuietHours{Start: "12:30", End: "14:00"}                 // 13:00 in Berlin: ends 13:00Z
	tenantCats := tenant()
	tenantCats.Prefs.Categories = []inbox.CategorySwitches{{Category: "social", Channels: inbox.SwitchChanges{inbox.ChannelSMS: false, inbox.ChannelInApp: false}}}
	tenantOff := tenant()
	tenantOff.Prefs.Channels[inbox.ChannelEmail] = false
	return []decideCase{
		{"no webhook URL: the webhook is no candidate", every, noHook, routing.Recipient{Profile: both},
			"IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:no_webhook"},
		{"no webhook URL, no template, no hint", inbox.SendInput{Type: "comment"}, noHook, routing.Recipient{Profile: both}, "IN_APP:Q"},
		{"no webhook URL, the hint names it", inbox.SendInput{Type: "comment", Channels: []string{inApp, webhook}}, noHook,
			routing.Recipient{Profile: both}, "IN_APP:Q WEBHOOK:no_webhook"},
		{"webhook out of the hint", inbox.SendInput{Type: "comment", Channels: []string{inApp}}, tenant(),
			routing.Recipient{Profile: both}, "IN_APP:Q WEBHOOK:not_in_hint"},
		{"the tenant's quiet hours, zone UTC", every, tenantQuiet, routing.Recipient{Profile: both},
			"IN_APP:Q EMAIL:Q@12:15 PUSH:no_device SMS:Q@12:15 WEBHOOK:Q"},
		{"the tenant's quiet hours in the profile's zone (New York, 08:00: outside)", every, tenantQuiet,
			routing.Recipient{Profile: inbox.UserProfile{Addresses: map[string]string{"email": "n@example.com"}, Timezone: "America/New_York"}},
			"IN_APP:Q EMAIL:Q PUSH:no_device SMS:no_phone WEBHOOK:Q"},
		{"the tenant's quiet hours, critical", inbox.SendInput{Type: "comment", Category: "security", TemplateChannels: all},
			tenantQuiet, routing.Recipient{Profile: both}, "IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"own quiet hours over the tenant's", every, tenantQuiet,
			routing.Recipient{Own: inbox.OwnPreferences{QuietHours: berlinQuiet, Timezone: "Europe/Berlin"}, Profile: both},
			"IN_APP:Q EMAIL:Q@13:00 PUSH:no_device SMS:Q@13:00 WEBHOOK:Q"},
		{"own zone over the profile's", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{QuietHours: berlinQuiet, Timezone: "Europe/Berlin"},
				Profile: inbox.UserProfile{Addresses: map[string]string{"email": "x@example.com"}, Timezone: "America/New_York"}},
			"IN_APP:Q EMAIL:Q@13:00 PUSH:no_device SMS:no_phone WEBHOOK:Q"},
		{"the profile's zone over the tenant's", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{QuietHours: berlinQuiet}, Profile: inbox.UserProfile{Addresses: map[string]string{"email": "x@example.com"}, Timezone: "Europe/Berlin"}},
			"IN_APP:Q EMAIL:Q@13:00 PUSH:no_device SMS:no_phone WEBHOOK:Q"},
		{"the tenant's zone (UTC: 12:00 is outside 12:30-14:00)", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{QuietHours: berlinQuiet}, Profile: both},
			"IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"no zone anywhere: no quiet hours", every, func() routing.Tenant { tn := tenant(); tn.Prefs.Timezone = ""; return tn }(),
			routing.Recipient{Own: inbox.OwnPreferences{QuietHours: &inbox.QuietHours{Start: "00:00", End: "23:59"}}, Profile: both},
			"IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"an unknown zone is not guessed at", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{QuietHours: &inbox.QuietHours{Start: "00:00", End: "23:59"}, Timezone: "Mars/Olympus_Mons"}, Profile: both},
			"IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"quiet hours over midnight into tomorrow", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{QuietHours: &inbox.QuietHours{Start: "11:00", End: "07:00"}}, Profile: both},
			"IN_APP:Q EMAIL:Q@2026-03-11T07:00:00Z PUSH:no_device SMS:Q@2026-03-11T07:00:00Z WEBHOOK:Q"},
		{"the tenant's category defaults", every, tenantCats, routing.Recipient{Profile: both},
			"IN_APP:category_opted_out EMAIL:Q PUSH:no_device SMS:category_opted_out WEBHOOK:Q"},
		{"the user's category switch over the tenant's", every, tenantCats,
			routing.Recipient{Own: inbox.OwnPreferences{Categories: map[string]inbox.SwitchChanges{"social": {inbox.ChannelSMS: true}}}, Profile: both},
			"IN_APP:category_opted_out EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"the tenant's global default off", every, tenantOff, routing.Recipient{Profile: both},
			"IN_APP:Q EMAIL:opted_out PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"the user's global switch over the tenant's", every, tenantOff,
			routing.Recipient{Own: inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelEmail: true}}, Profile: both},
			"IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"a v1 muted category: in-app off for it", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{MutedCategories: []string{"social"}}, Profile: both},
			"IN_APP:category_opted_out EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"another target muted", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "7"}}}, Profile: both},
			"IN_APP:Q EMAIL:Q PUSH:no_device SMS:Q WEBHOOK:Q"},
		{"muted beats opted out", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}, Channels: inbox.SwitchChanges{inbox.ChannelEmail: false}}},
			"IN_APP:muted EMAIL:muted PUSH:muted SMS:muted WEBHOOK:muted"},
		{"opted out beats no email", every, tenant(),
			routing.Recipient{Own: inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelEmail: false, inbox.ChannelPush: false, inbox.ChannelSMS: false}}},
			"IN_APP:Q EMAIL:opted_out PUSH:opted_out SMS:opted_out WEBHOOK:Q"},
		{"critical ignores own preferences passed anyway", inbox.SendInput{Type: "comment", Category: "security", Target: issue, TemplateChannels: all},
			tenant(), routing.Recipient{Own: inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}, Channels: inbox.SwitchChanges{inbox.ChannelInApp: false, inbox.ChannelEmail: false},
				QuietHours: &inbox.QuietHours{Start: "00:00", End: "23:59"}}, Profile: both, Devices: twoDev},
			"IN_APP:Q EMAIL:Q PUSH#d1:Q PUSH#d2:Q SMS:Q WEBHOOK:Q"},
		{"critical without a webhook URL", inbox.SendInput{Type: "comment", Category: "security", Channels: all}, noHook,
			routing.Recipient{}, "IN_APP:Q EMAIL:not_in_template PUSH:not_in_template SMS:not_in_template WEBHOOK:no_webhook"},
		{"an empty template (rendered, no channel)", inbox.SendInput{Type: "comment", TemplateChannels: []string{}}, tenant(),
			routing.Recipient{Profile: both}, "IN_APP:not_in_template WEBHOOK:Q"},
	}
}

// Every reason Decide gives over the tables' inputs is one of inbox's skip reasons, and
// every reason it can give is given by some case: the tables leave no rule untried.
func TestDecideEveryReason(t *testing.T) {
	t.Parallel()
	want := []string{inbox.ReasonNotInTemplate, inbox.ReasonNotInHint, inbox.ReasonMuted, inbox.ReasonOptedOut,
		inbox.ReasonCategoryOptedOut, inbox.ReasonNoEmail, inbox.ReasonNoPhone, inbox.ReasonNoDevice, inbox.ReasonNoWebhook}
	seen := map[string]bool{}
	for _, c := range append(matrixCases(t), tenantCases()...) {
		for _, d := range routing.Decide(c.in, c.tn, c.r, now) {
			if d.Queued() {
				continue
			}
			seen[d.Reason] = true
			if !slices.Contains(want, d.Reason) {
				t.Errorf("%s: %s skipped with %q, not one of Decide's reasons", c.name, d.Key, d.Reason)
			}
		}
	}
	for _, r := range want {
		if !seen[r] {
			t.Errorf("no case gives reason %q", r)
		}
	}
}

// A queued delivery carries its address: the profile's email for EMAIL, its phone for
// SMS, each device's token and the device itself for PUSH; in-app, the webhook and a
// skipped channel carry none.
func TestDecideAddresses(t *testing.T) {
	t.Parallel()
	r := routing.Recipient{Profile: both, Devices: slices.Clone(twoDev)}
	ds := routing.Decide(inbox.SendInput{Type: "comment", TemplateChannels: all}, tenant(), r, now)
	type addr struct {
		key, to string
		device  *inbox.Device
	}
	var got []addr
	for _, d := range ds {
		got = append(got, addr{d.Key, d.To, d.Device})
	}
	want := []addr{{inApp, "", nil}, {email, both.Address("email"), nil}, {"PUSH#d1", "tok-1", &r.Devices[0]},
		{"PUSH#d2", "tok-2", &r.Devices[1]}, {sms, both.Address("phone"), nil}, {webhook, "", nil}}
	if !slices.Equal(got, want) {
		t.Errorf("addresses\n got  %+v\n want %+v", got, want)
	}
	for _, d := range ds {
		if ch, _, _ := strings.Cut(d.Key, "#"); ch != d.Channel {
			t.Errorf("decision %s of channel %s", d.Key, d.Channel)
		}
	}
	// Skipped: no address, whatever the profile has.
	r.Own = inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelEmail: false, inbox.ChannelPush: false, inbox.ChannelSMS: false}}
	for _, d := range routing.Decide(inbox.SendInput{Type: "comment", TemplateChannels: all}, tenant(), r, now) {
		if !d.Queued() && (d.To != "" || d.Device != nil || !d.Deferred.IsZero()) {
			t.Errorf("skipped %s carries %q %v %v", d.Key, d.To, d.Device, d.Deferred)
		}
	}
}

// The in-app rule (the only one: Decide's in-app decision, read through InApp) for a
// send without a template: always for a critical category; otherwise not when the
// target is muted or in-app is off for the category (its own switch, else the global
// one).
func TestInAppRule(t *testing.T) {
	t.Parallel()
	tn := tenant()
	other := &inbox.Target{Kind: "issue", TargetID: "7"}
	for _, c := range []struct {
		name     string
		own      inbox.OwnPreferences
		category string
		target   *inbox.Target
		want     string
	}{
		{"nothing set", inbox.OwnPreferences{}, "", nil, ""},
		{"another target muted", inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}}, "social", other, ""},
		{"the target muted", inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}}, "", issue, inbox.ReasonMuted},
		{"the target muted, critical", inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}}, "security", issue, ""},
		{"category off", inbox.OwnPreferences{Categories: map[string]inbox.SwitchChanges{"marketing": {inbox.ChannelInApp: false}}}, "marketing", nil, inbox.ReasonCategoryOptedOut},
		{"another category off", inbox.OwnPreferences{Categories: map[string]inbox.SwitchChanges{"marketing": {inbox.ChannelInApp: false}}}, "social", nil, ""},
		{"critical category off", inbox.OwnPreferences{Categories: map[string]inbox.SwitchChanges{"security": {inbox.ChannelInApp: false}}}, "security", nil, ""},
		{"global off", inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}, "", nil, inbox.ReasonOptedOut},
		{"global off, another category", inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false},
			Categories: map[string]inbox.SwitchChanges{"social": {inbox.ChannelInApp: true}}}, "marketing", nil, inbox.ReasonOptedOut},
		{"global off, the category on", inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false},
			Categories: map[string]inbox.SwitchChanges{"social": {inbox.ChannelInApp: true}}}, "social", nil, ""},
		{"global off, critical", inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}, "security", nil, ""},
	} {
		d := routing.InApp(routing.Decide(inbox.SendInput{Type: "t", Category: c.category, Target: c.target}, tn, routing.Recipient{Own: c.own}, now))
		if d.Channel != inApp || d.Key != inApp || d.Reason != c.want || d.Queued() != (c.want == "") || !d.Deferred.IsZero() {
			t.Errorf("%s: in-app %+v, want reason %q", c.name, d, c.want)
		}
	}
	// No decisions at all: in-app is not in the template.
	if d := routing.InApp(nil); d.Channel != inApp || d.Reason != inbox.ReasonNotInTemplate {
		t.Errorf("InApp(nil) = %+v", d)
	}
}

// Recheck, at delivery time, applies the preferences of that time: a mute, a global or
// category opt-out keep the channel; the webhook has no switch; a critical category
// passes whatever the preferences say.
func TestRecheck(t *testing.T) {
	t.Parallel()
	tn := tenant()
	muted := inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}}
	allOff := inbox.OwnPreferences{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false, inbox.ChannelEmail: false, inbox.ChannelPush: false, inbox.ChannelSMS: false}}
	catOff := inbox.OwnPreferences{Categories: map[string]inbox.SwitchChanges{"social": {inbox.ChannelEmail: false, inbox.ChannelPush: false, inbox.ChannelSMS: false}}}
	for _, c := range []struct {
		name     string
		own      inbox.OwnPreferences
		category string
		target   *inbox.ProfileRef
		want     map[string]string // channel -> reason
	}{
		{"nothing set", inbox.OwnPreferences{}, "social", &thread, map[string]string{}},
		{"muted", muted, "social", &thread, map[string]string{email: inbox.ReasonMuted, push: inbox.ReasonMuted, sms: inbox.ReasonMuted, webhook: inbox.ReasonMuted}},
		{"muted, no target", muted, "social", nil, map[string]string{}},
		{"muted, critical", muted, "security", &thread, map[string]string{}},
		{"all off", allOff, "social", nil, map[string]string{email: inbox.ReasonOptedOut, push: inbox.ReasonOptedOut, sms: inbox.ReasonOptedOut}},
		{"all off, critical", allOff, "security", nil, map[string]string{}},
		{"category off", catOff, "social", nil, map[string]string{email: inbox.ReasonCategoryOptedOut, push: inbox.ReasonCategoryOptedOut, sms: inbox.ReasonCategoryOptedOut}},
		{"category off, another category", catOff, "billing", nil, map[string]string{}},
		{"category off, no category", catOff, "", nil, map[string]string{}},
	} {
		for _, ch := range []string{email, push, sms, webhook} {
			if got := routing.Recheck(tn, c.own, c.category, ch, c.target); got != c.want[ch] {
				t.Errorf("%s: %s: %q, want %q", c.name, ch, got, c.want[ch])
			}
		}
	}
}

// SwitchOn reads each channel's own switch; a channel without one is on.
func TestSwitchOn(t *testing.T) {
	t.Parallel()
	sw := inbox.ChannelSwitches{inbox.ChannelInApp: true, inbox.ChannelPush: true}
	for ch, want := range map[string]bool{inApp: true, email: false, push: true, sms: false, webhook: true} {
		if got := routing.SwitchOn(sw, ch); got != want {
			t.Errorf("SwitchOn(%s) = %v", ch, got)
		}
	}
	sw = inbox.ChannelSwitches{inbox.ChannelEmail: true, inbox.ChannelSMS: true}
	for ch, want := range map[string]bool{inApp: false, email: true, push: false, sms: true} {
		if got := routing.SwitchOn(sw, ch); got != want {
			t.Errorf("SwitchOn(%s) = %v", ch, got)
		}
	}
}

// SLACK is decided as every channel with an address on the profile: queued to the
// profile's Slack user id, skipped without one ("no_slack_user", the spec's NoAddress), by its switch
// (global and per category), a mute, the hint and the template, deferred by quiet hours,
// and critical categories bypass the preferences but not a missing id. Nothing in
// routing names SLACK: the channel's registration (inbox.ChannelSpec) says all of it.
func TestDecideSlack(t *testing.T) {
	t.Parallel()
	const slack = inbox.ChannelSlack
	withID := inbox.UserProfile{Addresses: map[string]string{"slackUserId": "U024BE7LH"}}
	quiet := inbox.OwnPreferences{QuietHours: &inbox.QuietHours{Start: "12:30", End: "14:00"}, Timezone: "Europe/Berlin"}
	send := inbox.SendInput{Type: "comment", Category: "social", Target: issue, TemplateChannels: []string{inApp, slack}}
	crit := send
	crit.Category = "security"
	hinted := send
	hinted.Channels = []string{inApp}
	noPart := send
	noPart.TemplateChannels = []string{inApp}
	run(t, []decideCase{
		{"queued", send, tenant(), routing.Recipient{Profile: withID}, "IN_APP:Q SLACK:Q WEBHOOK:Q"},
		{"no id", send, tenant(), routing.Recipient{Profile: both}, "IN_APP:Q SLACK:no_slack_user WEBHOOK:Q"},
		{"off", send, tenant(), routing.Recipient{Profile: withID,
			Own: inbox.OwnPreferences{Channels: inbox.SwitchChanges{slack: false}}}, "IN_APP:Q SLACK:opted_out WEBHOOK:Q"},
		{"category off", send, tenant(), routing.Recipient{Profile: withID,
			Own: inbox.OwnPreferences{Categories: map[string]inbox.SwitchChanges{"social": {slack: false}}}}, "IN_APP:Q SLACK:category_opted_out WEBHOOK:Q"},
		{"muted", send, tenant(), routing.Recipient{Profile: withID,
			Own: inbox.OwnPreferences{MutedTargets: []inbox.ProfileRef{thread}}}, "IN_APP:muted SLACK:muted WEBHOOK:muted"},
		{"quiet", send, tenant(), routing.Recipient{Profile: withID, Own: quiet}, "IN_APP:Q SLACK:Q@13:00 WEBHOOK:Q"},
		{"critical off and quiet", crit, tenant(), routing.Recipient{Profile: withID,
			Own: inbox.OwnPreferences{Channels: inbox.SwitchChanges{slack: false}, QuietHours: quiet.QuietHours, Timezone: quiet.Timezone}}, "IN_APP:Q SLACK:Q WEBHOOK:Q"},
		{"critical without id", crit, tenant(), routing.Recipient{}, "IN_APP:Q SLACK:no_slack_user WEBHOOK:Q"},
		{"not in hint", hinted, tenant(), routing.Recipient{Profile: withID}, "IN_APP:Q SLACK:not_in_hint WEBHOOK:not_in_hint"},
		{"not in template", noPart, tenant(), routing.Recipient{Profile: withID}, "IN_APP:Q WEBHOOK:Q"},
	})
	ds := routing.Decide(send, tenant(), routing.Recipient{Profile: withID}, now)
	if d := ds[1]; d.Channel != slack || d.Key != slack || d.To != withID.Address("slackUserId") {
		t.Errorf("queued slack decision: %+v", d)
	}
	if !routing.NeedsProfile(send) || routing.NeedsProfile(noPart) {
		t.Error("a send that may deliver SLACK reads the profile; one that may not, does not")
	}
}
