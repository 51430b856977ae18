package channeltest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/inboxgw/gateway/channel/smtpcatch"
)

// Step is an SMTP command whose reply an SMTPServer can script.
type Step string

// Steps of an SMTP transaction.
const (
	StepMail Step = "MAIL" // MAIL FROM
	StepRcpt Step = "RCPT" // RCPT TO
	StepData Step = "DATA" // the reply after the message's final "." (the message counts as received)
)

// SMTPOptions configures an SMTPServer.
type SMTPOptions struct {
	// Username and Password, when set, make the server offer AUTH PLAIN (over plain TCP)
	// and refuse MAIL before a successful AUTH (535 on wrong credentials).
	Username, Password string
	// TLSConfig, when set (with a certificate), makes the server offer STARTTLS, or speak
	// TLS from the first byte when ImplicitTLS (an smtps:// server).
	TLSConfig   *tls.Config
	ImplicitTLS bool
}

// SMTPMessage is one message the server received (after its DATA).
type SMTPMessage struct {
	smtpcatch.Message
	// AuthUser is the user the session authenticated as ("" without AUTH).
	AuthUser string
	// TLS tells whether the message came over TLS (STARTTLS or implicit).
	TLS bool
}

// SMTPServer is a real SMTP server on 127.0.0.1 with scripted replies. Its methods are
// safe for concurrent use.
type SMTPServer struct {
	opts SMTPOptions
	srv  *smtp.Server
	addr string

	mu      sync.Mutex
	fails   map[Step]*failure
	hang    map[Step]bool
	release chan struct{} // closed by Release or Close: held replies go on
	msgs    []SMTPMessage
	changed chan struct{}
	closed  bool
}

type failure struct {
	err   *smtp.SMTPError
	times int // replies left; <= 0: until ClearFailures
}

// NewSMTPServer starts an SMTPServer on a free port of 127.0.0.1; Close stops it.
func NewSMTPServer(opts SMTPOptions) (*SMTPServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("channeltest: listen: %w", err)
	}
	if opts.ImplicitTLS {
		if opts.TLSConfig == nil {
			_ = l.Close()
			return nil, errors.New("channeltest: ImplicitTLS needs a TLSConfig")
		}
		l = tls.NewListener(l, opts.TLSConfig)
	}
	s := &SMTPServer{opts: opts, addr: l.Addr().String(), fails: map[Step]*failure{}, hang: map[Step]bool{},
		release: make(chan struct{}), changed: make(chan struct{})}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &smtpSession{s: s, conn: c}, nil }))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	if !opts.ImplicitTLS {
		srv.TLSConfig = opts.TLSConfig
	}
	srv.MaxMessageBytes = 4 << 20
	srv.ReadTimeout, srv.WriteTimeout = time.Minute, time.Minute
	srv.ErrorLog = log.New(io.Discard, "", 0)
	s.srv = srv
	go func() { _ = srv.Serve(l) }()
	return s, nil
}

// StartSMTP is NewSMTPServer for a test: it fails t on error and closes the server when
// the test ends.
func StartSMTP(t testing.TB, opts SMTPOptions) *SMTPServer {
	t.Helper()
	s, err := NewSMTPServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Addr is the server's "127.0.0.1:port".
func (s *SMTPServer) Addr() string { return s.addr }

// URL is the server as channel.EmailConfig.URL takes it: smtp://127.0.0.1:port, with
// the configured credentials.
func (s *SMTPServer) URL() string {
	u := url.URL{Scheme: "smtp", Host: s.addr}
	if s.opts.ImplicitTLS {
		u.Scheme = "smtps"
	}
	if s.opts.Username != "" {
		u.User = url.UserPassword(s.opts.Username, s.opts.Password)
	}
	return u.String()
}

// Fail makes the server answer code (with enhanced code e.g. [3]int{5,1,1}, and text)
// at step, the next times times (times <= 0: until ClearFailures). At StepData the
// message is read but not kept.
func (s *SMTPServer) Fail(step Step, code int, enhanced [3]int, text string, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[step] = &failure{err: &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode(enhanced), Message: text}, times: times}
}

// ClearFailures removes every scripted failure.
func (s *SMTPServer) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.fails)
}

