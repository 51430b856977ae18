package rest_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/unsub"
)

// prefsLog records the preference updates NewUnsubscribe makes.
type prefsLog struct {
	mu   sync.Mutex
	upds []inbox.Viewer
}

func (p *prefsLog) UpdatePreferences(_ context.Context, v inbox.Viewer, _ inbox.PreferencesUpdate) (inbox.Preferences, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upds = append(p.upds, v)
	return inbox.Preferences{}, nil
}

func (p *prefsLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.upds)
}

// unsubServer serves rest.NewUnsubscribe over a signer and a recording preferences
// writer; tok is a valid token for tenant acme, user kim, category news.
func unsubServer(t *testing.T) (srv *httptest.Server, prefs *prefsLog, tok string) {
	t.Helper()
	s, err := unsub.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	tok, err = s.Token(unsub.Claims{TenantID: "acme", UserID: "kim", Category: "news", Channel: inbox.ChannelEmail})
	if err != nil {
		t.Fatal(err)
	}
	prefs = &prefsLog{}
	srv = httptest.NewServer(rest.NewUnsubscribe(rest.UnsubscribeOptions{Signer: s, Prefs: prefs}))
	t.Cleanup(srv.Close)
	return srv, prefs, tok
}

func doUnsub(t *testing.T, method, target, contentType string, body io.Reader) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(b)
}

// TestOneClickUnsubscribeMultipart: RFC 8058 section 3.2 has the mail receiver send
// the one-click POST as multipart/form-data (SHOULD; application/x-www-form-urlencoded
// MAY). The handler parsed only the urlencoded form, so a compliant client's click was
// refused with 400 and the user stayed subscribed.
func TestOneClickUnsubscribeMultipart(t *testing.T) {
	t.Parallel()
	srv, prefs, tok := unsubServer(t)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("List-Unsubscribe", "One-Click"); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	st, _, b := doUnsub(t, http.MethodPost, srv.URL+rest.UnsubscribePath+"?t="+url.QueryEscape(tok), mw.FormDataContentType(), &body)
	if st != 200 || !strings.Contains(b, `"unsubscribed":true`) || prefs.count() != 1 {
		t.Fatalf("multipart one-click POST: %d %s (%d updates)", st, b, prefs.count())
	}

	// A multipart body without the one-click field, and one over the bound, change nothing.
	body.Reset()
	mw = multipart.NewWriter(&body)
	_ = mw.WriteField("List-Unsubscribe", "Nope")
	_ = mw.Close()
	if st, ct, b := doUnsub(t, http.MethodPost, srv.URL+rest.UnsubscribePath+"?t="+url.QueryEscape(tok), mw.FormDataContentType(), &body); st != 400 || ct != rest.ProblemContentType {
		t.Fatalf("multipart without the one-click value: %d %s %s", st, ct, b)
	}
	body.Reset()
	mw = multipart.NewWriter(&body)
	_ = mw.WriteField("List-Unsubscribe", "One-Click")
	_ = mw.WriteField("pad", strings.Repeat("x", 1<<20))
	_ = mw.Close()
	if st, ct, b := doUnsub(t, http.MethodPost, srv.URL+rest.UnsubscribePath+"?t="+url.QueryEscape(tok), mw.FormDataContentType(), &body); st != 413 || ct != rest.ProblemContentType {
		t.Fatalf("a 1 MiB multipart body: %d %s %s", st, ct, b)
	}
	if prefs.count() != 1 {
		t.Fatalf("refused requests made %d updates", prefs.count()-1)
	}
}

