package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

const tenant = "acme"

// newServer starts the gateway as served: its REST backend is the composition's
// (app.Build), so sends go through the send service's real Accept.
func newServer(t *testing.T) *testgw.Server {
	t.Helper()
	return testgw.New(t)
}

func TestOpenAPIDocumentIsServedAndCoversEveryRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a := call(t, s, http.MethodGet, "/v1/openapi.json", "", nil, nil)
	if a.Status != http.StatusOK {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(a.Body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	// Every endpoint of DESIGN.md's table.
	want := map[string][]string{
		"/v1/users/{id}/devices":               {"post"},
		"/v1/users/{id}/devices/{token}":       {"delete"},
		"/v1/webhooks/provider/{name}":         {"post"},
		"/v1/notifications":                    {"get", "post"},
		"/v1/notifications/{id}/status":        {"get"},
		"/v1/broadcasts":                       {"post"},
		"/v1/broadcasts/{id}":                  {"delete", "get"},
		"/v1/segments/{id}/members":            {"put"},
		"/v1/segments/{id}":                    {"get"},
		"/v1/templates/{id}":                   {"get", "put"},
		"/v1/users/{id}":                       {"put"},
		"/v1/users/{id}/preferences":           {"get", "put"},
		"/v1/tenant/settings":                  {"put"},
		"/v1/openapi.json":                     {"get"},
		"/v1/docs":                             {"get"},
		"/v1/docs/redoc.standalone.js":         {"get"},
		"/v1/suppressions":                     {"get"},
		"/v1/suppressions/{channel}/{address}": {"delete"},
	}
	for p, ms := range want {
		for _, m := range ms {
			if _, ok := doc.Paths[p][m]; !ok {
				t.Errorf("document lacks %s %s", m, p)
			}
		}
	}
	if len(doc.Paths) != len(want) {
		t.Errorf("document has %d paths, want %d", len(doc.Paths), len(want))
	}
}

func TestFeedPagesAUsersInbox(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ids := s.Seed(s.Token(tenant, "svc", auth.ScopeSend), "alice", 3)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	a := call(t, s, http.MethodGet, "/v1/notifications?userId=alice&limit=2", svc, nil, nil)
	if a.Status != http.StatusOK {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	var f gen.Feed
	if err := json.Unmarshal(a.Body, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Items) != 2 || f.NextCursor == nil {
		t.Fatalf("first page: %s", a.Body)
	}
	// Newest first: the ids are GraphQL global ids in Seed's result; the feed has ULIDs.
	if f.Items[0].Title == nil || *f.Items[0].Title != "n2" || *f.Items[1].Title != "n1" || f.Items[0].Read {
		t.Fatalf("first page: %s", a.Body)
	}
	if f.Items[0].Actor == nil || f.Items[0].Actor.Id != "octocat" || f.Items[0].Target == nil || f.Items[0].Target.Kind != "repository" {
		t.Fatalf("actor/target: %s", a.Body)
	}
	a = call(t, s, http.MethodGet, "/v1/notifications?userId=alice&limit=2&cursor="+*f.NextCursor, svc, nil, nil)
	var f2 gen.Feed
	if err := json.Unmarshal(a.Body, &f2); err != nil {
		t.Fatal(err)
	}
	if len(f2.Items) != 1 || *f2.Items[0].Title != "n0" || f2.NextCursor != nil {
		t.Fatalf("second page: %s", a.Body)
	}
	if len(ids) != 3 {
		t.Fatal(ids)
	}
	// Another tenant's service sees nothing of acme's alice.
	other := call(t, s, http.MethodGet, "/v1/notifications?userId=alice", s.Token("globex", "svc", rest.ScopeSend), nil, nil)
	if other.Status != http.StatusOK || !strings.Contains(string(other.Body), `"items":[]`) {
		t.Fatalf("other tenant: %d %s", other.Status, other.Body)
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications?userId=alice&limit=101", svc, nil, nil), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications?userId=alice&limit=x", svc, nil, nil), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications", svc, nil, nil), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications?userId=a%23b", svc, nil, nil), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications?userId=alice&cursor=nope", svc, nil, nil), 400, "BAD_USER_INPUT")
}

func TestPreferencesByAdminAndByTheUserItself(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	path := "/v1/users/alice/preferences"
	a := call(t, s, http.MethodGet, path, admin, nil, nil)
	var p gen.Preferences
	if err := json.Unmarshal(a.Body, &p); err != nil || a.Status != 200 {
		t.Fatalf("%d %s %v", a.Status, a.Body, err)
	}
	if !p.Channels.Email || p.QuietHours != nil {
		t.Fatalf("defaults: %s", a.Body)
	}
	a = call(t, s, http.MethodPut, path, admin, nil, map[string]any{
		"channels":    map[string]any{"email": false},
		"categories":  []any{map[string]any{"category": "marketing", "channels": map[string]any{"push": false}}},
		"quietHours":  map[string]any{"start": "22:00", "end": "07:00"},
		"timezone":    "Europe/Berlin",
		"muteTargets": []any{map[string]any{"kind": "issue", "targetId": "42"}},
	})
	if err := json.Unmarshal(a.Body, &p); err != nil || a.Status != 200 {
		t.Fatalf("%d %s %v", a.Status, a.Body, err)
	}
	if p.Channels.Email || p.QuietHours == nil || p.QuietHours.Start != "22:00" || p.Timezone == nil || *p.Timezone != "Europe/Berlin" ||
		len(p.MutedTargets) != 1 || p.MutedTargets[0].TargetId != "42" || len(p.Categories) != 1 || p.Categories[0].Channels.Push {
		t.Fatalf("after update: %s", a.Body)
	}
	// The user's own token reads the same, and null clears quiet hours.
	own := s.Token(tenant, "alice")
	a = call(t, s, http.MethodPut, path, own, nil, `{"quietHours": null}`)
	p = gen.Preferences{}
	if err := json.Unmarshal(a.Body, &p); err != nil || a.Status != 200 || p.QuietHours != nil || p.Timezone == nil {
		t.Fatalf("clear: %d %s %v", a.Status, a.Body, err)
	}
	if a := call(t, s, http.MethodGet, path, own, nil, nil); a.Status != 200 {
		t.Fatalf("own read: %d %s", a.Status, a.Body)
	}
	// A user token for another user, and a send-only service token, are refused.
	expectProblem(t, call(t, s, http.MethodGet, path, s.Token(tenant, "mallory"), nil, nil), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodPut, path, s.Token(tenant, "mallory"), nil, `{}`), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodGet, path, s.Token(tenant, "svc", rest.ScopeSend), nil, nil), 403, "FORBIDDEN")
	// Bad input.
	expectProblem(t, call(t, s, http.MethodPut, path, admin, nil, `{"timezone": "Mars/Olympus"}`), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, path, admin, nil, `{"timezone": ""}`), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, path, admin, nil, `{"quietHours": {"start": "25:00", "end": "07:00"}}`), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, path, admin, nil, `{"channels": {"email": "no"}}`), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/users/a%23b/preferences", admin, nil, nil), 400, "BAD_USER_INPUT")
}

