package rest_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/service"
)

// The send suite: POST /v1/notifications through the gateway as composed
// (app.Build: the send service's real Accept, its lanes, the store), every
// answer validated against the document by call.

// send posts body to /v1/notifications under key with token.
func send(t *testing.T, s *testgw.Server, token, key string, body any) answer {
	t.Helper()
	return call(t, s, http.MethodPost, "/v1/notifications", token, map[string]string{"Idempotency-Key": key}, body)
}

// feed reads user's first page (up to 100) through the service API.
func feed(t *testing.T, s *testgw.Server, token, user string) []gen.Notification {
	t.Helper()
	return decode[gen.Feed](t, call(t, s, http.MethodGet, "/v1/notifications?userId="+user+"&limit=100", token, nil, nil), 200).Items
}

// waitFeed polls user's feed until it has n notifications, and returns them.
func waitFeed(t *testing.T, s *testgw.Server, token, user string, n int) []gen.Notification {
	t.Helper()
	var items []gen.Notification
	testgw.WaitFor(t, 30*time.Second, fmt.Sprintf("%d notifications in %s's feed", n, user), func() bool {
		items = feed(t, s, token, user)
		if len(items) > n {
			t.Fatalf("%s's feed has %d notifications, want %d: %s", user, len(items), n, mustJSON(t, items))
		}
		return len(items) == n
	})
	return items
}

// requestWritten reports whether a send request is stored under key.
func requestWritten(t *testing.T, s *testgw.Server, tenant, key string) bool {
	t.Helper()
	_, ok, err := s.Store.GetRequest(t.Context(), tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestSendToUsersIsAcceptedWrittenAndHasStatus(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	// A list: one id per distinct recipient, in order; no notificationId.
	body := map[string]any{"recipients": []string{"bob", "cy", "bob"}, "type": "invoice.paid", "category": "billing",
		"title": "Paid", "body": "Invoice 7 is paid", "data": map[string]any{"invoice": 7},
		"actor": map[string]any{"id": "billing-bot", "name": "Billing"}, "target": map[string]any{"id": "inv-7", "kind": "invoice"},
		"actions": []any{map[string]any{"label": "Open", "url": "https://example.com/inv/7"}}, "groupKey": "invoices"}
	acc := decode[gen.Accepted](t, send(t, s, svc, "list-1", body), 202)
	if acc.RequestId == "" || len(acc.NotificationIds) != 2 || acc.NotificationId != nil || acc.BroadcastId != nil ||
		acc.NotificationIds[0] == acc.NotificationIds[1] {
		t.Fatalf("list accept: %s", mustJSON(t, acc))
	}
	for i, u := range []string{"bob", "cy"} {
		items := waitFeed(t, s, svc, u, 1)
		n := items[0]
		if n.Id != acc.NotificationIds[i] || deref(n.Title) != "Paid" || deref(n.Body) != "Invoice 7 is paid" || n.Type != "invoice.paid" ||
			deref(n.Category) != "billing" || deref(n.GroupKey) != "invoices" || len(n.Actions) != 1 || n.Actions[0].Url != "https://example.com/inv/7" ||
			n.Actor == nil || n.Actor.Id != "billing-bot" || n.Target == nil || n.Target.Id != "inv-7" || n.Read {
			t.Fatalf("%s's notification: %s", u, mustJSON(t, n))
		}
		// The document: data is the template's variables AND the notification's payload.
		if n.Data == nil || string(*n.Data) != `{"invoice":7}` {
			t.Fatalf("%s's notification lost the data: %s", u, mustJSON(t, n))
		}
		st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+n.Id+"/status", svc, nil, nil), 200)
		if st.Id != n.Id || st.UserId != u || st.Status != "written" || len(st.Channels) != 1 || st.Channels[0].Channel != "in_app" ||
			st.Channels[0].Status != "delivered" {
			t.Fatalf("%s's status: %s", u, mustJSON(t, st))
		}
	}
	// One user: notificationId too, the same as the one id.
	acc = decode[gen.Accepted](t, send(t, s, svc, "one-1", sendBody()), 202)
	if acc.NotificationId == nil || !slices.Equal(acc.NotificationIds, []string{*acc.NotificationId}) {
		t.Fatalf("one accept: %s", mustJSON(t, acc))
	}
	if items := waitFeed(t, s, svc, "alice", 1); items[0].Id != *acc.NotificationId || deref(items[0].Title) != "Your code" {
		t.Fatalf("alice's feed: %s", mustJSON(t, items))
	}
	testgw.WaitFor(t, 30*time.Second, "the request done", func() bool {
		r, ok, err := s.Store.GetRequest(t.Context(), tenant, "one-1")
		return err == nil && ok && r.State == inbox.RequestDone
	})
	// The bad input the service itself refuses (the handler's checks passed): nothing
	// is written under the key.
	for key, b := range map[string]map[string]any{
		"bad-content": {"recipientUserId": "alice", "type": "otp", "title": strings.Repeat("x", 9000), "body": strings.Repeat("y", 9000)},
		"bad-expiry":  {"recipientUserId": "alice", "type": "otp", "title": "x", "expiresAt": time.Now().Add(-time.Hour).Format(time.RFC3339)},
	} {
		expectProblem(t, send(t, s, svc, key, b), 400, "BAD_USER_INPUT")
		if requestWritten(t, s, tenant, key) {
			t.Fatalf("%s: a refused send was written", key)
		}
	}
	if items := feed(t, s, svc, "alice"); len(items) != 1 {
		t.Fatalf("alice's feed after refused sends: %s", mustJSON(t, items))
	}
}

