// Package smtpcatch is an in-process SMTP server that keeps the mail it receives in
// memory instead of delivering it: the dev mode's local mail catcher (the app mounts
// Handler at /dev/mail) and the SMTP server of tests and the bench.
//
// Memory is bounded: it keeps the last MaxMessages messages (older ones are dropped)
// and refuses a message larger than MaxMessageBytes with SMTP 552. It accepts any
// sender and recipient and asks for no authentication.
package smtpcatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/mail"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Defaults of Config.
const (
	DefaultMaxMessages     = 200
	DefaultMaxMessageBytes = 1 << 20
)

// Config configures a Catcher. The zero value is usable.
type Config struct {
	// MaxMessages is how many messages are kept (the newest); DefaultMaxMessages when 0.
	MaxMessages int
	// MaxMessageBytes is the largest message accepted, in bytes; DefaultMaxMessageBytes
	// when 0.
	MaxMessageBytes int64
	// Domain is the name the server greets with; "localhost" when "".
	Domain string
	// ErrorLog receives the server's connection errors; discarded when nil.
	ErrorLog *log.Logger
}

// Message is one received message.
type Message struct {
	// ID numbers the messages a Catcher received, from 1.
	ID uint64 `json:"id"`
	// ReceivedAt is when the message's DATA ended.
	ReceivedAt time.Time `json:"receivedAt"`
	// From and To are the envelope's sender (MAIL FROM) and recipients (RCPT TO).
	From string   `json:"from"`
	To   []string `json:"to"`
	// Subject, MessageID, Text and HTML are decoded from the message (see Parse).
	Subject   string `json:"subject"`
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
	HTML      string `json:"html"`
	// Header is the message's top-level header (canonical keys).
	Header mail.Header `json:"header"`
	// Raw is the message as received.
	Raw []byte `json:"-"`
}

// Catcher is the SMTP server and its store of received messages. Its methods are safe
// for concurrent use.
type Catcher struct {
	cfg Config
	srv *smtp.Server

	mu       sync.Mutex
	msgs     []Message // ring: the last cfg.MaxMessages, oldest first
	received uint64    // messages accepted since New (kept or dropped)
	changed  chan struct{}

	addr net.Addr
}

// New returns a Catcher that is not listening yet (see Listen, Serve).
func New(cfg Config) *Catcher {
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = DefaultMaxMessages
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	c := &Catcher{cfg: cfg, changed: make(chan struct{})}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{c: c}, nil }))
	s.Domain = cfg.Domain
	s.MaxMessageBytes = cfg.MaxMessageBytes
	s.MaxRecipients = 100
	s.ReadTimeout = time.Minute
	s.WriteTimeout = time.Minute
	// go-smtp's ErrorLog is an interface: a nil *log.Logger in it would be called.
	s.ErrorLog = log.New(io.Discard, "", 0)
	if cfg.ErrorLog != nil {
		s.ErrorLog = cfg.ErrorLog
	}
	c.srv = s
	return c
}

// Listen listens on addr ("127.0.0.1:1025"; port 0 picks a free one) and serves in a
// goroutine until Close. Addr tells the address bound.
func (c *Catcher) Listen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("smtpcatch: listen %s: %w", addr, err)
	}
	c.mu.Lock()
	c.addr = l.Addr()
	c.mu.Unlock()
	go func() { _ = c.srv.Serve(l) }()
	return nil
}

// Serve serves SMTP on l until Close; it returns smtp.ErrServerClosed after Close.
func (c *Catcher) Serve(l net.Listener) error {
	c.mu.Lock()
	c.addr = l.Addr()
	c.mu.Unlock()
	return c.srv.Serve(l)
}

// Addr is the address Listen or Serve bound ("127.0.0.1:40123"); "" before.
func (c *Catcher) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addr == nil {
		return ""
	}
	return c.addr.String()
}

// URL is Addr as an smtp:// URL (what channel.EmailConfig.URL takes).
func (c *Catcher) URL() string { return "smtp://" + c.Addr() }

// Close stops listening and closes open connections.
func (c *Catcher) Close() error {
	err := c.srv.Close()
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Messages returns the kept messages, oldest first (copies of the slice; the messages
// themselves are never modified).
func (c *Catcher) Messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.msgs...)
}

// Received counts the messages accepted since New, including those no longer kept.
func (c *Catcher) Received() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.received
}

// WaitReceived waits until Received reaches n, or ctx ends (its error).
func (c *Catcher) WaitReceived(ctx context.Context, n uint64) error {
	for {
		c.mu.Lock()
		got, ch := c.received, c.changed
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("smtpcatch: %d of %d messages received: %w", got, n, ctx.Err())
		case <-ch:
		}
	}
}

// Reset forgets the kept messages (Received keeps counting).
func (c *Catcher) Reset() {
	c.mu.Lock()
	c.msgs = nil
	c.mu.Unlock()
}

// add keeps m, dropping the oldest beyond MaxMessages, and wakes WaitReceived.
func (c *Catcher) add(m Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.received++
	m.ID = c.received
	if len(c.msgs) >= c.cfg.MaxMessages {
		n := copy(c.msgs, c.msgs[len(c.msgs)-c.cfg.MaxMessages+1:])
		clear(c.msgs[n:])
		c.msgs = c.msgs[:n]
	}
	c.msgs = append(c.msgs, m)
	close(c.changed)
	c.changed = make(chan struct{})
}

// session is one SMTP transaction's envelope.
type session struct {
	c    *Catcher
	from string
	to   []string
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r) // bounded by the server's MaxMessageBytes (552 beyond)
	if err != nil {
		return err
	}
	m := Message{ReceivedAt: time.Now().UTC(), From: s.from, To: append([]string(nil), s.to...), Raw: raw}
	if p, err := Parse(raw); err == nil {
		m.Subject, m.MessageID, m.Text, m.HTML, m.Header = p.Subject, p.MessageID, p.Text, p.HTML, p.Header
	}
	s.c.add(m)
	return nil
}