// sendBody is a valid send to one user.
func sendBody() map[string]any {
	return map[string]any{"recipientUserId": "alice", "type": "otp", "title": "Your code", "body": "123456", "priority": "transactional"}
}

func TestSendAcceptReplayAndConflict(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	key := map[string]string{"Idempotency-Key": "order-1"}
	a := call(t, s, http.MethodPost, "/v1/notifications", svc, key, sendBody())
	if a.Status != http.StatusAccepted || a.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v %s", a.Status, a.Header, a.Body)
	}
	var first gen.Accepted
	if err := json.Unmarshal(a.Body, &first); err != nil || first.NotificationId == nil {
		t.Fatalf("%s %v", a.Body, err)
	}
	a = call(t, s, http.MethodPost, "/v1/notifications", svc, key, sendBody())
	if a.Status != http.StatusAccepted || a.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %s", a.Status, a.Header, a.Body)
	}
	var again gen.Accepted
	if err := json.Unmarshal(a.Body, &again); err != nil || again.RequestId != first.RequestId || *again.NotificationId != *first.NotificationId {
		t.Fatalf("replay body %s, first %+v", a.Body, first)
	}
	other := sendBody()
	other["body"] = "654321"
	expectProblem(t, call(t, s, http.MethodPost, "/v1/notifications", svc, key, other), 409, "CONFLICT")
	// The key is the tenant's: another tenant's same key is a new request.
	if a := call(t, s, http.MethodPost, "/v1/notifications", s.Token("globex", "svc", rest.ScopeSend), key, other); a.Status != 202 ||
		a.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("other tenant: %d %s", a.Status, a.Body)
	}
	// acme's alice has the first send only (the conflict wrote nothing), globex's the other.
	if items := waitFeed(t, s, svc, "alice", 1); items[0].Id != *first.NotificationId || deref(items[0].Body) != "123456" {
		t.Fatalf("acme's alice: %s", mustJSON(t, items))
	}
	if items := waitFeed(t, s, s.Token("globex", "svc", rest.ScopeSend), "alice", 1); deref(items[0].Body) != "654321" {
		t.Fatalf("globex's alice: %s", mustJSON(t, items))
	}
}

