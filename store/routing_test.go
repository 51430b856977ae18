package store_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// routingNow is the fixed clock of the routing tests: a Tuesday, 12:00 UTC (13:00 in
// Berlin, before DST; 08:00 in New York, after DST began).
var routingNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// outcome is what a test expects of one channel: "DELIVERED" (in-app written),
// "QUEUED", "QUEUED@<RFC 3339 UTC>" (deferred) or a skip reason.
type outcome = string

// routingUsers sets up the matrix's recipients in f's tenant and returns their names:
//
//	full      email + phone, no preferences
//	bare      no profile, no preferences
//	emailoff  email + phone, email off globally
//	catoff    email + phone, email off for "social" only
//	muter     email + phone, issue 42 muted
//	quiet     email + phone, quiet hours 12:30-14:00 Europe/Berlin (now inside: ends 13:00Z)
//	night     email + phone, timezone on the profile only (America/New_York), quiet
//	          hours 22:00-08:30 (now 08:00 inside, past midnight: ends 12:30Z)
//	inappoff  email, in-app off globally
func routingUsers(t *testing.T, f *fixture) []string {
	t.Helper()
	ctx := context.Background()
	both := inbox.UserProfile{Email: "x@example.com", Phone: "+4915112345678"}
	profiles := map[string]inbox.UserProfile{
		"full": both, "emailoff": both, "catoff": both, "muter": both, "quiet": both,
		"night":    {Email: "n@example.com", Phone: "+12125550100", Timezone: "America/New_York"},
		"inappoff": {Email: "i@example.com"},
	}
	for u, p := range profiles {
		if _, err := f.s.PutUserProfile(ctx, f.viewer(u), p); err != nil {
			t.Fatalf("profile %s: %v", u, err)
		}
	}
	prefs := map[string]inbox.PreferencesUpdate{
		"emailoff": {Channels: inbox.SwitchChanges{Email: no()}},
		"catoff":   {Categories: []inbox.CategorySwitches{{Category: "social", Channels: inbox.SwitchChanges{Email: no()}}}},
		"muter":    {MuteTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "42"}}},
		"quiet":    {QuietHours: &inbox.QuietHours{Start: "12:30", End: "14:00"}, Timezone: sptr("Europe/Berlin")},
		"inappoff": {Channels: inbox.SwitchChanges{InApp: no()}},
	}
	for u, p := range prefs {
		if _, err := f.s.UpdatePreferences(ctx, f.viewer(u), p); err != nil {
			t.Fatalf("preferences %s: %v", u, err)
		}
	}
	// night's quiet hours: its zone comes from the profile, which UpdatePreferences does
	// not know; the tenant's default zone lets the update pass.
	return []string{"full", "bare", "emailoff", "catoff", "muter", "quiet", "night", "inappoff"}
}

// every returns the same outcome for every user.
func every(users []string, o map[string]outcome) map[string]map[string]outcome {
	out := map[string]map[string]outcome{}
	for _, u := range users {
		out[u] = maps.Clone(o)
	}
	return out
}