func TestSendReplaysAfterProcessingAndKeysAreTheTenants(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	first := decode[gen.Accepted](t, send(t, s, svc, "k", sendBody()), 202)
	waitFeed(t, s, svc, "alice", 1)
	testgw.WaitFor(t, 30*time.Second, "the request done", func() bool {
		r, ok, err := s.Store.GetRequest(t.Context(), tenant, "k")
		return err == nil && ok && r.State == inbox.RequestDone
	})
	// Processed, a replay still answers the first body and writes nothing.
	a := send(t, s, svc, "k", sendBody())
	if again := decode[gen.Accepted](t, a, 202); a.Header.Get("Idempotent-Replayed") != "true" || mustJSON(t, again) != mustJSON(t, first) {
		t.Fatalf("replay: %s %v, first %s", a.Body, a.Header, mustJSON(t, first))
	}
	other := sendBody()
	other["title"] = "Another code"
	expectProblem(t, send(t, s, svc, "k", other), 409, "CONFLICT")
	// globex's same key is its own request, to its own alice.
	gsvc := s.Token("globex", "svc", rest.ScopeSend)
	a = send(t, s, gsvc, "k", other)
	g := decode[gen.Accepted](t, a, 202)
	if a.Header.Get("Idempotent-Replayed") != "" || g.RequestId == first.RequestId || *g.NotificationId == *first.NotificationId {
		t.Fatalf("globex: %s %v", a.Body, a.Header)
	}
	if items := waitFeed(t, s, gsvc, "alice", 1); deref(items[0].Title) != "Another code" {
		t.Fatalf("globex's alice: %s", mustJSON(t, items))
	}
	time.Sleep(200 * time.Millisecond) // a wrongly processed replay or conflict would show by now
	if items := feed(t, s, svc, "alice"); len(items) != 1 || items[0].Id != *first.NotificationId || deref(items[0].Title) != "Your code" {
		t.Fatalf("acme's alice: %s", mustJSON(t, items))
	}
	if b, err := s.Store.Badge(t.Context(), inbox.Viewer{TenantID: tenant, UserID: "alice"}); err != nil || b.Unread != 1 {
		t.Fatalf("acme's alice's badge: %+v %v", b, err)
	}
}

