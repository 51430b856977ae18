package service_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
	"github.com/inboxgw/gateway/service"
)

// fakeWrites is the store's side of the send loop in memory: recipients as configured,
// guards as written, every call recorded. WriteRecipient fails for "fail" and finds the
// guard of another call for "raced".
type fakeWrites struct {
	mu         sync.Mutex
	recipients map[string]routing.Recipient
	tenant     routing.Tenant
	guards     map[string]map[string]routing.Guard // by key, then user
	reads      [][]string
	needs      []routing.Need
	plans      []routing.Plan
	upserts    int
}

func (f *fakeWrites) CheckSend(in inbox.SendInput) error { return in.Validate() }

func (f *fakeWrites) Guards(_ context.Context, _, key string) (map[string]routing.Guard, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]routing.Guard{}
	for u, g := range f.guards[key] {
		out[u] = g
	}
	return out, nil
}

func (f *fakeWrites) UpsertActor(context.Context, string, *inbox.Actor) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upserts++
	return nil
}

func (f *fakeWrites) UpsertTarget(context.Context, string, *inbox.Target) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upserts++
	return nil
}

func (f *fakeWrites) ReadRecipients(_ context.Context, _ string, users []string, need routing.Need) (routing.Read, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, slices.Clone(users))
	f.needs = append(f.needs, need)
	r := routing.Read{Tenant: f.tenant, Recipients: map[string]routing.Recipient{}, Groups: map[string]routing.Group{},
		At: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	for _, u := range users {
		r.Recipients[u] = f.recipients[u]
		r.Groups[u] = routing.Group{Key: need.GroupKey}
	}
	return r, nil
}

func (f *fakeWrites) WriteRecipient(_ context.Context, p routing.Plan) (routing.Written, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans = append(f.plans, p)
	switch p.UserID {
	case "fail":
		return routing.Written{}, errors.New("the transaction's answer was lost")
	case "raced":
		return routing.Written{Duplicate: true, StatusID: "n-raced",
			Delivery: inbox.Delivery{UserID: p.UserID, Notification: &inbox.Notification{ID: "n-raced"}}}, nil
	}
	g := routing.Guard{InputHash: p.InputHash}
	w := routing.Written{Wrote: true, Delivery: inbox.Delivery{UserID: p.UserID}}
	if routing.InApp(p.Decisions).Queued() {
		g.NotificationID = "n-" + p.UserID
		w.Delivery.Notification, w.Delivery.New = &inbox.Notification{ID: g.NotificationID, Title: p.Send.Title}, true
		w.StatusID = g.NotificationID
	} else {
		g.StatusID = "s-" + p.UserID
		w.StatusID = g.StatusID
	}
	if f.guards[p.Send.IdempotencyKey] == nil {
		f.guards[p.Send.IdempotencyKey] = map[string]routing.Guard{}
	}
	f.guards[p.Send.IdempotencyKey][p.UserID] = g
	return w, nil
}

// changes records what the loop publishes.
type changes struct {
	mu  sync.Mutex
	got []inbox.Change
}

func (c *changes) Publish(_ context.Context, ch inbox.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ch)
}

// take returns, by user, the kinds published since the last take ("hint" for a re-read
// hint), and forgets them.
func (c *changes) take() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	for _, ch := range c.got {
		k := string(ch.Kind)
		if ch.Kind == inbox.EventNone {
			k = "hint"
		}
		out[ch.Viewer.UserID] = append(out[ch.Viewer.UserID], k)
	}
	c.got = nil
	return out
}

