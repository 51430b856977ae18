package store_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// Status is ONE Query; an unknown id is NOT_FOUND and a '#' in it BAD_USER_INPUT, both
// without a Scan or a write. A replay returns every recipient's status id (a skipped
// in-app one included) and counts no skip again.
func TestStatusOneQueryAndReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.s.UpdatePreferences(ctx, f.viewer("b"), inbox.PreferencesUpdate{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}); err != nil {
		t.Fatal(err)
	}
	in := inbox.SendInput{IdempotencyKey: "st", Recipients: []string{"a", "b"}, Type: "t",
		TemplateChannels: []string{inbox.ChannelInApp, inbox.ChannelEmail}}
	res, err := writer(f.s).Send(ctx, f.tenant, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || len(res.StatusIDs) != 2 || res.StatusIDs["a"] != res.NotificationIDs[0] {
		t.Fatalf("send = %+v", res)
	}
	if res.Skipped.Channel(inbox.ChannelInApp) != 1 || res.Skipped[inbox.ChannelEmail][inbox.ReasonNoEmail] != 2 {
		t.Fatalf("skips %v", res.Skipped)
	}
	f.rec.Reset()
	st, err := f.s.Status(ctx, f.tenant, res.StatusIDs["b"])
	if err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"Query"}) {
		t.Errorf("status ops %v, want one Query", ops)
	}
	want := inbox.NotificationStatus{ID: res.StatusIDs["b"], UserID: "b", Status: inbox.NotificationSkipped, Reason: inbox.ReasonOptedOut,
		CreatedAt: st.CreatedAt, Channels: []inbox.ChannelStatus{
			{Channel: inbox.ChannelInApp, Key: inbox.ChannelInApp, Status: inbox.DeliverySkipped, Reason: inbox.ReasonOptedOut, UpdatedAt: st.CreatedAt},
			{Channel: inbox.ChannelEmail, Key: inbox.ChannelEmail, Status: inbox.DeliverySkipped, Reason: inbox.ReasonNoEmail, UpdatedAt: st.CreatedAt},
		}}
	if st.CreatedAt.IsZero() || !equalStatus(st, want) {
		t.Fatalf("status\n got  %+v\n want %+v", st, want)
	}
	st, err = f.s.Status(ctx, f.tenant, res.StatusIDs["a"])
	if err != nil || st.Status != inbox.NotificationWritten || len(st.Channels) != 2 ||
		st.Channels[0].Status != inbox.DeliveryDelivered || st.Channels[0].Provider != inbox.ProviderInbox || st.Channels[0].Attempts != 1 ||
		!st.Channels[0].SentAt.Equal(st.CreatedAt) || !st.Channels[0].DeliveredAt.Equal(st.CreatedAt) {
		t.Fatalf("status of a = %+v, %v", st, err)
	}

	replay, err := writer(f.s).Send(ctx, f.tenant, in)
	if err != nil || !replay.Duplicate || len(replay.Skipped) != 0 ||
		replay.StatusIDs["a"] != res.StatusIDs["a"] || replay.StatusIDs["b"] != res.StatusIDs["b"] {
		t.Fatalf("replay = %+v, %v (first %+v)", replay, err, res)
	}
	// The channels are part of the content: the key with another hint is refused.
	in.Channels = []string{inbox.ChannelEmail}
	if _, err := writer(f.s).Send(ctx, f.tenant, in); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("reused key with another hint: %v", err)
	}
	in.IdempotencyKey, in.Channels = "st2", []string{"FAX"}
	if _, err := writer(f.s).Send(ctx, f.tenant, in); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("unknown channel: %v", err)
	}

	f.rec.Reset()
	if _, err := f.s.Status(ctx, f.tenant, "01ARZ3NDEKTSV4RRFFQ69G5FAV"); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := f.s.Status(ctx, f.tenant, "x#S"); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("id with '#': %v", err)
	}
	assertNoWrite(t, "status", f.rec.Ops())
}

func equalStatus(a, b inbox.NotificationStatus) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.Status == b.Status && a.Reason == b.Reason &&
		a.CreatedAt.Equal(b.CreatedAt) && slices.Equal(a.Channels, b.Channels)
}

// A profile is validated before anything is written, stored with its locale canonical,
// and read back; a PUT replaces it whole.
// addr returns the profile with the one address value under key.
func addr(key, value string) inbox.UserProfile {
	return inbox.UserProfile{Addresses: map[string]string{key: value}}
}

// addressSamples are a valid address of each channel's AddressKey: a channel registered
// with an address needs one here (TestUserProfileAddressesRoundTrip names it).
var addressSamples = map[string]string{"email": "ada@example.com", "phone": "+4915112345678", "slackUserId": "U024BE7LH"}