func TestSendWithATemplateRendersEachRecipientsLocale(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	for _, body := range []map[string]any{
		{"locale": "en", "title": "Welcome, {{ name }}", "body": "Your plan: {{ plan }}"},
		{"locale": "de", "title": "Willkommen, {{ name }}", "body": "Ihr Tarif: {{ plan }}"},
	} {
		decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/welcome", admin, nil, body), 200)
	}
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/bob", admin, nil, map[string]any{"locale": "de-AT"}), 200)
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/cy", admin, nil, map[string]any{"locale": "fr"}), 200)
	data := map[string]any{"name": "Ada", "plan": "pro"}
	acc := decode[gen.Accepted](t, send(t, s, svc, "welcome-1",
		map[string]any{"recipients": []string{"alice", "bob", "cy"}, "type": "welcome", "template": "welcome", "data": data}), 202)
	if len(acc.NotificationIds) != 3 {
		t.Fatalf("accept: %s", mustJSON(t, acc))
	}
	// alice has no locale (the template's default, en), bob de-AT (de), cy fr (no such
	// content: the default).
	for i, want := range []struct{ user, title, body string }{
		{"alice", "Welcome, Ada", "Your plan: pro"},
		{"bob", "Willkommen, Ada", "Ihr Tarif: pro"},
		{"cy", "Welcome, Ada", "Your plan: pro"},
	} {
		n := waitFeed(t, s, svc, want.user, 1)[0]
		if n.Id != acc.NotificationIds[i] || deref(n.Title) != want.title || deref(n.Body) != want.body {
			t.Fatalf("%s's notification: %s", want.user, mustJSON(t, n))
		}
	}
	// An undefined variable, or an unknown template: 400, and nothing is written.
	for key, b := range map[string]map[string]any{
		"undefined":   {"recipients": []string{"dee"}, "type": "welcome", "template": "welcome", "data": map[string]any{"name": "Ada"}},
		"no-template": {"recipients": []string{"dee"}, "type": "welcome", "template": "nope", "data": data},
	} {
		expectProblem(t, send(t, s, svc, key, b), 400, "BAD_USER_INPUT")
		if requestWritten(t, s, tenant, key) {
			t.Fatalf("%s: a refused send was written", key)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if items := feed(t, s, svc, "dee"); len(items) != 0 {
		t.Fatalf("dee's feed after refused sends: %s", mustJSON(t, items))
	}
}

func TestSendToASegmentStartsABroadcastThatReachesDone(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	members := make([]string, 15)
	for i := range members {
		members[i] = fmt.Sprintf("m%03d", i)
	}
	decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/beta/members", admin, nil, map[string]any{"add": members}), 200)
	body := map[string]any{"segment": "beta", "type": "launch", "title": "We launched", "data": map[string]any{"v": 2}}
	a := send(t, s, svc, "launch", body)
	acc := decode[gen.Accepted](t, a, 202)
	if acc.BroadcastId == nil || *acc.BroadcastId != service.SendBroadcastID("launch") || len(acc.NotificationIds) != 0 || acc.NotificationId != nil {
		t.Fatalf("segment accept: %s", a.Body)
	}
	if a := send(t, s, svc, "launch", body); a.Header.Get("Idempotent-Replayed") != "true" || decode[gen.Accepted](t, a, 202).RequestId != acc.RequestId {
		t.Fatalf("segment replay: %d %s %v", a.Status, a.Body, a.Header)
	}
	bc := pollBroadcast(t, s, svc, *acc.BroadcastId, "done", 60*time.Second)
	if bc.Recipients != 15 || bc.Written != 15 || bc.Skipped != 0 || bc.Failed != 0 {
		t.Fatalf("done: %s", mustJSON(t, bc))
	}
	for _, m := range []string{"m000", "m007", "m014"} {
		items := feed(t, s, svc, m)
		if len(items) != 1 || deref(items[0].Title) != "We launched" || items[0].Data == nil || string(*items[0].Data) != `{"v":2}` {
			t.Fatalf("%s's feed: %s", m, mustJSON(t, items))
		}
	}
	// An unknown segment is refused before anything is written.
	expectProblem(t, send(t, s, svc, "ghost", map[string]any{"segment": "ghosts", "type": "launch", "title": "x"}), 400, "BAD_USER_INPUT")
	if requestWritten(t, s, tenant, "ghost") {
		t.Fatal("a send to an unknown segment was written")
	}
}

func TestBulkSendWritesEveryRecipient(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	users := make([]string, 120) // two chunks of the service's 100
	for i := range users {
		users[i] = fmt.Sprintf("u%03d", i)
	}
	acc := decode[gen.Accepted](t, send(t, s, svc, "digest", map[string]any{"recipients": users, "type": "digest", "title": "Weekly digest", "priority": "bulk"}), 202)
	if len(acc.NotificationIds) != len(users) {
		t.Fatalf("accept: %d ids", len(acc.NotificationIds))
	}
	testgw.WaitFor(t, 2*time.Minute, "the bulk request done", func() bool {
		r, ok, err := s.Store.GetRequest(t.Context(), tenant, "digest")
		return err == nil && ok && r.State == inbox.RequestDone
	})
	for i, id := range acc.NotificationIds {
		st, err := s.Store.Status(t.Context(), tenant, id)
		if err != nil || st.UserID != users[i] || st.Status != "written" {
			t.Fatalf("%s (%s): %+v %v", id, users[i], st, err)
		}
	}
	st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+acc.NotificationIds[119]+"/status", svc, nil, nil), 200)
	if st.UserId != "u119" || st.Status != "written" {
		t.Fatalf("status: %s", mustJSON(t, st))
	}
	if items := feed(t, s, svc, "u100"); len(items) != 1 || items[0].Id != acc.NotificationIds[100] {
		t.Fatalf("u100's feed: %s", mustJSON(t, items))
	}
}