// TestRoutingMatrix sends notifications that differ in category (critical or not),
// template channels and hint to recipients that differ in preferences (channel and
// category opt-outs, a muted target, quiet hours) and in what they have (email, phone;
// no devices exist yet), and checks every decision in the stored status records, the
// deliver tasks written with them, the skip counts and the notifications.
func TestRoutingMatrix(t *testing.T) {
	t.Parallel()
	defaults := func(string) inbox.TenantPreferences {
		d := inbox.DefaultTenantPreferences()
		d.Timezone = "UTC"
		return d
	}
	f := newFixture(t, store.WithClock(func() time.Time { return routingNow }), store.WithTenantPreferences(defaults))
	ctx := context.Background()
	d := defaults(f.tenant)
	d.Critical = []string{"security"}
	if _, err := f.s.PutTenantSettings(ctx, f.tenant, inbox.TenantSettings{Preferences: &d,
		WebhookURL: "https://hooks.example.com/inbox", WebhookSecret: "whsec_0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	users := routingUsers(t, f)
	// night's quiet hours need a zone: the tenant's (UTC) passes the update, the
	// profile's (New York) is the one used, since night set none of its own.
	if _, err := f.s.UpdatePreferences(ctx, f.viewer("night"), inbox.PreferencesUpdate{QuietHours: &inbox.QuietHours{Start: "22:00", End: "08:30"}}); err != nil {
		t.Fatal(err)
	}
	all := []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelWebhook}
	const (
		D  = inbox.DeliveryDelivered
		Q  = inbox.DeliveryQueued
		Q1 = "QUEUED@2026-03-10T13:00:00Z"
		Q2 = "QUEUED@2026-03-10T12:30:00Z"
	)
	type sendCase struct {
		name     string
		category string
		template []string
		hint     []string
		want     map[string]map[string]outcome // user -> channel -> outcome
	}
	social := map[string]map[string]outcome{
		"full":     {inbox.ChannelInApp: D, inbox.ChannelEmail: Q, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q, inbox.ChannelWebhook: Q},
		"bare":     {inbox.ChannelInApp: D, inbox.ChannelEmail: inbox.ReasonNoEmail, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: inbox.ReasonNoPhone, inbox.ChannelWebhook: Q},
		"emailoff": {inbox.ChannelInApp: D, inbox.ChannelEmail: inbox.ReasonOptedOut, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q, inbox.ChannelWebhook: Q},
		"catoff":   {inbox.ChannelInApp: D, inbox.ChannelEmail: inbox.ReasonCategoryOptedOut, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q, inbox.ChannelWebhook: Q},
		"muter":    {inbox.ChannelInApp: inbox.ReasonMuted, inbox.ChannelEmail: inbox.ReasonMuted, inbox.ChannelPush: inbox.ReasonMuted, inbox.ChannelSMS: inbox.ReasonMuted, inbox.ChannelWebhook: inbox.ReasonMuted},
		"quiet":    {inbox.ChannelInApp: D, inbox.ChannelEmail: Q1, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q1, inbox.ChannelWebhook: Q},
		"night":    {inbox.ChannelInApp: D, inbox.ChannelEmail: Q2, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q2, inbox.ChannelWebhook: Q},
		"inappoff": {inbox.ChannelInApp: inbox.ReasonOptedOut, inbox.ChannelEmail: Q, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: inbox.ReasonNoPhone, inbox.ChannelWebhook: Q},
	}
	// Critical: no opt-out, mute or quiet hours applies; what a user lacks still does.
	security := map[string]map[string]outcome{}
	for _, u := range users {
		security[u] = map[string]outcome{inbox.ChannelInApp: D, inbox.ChannelEmail: Q, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q, inbox.ChannelWebhook: Q}
	}
	security["bare"][inbox.ChannelEmail], security["bare"][inbox.ChannelSMS] = inbox.ReasonNoEmail, inbox.ReasonNoPhone
	security["inappoff"][inbox.ChannelSMS] = inbox.ReasonNoPhone
	// Template [IN_APP EMAIL SMS], hint [IN_APP SMS]: email and the webhook (the
	// tenant has one: every send defines it) are left out by the hint, push is not
	// considered at all.
	hinted := map[string]map[string]outcome{}
	for _, u := range users {
		hinted[u] = map[string]outcome{inbox.ChannelInApp: social[u][inbox.ChannelInApp], inbox.ChannelEmail: inbox.ReasonNotInHint,
			inbox.ChannelSMS: social[u][inbox.ChannelSMS], inbox.ChannelWebhook: inbox.ReasonNotInHint}
	}
	hinted["muter"][inbox.ChannelEmail] = inbox.ReasonNotInHint
	cases := []sendCase{
		{name: "social every channel", category: "social", template: all, want: social},
		{name: "security (critical) every channel", category: "security", template: all, want: security},
		// Without a template: in-app, and the tenant's webhook (it needs no template part).
		{name: "no template: in-app and the webhook", category: "social", want: func() map[string]map[string]outcome {
			w := every(users, map[string]outcome{inbox.ChannelInApp: D, inbox.ChannelWebhook: Q})
			w["muter"][inbox.ChannelInApp], w["muter"][inbox.ChannelWebhook] = inbox.ReasonMuted, inbox.ReasonMuted
			w["inappoff"][inbox.ChannelInApp] = inbox.ReasonOptedOut
			return w
		}()},
		{name: "hint outside the template", category: "social", hint: []string{inbox.ChannelEmail},
			want: every(users, map[string]outcome{inbox.ChannelInApp: inbox.ReasonNotInHint, inbox.ChannelEmail: inbox.ReasonNotInTemplate,
				inbox.ChannelWebhook: inbox.ReasonNotInHint})},
		{name: "hint narrows the template", category: "social", template: []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelSMS},
			hint: []string{inbox.ChannelInApp, inbox.ChannelSMS}, want: hinted},
	}
	for i, c := range cases {
		res, err := f.s.Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: fmt.Sprintf("matrix-%d", i), Recipients: users,
			Type: "comment", Category: c.category, Title: c.name, Target: &inbox.Target{Kind: "issue", TargetID: "42"},
			TemplateChannels: c.template, Channels: c.hint})
		if err != nil {
			t.Fatalf("%s: send: %v", c.name, err)
		}
		wantSkips := inbox.SkipCounts{}
		accepted := 0
		for _, u := range users {
			id := res.StatusIDs[u]
			if id == "" {
				t.Fatalf("%s: no status id for %s: %v", c.name, u, res.StatusIDs)
			}
			st, err := f.s.Status(ctx, f.tenant, id)
			if err != nil {
				t.Fatalf("%s: status of %s: %v", c.name, u, err)
			}
			got := map[string]outcome{}
			for _, ch := range st.Channels {
				got[ch.Channel] = describe(ch)
			}
			if !maps.Equal(got, c.want[u]) {
				t.Errorf("%s: %s:\n got  %v\n want %v", c.name, u, got, c.want[u])
			}
			for ch, o := range c.want[u] {
				if !strings.HasPrefix(o, Q) && o != D {
					wantSkips.Add(ch, o)
				}
			}
			written := c.want[u][inbox.ChannelInApp] == D
			hasNotif := slices.ContainsFunc(res.Delivered, func(d inbox.Delivery) bool { return d.UserID == u })
			wantStatus, wantReason := inbox.NotificationWritten, ""
			if written {
				accepted++
			} else {
				wantStatus, wantReason = inbox.NotificationSkipped, c.want[u][inbox.ChannelInApp]
			}
			if st.UserID != u || st.Status != wantStatus || st.Reason != wantReason || !st.CreatedAt.Equal(routingNow) || hasNotif != written {
				t.Errorf("%s: %s: summary %+v, notification %v; want %s %q, notification %v", c.name, u, st, hasNotif, wantStatus, wantReason, written)
			}
		}
		if res.Accepted != accepted {
			t.Errorf("%s: accepted %d, want %d", c.name, res.Accepted, accepted)
		}
		if !reflectEqualSkips(res.Skipped, wantSkips) {
			t.Errorf("%s: skip counts\n got  %v\n want %v", c.name, res.Skipped, wantSkips)
		}
		// Every queued channel but in-app has exactly one deliver task, due now or at its
		// deferral; nothing else has one.
		var wantTasks []string
		for _, u := range users {
			for ch, o := range c.want[u] {
				if ch == inbox.ChannelInApp || !strings.HasPrefix(o, Q) {
					continue
				}
				due := routingNow
				if at, ok := strings.CutPrefix(o, Q+"@"); ok {
					due, _ = time.Parse(time.RFC3339, at)
				}
				wantTasks = append(wantTasks, fmt.Sprintf("%s %s %s %s", u, res.StatusIDs[u], ch, due.Format(time.RFC3339)))
			}
		}
		sort.Strings(wantTasks)
		got := deliverTasks(t, f, res.StatusIDs)
		if !slices.Equal(got, wantTasks) {
			t.Errorf("%s: deliver tasks\n got  %v\n want %v", c.name, got, wantTasks)
		}
	}
	// Every recipient's notifications: those whose in-app was delivered, counted exactly.
	for _, u := range users {
		n, err := f.s.UnreadCount(ctx, f.viewer(u))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, c := range cases {
			if c.want[u][inbox.ChannelInApp] == D {
				want++
			}
		}
		if n != want {
			t.Errorf("%s: unread %d, want %d", u, n, want)
		}
	}
}