// Every registered channel's address is written under its AddressKey, as the attribute
// of that name (what profiles stored before read back as), and read back; an empty one
// removes it.
func TestUserProfileAddressesRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("a")
	all := inbox.UserProfile{Addresses: map[string]string{}}
	for _, k := range inbox.AddressKeys {
		s, ok := addressSamples[k]
		if !ok {
			t.Fatalf("no sample address for the address key %q: add one to addressSamples", k)
		}
		all.Addresses[k] = s
	}
	if got, err := f.s.PutUserProfile(ctx, v, all); err != nil || !reflect.DeepEqual(got, all) {
		t.Fatalf("put = %+v, %v", got, err)
	}
	if got, err := f.s.UserProfile(ctx, v); err != nil || !reflect.DeepEqual(got, all) {
		t.Fatalf("read = %+v, %v", got, err)
	}
	raw, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: store.UserProfileKey(v)})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range all.Addresses {
		if s, ok := raw.Item[k].(*types.AttributeValueMemberS); !ok || s.Value != want {
			t.Errorf("attribute %q = %#v, want %q", k, raw.Item[k], want)
		}
	}
	for _, k := range inbox.AddressKeys {
		if got, err := f.s.PutUserProfile(ctx, v, addr(k, all.Addresses[k])); err != nil || !reflect.DeepEqual(got, addr(k, all.Addresses[k])) {
			t.Fatalf("put %s alone = %+v, %v", k, got, err)
		}
		if got, err := f.s.UserProfile(ctx, v); err != nil || !reflect.DeepEqual(got, addr(k, all.Addresses[k])) {
			t.Errorf("read %s alone = %+v, %v", k, got, err)
		}
	}
}

func TestUserProfile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("a")
	if p, err := f.s.UserProfile(ctx, v); err != nil || !reflect.DeepEqual(p, inbox.UserProfile{}) {
		t.Fatalf("no profile = %+v, %v", p, err)
	}
	f.rec.Reset()
	for _, bad := range []inbox.UserProfile{
		addr("email", "not an address"), addr("email", "Ada <ada@example.com>"), addr("email", "ada@"),
		addr("phone", "0151 1234"), addr("phone", "+0151"), addr("phone", "+1"), addr("phone", "+1234567890123456"),
		addr("slackUserId", "C024BE7LH"), addr("fax", "+4930123456"),
		{Locale: "not a locale!"}, {Locale: "xx-YY-zzzzzzzzzzz"}, {Timezone: "Mars/Base"}, {Timezone: "Local"},
	} {
		if _, err := f.s.PutUserProfile(ctx, v, bad); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%+v: %v, want BAD_USER_INPUT", bad, err)
		}
	}
	if _, err := f.s.PutUserProfile(ctx, inbox.Viewer{TenantID: f.tenant, UserID: "a#PREFS"}, inbox.UserProfile{}); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("user with '#': %v", err)
	}
	if ops := f.rec.Ops(); len(ops) != 0 {
		t.Fatalf("refused profiles sent %v", ops)
	}
	got, err := f.s.PutUserProfile(ctx, v, inbox.UserProfile{Addresses: map[string]string{"email": "ada@example.com", "phone": "+4915112345678"}, Locale: "de-de", Timezone: "Europe/Berlin"})
	want := inbox.UserProfile{Addresses: map[string]string{"email": "ada@example.com", "phone": "+4915112345678"}, Locale: "de-DE", Timezone: "Europe/Berlin"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("put = %+v, %v", got, err)
	}
	if p, err := f.s.UserProfile(ctx, v); err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("read = %+v, %v", p, err)
	}
	if _, err := f.s.PutUserProfile(ctx, v, inbox.UserProfile{Addresses: map[string]string{"phone": "+4915112345678"}}); err != nil {
		t.Fatal(err)
	}
	if p, err := f.s.UserProfile(ctx, v); err != nil || !reflect.DeepEqual(p, addr("phone", "+4915112345678")) {
		t.Fatalf("replaced = %+v, %v", p, err)
	}
	// The profile is outside the inbox's key range: the inbox stays empty.
	if page := f.page(t, "a", inbox.PageQuery{First: ptr(10)}); len(page.Edges) != 0 {
		t.Fatalf("inbox holds %d items", len(page.Edges))
	}
}

