package channel_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

func newEmail(t *testing.T, cfg channel.EmailConfig) channel.Channel {
	t.Helper()
	if cfg.From == "" {
		cfg.From = "Inbox <no-reply@mail.example.com>"
	}
	ch, err := channel.NewEmail(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func emailMsg() channel.Message {
	return channel.Message{
		TenantID: "t1", UserID: "u1", NotificationID: "n1", Key: "EMAIL", Attempt: 1,
		IdempotencyKey: "dDEjbjEjRU1BSUw", To: "ada@example.org",
		Subject: "Your report is ready — ✓", Text: "Hello Ada,\nyour report is ready.", HTML: "<p>Hello <b>Ada</b>, your report is ready.</p>",
		CallbackRef: "dDEjbjEjRU1BSUw",
	}
}

// wantErr asserts err is a *channel.Error of kind, status and code.
func wantErr(t *testing.T, err error, kind channel.Kind, status int, code string) *channel.Error {
	t.Helper()
	var e *channel.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *channel.Error", err, err)
	}
	if e.Kind != kind || e.Status != status || e.Code != code {
		t.Fatalf("error %v: kind %v status %d code %q, want %v %d %q", e, e.Kind, e.Status, e.Code, kind, status, code)
	}
	if k, _ := channel.Classify(err); k != kind {
		t.Fatalf("Classify = %v, want %v", k, kind)
	}
	return e
}

func TestEmailSendsTextAndHTMLWithDerivedMessageID(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	unsub := func(m channel.Message) string { return "https://app.example.com/unsub?u=" + m.UserID }
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL(), SendGrid: true, ListUnsubscribe: unsub})
	if ch.Provider() != channel.ProviderSMTP {
		t.Fatalf("provider %q", ch.Provider())
	}
	m := emailMsg()
	res, err := ch.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Provider != channel.ProviderSMTP || res.MessageID != "dDEjbjEjRU1BSUw@mail.example.com" {
		t.Fatalf("result %+v", res)
	}
	// a second attempt of the same record carries the same Message-ID
	m.Attempt = 2
	res2, err := ch.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if res2.MessageID != res.MessageID {
		t.Fatalf("attempt 2 Message-ID %q, want %q", res2.MessageID, res.MessageID)
	}
	got := srv.Messages()
	if len(got) != 2 {
		t.Fatalf("%d messages received, want 2", len(got))
	}
	g := got[0]
	if g.From != "no-reply@mail.example.com" || len(g.To) != 1 || g.To[0] != "ada@example.org" {
		t.Fatalf("envelope from %q to %q", g.From, g.To)
	}
	if g.MessageID != "<dDEjbjEjRU1BSUw@mail.example.com>" || got[1].MessageID != g.MessageID {
		t.Fatalf("Message-ID %q / %q", g.MessageID, got[1].MessageID)
	}
	if g.Subject != m.Subject {
		t.Fatalf("subject %q", g.Subject)
	}
	if strings.TrimRight(strings.ReplaceAll(g.Text, "\r\n", "\n"), "\n") != m.Text || strings.TrimSpace(g.HTML) != m.HTML {
		t.Fatalf("parts text %q html %q", g.Text, g.HTML)
	}
	h := g.Header
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/alternative") {
		t.Fatalf("Content-Type %q", ct)
	}
	if x := h.Get("X-Smtpapi"); x != `{"unique_args":{"inbox_ref":"dDEjbjEjRU1BSUw"}}` {
		t.Fatalf("X-SMTPAPI %q", x)
	}
	if lu := h.Get("List-Unsubscribe"); lu != "<https://app.example.com/unsub?u=u1>" || h.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("List-Unsubscribe %q / %q", lu, h.Get("List-Unsubscribe-Post"))
	}
	if h.Get("From") != `"Inbox" <no-reply@mail.example.com>` || h.Get("To") != "<ada@example.org>" || h.Get("Date") == "" {
		t.Fatalf("From %q To %q Date %q", h.Get("From"), h.Get("To"), h.Get("Date"))
	}
}

