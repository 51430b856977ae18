package rest_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/service"
)

// The REST suite over the gateway's real backend (rest.Gateway, as app.Build
// composes it) and, where broadcasts run, its real scheduler; every answer is validated
// against the document by call.

// newWired starts the gateway as served, with its scheduler running.
func newWired(t *testing.T) *testgw.Server {
	t.Helper()
	return testgw.NewWith(t, testgw.Options{Scheduler: true})
}

// decode decodes a's JSON body into a T, failing unless a has status.
func decode[T any](t *testing.T, a answer, status int) T {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status %d, want %d: %s", a.Status, status, a.Body)
	}
	var v T
	if err := json.Unmarshal(a.Body, &v); err != nil {
		t.Fatalf("%s: %v", a.Body, err)
	}
	return v
}

func TestTemplatesVersionsLocalesAndParseErrors(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	put := func(body map[string]any) answer {
		return call(t, s, http.MethodPut, "/v1/templates/welcome", admin, nil, body)
	}
	get := func(query string) gen.Template {
		t.Helper()
		return decode[gen.Template](t, call(t, s, http.MethodGet, "/v1/templates/welcome"+query, admin, nil, nil), 200)
	}
	for i, body := range []map[string]any{
		{"locale": "en", "title": "Hi {{ name }}", "body": "Welcome"},
		{"locale": "de", "title": "Hallo {{ name }}"},
		{"locale": "en", "title": "Hello {{ name }}", "email": map[string]any{"subject": "Hello", "html": "<p>{{ name }}</p>", "text": "{{ name }}"}},
	} {
		v := decode[gen.TemplateVersion](t, put(body), 200)
		if v.Id != "welcome" || v.Version != int64(i+1) {
			t.Fatalf("put %d: %+v", i, v)
		}
	}
	latest := get("?locale=en")
	if latest.Version != 3 || latest.Locale != "en" || *latest.Title != "Hello {{ name }}" || latest.Email == nil ||
		*latest.Email.Html != "<p>{{ name }}</p>" || latest.Body != nil || latest.DefaultLocale == nil || *latest.DefaultLocale != "en" {
		t.Fatalf("latest en: %+v", latest)
	}
	// A pinned version reads the newest content of the locale at or below it.
	if v2 := get("?locale=en&version=2"); v2.Version != 1 || *v2.Title != "Hi {{ name }}" || *v2.Body != "Welcome" || v2.Email != nil {
		t.Fatalf("en at version 2: %+v", v2)
	}
	// Locale fallback: the base language, then the default locale.
	if de := get("?locale=de-AT"); de.Locale != "de" || de.Version != 2 || *de.Title != "Hallo {{ name }}" {
		t.Fatalf("de-AT: %+v", de)
	}
	if fr := get("?locale=fr"); fr.Locale != "en" || fr.Version != 3 {
		t.Fatalf("fr: %+v", fr)
	}
	if def := get(""); def.Locale != "en" || def.Version != 3 {
		t.Fatalf("default: %+v", def)
	}
	// A part that does not parse is refused, and nothing is written.
	p := expectProblem(t, put(map[string]any{"locale": "en", "title": "Hi {{ name | }}"}), 400, "BAD_USER_INPUT")
	if p.Detail == nil || !strings.Contains(*p.Detail, "title") {
		t.Fatalf("parse error detail: %v", p.Detail)
	}
	expectProblem(t, put(map[string]any{"locale": "en", "title": "ok", "sms": map[string]any{"text": "{% if %}"}}), 400, "BAD_USER_INPUT")
	if after := get("?locale=en"); after.Version != 3 {
		t.Fatalf("a refused PUT wrote version %d", after.Version)
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/templates/nope", admin, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/templates/welcome?version=9", admin, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/templates/welcome?version=0", admin, nil, nil), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/templates/welcome", s.Token(tenant, "svc", rest.ScopeSend), nil, nil), 403, "FORBIDDEN")
	// Another tenant has no such template.
	expectProblem(t, call(t, s, http.MethodGet, "/v1/templates/welcome", s.Token("globex", "svc", rest.ScopeAdmin), nil, nil), 404, "NOT_FOUND")
}

