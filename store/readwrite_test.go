package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
	"github.com/inboxgw/gateway/store"
)

// ReadRecipients is one strongly consistent BatchGetItem (one per 100 keys) of what need
// names, returned as plain values: preferences, profile and devices, the group as stored
// (or a new one), the tenant's configuration. A critical category on a cached
// configuration reads no preferences; a configuration not cached is read in the same call.
func TestReadRecipients(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.rec.KeepInputs()
	if _, err := f.s.PutTenantSettings(ctx, f.tenant, inbox.TenantSettings{Preferences: &inbox.TenantPreferences{
		Channels: inbox.DefaultTenantPreferences().Channels, Critical: []string{"security"}, Locale: "fr"}}); err != nil {
		t.Fatal(err)
	}
	de := "de"
	if _, err := f.s.UpdatePreferences(ctx, f.viewer("a"), inbox.PreferencesUpdate{Locale: &de}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.PutUserProfile(ctx, f.viewer("b"), inbox.UserProfile{Addresses: map[string]string{"email": "b@example.com"}, Timezone: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RegisterDevice(ctx, f.viewer("b"), "tok-b", inbox.PlatformFCM); err != nil {
		t.Fatal(err)
	}
	if res, err := writer(f.s).Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: "g1", Recipients: []string{"a"}, Type: "t", GroupKey: "g"}); err != nil || res.Accepted != 1 {
		t.Fatalf("send: %+v, %v", res, err)
	}

	// A cold instance: the settings come in the same call.
	cold := store.New(f.db, f.table)
	t.Cleanup(cold.Close)
	users := []string{"a", "b", "c"}
	for _, c := range []struct {
		name      string
		st        *store.Store
		need      routing.Need
		wantPrefs bool
	}{
		{"cold, all", cold, routing.Need{Profile: true, GroupKey: "g"}, true},
		{"warm, all", f.s, routing.Need{Profile: true, GroupKey: "g"}, true},
		{"warm, critical", f.s, routing.Need{Prefs: func(t routing.Tenant) bool { return !t.Critical("security") },
			Profile: true, GroupKey: "g"}, false},
		{"warm, no profile or group", f.s, routing.Need{}, true},
	} {
		f.rec.Reset()
		r, err := c.st.ReadRecipients(ctx, f.tenant, users, c.need)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// b has an email address: with profiles, a second BatchGetItem reads whether it
		// is suppressed (AP27).
		want := []string{"BatchGetItem"}
		if c.need.Profile {
			want = append(want, "BatchGetItem")
		}
		if ops := f.rec.Ops(); !slices.Equal(ops, want) {
			t.Errorf("%s: %v, want %v", c.name, ops, want)
		}
		if !r.Tenant.Critical("security") || r.Tenant.Prefs.Locale != "fr" || r.At.IsZero() {
			t.Errorf("%s: tenant %+v at %v", c.name, r.Tenant, r.At)
		}
		if got := r.Recipients["a"].Own.Locale; (got == "de") != c.wantPrefs {
			t.Errorf("%s: a's locale %q (preferences read: %v)", c.name, got, c.wantPrefs)
		}
		b := r.Recipients["b"]
		if c.need.Profile != (b.Profile.Address("email") == "b@example.com" && b.Profile.Timezone == "Europe/Berlin" && len(b.Devices) == 1 && b.Devices[0].Token == "tok-b") {
			t.Errorf("%s: b %+v", c.name, b)
		}
		if _, ok := r.Recipients["c"]; !ok || len(r.Recipients) != 3 {
			t.Errorf("%s: recipients %v", c.name, r.Recipients)
		}
		switch ga, gc := r.Groups["a"], r.Groups["c"]; {
		case c.need.GroupKey == "" && len(r.Groups) != 0:
			t.Errorf("%s: groups %v read without a group key", c.name, r.Groups)
		case c.need.GroupKey != "" && (!ga.Stored || ga.Key != "g" || len(ga.Members) != 1 || ga.Rev == 0 || gc.Stored || gc.Key != "g"):
			t.Errorf("%s: groups a %+v, c %+v", c.name, ga, gc)
		}
	}

	// 150 users with their preferences and profiles: 300 keys, 3 calls, not one per kind.
	many := make([]string, 150)
	for i := range many {
		many[i] = fmt.Sprintf("m%03d", i)
	}
	f.rec.Reset()
	if _, err := f.s.ReadRecipients(ctx, f.tenant, many, routing.Need{Profile: true}); err != nil {
		t.Fatal(err)
	}
	if n := f.rec.Count("BatchGetItem"); n != 3 {
		t.Errorf("300 keys in %d BatchGetItem calls, want 3", n)
	}
}

// WriteRecipient writes a plan in one transaction and publishes nothing: a recipient
// with in-app skipped gets its status records only; a queued one its notification,
// counted; the same plan again finds the guard (Duplicate, the first notification); a
// plan whose group was read before another write re-reads it and commits.
func TestWriteRecipient(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	pub := &recorder{}
	st := store.New(f.db, f.table, store.WithPublisher(pub))
	t.Cleanup(st.Close)
	inApp := func(reason string) []routing.Decision {
		return []routing.Decision{{Channel: inbox.ChannelInApp, Key: inbox.ChannelInApp, Reason: reason}}
	}
	plan := func(key, user string, ds []routing.Decision) routing.Plan {
		return routing.Plan{TenantID: f.tenant, UserID: user, InputHash: "h",
			Send: inbox.SendInput{IdempotencyKey: key, Recipients: []string{user}, Type: "t", Title: "hi", GroupKey: "g"}, Decisions: ds}
	}

	f.rec.Reset()
	w, err := st.WriteRecipient(ctx, plan("k1", "muted", inApp(inbox.ReasonOptedOut)))
	if err != nil || w.Delivery.Notification != nil || !w.Wrote || w.Duplicate || w.StatusID == "" {
		t.Fatalf("in-app skipped: %+v, %v", w, err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"TransactWriteItems"}) {
		t.Errorf("in-app skipped: %v, want one TransactWriteItems", ops)
	}
	if s, err := st.Status(ctx, f.tenant, w.StatusID); err != nil || s.Status != inbox.NotificationSkipped || s.Reason != inbox.ReasonOptedOut {
		t.Errorf("status of a skipped recipient: %+v, %v", s, err)
	}
	if p := f.page(t, "muted", inbox.PageQuery{First: ptr(10)}); len(p.Edges) != 0 || p.UnreadCount != 0 {
		t.Errorf("a skipped recipient's inbox: %d, count %d", len(p.Edges), p.UnreadCount)
	}

	w, err = st.WriteRecipient(ctx, plan("k1", "alice", inApp("")))
	if err != nil || w.Delivery.Notification == nil || !w.Delivery.New || !w.Wrote || w.StatusID != w.Delivery.Notification.ID {
		t.Fatalf("in-app queued: %+v, %v", w, err)
	}
	first := w.Delivery.Notification.ID
	again, err := st.WriteRecipient(ctx, plan("k1", "alice", inApp("")))
	if err != nil || !again.Duplicate || again.Wrote || again.Delivery.New || again.Delivery.Notification == nil || again.Delivery.Notification.ID != first {
		t.Fatalf("the plan again: %+v, %v; want the duplicate of %s", again, err, first)
	}

	// The group as read before the second notification: its rev has moved since.
	r, err := st.ReadRecipients(ctx, f.tenant, []string{"alice"}, routing.Need{GroupKey: "g"})
	if err != nil {
		t.Fatal(err)
	}
	stale := r.Groups["alice"]
	if _, err := st.WriteRecipient(ctx, plan("k2", "alice", inApp(""))); err != nil {
		t.Fatal(err)
	}
	p := plan("k3", "alice", inApp(""))
	p.Group = &stale
	if w, err := st.WriteRecipient(ctx, p); err != nil || !w.Delivery.New {
		t.Fatalf("a plan with a stale group: %+v, %v", w, err)
	}
	g, err := st.Group(ctx, f.viewer("alice"), "g")
	if err != nil || g == nil || g.Count != 3 || g.UnreadCount != 3 {
		t.Errorf("group after three writes: %+v, %v", g, err)
	}
	if p := f.page(t, "alice", inbox.PageQuery{First: ptr(10)}); len(p.Edges) != 3 || p.UnreadCount != 3 {
		t.Errorf("alice: %d notifications, count %d; want 3, 3", len(p.Edges), p.UnreadCount)
	}
	if got := pub.take(); len(got) != 0 {
		t.Errorf("WriteRecipient published %+v; publishing is the caller's", got)
	}
}