// TestSuppressionAddressesRoundTrip: addresses with '/', '%', '+', spaces, upper case,
// non-ASCII letters and at the length bound go on the list, are listed as normalized and
// are deleted through DELETE /v1/suppressions/{channel}/{address} with the path escaped;
// one over the bound, a channel without addresses and another tenant's delete are
// refused and remove nothing.
func TestSuppressionAddressesRoundTrip(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	long := strings.Repeat("l", inbox.MaxAddressBytes-len("@x.test")) + "@x.test"
	addrs := map[string]string{ // as the provider names it -> as listed
		"a/b@x.test":         "a/b@x.test",
		"100%off@x.test":     "100%off@x.test",
		"kim+tag@x.test":     "kim+tag@x.test",
		"  Mixed@Case.TEST ": "mixed@case.test",
		"Ünï@x.test":         "Ünï@x.test",
		"a?b=c&d@x.test":     "a?b=c&d@x.test",
		"..%2F..@x.test":     "..%2f..@x.test",
		long:                 long,
	}
	for a := range addrs {
		if ok, err := s.Store.AddSuppression(t.Context(), tenant, inbox.Suppression{Channel: inbox.ChannelEmail, Address: a, Reason: "bounce"}); err != nil || !ok {
			t.Fatalf("add %q: %v %v", a, ok, err)
		}
	}
	page := decode[gen.SuppressionPage](t, call(t, s, http.MethodGet, "/v1/suppressions?limit=100", admin, nil, nil), 200)
	if len(page.Items) != len(addrs) {
		t.Fatalf("listed %d, want %d: %s", len(page.Items), len(addrs), mustJSON(t, page))
	}
	other := s.Token("other-tenant", "svc", rest.ScopeAdmin)
	if a := call(t, s, http.MethodDelete, "/v1/suppressions/email/"+url.PathEscape("kim+tag@x.test"), other, nil, nil); a.Status != 404 {
		t.Fatalf("another tenant's delete: %d %s", a.Status, a.Body)
	}
	for _, bad := range []string{"/v1/suppressions/email/" + strings.Repeat("l", inbox.MaxAddressBytes+1), "/v1/suppressions/push/x", "/v1/suppressions/email/a%23b@x.test"} {
		if a := call(t, s, http.MethodDelete, bad, admin, nil, nil); a.Status != 400 && a.Status != 404 {
			t.Fatalf("DELETE %.60s: %d %s", bad, a.Status, a.Body)
		}
	}
	for raw, listed := range addrs {
		if a := call(t, s, http.MethodDelete, "/v1/suppressions/email/"+url.PathEscape(raw), admin, nil, nil); a.Status != 204 {
			t.Fatalf("DELETE %q (listed %q): %d %s", raw, listed, a.Status, a.Body)
		}
	}
	if p := decode[gen.SuppressionPage](t, call(t, s, http.MethodGet, "/v1/suppressions", admin, nil, nil), 200); len(p.Items) != 0 {
		t.Fatalf("left after the deletes: %s", mustJSON(t, p))
	}
}

// TestOneClickUnsubscribeHostileRequests: hostile variants of a valid link change
// nothing and answer a 400 problem (or 405/413); GET never changes anything.
func TestOneClickUnsubscribeHostileRequests(t *testing.T) {
	t.Parallel()
	srv, prefs, tok := unsubServer(t)
	base := srv.URL + rest.UnsubscribePath
	payload, sig, _ := strings.Cut(tok, ".")
	std := strings.NewReplacer("-", "+", "_", "/").Replace(tok)
	form := "application/x-www-form-urlencoded"
	for name, c := range map[string]struct {
		method, target, ct, body string
		status                   int
	}{
		"padded":              {"POST", base + "?t=" + url.QueryEscape(tok+"=="), form, "List-Unsubscribe=One-Click", 400},
		"std base64":          {"POST", base + "?t=" + url.QueryEscape(std+"+/"), form, "List-Unsubscribe=One-Click", 400},
		"forged first t":      {"POST", base + "?t=x.y&t=" + url.QueryEscape(tok), form, "List-Unsubscribe=One-Click", 400},
		"token in body only":  {"POST", base, form, "List-Unsubscribe=One-Click&t=" + url.QueryEscape(tok), 400},
		"two signatures":      {"POST", base + "?t=" + url.QueryEscape(tok+"."+sig), form, "List-Unsubscribe=One-Click", 400},
		"payload only":        {"POST", base + "?t=" + url.QueryEscape(payload), form, "List-Unsubscribe=One-Click", 400},
		"huge t":              {"POST", base + "?t=" + strings.Repeat("A", 512<<10), form, "List-Unsubscribe=One-Click", 400},
		"json body":           {"POST", base + "?t=" + url.QueryEscape(tok), "application/json", `{"List-Unsubscribe":"One-Click"}`, 400},
		"no content type":     {"POST", base + "?t=" + url.QueryEscape(tok), "", "List-Unsubscribe=One-Click", 400},
		"value in query only": {"POST", base + "?List-Unsubscribe=One-Click&t=" + url.QueryEscape(tok), form, "x=1", 400},
		"lower-case value":    {"POST", base + "?t=" + url.QueryEscape(tok), form, "List-Unsubscribe=one-click", 400},
		"1 MiB urlencoded":    {"POST", base + "?t=" + url.QueryEscape(tok), form, "List-Unsubscribe=One-Click&p=" + strings.Repeat("x", 1<<20), 413},
		"PUT":                 {"PUT", base + "?t=" + url.QueryEscape(tok), form, "List-Unsubscribe=One-Click", 405},
		"GET with the body":   {"GET", base + "?t=" + url.QueryEscape(tok), form, "List-Unsubscribe=One-Click", 200},
		"HEAD":                {"HEAD", base + "?t=" + url.QueryEscape(tok), "", "", 405},
	} {
		st, ct, b := doUnsub(t, c.method, c.target, c.ct, strings.NewReader(c.body))
		if st != c.status || (st >= 400 && c.method != "HEAD" && ct != rest.ProblemContentType) {
			t.Errorf("%s: %d %s %.200s, want %d", name, st, ct, b, c.status)
		}
	}
	if n := prefs.count(); n != 0 {
		t.Fatalf("hostile requests made %d preference updates", n)
	}
}

