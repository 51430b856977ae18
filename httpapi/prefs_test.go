package httpapi_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	_ "time/tzdata" // as package main: zones do not depend on the host

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

const prefsSelection = `{ channels { inApp email push sms } categories { category critical channels { inApp email push sms } }
	mutedTargets { id kind targetId title } quietHours { start end } timezone locale }`

// prefsGateway serves tenant defaults: SMS off, "security" critical.
func prefsGateway(t *testing.T) *gateway {
	t.Helper()
	return newGatewayWith(t, gatewaySetup{store: []store.Option{store.WithTenantPreferences(func(string) inbox.TenantPreferences {
		d := inbox.DefaultTenantPreferences()
		d.Channels = inbox.SwitchChanges{inbox.ChannelSMS: false}.Over(d.Channels)
		d.Critical = []string{"security"}
		return d
	})}})
}

// prefsJSON renders v (a decoded GraphQL value) as compact JSON for comparison.
func prefsJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gqlVars is a GraphQL request body with variables.
func gqlVars(query string, vars map[string]any) string {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return string(b)
}

func TestViewerPreferencesAndUpdateRoundTrip(t *testing.T) {
	t.Parallel()
	g := prefsGateway(t)
	// An instance that has not cached the tenant's settings reads them with PREFS (one
	// BatchGetItem); then it is one GetItem.
	ops, _ := g.ops(t, `{ viewer { preferences `+prefsSelection+` } }`, nil)
	if !slices.Equal(ops, []string{"BatchGetItem"}) {
		t.Errorf("viewer.preferences, settings not cached: ops %v, want one BatchGetItem", ops)
	}
	ops, data := g.ops(t, `{ viewer { preferences `+prefsSelection+` } }`, nil)
	if !slices.Equal(ops, []string{"GetItem"}) {
		t.Errorf("viewer.preferences: ops %v, want one GetItem", ops)
	}
	want := `{"viewer":{"preferences":{"categories":[{"category":"security","channels":{"email":true,"inApp":true,"push":true,"sms":true},"critical":true}],` +
		`"channels":{"email":true,"inApp":true,"push":true,"sms":false},"locale":null,"mutedTargets":[],"quietHours":null,"timezone":null}}}`
	if got := prefsJSON(t, data); got != want {
		t.Fatalf("defaults\ngot  %s\nwant %s", got, want)
	}

	// A target with a profile, reached through a notification; another without one.
	if _, err := g.send(context.Background(), "acme", inbox.SendInput{IdempotencyKey: "k", Recipients: []string{"alice"}, Type: "t",
		Target: &inbox.Target{Kind: "issue", TargetID: "42", Title: "Issue 42"}}); err != nil {
		t.Fatal(err)
	}
	_, data = g.ops(t, `{ viewer { inbox(first: 1) { nodes { target { id } } } } }`, nil)
	issueID := data["viewer"].(map[string]any)["inbox"].(map[string]any)["nodes"].([]any)[0].(map[string]any)["target"].(map[string]any)["id"].(string)
	prID := (&inbox.Target{Kind: "pr", TargetID: "9", Via: "01HZX8Y3T9M2V6Q4R8S0W1A2B3"}).GlobalID()

	const update = `mutation($in: PreferencesInput!) { updatePreferences(input: $in) ` + prefsSelection + ` }`
	ops, data = g.ops(t, update, map[string]any{"in": map[string]any{
		"channels":    map[string]any{"email": false},
		"categories":  []any{map[string]any{"category": "marketing", "channels": map[string]any{"inApp": false}}},
		"quietHours":  map[string]any{"start": "22:00", "end": "07:00"},
		"timezone":    "Europe/Berlin",
		"locale":      "de-de",
		"muteTargets": []any{issueID, prID},
	}})
	if ops := summarize(ops); ops["UpdateItem"] != 1 || ops["GetItem"] != 0 {
		t.Errorf("updatePreferences: ops %v, want one UpdateItem and no GetItem", ops)
	}
	got := data["updatePreferences"].(map[string]any)
	muted := got["mutedTargets"].([]any)
	delete(got, "mutedTargets")
	want = `{"categories":[{"category":"marketing","channels":{"email":false,"inApp":false,"push":true,"sms":false},"critical":false},` +
		`{"category":"security","channels":{"email":true,"inApp":true,"push":true,"sms":true},"critical":true}],` +
		`"channels":{"email":false,"inApp":true,"push":true,"sms":false},"locale":"de-DE","quietHours":{"end":"07:00","start":"22:00"},"timezone":"Europe/Berlin"}`
	if s := prefsJSON(t, got); s != want {
		t.Fatalf("after update\ngot  %s\nwant %s", s, want)
	}
	if len(muted) != 2 {
		t.Fatalf("mutedTargets %v", muted)
	}
	byKind := map[string]map[string]any{}
	for _, m := range muted {
		byKind[m.(map[string]any)["kind"].(string)] = m.(map[string]any)
	}
	if byKind["issue"]["targetId"] != "42" || byKind["issue"]["title"] != "Issue 42" || byKind["pr"]["targetId"] != "9" || byKind["pr"]["title"] != nil {
		t.Fatalf("mutedTargets %v", muted)
	}

	// The same through Viewer.preferences; a muted target's id unmutes it, null clears.
	_, data = g.ops(t, `{ viewer { preferences `+prefsSelection+` } }`, nil)
	again := data["viewer"].(map[string]any)["preferences"].(map[string]any)
	if len(again["mutedTargets"].([]any)) != 2 || again["timezone"] != "Europe/Berlin" {
		t.Fatalf("read back: %v", again)
	}
	_, data = g.ops(t, update, map[string]any{"in": map[string]any{
		"unmuteTargets": []any{byKind["issue"]["id"]}, "quietHours": nil, "timezone": nil,
	}})
	got = data["updatePreferences"].(map[string]any)
	if m := got["mutedTargets"].([]any); len(m) != 1 || m[0].(map[string]any)["kind"] != "pr" {
		t.Fatalf("after unmute: %v", m)
	}
	if got["quietHours"] != nil || got["timezone"] != nil || got["locale"] != "de-DE" || got["channels"].(map[string]any)["email"] != false {
		t.Fatalf("after clearing: %v", got)
	}
	// A literal null clears too; a muted target's id names nothing for node().
	_, data = g.ops(t, `mutation { updatePreferences(input: {locale: null}) { locale } }`, nil)
	if data["updatePreferences"].(map[string]any)["locale"] != nil {
		t.Fatalf("locale: null: %v", data)
	}
	_, data = g.ops(t, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": byKind["pr"]["id"]})
	if data["node"] != nil {
		t.Fatalf("node(muted target id) = %v", data["node"])
	}
}

func TestUpdatePreferencesBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	g := prefsGateway(t)
	_, before := g.ops(t, `{ viewer { preferences `+prefsSelection+` } }`, nil)
	const update = `mutation($in: PreferencesInput!) { updatePreferences(input: $in) { timezone } }`
	for name, in := range map[string]map[string]any{
		"bad timezone":        {"timezone": "Mars/Olympus", "locale": "fr"},
		"quiet hours 25:00":   {"quietHours": map[string]any{"start": "25:00", "end": "07:00"}, "timezone": "UTC"},
		"empty timezone":      {"timezone": ""},
		"notification id":     {"muteTargets": []any{gid("Notification:01HZX8Y3T9M2V6Q4R8S0W1A2B3")}},
		"actor id":            {"muteTargets": []any{(&inbox.Actor{ActorID: "bob", Via: "01HZX8Y3T9M2V6Q4R8S0W1A2B3"}).GlobalID()}},
		"old target id":       {"unmuteTargets": []any{gid("Target:issue\x0042")}},
		"malformed id":        {"muteTargets": []any{"%%%"}},
		"critical off":        {"categories": []any{map[string]any{"category": "security", "channels": map[string]any{"email": false}}}},
		"mute and unmute":     {"muteTargets": []any{(&inbox.Target{Kind: "i", TargetID: "1"}).GlobalID()}, "unmuteTargets": []any{(&inbox.Target{Kind: "i", TargetID: "1"}).GlobalID()}},
		"quiet hours no zone": {"quietHours": map[string]any{"start": "22:00", "end": "07:00"}},
	} {
		g.rec.Reset()
		r := g.request(t, "POST", g.srv.URL+"/graphql", "application/json", gqlVars(update, map[string]any{"in": in}))
		if r.code() != inbox.CodeBadUserInput {
			t.Errorf("%s: code %q (%s)", name, r.code(), r.body)
		}
		for _, op := range g.rec.Ops() {
			if op == "UpdateItem" || op == "PutItem" || op == "TransactWriteItems" {
				// The quiet-hours-without-zone rule is a condition of the one
				// UpdateItem: refused, it wrote nothing (checked below).
				if name != "quiet hours no zone" {
					t.Errorf("%s: sent %s", name, op)
				}
			}
		}
	}
	_, after := g.ops(t, `{ viewer { preferences `+prefsSelection+` } }`, nil)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("refused updates changed the preferences:\n%v\n%v", before, after)
	}
}