// Tenant settings: validated; a tenant without settings has the configured defaults
// (critical categories, retention) and no webhook; stored settings replace them at
// once on this instance (the cache takes the write); a cold preferences read is one
// BatchGetItem of PREFS and the settings.
func TestTenantSettings(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	env := func(string) inbox.TenantPreferences {
		d := inbox.DefaultTenantPreferences()
		d.Critical = []string{"billing"}
		return d
	}
	f := newFixture(t, store.WithClock(func() time.Time { return now }), store.WithTenantPreferences(env), store.WithRetention(time.Hour))
	ctx := context.Background()
	if _, err := f.s.UpdatePreferences(ctx, f.viewer("a"), inbox.PreferencesUpdate{Channels: inbox.SwitchChanges{inbox.ChannelInApp: false}}); err != nil {
		t.Fatal(err)
	}
	f.s = store.New(f.db, f.table, store.WithClock(func() time.Time { return now }), store.WithTenantPreferences(env), store.WithRetention(time.Hour))
	t.Cleanup(f.s.Close)
	f.rec.Reset()
	p, err := f.s.Preferences(ctx, f.viewer("a"))
	if err != nil || p.Channels[inbox.ChannelInApp] || !p.Critical("billing") {
		t.Fatalf("preferences = %+v, %v", p, err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"BatchGetItem"}) {
		t.Errorf("cold preferences read: %v, want one BatchGetItem", ops)
	}

	send := func(key, category string) (inbox.SendResult, inbox.NotificationStatus) {
		t.Helper()
		res, err := writer(f.s).Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: key, Recipients: []string{"a"}, Type: "t", Category: category,
			TemplateChannels: []string{inbox.ChannelInApp, inbox.ChannelWebhook}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.s.Status(ctx, f.tenant, res.StatusIDs["a"])
		if err != nil {
			t.Fatal(err)
		}
		return res, st
	}
	// The configured critical category bypasses a's in-app opt-out; no webhook URL.
	res, st := send("s1", "billing")
	if res.Accepted != 1 || st.Channels[1].Reason != inbox.ReasonNoWebhook {
		t.Fatalf("env defaults: %+v %+v", res, st)
	}
	if exp := res.Delivered[0].Notification.ExpiresAt; exp == nil || !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("configured retention: expiresAt %v", exp)
	}

	for _, bad := range []inbox.TenantSettings{
		{WebhookURL: "http://hooks.example.com/x", WebhookSecret: "0123456789abcdef"},
		{WebhookURL: "https://hooks.example.com/x"},
		{WebhookURL: "https://hooks.example.com/x", WebhookSecret: "short"},
		{WebhookSecret: "0123456789abcdef"},
		{WebhookURL: "/relative", WebhookSecret: "0123456789abcdef"},
		{Retention: durPtr(-time.Second)},
		{Preferences: &inbox.TenantPreferences{Critical: []string{"a#b"}}},
		{Preferences: &inbox.TenantPreferences{QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"}}},
	} {
		if _, err := f.s.PutTenantSettings(ctx, f.tenant, bad); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%+v: %v, want BAD_USER_INPUT", bad, err)
		}
	}
	d := inbox.DefaultTenantPreferences()
	d.Critical, d.Locale = []string{"security"}, "de-de"
	set := inbox.TenantSettings{Preferences: &d, WebhookURL: "http://localhost:9000/hook", WebhookSecret: "whsec_0123456789abcdef", Retention: durPtr(0)}
	stored, err := f.s.PutTenantSettings(ctx, f.tenant, set)
	if err != nil || stored.Preferences.Locale != "de-DE" {
		t.Fatalf("put = %+v, %v", stored, err)
	}
	// billing is no longer critical: a's opt-out applies; the webhook is queued; the
	// settings' retention (0: none) replaces the configured hour.
	res, st = send("s2", "billing")
	if res.Accepted != 0 || st.Reason != inbox.ReasonOptedOut || st.Channels[1].Status != inbox.DeliveryQueued {
		t.Fatalf("settings: %+v %+v", res, st)
	}
	res, _ = send("s3", "security")
	if res.Accepted != 1 || res.Delivered[0].Notification.ExpiresAt != nil {
		t.Fatalf("settings' critical and retention: %+v", res.Delivered[0].Notification)
	}
	// Another instance reads them from the table (once: then from its cache).
	g := store.New(f.db, f.table)
	t.Cleanup(g.Close)
	got, err := g.TenantSettings(ctx, f.tenant)
	if err != nil || got.WebhookURL != set.WebhookURL || got.WebhookSecret != set.WebhookSecret || got.Retention == nil || *got.Retention != 0 ||
		got.Preferences == nil || !slices.Equal(got.Preferences.Critical, []string{"security"}) || got.Preferences.Locale != "de-DE" {
		t.Fatalf("read = %+v, %v", got, err)
	}
	if p, err := g.Preferences(ctx, f.viewer("a")); err != nil || p.Critical("billing") || !p.Critical("security") || p.Locale != "de-DE" {
		t.Fatalf("preferences under the settings = %+v, %v", p, err)
	}
}

func durPtr(d time.Duration) *time.Duration { return &d }
