package store_test

import (
	"cmp"
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

// TestRoutingWritesDecisions checks that a send stores what package routing decided
// (the rules themselves are routing's table tests, without an engine): the store reads
// each recipient's preferences (a mute, quiet hours in their own zone), profile
// (addresses, the zone of quiet hours set without one) and the tenant's settings
// (critical categories, the webhook URL), and writes one status record per decision
// (DELIVERED in-app, QUEUED with its deferral, SKIPPED with the reason), the summary,
// a deliver task per queued channel but in-app (due now or at the deferral), a
// notification only where in-app is queued, and the skip counts. The critical send
// reads no preferences and still decides every channel (no mute, no deferral).
func TestRoutingWritesDecisions(t *testing.T) {
	t.Parallel()
	defaults := func(string) inbox.TenantPreferences {
		d := inbox.DefaultTenantPreferences()
		d.Timezone = "UTC"
		return d
	}
	// One scheduler shard: the deliver tasks are read back in 3 Queries, not 48.
	f := newFixture(t, store.WithClock(func() time.Time { return routingNow }), store.WithTenantPreferences(defaults),
		store.WithSchedShards(1))
	ctx := context.Background()
	d := defaults(f.tenant)
	d.Critical = []string{"security"}
	if _, err := f.s.PutTenantSettings(ctx, f.tenant, inbox.TenantSettings{Preferences: &d,
		WebhookURL: "https://hooks.example.com/inbox", WebhookSecret: "whsec_0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	// bare: nothing; muter: email + phone, issue 42 muted; quiet: email + phone,
	// 12:30-14:00 in Europe/Berlin, their own zone (now 13:00 there: ends 13:00Z); night:
	// 22:00-08:30 in their profile's zone only, America/New_York (now 08:00 there: ends
	// 12:30Z).
	users := []string{"bare", "muter", "quiet", "night"}
	both := inbox.UserProfile{Addresses: map[string]string{"email": "x@example.com", "phone": "+4915112345678"}}
	for u, p := range map[string]inbox.UserProfile{"muter": both, "quiet": both,
		"night": {Addresses: map[string]string{"email": "n@example.com", "phone": "+12125550100"}, Timezone: "America/New_York"}} {
		if _, err := f.s.PutUserProfile(ctx, f.viewer(u), p); err != nil {
			t.Fatalf("profile %s: %v", u, err)
		}
	}
	// night's quiet hours need a zone to pass the update: the tenant's (UTC); the
	// profile's is the one used, since night set none of its own.
	for u, p := range map[string]inbox.PreferencesUpdate{
		"muter": {MuteTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "42"}}},
		"quiet": {QuietHours: &inbox.QuietHours{Start: "12:30", End: "14:00"}, Timezone: sptr("Europe/Berlin")},
		"night": {QuietHours: &inbox.QuietHours{Start: "22:00", End: "08:30"}},
	} {
		if _, err := f.s.UpdatePreferences(ctx, f.viewer(u), p); err != nil {
			t.Fatalf("preferences %s: %v", u, err)
		}
	}
	const (
		D  = inbox.DeliveryDelivered
		Q  = inbox.DeliveryQueued
		Q1 = "QUEUED@2026-03-10T13:00:00Z"
		Q2 = "QUEUED@2026-03-10T12:30:00Z"
	)
	type sendCase struct {
		name, category string
		template, hint []string
		want           map[string]map[string]outcome // user -> channel -> outcome
	}
	critical := map[string]outcome{inbox.ChannelInApp: D, inbox.ChannelEmail: Q, inbox.ChannelSMS: inbox.ReasonNotInHint, inbox.ChannelWebhook: inbox.ReasonNotInHint}
	cases := []sendCase{
		{name: "social", category: "social", template: []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelWebhook}, want: map[string]map[string]outcome{
			"bare":  {inbox.ChannelInApp: D, inbox.ChannelEmail: inbox.ReasonNoEmail, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: inbox.ReasonNoPhone, inbox.ChannelWebhook: Q},
			"muter": {inbox.ChannelInApp: inbox.ReasonMuted, inbox.ChannelEmail: inbox.ReasonMuted, inbox.ChannelPush: inbox.ReasonMuted, inbox.ChannelSMS: inbox.ReasonMuted, inbox.ChannelWebhook: inbox.ReasonMuted},
			"quiet": {inbox.ChannelInApp: D, inbox.ChannelEmail: Q1, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q1, inbox.ChannelWebhook: Q},
			"night": {inbox.ChannelInApp: D, inbox.ChannelEmail: Q2, inbox.ChannelPush: inbox.ReasonNoDevice, inbox.ChannelSMS: Q2, inbox.ChannelWebhook: Q},
		}},
		// Template [IN_APP EMAIL SMS], hint [IN_APP EMAIL]: push is not considered.
		{name: "security", category: "security", template: []string{inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelSMS},
			hint: []string{inbox.ChannelInApp, inbox.ChannelEmail}, want: map[string]map[string]outcome{
				"muter": critical, "quiet": critical, "night": critical,
				"bare": {inbox.ChannelInApp: D, inbox.ChannelEmail: inbox.ReasonNoEmail, inbox.ChannelSMS: inbox.ReasonNotInHint, inbox.ChannelWebhook: inbox.ReasonNotInHint},
			}},
	}
	ids := map[string]string{} // "case/user" -> status id, for the deliver tasks
	var wantTasks []string
	for i, c := range cases {
		res, err := writer(f.s).Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: fmt.Sprintf("routing-%d", i), Recipients: users,
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
			ids[c.name+"/"+u] = id
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
				if ch == inbox.ChannelInApp || !strings.HasPrefix(o, Q) {
					continue
				}
				due := routingNow
				if at, ok := strings.CutPrefix(o, Q+"@"); ok {
					due, _ = time.Parse(time.RFC3339, at)
				}
				wantTasks = append(wantTasks, fmt.Sprintf("%s/%s %s %s %s", c.name, u, id, ch, due.Format(time.RFC3339)))
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
	}
	// Every queued channel but in-app has exactly one deliver task, due now or at its
	// deferral; nothing else has one.
	sort.Strings(wantTasks)
	if got := deliverTasks(t, f, ids); !slices.Equal(got, wantTasks) {
		t.Errorf("deliver tasks\n got  %v\n want %v", got, wantTasks)
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

// deliverTasks returns the deliver tasks of the notifications ids (recipient -> id, the
// recipient optionally prefixed "{label}/") as "recipient id channel due", sorted, read
// from every scheduler shard's buckets of the routing tests' times.
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
					if u, ok := byID[task.Ref]; ok && task.Kind == inbox.TaskDeliver {
						if _, user, _ := strings.Cut(u, "/"); task.Viewer != f.viewer(cmp.Or(user, u)) {
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
