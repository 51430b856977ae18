package channel_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

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

// TestAttackWebhookPublicOnly: with PublicOnly, a tenant's URL naming a loopback address,
// a name resolving to one, or a private, link-local or mapped address is refused before
// any byte is sent (Permanent, Code "address"); without it the same receiver is reached.
func TestAttackWebhookPublicOnly(t *testing.T) {
	t.Parallel()
	recv, hookURL := channeltest.StartWebhook(t, rawSecret)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.Split(hookURL, "/hook")[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	guarded := channel.NewWebhook(channel.WebhookConfig{PublicOnly: true, Timeout: 2 * time.Second})
	for _, u := range []string{hookURL, "http://localhost:" + port + "/hook", "http://[::ffff:127.0.0.1]:" + port + "/hook",
		"http://10.0.0.1:" + port + "/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:" + port + "/", "http://0.0.0.0:" + port + "/"} {
		_, err := guarded.Send(context.Background(), hookMsg(u, rawSecret))
		wantErr(t, err, channel.Permanent, 0, "address")
	}
	if n := len(recv.Requests()); n != 0 {
		t.Fatalf("the receiver got %d requests through the guard", n)
	}
	if _, err := channel.NewWebhook(channel.WebhookConfig{}).Send(context.Background(), hookMsg(hookURL, rawSecret)); err != nil {
		t.Fatalf("without PublicOnly: %v", err)
	}
	for addr, public := range map[string]bool{"8.8.8.8": true, "2606:4700::1111": true, "127.0.0.1": false, "192.168.1.1": false,
		"172.16.0.1": false, "100.64.0.1": false, "fd00::1": false, "fe80::1": false, "::": false, "64:ff9b::a00:1": false, "::ffff:10.0.0.1": false} {
		if got := channel.PublicAddr(netip.MustParseAddr(addr)); got != public {
			t.Errorf("PublicAddr(%s) = %v, want %v", addr, got, public)
		}
	}
}
