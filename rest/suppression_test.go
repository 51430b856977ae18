package rest_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/channel/smtpcatch"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// TestSMTPHardBounceSuppressesTheAddress: an SMTP server's 550 to RCPT TO fails the
// record and puts the address on the tenant's suppression list; the next send to it is
// skipped with reason suppressed and never reaches the SMTP server; an admin lists it
// (a forged cursor and a non-admin token refused), deletes it (204, then 404), and the
// next send goes out again.
func TestSMTPHardBounceSuppressesTheAddress(t *testing.T) {
	t.Parallel()
	s, smtpSrv, admin := newEmailing(t, "lee", "Lee@Example.test", "note", nil)
	emailRecord := func(id string) gen.DeliveryRecord {
		t.Helper()
		var rec gen.DeliveryRecord
		testgw.WaitFor(t, 30*time.Second, "the email record settled", func() bool {
			a := call(t, s, http.MethodGet, "/v1/notifications/"+id+"/status", admin, nil, nil)
			if a.Status != 200 {
				return false
			}
			for _, c := range decode[gen.NotificationStatus](t, a, 200).Channels {
				if c.Channel == "email" && c.Status != "queued" {
					rec = c
					return true
				}
			}
			return false
		})
		return rec
	}
	sendNote := func(key string) string {
		t.Helper()
		return *decode[gen.Accepted](t, send(t, s, admin, key, map[string]any{"recipientUserId": "lee", "type": "note", "template": "note"}), 202).NotificationId
	}

	smtpSrv.Fail(smtpcatch.StepRcpt, 550, [3]int{5, 1, 1}, "mailbox unavailable", 1)
	if rec := emailRecord(sendNote("bounce-1")); rec.Status != "failed" {
		t.Fatalf("the bounced email's record: %+v", rec)
	}
	page := decode[gen.SuppressionPage](t, call(t, s, http.MethodGet, "/v1/suppressions", admin, nil, nil), 200)
	if len(page.Items) != 1 || page.Items[0].Address != "lee@example.test" || page.Items[0].Channel != "email" || page.Items[0].Reason != "smtp_5xx" {
		t.Fatalf("the list after the bounce: %s", mustJSON(t, page))
	}
	received := len(smtpSrv.Messages())
	if rec := emailRecord(sendNote("after-bounce")); rec.Status != "skipped" || rec.Error == nil || *rec.Error != "suppressed" {
		t.Fatalf("the next email's record: %s", mustJSON(t, rec))
	}
	if n := len(smtpSrv.Messages()); n != received {
		t.Fatalf("the SMTP server received %d messages after the suppression, want %d", n, received)
	}
	// Admin only; a forged cursor is refused; the channel filter.
	user := s.Token(tenant, "lee")
	if a := call(t, s, http.MethodGet, "/v1/suppressions", user, nil, nil); a.Status != 403 {
		t.Fatalf("a user's token: %d %s", a.Status, a.Body)
	}
	for _, c := range []string{"garbage!", "eyJjIjoiRU1BSUwiLCJhIjoiTGVlQEV4YW1wbGUudGVzdCJ9", "eyJjIjoiUFVTSCIsImEiOiJ4In0"} {
		if a := call(t, s, http.MethodGet, "/v1/suppressions?cursor="+url.QueryEscape(c), admin, nil, nil); a.Status != 400 {
			t.Fatalf("cursor %q: %d %s", c, a.Status, a.Body)
		}
	}
	if p := decode[gen.SuppressionPage](t, call(t, s, http.MethodGet, "/v1/suppressions?channel=sms", admin, nil, nil), 200); len(p.Items) != 0 {
		t.Fatalf("sms entries: %s", mustJSON(t, p))
	}
	// Delete (case-insensitive), then it is gone; the next email goes out.
	if a := call(t, s, http.MethodDelete, "/v1/suppressions/email/"+url.PathEscape("LEE@example.test"), admin, nil, nil); a.Status != 204 {
		t.Fatalf("delete: %d %s", a.Status, a.Body)
	}
	if a := call(t, s, http.MethodDelete, "/v1/suppressions/email/"+url.PathEscape("lee@example.test"), admin, nil, nil); a.Status != 404 {
		t.Fatalf("delete again: %d %s", a.Status, a.Body)
	}
	if rec := emailRecord(sendNote("after-delete")); rec.Status != "sent" && rec.Status != "delivered" {
		t.Fatalf("the email after the delete: %s", mustJSON(t, rec))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := smtpSrv.WaitMessages(ctx, received+1); err != nil {
		t.Fatal(err)
	}
}

// TestProfilesAndSettingsReadBack: GET /v1/users/{id} and GET /v1/tenant/settings
// answer what the PUTs stored (the webhook secret left out), empty before any PUT, to an
// admin only, and never another tenant's.
func TestProfilesAndSettingsReadBack(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	if p := decode[gen.UserProfile](t, call(t, s, http.MethodGet, "/v1/users/nia", admin, nil, nil), 200); p.Email != nil || p.Phone != nil {
		t.Fatalf("a profile before any PUT: %s", mustJSON(t, p))
	}
	put := decode[gen.UserProfile](t, call(t, s, http.MethodPut, "/v1/users/nia", admin, nil, map[string]any{"email": "nia@example.test", "locale": "de-DE", "timezone": "Europe/Berlin"}), 200)
	got := decode[gen.UserProfile](t, call(t, s, http.MethodGet, "/v1/users/nia", admin, nil, nil), 200)
	if mustJSON(t, got) != mustJSON(t, put) || deref(got.Email) != "nia@example.test" {
		t.Fatalf("GET %s, PUT answered %s", mustJSON(t, got), mustJSON(t, put))
	}
	putSet := decode[gen.TenantSettings](t, call(t, s, http.MethodPut, "/v1/tenant/settings", admin, nil, map[string]any{
		"criticalCategories": []string{"security"}, "webhook": map[string]any{"url": "https://hooks.example.test/x", "secret": "0123456789abcdef0123456789"}}), 200)
	gotSet := decode[gen.TenantSettings](t, call(t, s, http.MethodGet, "/v1/tenant/settings", admin, nil, nil), 200)
	if mustJSON(t, gotSet) != mustJSON(t, putSet) {
		t.Fatalf("GET %s, PUT answered %s", mustJSON(t, gotSet), mustJSON(t, putSet))
	}
	if b := mustJSON(t, gotSet); strings.Contains(b, "0123456789abcdef0123456789") {
		t.Fatalf("the webhook secret was returned: %s", b)
	}
	if a := call(t, s, http.MethodGet, "/v1/users/nia", s.Token(tenant, "nia"), nil, nil); a.Status != 403 {
		t.Fatalf("a user's token: %d %s", a.Status, a.Body)
	}
	other := s.Token("other-tenant", "svc", rest.ScopeAdmin)
	if p := decode[gen.UserProfile](t, call(t, s, http.MethodGet, "/v1/users/nia", other, nil, nil), 200); p.Email != nil {
		t.Fatalf("another tenant read nia's profile: %s", mustJSON(t, p))
	}
	if st := decode[gen.TenantSettings](t, call(t, s, http.MethodGet, "/v1/tenant/settings", other, nil, nil), 200); st.CriticalCategories != nil {
		t.Fatalf("another tenant read the settings: %s", mustJSON(t, st))
	}
}

// newEmailing is a gateway with its scheduler sending email to a local SMTP server (config
// adjusts the configuration further; nil: none), an admin and sender token, user's profile
// with email, and the template tpl with an email part.
func newEmailing(t *testing.T, user, email, tpl string, config func(*app.Config)) (*testgw.Server, *channeltest.SMTPServer, string) {
	t.Helper()
	smtpSrv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	s := testgw.NewWith(t, testgw.Options{Scheduler: true, Config: func(c *app.Config) {
		c.SMTPURL, c.EmailFrom = smtpSrv.URL(), "Inbox Tests <inbox@example.test>"
		if config != nil {
			config(c)
		}
	}})
	admin := s.Token(tenant, "svc", rest.ScopeSend, rest.ScopeAdmin)
	decode[map[string]any](t, call(t, s, http.MethodPut, "/v1/users/"+user, admin, nil, map[string]any{"email": email}), 200)
	decode[map[string]any](t, call(t, s, http.MethodPut, "/v1/templates/"+tpl, admin, nil, map[string]any{
		"locale": "en", "title": "Note", "body": "hello", "email": map[string]any{"subject": "Note", "text": "Hello"}}), 200)
	return s, smtpSrv, admin
}