// Hold makes the server withhold its reply at step until Release or Close (the client
// sees a server that stopped answering). At StepData the message is kept, and counts
// as received, before the reply is withheld: the provider has it, the client cannot
// know.
func (s *SMTPServer) Hold(step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang[step] = true
}

// Release answers every withheld reply (as success) and ends every Hold.
func (s *SMTPServer) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.hang)
	if !s.closed {
		close(s.release)
		s.release = make(chan struct{})
	}
}

// Messages returns the messages received, oldest first.
func (s *SMTPServer) Messages() []SMTPMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SMTPMessage(nil), s.msgs...)
}

// WaitMessages waits until n messages were received and returns them, or ctx's error.
func (s *SMTPServer) WaitMessages(ctx context.Context, n int) ([]SMTPMessage, error) {
	for {
		s.mu.Lock()
		got, ch := len(s.msgs), s.changed
		s.mu.Unlock()
		if got >= n {
			return s.Messages(), nil
		}
		select {
		case <-ctx.Done():
			return s.Messages(), fmt.Errorf("channeltest: %d of %d messages received: %w", got, n, ctx.Err())
		case <-ch:
		}
	}
}

// Close releases held replies and stops the server, closing open connections.
func (s *SMTPServer) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.release)
	}
	s.mu.Unlock()
	if err := s.srv.Close(); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
		return err
	}
	return nil
}

// script applies step's scripted failure or hold: the error to answer, nil to go on.
func (s *SMTPServer) script(step Step) error {
	s.mu.Lock()
	f, hold, release := s.fails[step], s.hang[step], s.release
	if f != nil && f.times > 0 {
		if f.times--; f.times == 0 {
			delete(s.fails, step)
		}
	}
	s.mu.Unlock()
	if f != nil {
		return f.err
	}
	if hold {
		<-release
	}
	return nil
}

func (s *SMTPServer) keep(m SMTPMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.ID = uint64(len(s.msgs) + 1)
	s.msgs = append(s.msgs, m)
	close(s.changed)
	s.changed = make(chan struct{})
}

// smtpSession is one connection's state.
type smtpSession struct {
	s        *SMTPServer
	conn     *smtp.Conn
	authUser string
	from     string
	to       []string
}

var _ smtp.AuthSession = (*smtpSession)(nil)

func (ss *smtpSession) AuthMechanisms() []string {
	if ss.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *smtpSession) Auth(mech string) (sasl.Server, error) {
	if ss.s.opts.Username == "" || mech != sasl.Plain {
		return nil, smtp.ErrAuthUnsupported
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != ss.s.opts.Username || pass != ss.s.opts.Password {
			return smtp.ErrAuthFailed
		}
		ss.authUser = user
		return nil
	}), nil
}

func (ss *smtpSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *smtpSession) Logout() error { return nil }

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.opts.Username != "" && ss.authUser == "" {
		return smtp.ErrAuthRequired
	}
	if err := ss.s.script(StepMail); err != nil {
		return err
	}
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := ss.s.script(StepRcpt); err != nil {
		return err
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	failing := ss.s.fails[StepData] != nil
	ss.s.mu.Unlock()
	if !failing {
		m := SMTPMessage{Message: smtpcatch.Message{ReceivedAt: time.Now().UTC(), From: ss.from, To: append([]string(nil), ss.to...), Raw: raw}, AuthUser: ss.authUser}
		_, m.TLS = ss.conn.TLSConnectionState()
		if p, err := smtpcatch.Parse(raw); err == nil {
			m.Subject, m.MessageID, m.Text, m.HTML, m.Header = p.Subject, p.MessageID, p.Text, p.HTML, p.Header
		}
		ss.s.keep(m)
	}
	return ss.s.script(StepData)
}

// Silent is a TCP server on 127.0.0.1 that accepts connections and never answers (not
// even the SMTP greeting, nor any HTTP response): a provider that hangs.
type Silent struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// StartSilent starts a Silent server, closed when the test ends.
func StartSilent(t testing.TB) *Silent {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Silent{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

// Addr is the server's "127.0.0.1:port".
func (s *Silent) Addr() string { return s.l.Addr().String() }

// Accepted counts the connections accepted so far.
func (s *Silent) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops listening and closes the accepted connections.
func (s *Silent) Close() {
	_ = s.l.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}