// TestSuppressionPagesAndForeignCursors: GET /v1/suppressions pages in (channel,
// address) order with every entry once; a cursor taken in another tenant only positions
// the caller's own list (never another tenant's entries); a cursor of one channel is
// refused under the other channel's filter; limits out of 1..100 are refused.
func TestSuppressionPagesAndForeignCursors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	other := s.Token("evil-tenant", "svc", rest.ScopeAdmin)
	add := func(tn, ch, a string) {
		t.Helper()
		if _, err := s.Store.AddSuppression(t.Context(), tn, inbox.Suppression{Channel: ch, Address: a, Reason: "manual"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"a@x.test", "b@x.test", "c@x.test"} {
		add(tenant, inbox.ChannelEmail, a)
	}
	add(tenant, inbox.ChannelSMS, "+14155550100")
	add(tenant, inbox.ChannelSMS, "+14155550101")
	add("evil-tenant", inbox.ChannelEmail, "b@x.test")
	add("evil-tenant", inbox.ChannelEmail, "secret@evil.test")
	walk := func(token, query string) ([]string, []string) {
		t.Helper()
		var got, cursors []string
		cursor := ""
		for range 10 {
			q := query
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			p := decode[gen.SuppressionPage](t, call(t, s, http.MethodGet, "/v1/suppressions?limit=2"+q, token, nil, nil), 200)
			for _, it := range p.Items {
				got = append(got, string(it.Channel)+":"+it.Address)
			}
			if p.NextCursor == nil {
				return got, cursors
			}
			cursor = *p.NextCursor
			cursors = append(cursors, cursor)
		}
		t.Fatal("more than 10 pages")
		return nil, nil
	}
	all, _ := walk(admin, "")
	if want := "email:a@x.test email:b@x.test email:c@x.test sms:+14155550100 sms:+14155550101"; strings.Join(all, " ") != want {
		t.Fatalf("pages: %v, want %s", all, want)
	}
	if sms, _ := walk(admin, "&channel=sms"); len(sms) != 2 {
		t.Fatalf("sms pages: %v", sms)
	}
	// Our cursor after b@x.test, used by the other tenant: it positions their own list
	// (after email:b@x.test there: secret@evil.test), never ours.
	if evil, _ := walk(other, ""); strings.Join(evil, " ") != "email:b@x.test email:secret@evil.test" {
		t.Fatalf("the other tenant's list: %v", evil)
	}
	_, ours := walk(admin, "&channel=email")
	p := decode[gen.SuppressionPage](t, call(t, s, http.MethodGet, "/v1/suppressions?cursor="+url.QueryEscape(ours[0]), other, nil, nil), 200)
	for _, it := range p.Items {
		if it.Address != "secret@evil.test" {
			t.Fatalf("a foreign cursor listed %s to the other tenant", mustJSON(t, p))
		}
	}
	if a := call(t, s, http.MethodGet, "/v1/suppressions?channel=sms&cursor="+url.QueryEscape(ours[0]), admin, nil, nil); a.Status != 400 {
		t.Fatalf("an email cursor under the sms filter: %d %s", a.Status, a.Body)
	}
	for _, l := range []string{"0", "101", "-1", "99999999999999999999"} {
		if a := call(t, s, http.MethodGet, "/v1/suppressions?limit="+l, admin, nil, nil); a.Status != 400 {
			t.Fatalf("limit %s: %d %s", l, a.Status, a.Body)
		}
	}
}

// TestUnsubscribePageButtonBehindAPathPrefix: INBOX_PUBLIC_URL may hold a path (a
// proxy that serves the gateway under /notify); the link works, and so must the
// button of the page its GET shows. The form's action was the absolute path
// /v1/unsubscribe, which left the prefix out: the button posted past the proxy (404)
// and the user stayed subscribed.
func TestUnsubscribePageButtonBehindAPathPrefix(t *testing.T) {
	t.Parallel()
	s, err := unsub.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	prefs := &prefsLog{}
	mux := http.NewServeMux()
	mux.Handle("/notify/", http.StripPrefix("/notify", rest.NewUnsubscribe(rest.UnsubscribeOptions{Signer: s, Prefs: prefs})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	link, err := s.URL(srv.URL+"/notify", unsub.Claims{TenantID: "acme", UserID: "kim", Category: "news", Channel: inbox.ChannelEmail})
	if err != nil {
		t.Fatal(err)
	}
	st, _, b := doUnsub(t, http.MethodGet, link, "", nil)
	if st != 200 {
		t.Fatalf("GET %s: %d %s", link, st, b)
	}
	_, rest0, ok := strings.Cut(b, `<form method="post" action="`)
	action, _, _ := strings.Cut(rest0, `"`)
	if !ok || action == "" {
		t.Fatalf("no form in %s", b)
	}
	base, _ := url.Parse(link)
	ref, err := url.Parse(strings.ReplaceAll(action, "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	target := base.ResolveReference(ref).String()
	if st, _, b := doUnsub(t, http.MethodPost, target, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click")); st != 200 || prefs.count() != 1 {
		t.Fatalf("the page's button posted to %s: %d %s (%d updates)", target, st, b, prefs.count())
	}
}