func TestSegmentsAddRemoveCountAndPaging(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	members := make([]string, 250)
	for i := range members {
		members[i] = fmt.Sprintf("u%03d", i)
	}
	upd := func(body map[string]any) gen.SegmentMembersChanged {
		t.Helper()
		return decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/followers:octocat/members", admin, nil, body), 200)
	}
	if c := upd(map[string]any{"add": members}); c.Id != "followers:octocat" || c.Added != 250 || c.Removed != 0 || c.Count != 250 {
		t.Fatalf("add: %+v", c)
	}
	// Repeats and members already there count once; a removal of a non-member counts nothing.
	if c := upd(map[string]any{"add": []string{"u000", "u250", "u250"}, "remove": []string{"u001", "nobody"}}); c.Added != 1 || c.Removed != 1 || c.Count != 250 {
		t.Fatalf("change: %+v", c)
	}
	want := append(slices.Clone(members[:1]), members[2:]...)
	want = append(want, "u250")
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := "?limit=100"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		seg := decode[gen.Segment](t, call(t, s, http.MethodGet, "/v1/segments/followers:octocat"+q, admin, nil, nil), 200)
		if seg.Count != 250 || seg.Id != "followers:octocat" || len(seg.Members) > 100 {
			t.Fatalf("page %d: count %d, %d members", pages, seg.Count, len(seg.Members))
		}
		got = append(got, seg.Members...)
		if seg.NextCursor == nil {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = *seg.NextCursor
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("paged %d members, want %d (or different ids)", len(got), len(want))
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/segments/nobody", admin, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/segments/followers:octocat?cursor=nope", admin, nil, nil), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/segments/followers:octocat?limit=1001", admin, nil, nil), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/segments/followers:octocat/members", admin, nil, map[string]any{"add": []string{"a"}, "remove": []string{"a"}}), 400, "BAD_USER_INPUT")
	// Emptied, the segment is unknown again.
	for _, chunk := range [][]string{want} {
		if c := upd(map[string]any{"remove": chunk}); c.Removed != 250 || c.Count != 0 {
			t.Fatalf("remove all: %+v", c)
		}
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/segments/followers:octocat", admin, nil, nil), 404, "NOT_FOUND")
}

// pollBroadcast polls GET /v1/broadcasts/{id} until its status is want.
func pollBroadcast(t *testing.T, s *testgw.Server, token, id, want string, timeout time.Duration) gen.Broadcast {
	t.Helper()
	var bc gen.Broadcast
	testgw.WaitFor(t, timeout, "broadcast "+id+" "+want, func() bool {
		bc = decode[gen.Broadcast](t, call(t, s, http.MethodGet, "/v1/broadcasts/"+id, token, nil, nil), 200)
		return string(bc.Status) == want
	})
	return bc
}

// feedTitles reads the titles of user's feed through the service API.
func feedTitles(t *testing.T, s *testgw.Server, token, user string) []string {
	t.Helper()
	f := decode[gen.Feed](t, call(t, s, http.MethodGet, "/v1/notifications?userId="+user, token, nil, nil), 200)
	var out []string
	for _, n := range f.Items {
		if n.Title != nil {
			out = append(out, *n.Title)
		}
	}
	return out
}