func TestSendBadInputIsRejectedAndNothingIsWritten(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	key := map[string]string{"Idempotency-Key": "k1"}
	with := func(k string, v any) map[string]any {
		m := sendBody()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	many := make([]string, rest.MaxRecipients+1)
	for i := range many {
		many[i] = fmt.Sprintf("u%d", i)
	}
	now := time.Now()
	for _, c := range []struct {
		name   string
		header map[string]string
		body   any
		status int
		code   string
		detail string
	}{
		{"missing Idempotency-Key", nil, sendBody(), 400, "BAD_USER_INPUT", "Idempotency-Key"},
		{"Idempotency-Key with #", map[string]string{"Idempotency-Key": "a#REQ#b"}, sendBody(), 400, "BAD_USER_INPUT", "Idempotency-Key"},
		{"over 1,000 recipients", key, with("recipientUserId", nil), 0, "", ""}, // replaced below
		{"recipient id with #", key, with("recipientUserId", "alice#META"), 400, "BAD_USER_INPUT", "'#'"},
		{"recipient id with a control character", key, with("recipientUserId", "al\u0001ice"), 400, "BAD_USER_INPUT", "control"},
		{"type with #", key, with("type", "a#b"), 400, "BAD_USER_INPUT", "type"},
		{"segment and recipient", key, with("segment", "vip"), 400, "BAD_USER_INPUT", "exactly one"},
		{"no recipient", key, with("recipientUserId", nil), 400, "BAD_USER_INPUT", "exactly one"},
		{"sendAt in the past", key, with("sendAt", now.Add(-time.Minute).Format(time.RFC3339)), 400, "BAD_USER_INPUT", "past"},
		{"sendAt over a year ahead", key, with("sendAt", now.Add(367*24*time.Hour).Format(time.RFC3339)), 400, "BAD_USER_INPUT", "year"},
		{"sendAt not a date-time", key, with("sendAt", "tomorrow"), 400, "BAD_USER_INPUT", "RFC 3339"},
		{"unknown priority", key, with("priority", "urgent"), 400, "BAD_USER_INPUT", "priority"},
		{"unknown channel", key, with("channelsHint", []string{"fax"}), 400, "BAD_USER_INPUT", "channel"},
		{"unknown member", key, with("recipient", "alice"), 400, "BAD_USER_INPUT", `unknown field "recipient"`},
		{"wrong type", key, with("recipientUserId", 7), 400, "BAD_USER_INPUT", "recipientUserId must be a string"},
		{"not JSON", key, "{", 400, "BAD_USER_INPUT", "not valid JSON"},
		{"two JSON values", key, `{"recipientUserId":"a","type":"t"} {}`, 400, "BAD_USER_INPUT", "one JSON value"},
		{"body over the limit", key, with("body", strings.Repeat("x", rest.MaxSendBytes)), 413, "PAYLOAD_TOO_LARGE", "limit"},
		{"data over 16 KiB", key, with("data", map[string]any{"x": strings.Repeat("x", inbox.MaxPayloadBytes)}), 400, "BAD_USER_INPUT", "data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := c.body
			status, code, detail := c.status, c.code, c.detail
			if c.name == "over 1,000 recipients" {
				body, status, code, detail = with("recipients", many), 400, "BAD_USER_INPUT", "at most 1000"
				delete(body.(map[string]any), "recipientUserId")
			}
			p := expectProblem(t, call(t, s, http.MethodPost, "/v1/notifications", svc, c.header, body), status, code)
			if p.Detail == nil || !strings.Contains(*p.Detail, detail) {
				t.Fatalf("detail %v does not say %q", p.Detail, detail)
			}
		})
	}
	// A chunked body over the limit (no Content-Length) gets the same 413.
	req, _ := http.NewRequest(http.MethodPost, s.HTTP.URL+"/v1/notifications", &endless{})
	req.Header.Set("Authorization", "Bearer "+svc)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d", resp.StatusCode)
	}
	// Nothing was written for the rejected requests.
	if requestWritten(t, s, tenant, "k1") || requestWritten(t, s, tenant, "k2") {
		t.Fatal("a rejected send was written")
	}
	if items := feed(t, s, svc, "alice"); len(items) != 0 {
		t.Fatalf("alice's feed after rejected sends: %s", mustJSON(t, items))
	}
}