func TestEmailTextOnlyNoSendGridHeader(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
	m := emailMsg()
	m.HTML = ""
	m.IdempotencyKey = "key with spaces/and:colons"
	res, err := ch.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	g := srv.Messages()[0]
	if ct := g.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want text/plain", ct)
	}
	if g.HTML != "" || g.Header.Get("X-Smtpapi") != "" || g.Header.Get("List-Unsubscribe") != "" {
		t.Fatalf("html %q X-SMTPAPI %q List-Unsubscribe %q", g.HTML, g.Header.Get("X-Smtpapi"), g.Header.Get("List-Unsubscribe"))
	}
	// a key that is no dot-atom is hashed: still stable, still a valid msg-id
	local, domain, ok := strings.Cut(res.MessageID, "@")
	if !ok || len(local) != 32 || domain != "mail.example.com" || g.MessageID != "<"+res.MessageID+">" {
		t.Fatalf("Message-ID %q (header %q)", res.MessageID, g.MessageID)
	}
}

func TestEmailSMTPReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		step     channeltest.Step
		code     int
		enhanced [3]int
		kind     channel.Kind
	}{
		{"mail 421", channeltest.StepMail, 421, [3]int{4, 3, 2}, channel.Transient},
		{"rcpt 450 mailbox busy", channeltest.StepRcpt, 450, [3]int{4, 2, 1}, channel.Transient},
		{"rcpt 550 no such user", channeltest.StepRcpt, 550, [3]int{5, 1, 1}, channel.Permanent},
		{"data 451 local error", channeltest.StepData, 451, [3]int{4, 3, 0}, channel.Transient},
		{"data 552 too big", channeltest.StepData, 552, [3]int{5, 3, 4}, channel.Permanent},
		{"data 554 rejected", channeltest.StepData, 554, [3]int{5, 7, 1}, channel.Permanent},
		// 5xx replies to RCPT TO that are about the gateway, not the recipient's address:
		// a relay that refuses to relay for it, a sender the server refuses, a policy.
		{"rcpt 554 relay access denied", channeltest.StepRcpt, 554, [3]int{5, 7, 1}, channel.Permanent},
		{"rcpt 553 sender address rejected", channeltest.StepRcpt, 553, [3]int{5, 1, 8}, channel.Permanent},
		{"rcpt 550 no enhanced code", channeltest.StepRcpt, 550, [3]int{-1, -1, -1}, channel.Permanent},
		// Postfix's "Sender address rejected: User unknown in local recipient table",
		// delayed to RCPT TO, is 5.1.0 (the recipient's own is 5.1.1).
		{"rcpt 550 5.1.0 sender unknown", channeltest.StepRcpt, 550, [3]int{5, 1, 0}, channel.Permanent},
		{"rcpt 550 mailbox disabled", channeltest.StepRcpt, 550, [3]int{5, 2, 1}, channel.Permanent},
		{"rcpt 550 null mx", channeltest.StepRcpt, 556, [3]int{5, 1, 10}, channel.Permanent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
			srv.Fail(c.step, c.code, c.enhanced, "scripted failure", 0)
			ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
			_, err := ch.Send(context.Background(), emailMsg())
			enh := fmt.Sprintf("%d.%d.%d", c.enhanced[0], c.enhanced[1], c.enhanced[2])
			if c.enhanced[0] < 0 {
				enh = ""
			}
			e := wantErr(t, err, c.kind, c.code, enh)
			if !strings.Contains(e.Error(), "scripted failure") {
				t.Fatalf("error %q does not quote the server", e)
			}
			// Only a 5xx to RCPT TO whose enhanced code names the recipient's mailbox
			// (5.1.x but the generic 5.1.0 and the sender's 5.1.7 and 5.1.8, 5.2.1
			// disabled) refuses the
			// recipient itself (a hard bounce); a relay's or a policy's refusal at RCPT TO
			// would suppress every address the gateway sends to.
			hard := c.enhanced[0] == 5 && (c.enhanced[1] == 1 && c.enhanced[2] != 0 && c.enhanced[2] != 7 && c.enhanced[2] != 8 ||
				c.enhanced[1] == 2 && c.enhanced[2] == 1)
			if want := c.step == channeltest.StepRcpt && hard; e.Suppress != want {
				t.Fatalf("Suppress %v, want %v", e.Suppress, want)
			}
			if n := len(srv.Messages()); n != 0 {
				t.Fatalf("%d messages kept", n)
			}
		})
	}
}