// The send loop without an engine: one read of the pending recipients (what it needs
// depends on the send), a render per distinct locale, a plan per recipient with their
// locale's content and their decisions, publishing after each write (ADDED when new, a
// re-read hint when found written or failed), skips counted for this call's writes only;
// a replay reads and writes nothing and hints every recipient; a key reused with other
// content is refused before anything is read.
func TestWriterLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeWrites{guards: map[string]map[string]routing.Guard{}, tenant: routing.Tenant{
		Prefs: inbox.TenantPreferences{Channels: inbox.DefaultTenantPreferences().Channels, Critical: []string{"security"}}},
		recipients: map[string]routing.Recipient{
			"own-de":     {Own: inbox.OwnPreferences{Locale: "de"}},
			"profile-de": {Profile: inbox.UserProfile{Addresses: map[string]string{"email": "p@example.com"}, Locale: "de"}},
			"none":       {},
			"off":        {Own: inbox.OwnPreferences{Locale: "de", MutedTargets: []inbox.ProfileRef{{TargetKind: "issue", ID: "1"}}}},
		}}
	pub := &changes{}
	w := service.Writer{Store: f, Publisher: pub, Concurrency: 2}
	var rendered []string
	var mu sync.Mutex
	render := func(_ context.Context, locale string) (inbox.Rendered, error) {
		mu.Lock()
		defer mu.Unlock()
		rendered = append(rendered, locale)
		return inbox.Rendered{Title: "title " + locale, Channels: []string{inbox.ChannelInApp, inbox.ChannelEmail}}, nil
	}
	in := inbox.SendInput{IdempotencyKey: "k", Recipients: []string{"own-de", "profile-de", "none", "off", "none"}, Type: "t",
		Locale: "en", Actor: &inbox.Actor{ActorID: "ada"}, Target: &inbox.Target{Kind: "issue", TargetID: "1"}}
	res, err := w.Write(ctx, "acme", in, render)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rendered)
	if !slices.Equal(rendered, []string{"de", "en"}) {
		t.Errorf("rendered %v; want de and en once each", rendered)
	}
	if len(f.reads) != 1 || !slices.Equal(f.reads[0], []string{"own-de", "profile-de", "none", "off"}) {
		t.Errorf("reads %v; want one of the distinct recipients", f.reads)
	}
	if n := f.needs[0]; !n.Profile || n.GroupKey != "t|issue:1" || !n.Prefs(f.tenant) {
		t.Errorf("a templated send's need %+v: profiles, the group and (for the locale) preferences", n)
	}
	titles := map[string]string{}
	for _, p := range f.plans {
		titles[p.UserID] = p.Send.Title
		if p.Content == nil || p.Content.Title != p.Send.Title || p.NotificationID != "" || p.InputHash == "" {
			t.Errorf("plan of %s: %+v", p.UserID, p)
		}
	}
	if want := map[string]string{"own-de": "title de", "profile-de": "title de", "none": "title en", "off": "title de"}; !equalMaps(titles, want) {
		t.Errorf("titles %v; want %v", titles, want)
	}
	if !slices.Equal(res.NotificationIDs, []string{"n-own-de", "n-profile-de", "n-none"}) || res.Accepted != 3 || res.Duplicate ||
		res.StatusIDs["off"] != "s-off" {
		t.Errorf("result %+v", res)
	}
	// EMAIL: no address (own-de, none), the target muted (off); in-app muted (off).
	if res.Skipped[inbox.ChannelEmail][inbox.ReasonNoEmail] != 2 || res.Skipped[inbox.ChannelEmail][inbox.ReasonMuted] != 1 ||
		res.Skipped[inbox.ChannelInApp][inbox.ReasonMuted] != 1 {
		t.Errorf("skips %v", res.Skipped)
	}
	if got, want := pub.take(), map[string][]string{"own-de": {"ADDED"}, "profile-de": {"ADDED"}, "none": {"ADDED"}}; !equalMapSlices(got, want) {
		t.Errorf("published %v; want %v", got, want)
	}
	if f.upserts != 2 {
		t.Errorf("%d upserts; want the actor and the target once", f.upserts)
	}

	// The replay: nothing read, rendered, upserted or written; every notification hinted.
	reads, plans, renders := len(f.reads), len(f.plans), len(rendered)
	again, err := w.Write(ctx, "acme", in, render)
	if err != nil || !again.Duplicate || !slices.Equal(again.NotificationIDs, res.NotificationIDs) || again.StatusIDs["off"] != "s-off" {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	if len(f.reads) != reads || len(f.plans) != plans || len(rendered) != renders || f.upserts != 2 {
		t.Errorf("the replay read %d, wrote %d, rendered %d, upserted %d", len(f.reads)-reads, len(f.plans)-plans, len(rendered)-renders, f.upserts-2)
	}
	if got, want := pub.take(), map[string][]string{"own-de": {"hint"}, "profile-de": {"hint"}, "none": {"hint"}}; !equalMapSlices(got, want) {
		t.Errorf("replay published %v; want %v", got, want)
	}

	// Other content under the key: refused, nothing read.
	for _, changed := range []inbox.SendInput{
		{IdempotencyKey: "k", Recipients: in.Recipients, Type: "t", Locale: "de", Actor: in.Actor, Target: in.Target},
		{IdempotencyKey: "k", Recipients: []string{"own-de"}, Type: "t", Locale: "en", Actor: in.Actor, Target: in.Target},
		{IdempotencyKey: "k", Recipients: in.Recipients, Type: "t", Locale: "en", Actor: in.Actor, Target: in.Target, RenderKey: "other@1"},
	} {
		if _, err := w.Write(ctx, "acme", changed, render); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("other content %+v: %v; want BAD_USER_INPUT", changed, err)
		}
	}
	if len(f.reads) != reads {
		t.Errorf("a refused send read its recipients")
	}

	// Critical, no template, no channels: no preferences or profiles needed. A recipient
	// found written by another call is hinted and not counted; a failed write is hinted
	// and fails the send.
	crit := inbox.SendInput{IdempotencyKey: "c", Recipients: []string{"none", "raced"}, Type: "t", Category: "security", Title: "x"}
	res, err = w.Send(ctx, "acme", crit)
	if err != nil || !slices.Equal(res.NotificationIDs, []string{"n-none", "n-raced"}) || res.Skipped.Channel(inbox.ChannelInApp) != 0 {
		t.Fatalf("critical: %+v, %v", res, err)
	}
	if n := f.needs[len(f.needs)-1]; n.Profile || n.Prefs(f.tenant) {
		t.Errorf("a critical in-app send's need %+v: no profiles, no preferences", n)
	}
	if got, want := pub.take(), map[string][]string{"none": {"ADDED"}, "raced": {"hint"}}; !equalMapSlices(got, want) {
		t.Errorf("published %v; want %v", got, want)
	}
	if _, err := w.Send(ctx, "acme", inbox.SendInput{IdempotencyKey: "f", Recipients: []string{"fail"}, Type: "t", Title: "x"}); err == nil {
		t.Error("a failed write: no error")
	}
	if got := pub.take(); !slices.Equal(got["fail"], []string{"hint"}) {
		t.Errorf("a failed write published %v; want a re-read hint", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func equalMapSlices(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(b[k], v) {
			return false
		}
	}
	return true
}