// endless is a request body that never ends (a JSON string that goes on).
type endless struct{ started bool }

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	if !e.started {
		e.started, n = true, copy(p, `{"body":"`)
	}
	for ; n < len(p); n++ {
		p[n] = 'x'
	}
	return n, nil
}

func TestRoutesMethodsTokensAndScopes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	key := map[string]string{"Idempotency-Key": "k"}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/nope", svc, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/", "", nil, nil), 404, "NOT_FOUND")
	a := call(t, s, http.MethodPatch, "/v1/notifications", svc, nil, nil)
	expectProblem(t, a, 405, "BAD_REQUEST")
	if got := a.Header.Get("Allow"); got != "GET, POST" {
		t.Fatalf("Allow %q", got)
	}
	a = call(t, s, http.MethodPost, "/v1/users/alice/preferences", admin, nil, `{}`)
	expectProblem(t, a, 405, "BAD_REQUEST")
	if got := a.Header.Get("Allow"); got != "GET, PUT" {
		t.Fatalf("Allow %q", got)
	}
	a = expectAnswer(t, call(t, s, http.MethodPost, "/v1/notifications", "", key, sendBody()), 401, "UNAUTHENTICATED")
	// RFC 6750 section 3.1: no token, no error code; a bad token, invalid_token.
	if got := a.Header.Get("WWW-Authenticate"); got != "Bearer" {
		t.Fatalf("WWW-Authenticate without a token %q, want Bearer", got)
	}
	a = expectAnswer(t, call(t, s, http.MethodPost, "/v1/notifications", "not.a.jwt", key, sendBody()), 401, "UNAUTHENTICATED")
	if got := a.Header.Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
		t.Fatalf("WWW-Authenticate with a bad token %q", got)
	}
	expired, err := s.Verifier.Sign(auth.Claims{TenantID: tenant, UserID: "svc", Scopes: []string{rest.ScopeSend}, ExpiresAt: time.Now().Add(-time.Hour)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications?userId=a", expired, nil, nil), 401, "UNAUTHENTICATED")
	// Scopes: admin cannot send, send cannot administer, a user token reaches neither.
	expectProblem(t, call(t, s, http.MethodPost, "/v1/notifications", admin, key, sendBody()), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications?userId=alice", s.Token(tenant, "alice"), nil, nil), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/tenant/settings", svc, nil, `{}`), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/users/alice", s.Token(tenant, "alice"), nil, `{}`), 403, "FORBIDDEN")
	// The gateway's backend (rest.Gateway, composed with the send service as app.Build
	// composes it): every operation answers for real, sends included.
	if a := call(t, s, http.MethodPost, "/v1/notifications", svc, key, sendBody()); a.Status != http.StatusAccepted {
		t.Fatalf("send through the gateway's backend: status %d, want 202: %s", a.Status, a.Body)
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications/01ARZ3NDEKTSV4RRFFQ69G5FAV/status", svc, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodPost, "/v1/broadcasts", svc, key, map[string]any{"segment": "vip", "type": "promo"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/broadcasts/b1", svc, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodDelete, "/v1/broadcasts/b1", svc, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/segments/vip", admin, nil, nil), 404, "NOT_FOUND")
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPut, "/v1/segments/vip/members", map[string]any{"add": []string{"alice"}}},
		{http.MethodGet, "/v1/segments/vip", nil},
		{http.MethodPut, "/v1/templates/welcome", map[string]any{"locale": "en", "title": "Hi {{ name }}"}},
		{http.MethodGet, "/v1/templates/welcome?locale=en&version=1", nil},
		{http.MethodPut, "/v1/users/alice", map[string]any{"email": "a@example.com", "timezone": "Europe/Berlin"}},
		{http.MethodPut, "/v1/tenant/settings", map[string]any{"criticalCategories": []string{"security"}}},
	} {
		if a := call(t, s, c.method, c.path, admin, nil, c.body); a.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", c.method, c.path, a.Status, a.Body)
		}
	}
	a = call(t, s, http.MethodPost, "/v1/broadcasts", svc, key, map[string]any{"segment": "vip", "type": "promo"})
	if a.Status != http.StatusAccepted {
		t.Fatalf("broadcast to vip: %d %s", a.Status, a.Body)
	}
	// Bad input on the admin operations is answered before the backend.
	tooMany := make([]string, rest.MaxSegmentChange+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("u%d", i)
	}
	expectProblem(t, call(t, s, http.MethodPut, "/v1/segments/vip/members", admin, nil, map[string]any{"add": tooMany}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/segments/vip/members", admin, nil, map[string]any{"add": []string{"a#b"}}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/segments/v%23ip/members", admin, nil, map[string]any{"add": []string{"a"}}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"phone": "12345"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"email": "nope"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/templates/welcome", admin, nil, map[string]any{"locale": "not a locale"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{"webhook": map[string]any{"url": "ftp://x", "secret": strings.Repeat("s", 32)}}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPost, "/v1/broadcasts", svc, key, map[string]any{"type": "promo"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/users/alice", admin, map[string]string{"Content-Type": "text/plain"}, `{}`), 400, "BAD_USER_INPUT")
}

// expectAnswer is expectProblem returning the answer (for its headers).
func expectAnswer(t *testing.T, a answer, status int, code string) answer {
	t.Helper()
	expectProblem(t, a, status, code)
	return a
}

func TestCORSPreflightForTheServiceAPI(t *testing.T) {
	t.Parallel()
	s := testgw.NewWith(t, testgw.Options{Handler: func(o *httpapi.Options) { o.AllowedOrigins = []string{"app.example.com"} }})
	req, _ := http.NewRequest(http.MethodOptions, s.HTTP.URL+"/v1/users/alice/preferences", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", http.MethodPut)
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), http.MethodPut) {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}
