package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// encoding/json matches a member to a field ignoring case and keeps the last of a member
// given twice, and a nullable member decodes its object itself, out of
// DisallowUnknownFields' reach: {"EMAIL": ...} set the user's email, {"email": a,
// "email": b} stored b while a proxy or a validator reading the first saw a, {"channels":
// {"Email": false}} turned email off, and quietHours took members the document does not
// have. Every body must name its members exactly as the document does, each once: each
// variant, at the top, nested, in a list and in a nullable, on several operations, is
// refused BAD_USER_INPUT as problem+json naming the member, and nothing is written.
func TestBodyMembersAreNamedExactlyOnce(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	ctx := context.Background()
	alice := inbox.Viewer{TenantID: tenant, UserID: "alice"}
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"email": "ada@example.com"}), 200)
	decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/w", admin, nil, map[string]any{"locale": "en", "title": "t1"}), 200)
	for _, tc := range []struct {
		path string
		body string
		want string // in the problem's detail
	}{
		{"/v1/users/alice", `{"EMAIL": "eve@example.com"}`, `"EMAIL"`},
		{"/v1/users/alice", `{"Email": "eve@example.com"}`, `"Email"`},
		{"/v1/users/alice", `{"email": "eve@example.com", "Locale": "de"}`, `"Locale"`},
		{"/v1/users/alice", `{"email": "ada@example.com", "email": "eve@example.com"}`, `"email" is given twice`},
		{"/v1/users/alice", `{"phone": "+4915112345678", "email": "eve@example.com", "phone": "+4915112345679"}`, `"phone" is given twice`},
		{"/v1/users/alice/preferences", `{"channels": {"Email": false}}`, `"channels.Email"`},
		{"/v1/users/alice/preferences", `{"channels": {"email": true, "email": false}}`, `"channels.email" is given twice`},
		{"/v1/users/alice/preferences", `{"categories": [{"category": "news", "channels": {"inApp": true}}, {"category": "x", "Channels": {}}]}`, `"categories[1].Channels"`},
		{"/v1/users/alice/preferences", `{"timezone": "UTC", "quietHours": {"start": "22:00", "end": "07:00", "days": "weekends"}}`, `"quietHours.days"`},
		{"/v1/users/alice/preferences", `{"timezone": "UTC", "quietHours": {"start": "22:00", "End": "07:00"}}`, `"quietHours.End"`},
		{"/v1/users/alice/preferences", `{"locale": "en", "locale": "de"}`, `"locale" is given twice`},
		{"/v1/templates/w", `{"locale": "en", "Title": "t2"}`, `"Title"`},
		{"/v1/templates/w", `{"locale": "en", "title": "t2", "sms": {"TEXT": "hi"}}`, `"sms.TEXT"`},
		{"/v1/templates/w", `{"locale": "en", "title": "t2", "title": "t3"}`, `"title" is given twice`},
	} {
		p := expectProblem(t, call(t, s, http.MethodPut, tc.path, admin, nil, tc.body), 400, inbox.CodeBadUserInput)
		if detail := deref(p.Detail); !strings.Contains(detail, tc.want) {
			t.Errorf("PUT %s %s: detail %q, want %s", tc.path, tc.body, detail, tc.want)
		}
	}
	if p, err := s.Store.UserProfile(ctx, alice); err != nil || p.Address("email") != "ada@example.com" || p.Address("phone") != "" || p.Locale != "" {
		t.Errorf("profile after the refused bodies: %+v %v", p, err)
	}
	prefs := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/alice/preferences", admin, nil, nil), 200)
	if !prefs.Channels.Email || prefs.QuietHours != nil || prefs.Locale != nil || len(prefs.Categories) != 0 {
		t.Errorf("preferences after the refused bodies: %+v", prefs)
	}
	if tpl := decode[gen.Template](t, call(t, s, http.MethodGet, "/v1/templates/w", admin, nil, nil), 200); tpl.Version != 1 || tpl.Title == nil || *tpl.Title != "t1" {
		t.Errorf("template after the refused bodies: %+v", tpl)
	}
	// Exact names still pass, nulls and empty objects included.
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, `{"email": "ada@example.com", "phone": null, "locale": "de-DE"}`), 200)
	decode[gen.Preferences](t, call(t, s, http.MethodPut, "/v1/users/alice/preferences", admin, nil,
		`{"channels": {"email": false, "sms": null}, "categories": [{"category": "news", "channels": {}}], "timezone": "UTC", "quietHours": {"start": "22:00", "end": "07:00"}}`), 200)
	decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/w", admin, nil, `{"locale": "en", "title": "t2", "sms": {"text": "hi"}, "push": null}`), 200)
}
