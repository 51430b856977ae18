package channel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// DefaultTimeout bounds one provider call when a config leaves Timeout 0.
const DefaultTimeout = 15 * time.Second

// EmailConfig configures NewEmail.
type EmailConfig struct {
	// URL is the SMTP server: smtp://[user:pass@]host[:port] (port 587 by default; STARTTLS
	// when the server offers it) or smtps://[user:pass@]host[:port] (implicit TLS, port
	// 465 by default). With a user, the adapter authenticates with AUTH PLAIN, which
	// go-mail allows only over TLS or to localhost.
	URL string
	// From is the sender, an RFC 5322 address ("Inbox <no-reply@example.com>"); its domain
	// also names the Message-ID's.
	From string
	// SendGrid adds SendGrid's X-SMTPAPI header carrying the message's CallbackRef as the
	// unique argument inbox_ref, which SendGrid's event webhook echoes.
	SendGrid bool
	// Timeout bounds one Send from dial to the last reply (and each network read or
	// write within it); DefaultTimeout when 0. A shorter ctx deadline wins.
	Timeout time.Duration
	// TLSConfig is used for STARTTLS and smtps; nil: the system roots and the URL's host.
	TLSConfig *tls.Config
	// ListUnsubscribe, when set, returns a message's unsubscribe URL (https: or mailto:);
	// a non-empty answer adds List-Unsubscribe and, for https URLs, RFC 8058's
	// List-Unsubscribe-Post one-click header.
	ListUnsubscribe func(Message) string
}

// email is the SMTP adapter (see NewEmail).
type email struct {
	host      string
	port      int
	ssl       bool
	user      string
	pass      string
	from      *mail.Address
	domain    string
	sendGrid  bool
	timeout   time.Duration
	tlsConfig *tls.Config
	unsub     func(Message) string
}

// NewEmail returns the email adapter: one SMTP connection per Send (dial, EHLO,
// STARTTLS/AUTH as configured, MAIL, RCPT, DATA, QUIT) through go-mail. The message
// has a text part and, when Message.HTML is set, an HTML alternative; its Message-ID is
// derived from Message.IdempotencyKey, so every attempt of one delivery record carries
// the same id (receivers and providers can drop a duplicate); Result.MessageID is that
// Message-ID without angle brackets.
//
// Errors (*Error, Provider "smtp"): an SMTP 4xx reply is Transient, 5xx Permanent,
// Status the reply code and Code its enhanced status code ("5.1.1") when the server
// gave one; an authentication failure is Permanent with Code "auth" (a configuration
// error: retrying with the same credentials cannot succeed) unless the server answered
// 4xx; a certificate the TLS config does not trust is Permanent with Code "tls"; a
// failure to connect, a timeout (Code "timeout") or a dropped connection is Transient.
// An error after the server accepted the DATA (a failing RSET or QUIT) is a success.
// NewEmail fails on a malformed URL or From.
func NewEmail(cfg EmailConfig) (Channel, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("channel: email url: %w", err)
	}
	e := &email{sendGrid: cfg.SendGrid, timeout: cfg.Timeout, unsub: cfg.ListUnsubscribe}
	switch u.Scheme {
	case "smtp":
		e.port = 587
	case "smtps":
		e.port, e.ssl = 465, true
	default:
		return nil, fmt.Errorf("channel: email url: scheme %q, want smtp or smtps", u.Scheme)
	}
	e.host = u.Hostname()
	if e.host == "" {
		return nil, errors.New("channel: email url: no host")
	}
	if p := u.Port(); p != "" {
		if e.port, err = strconv.Atoi(p); err != nil || e.port < 1 || e.port > 65535 {
			return nil, fmt.Errorf("channel: email url: bad port %q", p)
		}
	}
	if u.User != nil {
		e.user = u.User.Username()
		e.pass, _ = u.User.Password()
	}
	if e.from, err = mail.ParseAddress(cfg.From); err != nil {
		return nil, fmt.Errorf("channel: email from %q: %w", cfg.From, err)
	}
	if at := strings.LastIndexByte(e.from.Address, '@'); at > 0 {
		e.domain = e.from.Address[at+1:]
	}
	if e.timeout <= 0 {
		e.timeout = DefaultTimeout
	}
	if cfg.TLSConfig != nil {
		e.tlsConfig = cfg.TLSConfig.Clone()
	} else {
		e.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if e.tlsConfig.ServerName == "" {
		e.tlsConfig.ServerName = e.host
	}
	return e, nil
}

