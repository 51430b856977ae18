package rest_test

import (
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
)

// announceBody is a valid announcement.
func announceBody(title string) map[string]any {
	return map[string]any{"type": "product.update", "category": "news", "title": title, "body": "body of " + title}
}

// announce posts body to /v1/announcements under key with token.
func announce(t *testing.T, s *testgw.Server, token, key string, body any) answer {
	t.Helper()
	var h map[string]string
	if key != "" {
		h = map[string]string{"Idempotency-Key": key}
	}
	return call(t, s, http.MethodPost, "/v1/announcements", token, h, body)
}

// POST /v1/announcements answers 202 with the announcement's id; a replay of the key with
// the same body answers the same id (Idempotent-Replayed), another body 409. GET reads it
// active; it is in the feed of a user who never received anything (id "@ULID"); DELETE
// withdraws it (it leaves the feed), and GET then says withdrawn. An unknown id is 404, and
// another tenant cannot read or withdraw it.
func TestAnnouncementCreateReplayGetWithdraw(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	a := announce(t, s, svc, "ann-1", announceBody("Maintenance"))
	if a.Status != http.StatusAccepted || a.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("create: %d %v %s", a.Status, a.Header, a.Body)
	}
	id := decode[gen.AnnouncementAccepted](t, a, 202).AnnouncementId
	if inbox.ULIDTime(id).IsZero() {
		t.Fatalf("announcementId %q is not a ULID", id)
	}
	a = announce(t, s, svc, "ann-1", announceBody("Maintenance"))
	if a.Status != http.StatusAccepted || a.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %s", a.Status, a.Header, a.Body)
	}
	if again := decode[gen.AnnouncementAccepted](t, a, 202).AnnouncementId; again != id {
		t.Fatalf("replay answered %s, first %s", again, id)
	}
	expectProblem(t, announce(t, s, svc, "ann-1", announceBody("Other")), 409, "CONFLICT")

	got := decode[gen.Announcement](t, call(t, s, http.MethodGet, "/v1/announcements/"+id, svc, nil, nil), 200)
	if got.Id != id || got.Status != "active" || deref(got.Title) != "Maintenance" || got.Type != "product.update" || got.WithdrawnAt != nil {
		t.Fatalf("GET: %s", mustJSON(t, got))
	}
	if d := got.ExpiresAt.Sub(got.CreatedAt); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Fatalf("default expiry %v after creation, want 30 days", d)
	}
	// In the feed of a user who never received anything, as "@ULID"; the conflict wrote
	// nothing (one announcement).
	items := feed(t, s, svc, "newcomer")
	if len(items) != 1 || items[0].Id != "@"+id || deref(items[0].Title) != "Maintenance" {
		t.Fatalf("newcomer's feed: %s", mustJSON(t, items))
	}
	// Another tenant knows nothing of it.
	other := s.Token("globex", "svc", rest.ScopeSend)
	expectProblem(t, call(t, s, http.MethodGet, "/v1/announcements/"+id, other, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodDelete, "/v1/announcements/"+id, other, nil, nil), 404, "NOT_FOUND")
	if items := feed(t, s, other, "newcomer"); len(items) != 0 {
		t.Fatalf("globex's newcomer sees acme's announcement: %s", mustJSON(t, items))
	}

	w := decode[gen.Announcement](t, call(t, s, http.MethodDelete, "/v1/announcements/"+id, svc, nil, nil), 200)
	if w.Status != "withdrawn" || w.WithdrawnAt == nil {
		t.Fatalf("DELETE: %s", mustJSON(t, w))
	}
	if got := decode[gen.Announcement](t, call(t, s, http.MethodGet, "/v1/announcements/"+id, svc, nil, nil), 200); got.Status != "withdrawn" {
		t.Fatalf("GET after DELETE: %s", mustJSON(t, got))
	}
	// Withdrawing again changes nothing.
	if again := decode[gen.Announcement](t, call(t, s, http.MethodDelete, "/v1/announcements/"+id, svc, nil, nil), 200); again.Status != "withdrawn" ||
		!again.WithdrawnAt.Equal(*w.WithdrawnAt) {
		t.Fatalf("DELETE again: %s, first %s", mustJSON(t, again), mustJSON(t, w))
	}
	if items := feed(t, s, svc, "newcomer"); len(items) != 0 {
		t.Fatalf("the withdrawn announcement is still in the feed: %s", mustJSON(t, items))
	}
	// An unknown id (well-formed or not) is 404.
	expectProblem(t, call(t, s, http.MethodGet, "/v1/announcements/01J00000000000000000000000", svc, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/announcements/nope", svc, nil, nil), 404, "NOT_FOUND")
}

// Bad announcements are 400 problems with a code and write nothing; the caller needs a
// token (401) with the send scope (403).
func TestAnnouncementBadInputTokensAndScopes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	with := func(k string, v any) map[string]any {
		m := announceBody("t")
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	noText := with("title", nil)
	delete(noText, "body")
	now := time.Now()
	for _, c := range []struct {
		name   string
		key    string
		body   any
		detail string
	}{
		{"missing Idempotency-Key", "", announceBody("t"), "Idempotency-Key"},
		{"no title nor body", "k1", noText, "title or a body"},
		{"no type", "k1", with("type", nil), "type"},
		{"expiresAt in the past", "k1", with("expiresAt", now.Add(-time.Minute).Format(time.RFC3339)), "future"},
		{"expiresAt over a year ahead", "k1", with("expiresAt", now.Add(367*24*time.Hour).Format(time.RFC3339)), "days ahead"},
		{"unknown member", "k1", with("recipientUserId", "alice"), "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := expectProblem(t, announce(t, s, svc, c.key, c.body), 400, "BAD_USER_INPUT")
			if p.Detail == nil || !strings.Contains(*p.Detail, c.detail) {
				t.Fatalf("detail %v does not say %q", p.Detail, c.detail)
			}
		})
	}
	if items := feed(t, s, svc, "alice"); len(items) != 0 {
		t.Fatalf("a rejected announcement was stored: %s", mustJSON(t, items))
	}
	expectProblem(t, announce(t, s, "", "k2", announceBody("t")), 401, "UNAUTHENTICATED")
	expectProblem(t, announce(t, s, s.Token(tenant, "alice"), "k2", announceBody("t")), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodGet, "/v1/announcements/01J00000000000000000000000", s.Token(tenant, "alice"), nil, nil), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodDelete, "/v1/announcements/01J00000000000000000000000", "", nil, nil), 401, "UNAUTHENTICATED")
	if items := feed(t, s, svc, "alice"); len(items) != 0 {
		t.Fatalf("an unauthorized announcement was stored: %s", mustJSON(t, items))
	}
}

