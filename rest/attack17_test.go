package rest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// TestAttackHostileCategoryNames: a category is data inside an attribute name of the
// preferences item ("cat#<category>#<channel>", written through the expression
// builder), so names that read as paths, placeholders, list indexes or other attributes
// ("pk", "devices", "a.b", "[0]", "#0", ":0", "$n"), long and non-ASCII ones, through REST
// and GraphQL, each write their own switches and nothing else: read back whole, the key
// and the other categories untouched, never a 5xx. Names inbox.CheckID refuses are 400
// BAD_USER_INPUT. (Held on the first attack, kept as a regression test.)
func TestAttackHostileCategoryNames(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	accepted := []string{"pk", "sk", "devices", "entityType", "cat", "inApp", "mutedTargets", "quietHours", ":0", "$n", "$v", "a.b", ".", "..",
		"[0]", "a[0].b", "x]", "[", "a[b]", " ", "\u200b", "ü.ñ", strings.Repeat("é", 128), strings.Repeat("\U0001F600", 64), strings.Repeat("x", 256)}
	refused := []string{"#0", "a#b", "#", "", "a\x00", "a\nb", strings.Repeat("x", 257)}
	sw := func(i int) map[string]any {
		return map[string]any{"inApp": i%2 == 0, "email": i%3 == 0, "push": i%5 == 0, "sms": true}
	}
	for i, c := range accepted {
		body := map[string]any{"categories": []any{map[string]any{"category": c, "channels": sw(i)}}}
		if i%2 == 0 {
			decode[gen.Preferences](t, call(t, s, http.MethodPut, "/v1/users/alice/preferences", admin, nil, body), 200)
			continue
		}
		tok := s.Token(tenant, "alice")
		if r := s.Post(tok, `mutation($in: PreferencesInput!) { updatePreferences(input: $in) { locale } }`, map[string]any{"in": body}); len(r.Errors) > 0 {
			t.Fatalf("%q through GraphQL: %+v", c, r.Errors)
		}
	}
	for _, c := range refused {
		body := map[string]any{"categories": []any{map[string]any{"category": c, "channels": sw(0)}}}
		expectProblem(t, call(t, s, http.MethodPut, "/v1/users/alice/preferences", admin, nil, body), 400, "BAD_USER_INPUT")
		if codes := s.Post(s.Token(tenant, "alice"), `mutation($in: PreferencesInput!) { updatePreferences(input: $in) { locale } }`,
			map[string]any{"in": body}).Codes(); len(codes) != 1 || codes[0] != "BAD_USER_INPUT" {
			t.Fatalf("%q through GraphQL: codes %v", c, codes)
		}
	}
	p := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/alice/preferences", admin, nil, nil), 200)
	got := map[string]gen.ChannelSwitches{}
	for _, c := range p.Categories {
		got[c.Category] = c.Channels
	}
	if len(got) != len(accepted) || !p.Channels.InApp || !p.Channels.Email || !p.Channels.Push || !p.Channels.Sms {
		t.Fatalf("%d categories read back, want %d; channels %+v", len(got), len(accepted), p.Channels)
	}
	for i, c := range accepted {
		w := sw(i)
		if g, ok := got[c]; !ok || g.InApp != w["inApp"] || g.Email != w["email"] || g.Push != w["push"] || !g.Sms {
			t.Errorf("%q read back as %+v (present %v), want %v", c, g, ok, w)
		}
	}
	// The most one update takes: 50 categories of 256 bytes that read as list paths, every switch.
	var cats []any
	for i := range 50 {
		cats = append(cats, map[string]any{"category": fmt.Sprintf("%03d", i) + strings.Repeat("[0].", 63), "channels": sw(i)})
	}
	p = decode[gen.Preferences](t, call(t, s, http.MethodPut, "/v1/users/bob/preferences", admin, nil, map[string]any{"categories": cats}), 200)
	if len(p.Categories) != 50 {
		t.Fatalf("%d categories after the update of 50", len(p.Categories))
	}
}