// Provider returns ProviderSMTP.
func (e *email) Provider() string { return ProviderSMTP }

// Send sends m as one email (see NewEmail).
func (e *email) Send(ctx context.Context, m Message) (Result, error) {
	msg, err := e.message(m)
	if err != nil {
		return Result{}, &Error{Provider: ProviderSMTP, Kind: Permanent, Code: "message", Err: err}
	}
	timeout := e.timeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			timeout = left
		}
	}
	if timeout <= 0 {
		return Result{}, &Error{Provider: ProviderSMTP, Kind: Transient, Code: "timeout", Err: context.DeadlineExceeded}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The dial function closes the connection when ctx ends, so a server that stops
	// answering mid-transaction cannot hold Send past its deadline; go-mail's own
	// timeout (connection deadlines) backs it up.
	var stops []func() bool
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	dial := func(dctx context.Context, network, addr string) (net.Conn, error) {
		d := &net.Dialer{}
		var conn net.Conn
		var err error
		if e.ssl {
			conn, err = (&tls.Dialer{NetDialer: d, Config: e.tlsConfig}).DialContext(dctx, network, addr)
		} else {
			conn, err = d.DialContext(dctx, network, addr)
		}
		if err != nil {
			return nil, err
		}
		stops = append(stops, context.AfterFunc(ctx, func() { _ = conn.Close() }))
		return conn, nil
	}
	opts := []gomail.Option{
		gomail.WithPort(e.port),
		gomail.WithTimeout(timeout),
		gomail.WithTLSConfig(e.tlsConfig),
		gomail.WithDialContextFunc(dial),
	}
	if e.ssl {
		// the dial function does the TLS handshake; go-mail must not STARTTLS again
		opts = append(opts, gomail.WithSSL(), gomail.WithTLSPolicy(gomail.NoTLS))
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if e.user != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain), gomail.WithUsername(e.user), gomail.WithPassword(e.pass))
	}
	client, err := gomail.NewClient(e.host, opts...)
	if err != nil {
		return Result{}, &Error{Provider: ProviderSMTP, Kind: Permanent, Code: "config", Err: err}
	}
	res := Result{Provider: ProviderSMTP, MessageID: strings.Trim(msg.GetMessageID(), "<>")}
	err = client.DialAndSendWithContext(ctx, msg)
	if err == nil || msg.IsDelivered() {
		return res, nil
	}
	return Result{}, classifySMTP(ctx, err)
}

// message builds m's email.
func (e *email) message(m Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	msg.FromMailAddress(e.from)
	if err := msg.To(m.To); err != nil {
		return nil, fmt.Errorf("recipient %q: %w", m.To, err)
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	msg.SetMessageIDWithValue(e.messageID(m.IdempotencyKey))
	msg.SetGenHeader(gomail.HeaderUserAgent, "inbox-gateway")
	switch {
	case m.HTML == "":
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	case m.Text == "":
		msg.SetBodyString(gomail.TypeTextHTML, m.HTML)
	default:
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	if e.sendGrid && m.CallbackRef != "" {
		b, err := json.Marshal(map[string]any{"unique_args": map[string]string{"inbox_ref": m.CallbackRef}})
		if err != nil {
			return nil, err
		}
		msg.SetGenHeaderPreformatted("X-SMTPAPI", string(b))
	}
	u := m.Unsubscribe
	if u == "" && e.unsub != nil {
		u = e.unsub(m)
	}
	// The header goes out unfolded (RFC 2369: no whitespace inside the brackets): a
	// link that would make its line longer than RFC 5322's 998 characters is left out,
	// as a server may refuse the whole message for it.
	if u != "" && !strings.ContainsAny(u, "<>\r\n") && len("List-Unsubscribe: <")+len(u)+len(">") <= maxHeaderLine {
		msg.SetGenHeaderPreformatted("List-Unsubscribe", "<"+u+">")
		// RFC 8058 asks for HTTPS; dev mode's links are http://localhost, which mail
		// clients do not call but a developer can follow.
		if strings.HasPrefix(u, "https:") || strings.HasPrefix(u, "http:") {
			msg.SetGenHeaderPreformatted("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
		}
	}
	return msg, nil
}

// maxHeaderLine is RFC 5322's limit of a line's characters (CRLF excluded).
const maxHeaderLine = 998

// messageID derives the Message-ID (without brackets) from an idempotency key: the key
// itself when it is a dot-atom of at most 128 characters, else the first 32 hex digits
// of its SHA-256; a random id when key is "" (no retry can reuse it).
func (e *email) messageID(key string) string {
	domain := e.domain
	if domain == "" {
		domain = "inbox.invalid"
	}
	if key == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b) + "@" + domain
	}
	if dotAtom(key) && len(key) <= 128 {
		return key + "@" + domain
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16]) + "@" + domain
}

