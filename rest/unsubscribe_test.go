package rest_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// TestOneClickUnsubscribe: a non-critical email carries RFC 8058's List-Unsubscribe
// (a signed link under INBOX_PUBLIC_URL) and List-Unsubscribe-Post; a critical one
// carries neither. GET of the link changes nothing; a tampered link, a link without
// the one-click body and a link signed under another secret change nothing and answer
// 400; the one-click POST (no token) opts the user out of email for that category,
// and a replay answers 200 too. The next email of that category is skipped
// (category_opted_out); another category still goes out.
func TestOneClickUnsubscribe(t *testing.T) {
	t.Parallel()
	s, smtpSrv, admin := newEmailing(t, "kim", "kim@example.test", "digest", func(c *app.Config) {
		c.PublicURL = "https://notify.example.test"
		c.UnsubscribeSecret = strings.Repeat("u", 32)
	})
	decode[map[string]any](t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{"criticalCategories": []string{"security"}}), 200)
	sendEmail := func(key, category string) string {
		t.Helper()
		return *decode[gen.Accepted](t, send(t, s, admin, key, map[string]any{"recipientUserId": "kim", "type": "digest", "category": category, "template": "digest"}), 202).NotificationId
	}
	wait := func(n int) []channeltest.SMTPMessage {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		ms, err := smtpSrv.WaitMessages(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	sendEmail("news-1", "news")
	m := wait(1)[0]
	link := strings.Trim(m.Header.Get("List-Unsubscribe"), "<>")
	if !strings.HasPrefix(link, "https://notify.example.test/v1/unsubscribe?t=") || m.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("headers of a non-critical email: List-Unsubscribe %q, List-Unsubscribe-Post %q", m.Header.Get("List-Unsubscribe"), m.Header.Get("List-Unsubscribe-Post"))
	}
	sendEmail("sec-1", "security")
	if c := wait(2)[1]; c.Header.Get("List-Unsubscribe") != "" || c.Header.Get("List-Unsubscribe-Post") != "" {
		t.Fatalf("a critical email carries List-Unsubscribe %q", c.Header.Get("List-Unsubscribe"))
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	local := s.HTTP.URL + u.Path + "?" + u.RawQuery
	do := func(method, target, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	emailOn := func() bool {
		t.Helper()
		p := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/kim/preferences", admin, nil, nil), 200)
		for _, c := range p.Categories {
			if c.Category == "news" {
				return c.Channels.Email
			}
		}
		return p.Channels.Email
	}
	// GET: a page with a button, nothing changed.
	if st, b := do(http.MethodGet, local, ""); st != 200 || !strings.Contains(b, `name="List-Unsubscribe" value="One-Click"`) || !emailOn() {
		t.Fatalf("GET: %d, email on %v: %s", st, emailOn(), b)
	}
	tok := u.Query().Get("t")
	tampered := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "AB"}[!strings.HasSuffix(tok, "AA")]
	other := strings.Replace(tok, ".", "x.", 1)
	for name, target := range map[string]string{
		"tampered signature": s.HTTP.URL + rest.UnsubscribePath + "?t=" + url.QueryEscape(tampered),
		"tampered payload":   s.HTTP.URL + rest.UnsubscribePath + "?t=" + url.QueryEscape(other),
		"no token":           s.HTTP.URL + rest.UnsubscribePath,
		"garbage":            s.HTTP.URL + rest.UnsubscribePath + "?t=" + strings.Repeat("A", 5000),
	} {
		if st, b := do(http.MethodPost, target, "List-Unsubscribe=One-Click"); st != 400 || !strings.Contains(b, "BAD_USER_INPUT") {
			t.Fatalf("%s: %d %s", name, st, b)
		}
	}
	if st, b := do(http.MethodPost, local, "unsubscribe=yes"); st != 400 {
		t.Fatalf("POST without the one-click body: %d %s", st, b)
	}
	if !emailOn() {
		t.Fatal("a refused request changed the preferences")
	}
	for i := range 2 { // the click, and a replay
		if st, b := do(http.MethodPost, local, "List-Unsubscribe=One-Click"); st != 200 || !strings.Contains(b, `"unsubscribed":true`) {
			t.Fatalf("one-click POST %d: %d %s", i, st, b)
		}
	}
	if emailOn() {
		t.Fatal("the one-click POST left news email on")
	}
	// The next news email is skipped; a security one still goes out.
	id := sendEmail("news-2", "news")
	sendEmail("sec-2", "security")
	wait(3)
	testgw.WaitFor(t, 30*time.Second, "news-2's email record", func() bool {
		a := call(t, s, http.MethodGet, "/v1/notifications/"+id+"/status", admin, nil, nil)
		if a.Status != 200 {
			return false
		}
		for _, c := range decode[gen.NotificationStatus](t, a, 200).Channels {
			if c.Channel == "email" {
				if c.Status != "skipped" || c.Error == nil || *c.Error != "category_opted_out" {
					t.Fatalf("news-2's email record: %+v", c)
				}
				return true
			}
		}
		return false
	})
	if n := len(smtpSrv.Messages()); n != 3 {
		t.Fatalf("%d emails after the opt-out, want 3 (news-2 skipped)", n)
	}
}