func TestBroadcastToASegmentReachesDoneWithExactProgress(t *testing.T) {
	// Not parallel: a broadcast writes a transaction per recipient, and beside the
	// package's other broadcasts it saturated the shared DynamoDB Local (leases lost, every
	// broadcast past its wait in a full run). 30 members: the REST mapping is what this
	// tests; service's broadcast tests walk pages, shards and crashes.
	s := newWired(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	members := make([]string, 30)
	for i := range members {
		members[i] = fmt.Sprintf("m%03d", i)
	}
	decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/all/members", admin, nil, map[string]any{"add": members}), 200)
	key := map[string]string{"Idempotency-Key": "spring-sale"}
	body := map[string]any{"segment": "all", "type": "promo", "category": "marketing", "title": "Spring sale", "body": "20% off", "data": map[string]any{"code": "SPRING"}}
	a := call(t, s, http.MethodPost, "/v1/broadcasts", svc, key, body)
	acc := decode[gen.BroadcastAccepted](t, a, 202)
	if acc.BroadcastId != service.BroadcastID("spring-sale") || a.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("start: %s %v", a.Body, a.Header)
	}
	// A replay answers the same broadcast; the same key with another body is a conflict.
	a = call(t, s, http.MethodPost, "/v1/broadcasts", svc, key, body)
	if again := decode[gen.BroadcastAccepted](t, a, 202); again.BroadcastId != acc.BroadcastId || a.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %s %v", a.Body, a.Header)
	}
	other := map[string]any{"segment": "all", "type": "promo", "title": "Summer sale"}
	expectProblem(t, call(t, s, http.MethodPost, "/v1/broadcasts", svc, key, other), 409, "CONFLICT")

	bc := pollBroadcast(t, s, svc, acc.BroadcastId, "done", 90*time.Second)
	if bc.Id != acc.BroadcastId || bc.Recipients != 30 || bc.Written != 30 || bc.Skipped != 0 || bc.Failed != 0 ||
		bc.StartedAt == nil || bc.FinishedAt == nil || bc.FinishedAt.Before(*bc.StartedAt) {
		t.Fatalf("done: %+v", bc)
	}
	// Every member has exactly one notification.
	for _, m := range []string{"m000", "m015", "m029"} {
		if got := feedTitles(t, s, svc, m); !slices.Equal(got, []string{"Spring sale"}) {
			t.Fatalf("%s's feed: %v", m, got)
		}
	}
	// Cancelling a finished broadcast changes nothing.
	if c := decode[gen.Broadcast](t, call(t, s, http.MethodDelete, "/v1/broadcasts/"+acc.BroadcastId, svc, nil, nil), 200); c.Status != "done" || c.Written != 30 {
		t.Fatalf("cancel after done: %+v", c)
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/broadcasts/bcnope", svc, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodDelete, "/v1/broadcasts/bcnope", svc, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/broadcasts/"+acc.BroadcastId, s.Token("globex", "svc", rest.ScopeSend), nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/broadcasts/"+acc.BroadcastId, admin, nil, nil), 403, "FORBIDDEN")
	// An unknown segment is bad input, and nothing is written under its key.
	p := expectProblem(t, call(t, s, http.MethodPost, "/v1/broadcasts", svc, map[string]string{"Idempotency-Key": "ghost"},
		map[string]any{"segment": "ghosts", "type": "promo", "title": "x"}), 400, "BAD_USER_INPUT")
	if p.Detail == nil || !strings.Contains(*p.Detail, "unknown segment") {
		t.Fatalf("unknown segment detail: %v", p.Detail)
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/broadcasts/"+service.BroadcastID("ghost"), svc, nil, nil), 404, "NOT_FOUND")
}

func TestBroadcastWithTemplateSendAtAndCancel(t *testing.T) {
	// Not parallel: a broadcast writes hundreds of recipients' transactions, and
	// beside the package's other broadcasts it saturated the shared DynamoDB Local
	// (leases lost, every broadcast past its wait in a full run).
	s := newWired(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/promo", admin, nil,
		map[string]any{"locale": "en", "title": "Hi {{ who }}", "body": "Code {{ code }}", "email": map[string]any{"subject": "Hi", "html": "<b>{{ code }}</b>", "text": "{{ code }}"}}), 200)
	start := func(key string, body map[string]any) answer {
		return call(t, s, http.MethodPost, "/v1/broadcasts", svc, map[string]string{"Idempotency-Key": key}, body)
	}
	// A template that is unknown, a variable the data lacks, or a template beside a
	// title: refused before anything is written.
	for key, body := range map[string]map[string]any{
		"t-unknown":   {"recipients": []string{"a"}, "type": "promo", "template": "nope"},
		"t-undefined": {"recipients": []string{"a"}, "type": "promo", "template": "promo", "data": map[string]any{"who": "you"}},
		"t-both":      {"recipients": []string{"a"}, "type": "promo", "template": "promo", "title": "x", "data": map[string]any{"who": "you", "code": 1}},
	} {
		expectProblem(t, start(key, body), 400, "BAD_USER_INPUT")
		expectProblem(t, call(t, s, http.MethodGet, "/v1/broadcasts/"+service.BroadcastID(key), svc, nil, nil), 404, "NOT_FOUND")
	}
	// ann has an address, bob none: the template's email part reaches ann's status only.
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/ann", admin, nil, map[string]any{"email": "ann@example.com"}), 200)
	// Scheduled: queued until sendAt, then run; the template rendered with the data.
	sendAt := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	body := map[string]any{"recipients": []string{"ann", "bob", "cy"}, "type": "promo", "template": "promo",
		"data": map[string]any{"who": "you", "code": 42}, "sendAt": sendAt.Format(time.RFC3339Nano)}
	acc := decode[gen.BroadcastAccepted](t, start("scheduled", body), 202)
	if bc := decode[gen.Broadcast](t, call(t, s, http.MethodGet, "/v1/broadcasts/"+acc.BroadcastId, svc, nil, nil), 200); bc.Status != "queued" || bc.Recipients != 3 || bc.Written != 0 || bc.StartedAt != nil {
		t.Fatalf("before sendAt: %+v", bc)
	}
	// A new template version does not make the replay another request.
	decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/promo", admin, nil, map[string]any{"locale": "en", "title": "Yo {{ who }}"}), 200)
	if a := start("scheduled", body); a.Status != 202 || a.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after a new template version: %d %s", a.Status, a.Body)
	}
	bc := pollBroadcast(t, s, svc, acc.BroadcastId, "done", 60*time.Second)
	// Its sendAt has passed: a replay still answers the first 202, a new request with
	// that sendAt is refused.
	if a := start("scheduled", body); a.Status != 202 || a.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after sendAt: %d %s", a.Status, a.Body)
	}
	if p := expectProblem(t, start("scheduled-late", body), 400, "BAD_USER_INPUT"); !strings.Contains(deref(p.Detail), "past") {
		t.Fatalf("past sendAt: %v", deref(p.Detail))
	}
	if bc.Written != 3 || bc.Recipients != 3 || bc.StartedAt == nil || bc.StartedAt.Before(sendAt.Add(-time.Second)) {
		t.Fatalf("after sendAt (%v): %+v", sendAt, bc)
	}
	if got := feedTitles(t, s, svc, "bob"); !slices.Equal(got, []string{"Hi you"}) {
		t.Fatalf("bob's feed: %v", got)
	}
	// The status of each recipient's notification (its id from the feed): in-app
	// delivered; email skipped for bob (no address); for ann queued, then skipped by the
	// deliver task (no provider in this issue).
	emailOf := func(user string) gen.DeliveryRecord {
		t.Helper()
		f := decode[gen.Feed](t, call(t, s, http.MethodGet, "/v1/notifications?userId="+user, svc, nil, nil), 200)
		st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+f.Items[0].Id+"/status", svc, nil, nil), 200)
		if st.UserId != user || st.Status != "written" || len(st.Channels) < 2 || st.Channels[0].Channel != "in_app" || st.Channels[0].Status != "delivered" {
			t.Fatalf("%s's status: %s", user, mustJSON(t, st))
		}
		for _, c := range st.Channels {
			if c.Channel == "email" {
				return c
			}
		}
		t.Fatalf("%s's status has no email record: %s", user, mustJSON(t, st))
		return gen.DeliveryRecord{}
	}
	if c := emailOf("bob"); c.Status != "skipped" || deref(c.Error) != "no_email" {
		t.Fatalf("bob's email: %s", mustJSON(t, c))
	}
	testgw.WaitFor(t, 30*time.Second, "ann's email skipped for want of a provider", func() bool {
		c := emailOf("ann")
		if c.Status != "queued" && (c.Status != "skipped" || deref(c.Error) != "no_provider") {
			t.Fatalf("ann's email: %s", mustJSON(t, c))
		}
		return c.Status == "skipped"
	})
	// Cancelled before its time: nothing is ever written.
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	acc = decode[gen.BroadcastAccepted](t, start("later", map[string]any{"recipients": []string{"dee"}, "type": "promo", "title": "Later", "sendAt": later}), 202)
	c := decode[gen.Broadcast](t, call(t, s, http.MethodDelete, "/v1/broadcasts/"+acc.BroadcastId, svc, nil, nil), 200)
	if c.Status != "cancelled" || c.Written != 0 || c.FinishedAt == nil {
		t.Fatalf("cancel: %+v", c)
	}
	if g := decode[gen.Broadcast](t, call(t, s, http.MethodGet, "/v1/broadcasts/"+acc.BroadcastId, svc, nil, nil), 200); g.Status != "cancelled" {
		t.Fatalf("after cancel: %+v", g)
	}
}