// describe is the outcome a status record shows.
func describe(c inbox.ChannelStatus) outcome {
	switch {
	case c.Status == inbox.DeliverySkipped:
		return c.Reason
	case c.Status == inbox.DeliveryQueued && !c.DeferredUntil.IsZero():
		return inbox.DeliveryQueued + "@" + c.DeferredUntil.UTC().Format(time.RFC3339)
	}
	return c.Status
}

func reflectEqualSkips(a, b inbox.SkipCounts) bool {
	if len(a) != len(b) {
		return false
	}
	for ch, m := range a {
		if !maps.Equal(m, b[ch]) {
			return false
		}
	}
	return true
}

// deliverTasks returns the deliver tasks of the notifications ids (recipient -> id) as
// "user id channel due", sorted, read from every scheduler shard's buckets of the
// routing tests' times.
func deliverTasks(t *testing.T, f *fixture, ids map[string]string) []string {
	t.Helper()
	byID := map[string]string{}
	for u, id := range ids {
		byID[id] = u
	}
	var out []string
	for shard := range f.s.SchedShards() {
		for _, bucket := range []time.Time{routingNow, routingNow.Add(30 * time.Minute), routingNow.Add(time.Hour)} {
			var after *inbox.Task
			for {
				page, err := f.s.DueTasks(context.Background(), shard, bucket, routingNow.Add(24*time.Hour), after, 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range page.Tasks {
					if u, ok := byID[task.Ref]; ok && task.Kind == store.TaskDeliver {
						if task.Viewer != f.viewer(u) {
							t.Errorf("task %s: viewer %+v", task.ID, task.Viewer)
						}
						out = append(out, fmt.Sprintf("%s %s %s %s", u, task.Ref, task.Token, task.Due.UTC().Format(time.RFC3339)))
					}
				}
				if !page.More {
					break
				}
				after = &page.Tasks[len(page.Tasks)-1]
			}
		}
	}
	sort.Strings(out)
	return out
}