func TestEmailTransientThenRecovers(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	srv.Fail(channeltest.StepRcpt, 451, [3]int{4, 4, 5}, "try later", 1)
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
	_, err := ch.Send(context.Background(), emailMsg())
	wantErr(t, err, channel.Transient, 451, "4.4.5")
	if _, err := ch.Send(context.Background(), emailMsg()); err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

func TestEmailAuth(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{Username: "apikey", Password: "s3cret"})
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
	if _, err := ch.Send(context.Background(), emailMsg()); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages(); len(got) != 1 || got[0].AuthUser != "apikey" {
		t.Fatalf("messages %+v", got)
	}

	bad := newEmail(t, channel.EmailConfig{URL: "smtp://apikey:wrong@" + srv.Addr()})
	_, err := bad.Send(context.Background(), emailMsg())
	wantErr(t, err, channel.Permanent, 535, "auth")

	// no credentials against a server requiring them: MAIL refused (502 5.7.0), permanent
	none := newEmail(t, channel.EmailConfig{URL: "smtp://" + srv.Addr()})
	_, err = none.Send(context.Background(), emailMsg())
	wantErr(t, err, channel.Permanent, 502, "5.7.0")
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

func TestEmailTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("no greeting", func(t *testing.T) {
		t.Parallel()
		silent := channeltest.StartSilent(t)
		ch := newEmail(t, channel.EmailConfig{URL: "smtp://" + silent.Addr(), Timeout: 300 * time.Millisecond})
		start := time.Now()
		_, err := ch.Send(context.Background(), emailMsg())
		wantErr(t, err, channel.Transient, 0, "timeout")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
		if silent.Accepted() != 1 {
			t.Fatalf("%d connections", silent.Accepted())
		}
	})
	t.Run("ctx deadline shorter than Timeout", func(t *testing.T) {
		t.Parallel()
		silent := channeltest.StartSilent(t)
		ch := newEmail(t, channel.EmailConfig{URL: "smtp://" + silent.Addr(), Timeout: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := ch.Send(ctx, emailMsg())
		wantErr(t, err, channel.Transient, 0, "timeout")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("reply to DATA withheld", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
		srv.Hold(channeltest.StepData)
		ch := newEmail(t, channel.EmailConfig{URL: srv.URL(), Timeout: 400 * time.Millisecond})
		start := time.Now()
		_, err := ch.Send(context.Background(), emailMsg())
		wantErr(t, err, channel.Transient, 0, "timeout")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
		// the server has the message although the client could not know: the caller's
		// claim rule (never resend an unconfirmed claim) is what prevents a duplicate
		if n := len(srv.Messages()); n != 1 {
			t.Fatalf("%d messages, want 1", n)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
		srv.Hold(channeltest.StepMail)
		ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		_, err := ch.Send(ctx, emailMsg())
		if k, _ := channel.Classify(err); err == nil || k != channel.Transient {
			t.Fatalf("err %v", err)
		}
	})
}

func TestEmailConnectionRefusedIsTransient(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ch := newEmail(t, channel.EmailConfig{URL: "smtp://" + addr, Timeout: time.Second})
	_, err = ch.Send(context.Background(), emailMsg())
	wantErr(t, err, channel.Transient, 0, "")
}

// tlsPair returns a server TLS config with httptest's certificate (valid for
// 127.0.0.1) and a client config trusting it.
func tlsPair(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.StartTLS()
	t.Cleanup(hs.Close)
	return hs.TLS, hs.Client().Transport.(*http.Transport).TLSClientConfig
}

func TestEmailTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := tlsPair(t)
	t.Run("STARTTLS with AUTH", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{TLSConfig: serverTLS, Username: "u", Password: "p"})
		ch := newEmail(t, channel.EmailConfig{URL: srv.URL(), TLSConfig: clientTLS})
		if _, err := ch.Send(context.Background(), emailMsg()); err != nil {
			t.Fatal(err)
		}
		if got := srv.Messages(); len(got) != 1 || !got[0].TLS || got[0].AuthUser != "u" {
			t.Fatalf("messages %+v", got)
		}
	})
	t.Run("smtps", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{TLSConfig: serverTLS, ImplicitTLS: true, Username: "u", Password: "p"})
		if !strings.HasPrefix(srv.URL(), "smtps://") {
			t.Fatalf("url %q", srv.URL())
		}
		ch := newEmail(t, channel.EmailConfig{URL: srv.URL(), TLSConfig: clientTLS})
		if _, err := ch.Send(context.Background(), emailMsg()); err != nil {
			t.Fatal(err)
		}
		if got := srv.Messages(); len(got) != 1 || !got[0].TLS {
			t.Fatalf("messages %+v", got)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		t.Parallel()
		srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{TLSConfig: serverTLS, ImplicitTLS: true})
		ch := newEmail(t, channel.EmailConfig{URL: srv.URL(), Timeout: 2 * time.Second})
		_, err := ch.Send(context.Background(), emailMsg())
		wantErr(t, err, channel.Permanent, 0, "tls")
	})
}