// notificationKey returns the key of a GraphQL Notification global id.
func notificationKey(t *testing.T, gid string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(gid)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := strings.CutPrefix(string(b), "Notification:")
	if !ok {
		t.Fatalf("global id %q is %q", gid, b)
	}
	return key
}

func TestStatusOfAGraphQLSend(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"email": "alice@example.com"}), 200)
	res := s.Send(s.ServiceToken(tenant, "svc"), s.SendInput("hello", "alice"))
	if res.Accepted != 1 {
		t.Fatalf("send: %+v", res)
	}
	id := notificationKey(t, res.NotificationIds[0])
	st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+id+"/status", svc, nil, nil), 200)
	if st.Id != id || st.UserId != "alice" || st.Status != "written" || st.CreatedAt.IsZero() || time.Since(st.CreatedAt) > time.Minute {
		t.Fatalf("status: %+v", st)
	}
	// A send without a template is in-app only: alice's address does not add email.
	if len(st.Channels) != 1 || st.Channels[0].Channel != "in_app" || st.Channels[0].Status != "delivered" ||
		deref(st.Channels[0].Provider) != "inbox" || st.Channels[0].Attempts != 1 || st.Channels[0].DeliveredAt == nil {
		t.Fatalf("channels: %s", mustJSON(t, st.Channels))
	}
	// The global id that sendNotification answered names the same status.
	if byGID := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+res.NotificationIds[0]+"/status", svc, nil, nil), 200); byGID.Id != id || byGID.UserId != "alice" {
		t.Fatalf("status by global id: %+v", byGID)
	}
	if p := expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications/01ARZ3NDEKTSV4RRFFQ69G5FAV/status", svc, nil, nil), 404, "NOT_FOUND"); !strings.Contains(deref(p.Detail), "not written yet") {
		t.Fatalf("404 detail: %q", deref(p.Detail))
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications/"+id+"/status", s.Token("globex", "svc", rest.ScopeSend), nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications/"+id+"/status", admin, nil, nil), 403, "FORBIDDEN")
}

