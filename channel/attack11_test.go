package channel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

// Attacks on the channel adapters (see the report of helper "attack11").

// TestAttackEmailHeaderInjection: a subject rendered from template data may carry CR LF
// and a header of the attacker's (Bcc, a second X-SMTPAPI naming another record); an
// address from a profile may too. Neither may add a header or a recipient: the subject
// is sent as one encoded header, the address refused (permanent, nothing sent).
func TestAttackEmailHeaderInjection(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	ch := newEmail(t, channel.EmailConfig{URL: srv.URL(), SendGrid: true})
	m := emailMsg()
	m.Subject = "Hello\r\nBcc: evil@attacker.example\r\nX-SMTPAPI: {\"unique_args\":{\"inbox_ref\":\"other\"}}\r\n\r\nbody"
	if _, err := ch.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitMessages(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	got := msgs[0]
	if len(got.To) != 1 || got.To[0] != m.To {
		t.Fatalf("envelope recipients %v, want only %s", got.To, m.To)
	}
	if b := got.Header.Get("Bcc"); b != "" {
		t.Fatalf("an injected Bcc header: %q", b)
	}
	if vs := got.Header["X-Smtpapi"]; len(vs) != 1 || strings.Contains(vs[0], "other") {
		t.Fatalf("X-SMTPAPI headers %q, want the gateway's one", vs)
	}
	head, _, _ := strings.Cut(string(got.Raw), "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		if strings.HasPrefix(strings.ToLower(line), "bcc:") {
			t.Fatalf("an injected header line %q in\n%s", line, head)
		}
	}
	if !strings.Contains(got.Subject, "Bcc: evil@attacker.example") {
		t.Fatalf("the subject %q lost its text (it is sent encoded, whole)", got.Subject)
	}

	for _, to := range []string{"ada@example.org\r\nBcc: evil@attacker.example", "ada@example.org>\r\nRCPT TO:<evil@attacker.example", "ada@example.org, evil@attacker.example"} {
		m := emailMsg()
		m.To = to
		_, err := ch.Send(context.Background(), m)
		wantErr(t, err, channel.Permanent, 0, "message")
	}
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("%d messages received, want the first only", n)
	}
}