func TestEmailConcurrentSends(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			m := emailMsg()
			m.To = fmt.Sprintf("user%d@example.org", i)
			m.IdempotencyKey = fmt.Sprintf("k%d", i)
			if _, err := ch.Send(context.Background(), m); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]bool{}
	for _, m := range srv.Messages() {
		seen[m.To[0]+" "+m.MessageID] = true
	}
	if len(seen) != 20 {
		t.Fatalf("%d distinct messages, want 20", len(seen))
	}
}

func TestNewEmailRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []channel.EmailConfig{
		{URL: "http://localhost:25", From: "a@example.com"},
		{URL: "smtp://:25", From: "a@example.com"},
		{URL: "smtp://localhost:99999", From: "a@example.com"},
		{URL: "smtp://localhost:25", From: "not an address"},
		{URL: "::", From: "a@example.com"},
	} {
		if _, err := channel.NewEmail(cfg); err == nil {
			t.Errorf("NewEmail(%+v) succeeded", cfg)
		}
	}
}

func TestEmailBadRecipientIsPermanent(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
	m := emailMsg()
	m.To = "not an address"
	_, err := ch.Send(context.Background(), m)
	wantErr(t, err, channel.Permanent, 0, "message")
}

// TestEmailLeavesOutAnUnsubscribeLinkOverTheLineLimit: List-Unsubscribe goes out as one
// unfolded line; a link that would make it longer than RFC 5322's 998 characters (a
// token of long ids) is left out rather than sent on a line a server may refuse the
// message for, and a link that fits exactly is kept.
func TestEmailLeavesOutAnUnsubscribeLinkOverTheLineLimit(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL()})
	base := "https://notify.example.com/v1/unsubscribe?t="
	fits := base + strings.Repeat("A", 998-len("List-Unsubscribe: <>")-len(base))
	for i, u := range []string{fits, fits + "A", base + strings.Repeat("A", 1500)} {
		m := emailMsg()
		m.Unsubscribe = u
		if _, err := ch.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		g := srv.Messages()[i]
		if got, want := g.Header.Get("List-Unsubscribe") != "", i == 0; got != want {
			t.Fatalf("a %d-character link: List-Unsubscribe sent %v, want %v", len(u), got, want)
		}
		for _, l := range strings.Split(string(g.Raw), "\r\n") {
			if len(l) > 998 {
				t.Fatalf("a %d-character link: a line of %d characters went out", len(u), len(l))
			}
		}
	}
}