func TestUsersProfile(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	u := decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil,
		map[string]any{"email": "alice@example.com", "phone": "+4915112345678", "locale": "de-de", "timezone": "Europe/Berlin"}), 200)
	if u.Id != "alice" || *u.Email != "alice@example.com" || *u.Phone != "+4915112345678" || *u.Locale != "de-DE" || *u.Timezone != "Europe/Berlin" {
		t.Fatalf("profile: %+v", u)
	}
	stored, err := s.Store.UserProfile(t.Context(), inbox.Viewer{TenantID: tenant, UserID: "alice"})
	if err != nil || stored.Address("email") != "alice@example.com" || stored.Locale != "de-DE" {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	// A PUT replaces the profile: what it leaves out is gone.
	u = decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"phone": "+14155550100"}), 200)
	if u.Email != nil || *u.Phone != "+14155550100" || u.Locale != nil {
		t.Fatalf("replaced: %+v", u)
	}
	for _, bad := range []map[string]any{
		{"email": "nope"},
		{"email": "a@b@example.com"},
		{"email": "Ada <ada@example.com>"},
		{"phone": "12345"},
		{"phone": "+0123456"},
		{"timezone": "Mars/Olympus"},
		{"locale": "not a locale"},
	} {
		expectProblem(t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, bad), 400, "BAD_USER_INPUT")
	}
	if stored, _ := s.Store.UserProfile(t.Context(), inbox.Viewer{TenantID: tenant, UserID: "alice"}); stored.Address("phone") != "+14155550100" {
		t.Fatalf("a refused PUT changed the profile: %+v", stored)
	}
}

