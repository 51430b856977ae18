package rest_test

import (
	"net/http"
	"testing"

	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// SLACK through the APIs' named fields: the profile's slackUserId (checked), the
// template's slack part (stored, read back, shape-checked), the preferences' slack
// switch in REST and GraphQL, the tenant's default switch, and the channels hint.
func TestSlackThroughTheAPIs(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	p := decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil,
		map[string]any{"email": "alice@example.com", "slackUserId": "U024BE7LH"}), 200)
	if p.SlackUserId == nil || *p.SlackUserId != "U024BE7LH" {
		t.Fatalf("profile: %+v", p)
	}
	for _, bad := range []string{"alice", "u024be7lh", "C024BE7LH"} {
		if a := call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"slackUserId": bad}); a.Status != 400 {
			t.Errorf("slackUserId %q: %d %s", bad, a.Status, a.Body)
		}
	}

	decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/ping", admin, nil, map[string]any{
		"locale": "en", "title": "Ping {{ n }}", "slack": map[string]any{"text": "*Ping* {{ n }}"}}), 200)
	tp := decode[gen.Template](t, call(t, s, http.MethodGet, "/v1/templates/ping", admin, nil, nil), 200)
	if tp.Slack == nil || tp.Slack.Text == nil || *tp.Slack.Text != "*Ping* {{ n }}" || tp.Email != nil {
		t.Fatalf("template: %+v", tp)
	}
	if a := call(t, s, http.MethodPut, "/v1/templates/ping", admin, nil, map[string]any{
		"locale": "en", "title": "t", "slack": map[string]any{"text": "  "}}); a.Status != 400 {
		t.Errorf("a blank slack part: %d %s", a.Status, a.Body)
	}

	prefs := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/alice/preferences", admin, nil, nil), 200)
	if !prefs.Channels.Slack {
		t.Fatalf("slack is on by default: %+v", prefs.Channels)
	}
	prefs = decode[gen.Preferences](t, call(t, s, http.MethodPut, "/v1/users/alice/preferences", admin, nil,
		map[string]any{"channels": map[string]any{"slack": false}}), 200)
	if prefs.Channels.Slack || !prefs.Channels.Email {
		t.Fatalf("slack off: %+v", prefs.Channels)
	}
	var got struct {
		Viewer struct {
			Preferences struct {
				Channels struct{ Slack, Email bool }
			}
		}
	}
	s.MustData(s.Token(tenant, "alice"), `{ viewer { preferences { channels { slack email } } } }`, nil, &got)
	if got.Viewer.Preferences.Channels.Slack || !got.Viewer.Preferences.Channels.Email {
		t.Fatalf("GraphQL channels: %+v", got)
	}
	s.MustData(s.Token(tenant, "alice"), `mutation { updatePreferences(input: {channels: {slack: true}}) { channels { slack } } }`, nil, nil)
	s.MustData(s.Token(tenant, "alice"), `{ viewer { preferences { channels { slack email } } } }`, nil, &got)
	if !got.Viewer.Preferences.Channels.Slack {
		t.Fatalf("GraphQL slack back on: %+v", got)
	}

	set := decode[gen.TenantSettings](t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{
		"defaultPreferences": map[string]any{"channels": map[string]any{"slack": false}}}), 200)
	if set.DefaultPreferences == nil || set.DefaultPreferences.Channels == nil || set.DefaultPreferences.Channels.Slack == nil ||
		*set.DefaultPreferences.Channels.Slack {
		t.Fatalf("tenant settings: %+v", set.DefaultPreferences)
	}
	if prefs := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/bob/preferences", admin, nil, nil), 200); prefs.Channels.Slack {
		t.Fatalf("the tenant's default is off: %+v", prefs.Channels)
	}

	in := s.SendInput("hinted", "alice")
	in["channels"] = []string{"SLACK"}
	if res := s.Send(s.ServiceToken(tenant, "svc"), in); res.Accepted != 0 {
		t.Fatalf("a SLACK-only hint leaves in-app out: %+v", res)
	}
}