// A tenant has at most inbox.MaxActiveAnnouncements active announcements: the next is a
// 400 (a replay of an earlier key is still answered); withdrawing one makes room. Another
// tenant is not limited by them.
func TestAnnouncementCapOfActiveOnes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	var first string
	for i := range inbox.MaxActiveAnnouncements {
		a := announce(t, s, svc, fmt.Sprintf("cap-%d", i), announceBody(fmt.Sprintf("a%d", i)))
		if a.Status != 202 {
			t.Fatalf("announcement %d: %d %s", i, a.Status, a.Body)
		}
		if i == 0 {
			first = decode[gen.AnnouncementAccepted](t, a, 202).AnnouncementId
		}
	}
	p := expectProblem(t, announce(t, s, svc, "cap-over", announceBody("over")), 400, "BAD_USER_INPUT")
	if p.Detail == nil || !strings.Contains(*p.Detail, fmt.Sprint(inbox.MaxActiveAnnouncements)) {
		t.Fatalf("detail %v", p.Detail)
	}
	if a := announce(t, s, svc, "cap-0", announceBody("a0")); a.Status != 202 || a.Header.Get("Idempotent-Replayed") != "true" ||
		decode[gen.AnnouncementAccepted](t, a, 202).AnnouncementId != first {
		t.Fatalf("replay at the cap: %d %v %s", a.Status, a.Header, a.Body)
	}
	if a := announce(t, s, s.Token("globex", "svc", rest.ScopeSend), "cap-over", announceBody("over")); a.Status != 202 {
		t.Fatalf("another tenant: %d %s", a.Status, a.Body)
	}
	decode[gen.Announcement](t, call(t, s, http.MethodDelete, "/v1/announcements/"+first, svc, nil, nil), 200)
	if a := announce(t, s, svc, "cap-over", announceBody("over")); a.Status != 202 {
		t.Fatalf("after a withdrawal: %d %s", a.Status, a.Body)
	}
}

// The service API's feed pages through an inbox with an announcement in the middle: every
// item once, in the order of one long page, the announcement as "@ULID".
func TestAnnouncementInFeedPages(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	send := s.ServiceToken(tenant, "svc")
	s.Seed(send, "alice", 5)
	id := decode[gen.AnnouncementAccepted](t, announce(t, s, svc, "feed", announceBody("Mid")), 202).AnnouncementId
	s.Seed(send, "alice", 5)
	var full []string
	for _, it := range feed(t, s, svc, "alice") {
		full = append(full, it.Id)
	}
	if len(full) != 11 || full[5] != "@"+id {
		t.Fatalf("one page: %v", full)
	}
	var paged []string
	cursor := ""
	for range 10 {
		p := decode[gen.Feed](t, restPage(t, s, svc, "alice", cursor), 200)
		for _, it := range p.Items {
			paged = append(paged, it.Id)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if !slices.Equal(paged, full) {
		t.Fatalf("pages of 2: %v, one page: %v", paged, full)
	}
}