func TestTenantSettingsCriticalCategoriesReachSends(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	sender := s.ServiceToken(tenant, "svc")
	// alice turns in-app off for security notifications: a send of that category skips her.
	decode[gen.Preferences](t, call(t, s, http.MethodPut, "/v1/users/alice/preferences", admin, nil,
		map[string]any{"categories": []any{map[string]any{"category": "security", "channels": map[string]any{"inApp": false}}}}), 200)
	send := func(title string) testgw.SendResult {
		in := s.SendInput(title, "alice")
		in["category"] = "security"
		return s.Send(sender, in)
	}
	if res := send("before"); res.Accepted != 0 {
		t.Fatalf("opted out, yet accepted: %+v", res)
	}
	set := decode[gen.TenantSettings](t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{
		"criticalCategories": []string{"security", "security"},
		"defaultPreferences": map[string]any{"channels": map[string]any{"sms": false}},
		"webhook":            map[string]any{"url": "https://hooks.example.com/inbox", "secret": strings.Repeat("s", 32)},
		"retentionDays":      30,
	}), 200)
	if set.CriticalCategories == nil || !slices.Equal(*set.CriticalCategories, []string{"security"}) || set.DefaultPreferences == nil ||
		*set.DefaultPreferences.Channels.Sms || !*set.DefaultPreferences.Channels.Email || set.Webhook == nil ||
		set.Webhook.Url != "https://hooks.example.com/inbox" || set.RetentionDays == nil || *set.RetentionDays != 30 {
		t.Fatalf("settings: %s", mustJSON(t, set))
	}
	if strings.Contains(mustJSON(t, set), strings.Repeat("s", 32)) {
		t.Fatal("the webhook secret was answered")
	}
	// Critical now: alice's opt-out no longer keeps it out.
	if res := send("after"); res.Accepted != 1 {
		t.Fatalf("critical, yet skipped: %+v", res)
	}
	if got := feedTitles(t, s, s.Token(tenant, "svc", rest.ScopeSend), "alice"); !slices.Equal(got, []string{"after"}) {
		t.Fatalf("feed: %v", got)
	}
	p := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/alice/preferences", admin, nil, nil), 200)
	if p.Channels.Sms || len(p.Categories) != 1 || !p.Categories[0].Critical || !p.Categories[0].Channels.InApp {
		t.Fatalf("effective preferences: %+v", p)
	}
	// Replaced by a PUT without them: the configured defaults again.
	set = decode[gen.TenantSettings](t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{}), 200)
	if set.CriticalCategories != nil || set.Webhook != nil || set.RetentionDays != nil {
		t.Fatalf("cleared: %s", mustJSON(t, set))
	}
	if res := send("cleared"); res.Accepted != 0 {
		t.Fatalf("no longer critical, yet accepted: %+v", res)
	}
	expectProblem(t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{"defaultPreferences": map[string]any{"quietHours": map[string]any{"start": "22:00", "end": "07:00"}}}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{"criticalCategories": []string{"a#b"}}), 400, "BAD_USER_INPUT")
}

// deref returns *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTemplateLocaleOfEachRecipient: a template renders in each recipient's locale, taken
// from their preferences, else their channel profile (PUT /v1/users/{id}), else the
// send's locale, else the tenant's default preferences.
func TestTemplateLocaleOfEachRecipient(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	for _, body := range []map[string]any{
		{"locale": "en", "title": "Hi {{ name }}"},
		{"locale": "de", "title": "Hallo {{ name }}"},
		{"locale": "fr", "title": "Salut {{ name }}"},
	} {
		decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/greet", admin, nil, body), 200)
	}
	// ann: a profile locale only; bob: a profile locale and a preferences locale, which wins.
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/ann", admin, nil, map[string]any{"locale": "de-AT"}), 200)
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/bob", admin, nil, map[string]any{"locale": "de-AT"}), 200)
	decode[gen.Preferences](t, call(t, s, http.MethodPut, "/v1/users/bob/preferences", admin, nil, map[string]any{"locale": "fr"}), 200)
	decode[gen.TenantSettings](t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil,
		map[string]any{"defaultPreferences": map[string]any{"locale": "de"}}), 200)
	send := func(key string, extra map[string]any) {
		t.Helper()
		body := map[string]any{"recipients": []string{"ann", "bob", "cy"}, "type": "greet", "template": "greet", "data": map[string]any{"name": key}}
		for k, v := range extra {
			body[k] = v
		}
		decode[gen.Accepted](t, call(t, s, http.MethodPost, "/v1/notifications", svc, map[string]string{"Idempotency-Key": key}, body), 202)
	}
	want := map[string][]string{"ann": {"Hallo k1"}, "bob": {"Salut k1"}, "cy": {"Hallo k1"}}
	send("k1", nil) // cy has no locale of their own: the tenant's default
	for user, titles := range want {
		testgw.WaitFor(t, 30*time.Second, user+"'s notification", func() bool { return len(feedTitles(t, s, svc, user)) == len(titles) })
		if got := feedTitles(t, s, svc, user); !slices.Equal(got, titles) {
			t.Fatalf("%s's feed: %v, want %v", user, got, titles)
		}
	}
	// The send's locale is for recipients without one of their own: it beats the tenant's
	// default (cy), not the recipients' own (ann, bob).
	send("k2", map[string]any{"locale": "fr"})
	want = map[string][]string{"ann": {"Hallo k2", "Hallo k1"}, "bob": {"Salut k2", "Salut k1"}, "cy": {"Salut k2", "Hallo k1"}}
	for user, titles := range want {
		testgw.WaitFor(t, 30*time.Second, user+"'s second notification", func() bool { return len(feedTitles(t, s, svc, user)) == len(titles) })
		if got := feedTitles(t, s, svc, user); !slices.Equal(got, titles) {
			t.Fatalf("%s's feed: %v, want %v", user, got, titles)
		}
	}
}