// dotAtom reports whether s is an RFC 5322 dot-atom-text of letters, digits and
// "-_.=+" (the safe subset of atext).
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.=+", c) >= 0) {
			return false
		}
	}
	return true
}

// classifySMTP turns a go-mail error into an *Error (see NewEmail).
func classifySMTP(ctx context.Context, err error) *Error {
	out := &Error{Provider: ProviderSMTP, Kind: Transient, Err: err}
	code, enhanced := 0, ""
	var se *gomail.SendError
	var te *textproto.Error
	switch {
	case errors.As(err, &se):
		code, enhanced = se.ErrorCode(), se.EnhancedStatusCode()
	case errors.As(err, &te):
		code = te.Code
		enhanced = enhancedCode(te.Msg)
	}
	auth := strings.Contains(err.Error(), "SMTP AUTH failed") || code == 535 || code == 534
	switch {
	case code >= 500 && code < 600:
		out.Kind, out.Status, out.Code = Permanent, code, enhanced
		// A 5xx to RCPT TO whose enhanced code names the recipient's mailbox refuses
		// this recipient (unknown user, mailbox disabled): a hard bounce, unlike a 5xx
		// to the message's content or to the session, and unlike a relay's or a
		// policy's refusal at RCPT TO (554 5.7.1 relay access denied, 553 5.1.8 sender
		// rejected), which would put every address the gateway sends to on the list.
		out.Suppress = se != nil && se.Reason == gomail.ErrSMTPRcptTo && recipientRefused(enhanced)
	case code >= 400 && code < 500:
		out.Kind, out.Status, out.Code = Transient, code, enhanced
	}
	var ne net.Error
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	switch {
	case auth && (code < 400 || code >= 500):
		out.Kind, out.Code = Permanent, "auth"
	case errors.As(err, &cv) || errors.As(err, &ua):
		out.Kind, out.Code = Permanent, "tls"
	case code == 0 && (ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "i/o timeout")):
		out.Kind, out.Code = Transient, "timeout"
	}
	return out
}

// recipientRefused reports whether an SMTP enhanced status code (RFC 3463) refuses the
// recipient's address for good: 5.1.x (bad mailbox, bad domain, moved, null MX) but
// the generic 5.1.0 (Postfix's for a sender it does not know, at RCPT TO) and the
// sender's address (5.1.7, 5.1.8), and 5.2.1 (mailbox disabled). A reply without an
// enhanced code does not say whom it refuses ("550 relay not permitted"): no.
func recipientRefused(enhanced string) bool {
	switch {
	case enhanced == "5.1.0" || enhanced == "5.1.7" || enhanced == "5.1.8":
		return false
	case strings.HasPrefix(enhanced, "5.1."), enhanced == "5.2.1":
		return true
	}
	return false
}

// enhancedCode returns the leading "x.y.z" enhanced status code of an SMTP reply text,
// or "".
func enhancedCode(msg string) string {
	f, _, _ := strings.Cut(msg, " ")
	parts := strings.Split(f, ".")
	if len(parts) != 3 {
		return ""
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil || p == "" {
			return ""
		}
	}
	return f
}