func TestScheduledSendIsWrittenAtSendAt(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	sendAt := time.Now().Add(2 * time.Second).UTC()
	b := sendBody()
	b["sendAt"] = sendAt.Format(time.RFC3339Nano)
	acc := decode[gen.Accepted](t, send(t, s, svc, "later", b), 202)
	if items := feed(t, s, svc, "alice"); len(items) != 0 {
		t.Fatalf("written before sendAt: %s", mustJSON(t, items))
	}
	expectProblem(t, call(t, s, http.MethodGet, "/v1/notifications/"+*acc.NotificationId+"/status", svc, nil, nil), 404, "NOT_FOUND")
	// The scheduler's task writes it (given time: its shards' leases on a loaded machine).
	var items []gen.Notification
	testgw.WaitFor(t, 60*time.Second, "the scheduled notification", func() bool {
		items = feed(t, s, svc, "alice")
		return len(items) > 0
	})
	n := items[0]
	if len(items) != 1 || n.Id != *acc.NotificationId || n.CreatedAt.Before(sendAt.Add(-time.Second)) || time.Now().Before(sendAt) {
		t.Fatalf("scheduled notification %s at %v (sendAt %v)", mustJSON(t, n), time.Now(), sendAt)
	}
}

// With a safety-net poll of ten minutes, a send at sendAt is still written at its time:
// the write of its task woke the scheduler, which armed a timer for it. (A generous
// bound in real time, 20 s, still far below what polling would take.)
func TestScheduledSendRunsAtSendAtWithoutPolling(t *testing.T) {
	t.Parallel()
	s := testgw.NewWith(t, testgw.Options{Scheduler: true, SchedPoll: 10 * time.Minute})
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	// The scheduler's first passes are done once it holds its shards: let them pass, so
	// that the task is not found by a first pass's read-ahead.
	testgw.WaitFor(t, 60*time.Second, "the scheduler to hold its shards", func() bool {
		return len(s.Scheduler.Held()) == s.Store.SchedShards()
	})
	sendAt := time.Now().Add(2 * time.Second).UTC()
	b := sendBody()
	b["sendAt"] = sendAt.Format(time.RFC3339Nano)
	acc := decode[gen.Accepted](t, send(t, s, svc, "woken", b), 202)
	var items []gen.Notification
	testgw.WaitFor(t, 60*time.Second, "the scheduled notification", func() bool {
		items = feed(t, s, svc, "alice")
		return len(items) > 0
	})
	at := time.Now()
	if len(items) != 1 || items[0].Id != *acc.NotificationId || at.Before(sendAt) {
		t.Fatalf("scheduled notification %s at %v (sendAt %v)", mustJSON(t, items), at, sendAt)
	}
	if late := at.Sub(sendAt); late > 20*time.Second {
		t.Fatalf("written %v after sendAt with a 10-minute poll: the wake-up did not arm the scheduler", late)
	}
}

// jwk is the public JWK of an RSA key.
func jwk(kid string, k *rsa.PrivateKey) map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	return map[string]any{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func TestSendWithAJWKSServiceToken(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{jwk("k1", key)}})
	}))
	t.Cleanup(jwks.Close)
	v, err := auth.NewVerifier(auth.Config{Secret: testgw.Secret, JWKSURL: jwks.URL, Leeway: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	s := testgw.NewWith(t, testgw.Options{Verifier: v})
	sign := func(claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = "k1"
		str, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return str
	}
	now := time.Now()
	claims := func(scope string) jwt.MapClaims {
		return jwt.MapClaims{"sub": "billing", "tenant": tenant, "scope": scope, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	}
	svc := sign(claims(rest.ScopeSend))
	acc := decode[gen.Accepted](t, send(t, s, svc, "jwks-1", sendBody()), 202)
	if items := waitFeed(t, s, svc, "alice", 1); items[0].Id != *acc.NotificationId {
		t.Fatalf("alice's feed: %s", mustJSON(t, items))
	}
	st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+*acc.NotificationId+"/status", svc, nil, nil), 200)
	if st.UserId != "alice" || st.Status != "written" {
		t.Fatalf("status: %s", mustJSON(t, st))
	}
	// The JWKS's admin token administers; a JWKS user token (no service scope) cannot send.
	admin := sign(claims(rest.ScopeAdmin))
	decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/alice", admin, nil, map[string]any{"locale": "en"}), 200)
	user := sign(jwt.MapClaims{"sub": "alice", "tenant": tenant, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	expectProblem(t, send(t, s, user, "jwks-2", sendBody()), 403, "FORBIDDEN")
	// A token of another key is refused.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, claims(rest.ScopeSend))
	forged.Header["kid"] = "k1"
	fs, err := forged.SignedString(other)
	if err != nil {
		t.Fatal(err)
	}
	expectProblem(t, send(t, s, fs, "jwks-3", sendBody()), 401, "UNAUTHENTICATED")
	if requestWritten(t, s, tenant, "jwks-2") || requestWritten(t, s, tenant, "jwks-3") {
		t.Fatal("a refused send was written")
	}
}
