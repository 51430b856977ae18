package channeltest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/inboxgw/gateway/channel/smtpcatch"
)

// Step is an SMTP command whose reply an SMTPServer can script.
type Step = smtpcatch.Step

// Steps of an SMTP transaction.
const (
	StepMail = smtpcatch.StepMail // MAIL FROM
	StepRcpt = smtpcatch.StepRcpt // RCPT TO
	StepData = smtpcatch.StepData // the reply after the message's final "." (the message counts as received)
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

// SMTPMessage is one message the server received (after its DATA), with the AUTH user
// and whether it came over TLS.
type SMTPMessage = smtpcatch.Message

// SMTPServer is a real SMTP server on 127.0.0.1 with scripted replies: an
// smtpcatch.Catcher that keeps every message and takes messages up to 4 MiB. Fail,
// ClearFailures, Hold, Release, Messages, Addr, URL and Close are the Catcher's. Its
// methods are safe for concurrent use.
type SMTPServer struct {
	*smtpcatch.Catcher
}

// NewSMTPServer starts an SMTPServer on a free port of 127.0.0.1; Close stops it.
func NewSMTPServer(opts SMTPOptions) (*SMTPServer, error) {
	c := smtpcatch.New(smtpcatch.Config{MaxMessages: smtpcatch.KeepAll, MaxMessageBytes: 4 << 20,
		Username: opts.Username, Password: opts.Password, TLSConfig: opts.TLSConfig, ImplicitTLS: opts.ImplicitTLS})
	if err := c.Listen("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("channeltest: %w", err)
	}
	return &SMTPServer{c}, nil
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

// WaitMessages waits until n messages were received and returns them (all received so
// far), or ctx's error with those received.
func (s *SMTPServer) WaitMessages(ctx context.Context, n int) ([]SMTPMessage, error) {
	err := s.WaitReceived(ctx, uint64(n))
	return s.Messages(), err
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
