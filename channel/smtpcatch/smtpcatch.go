// Package smtpcatch is an in-process SMTP server that keeps the mail it receives in
// memory instead of delivering it. It is the one SMTP server of the project: the dev
// mode's local mail catcher (the app mounts Handler at /dev/mail), the server of the
// tests (channeltest.StartSMTP wraps it: AUTH, TLS, scripted failures and held
// replies) and the bench's sink (it keeps nothing and counts, OnMessage reports).
//
// Memory is bounded: it keeps the last Config.MaxMessages messages, and of them no more
// than Config.MaxKeptBytes in all (older ones are dropped), and refuses a message larger than Config.MaxMessageBytes with SMTP 552. It
// accepts any sender and recipient, and asks for authentication only when
// Config.Username is set.
package smtpcatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/mail"
	"net/url"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Defaults of Config.
const (
	DefaultMaxMessages     = 200
	DefaultMaxMessageBytes = 1 << 20
	// DefaultMaxKeptBytes bounds what the kept messages hold in all (raw message, decoded
	// parts, header): 200 messages of 1 MiB with a text and an HTML part of half a MiB
	// each held 385 MiB without it.
	DefaultMaxKeptBytes = 32 << 20
)

// Values of Config.MaxMessages beside a count.
const (
	// KeepAll keeps every message (a test's server: it receives few).
	KeepAll = math.MaxInt
	// KeepNone keeps no message and does not decode them: the server only counts
	// (Received) and calls OnMessage (a bench's sink).
	KeepNone = -1
)

// Config configures a Catcher. The zero value is usable: the dev catcher's settings.
type Config struct {
	// MaxMessages is how many messages are kept (the newest): DefaultMaxMessages when
	// 0, every one with KeepAll, none with KeepNone (or any negative count).
	MaxMessages int
	// MaxMessageBytes is the largest message accepted, in bytes; DefaultMaxMessageBytes
	// when 0.
	MaxMessageBytes int64
	// MaxKeptBytes bounds the bytes the kept messages hold in all (Message.size: raw,
	// decoded text and HTML, header), dropping the oldest beyond it (the newest message
	// is always kept); DefaultMaxKeptBytes when 0.
	MaxKeptBytes int64
	// Domain is the name the server greets with; "localhost" when "".
	Domain string
	// ErrorLog receives the server's connection errors; discarded when nil.
	ErrorLog *log.Logger
	// Username and Password, when Username is set, make the server offer AUTH PLAIN
	// (over plain TCP too) and refuse MAIL before a successful AUTH (530; 535 on wrong
	// credentials). URL carries them.
	Username, Password string
	// TLSConfig, when set (with a certificate), makes the server offer STARTTLS, or speak
	// TLS from the first byte when ImplicitTLS (an smtps:// server; Listen and Serve
	// fail without a TLSConfig).
	TLSConfig   *tls.Config
	ImplicitTLS bool
	// OnMessage, when set, is called with each message received, in the session's
	// goroutine after the message is counted and kept and before the DATA reply: the
	// reply waits for it (a slow OnMessage is a slow provider). With KeepNone the
	// message is not decoded: it carries the envelope, Raw and Header only.
	OnMessage func(Message)
}

// Message is one received message.
type Message struct {
	// ID numbers the messages a Catcher received, from 1 (Received after this one).
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
	// Header is the message's top-level header (canonical keys); nil when unreadable.
	Header mail.Header `json:"header"`
	// AuthUser is the user the session authenticated as ("" without AUTH).
	AuthUser string `json:"authUser,omitempty"`
	// TLS tells whether the message came over TLS (STARTTLS or implicit).
	TLS bool `json:"tls"`
	// Raw is the message as received.
	Raw []byte `json:"-"`
}

// Step is an SMTP command whose reply a Catcher can script (Fail, Hold).
type Step string

// Steps of an SMTP transaction.
const (
	StepMail Step = "MAIL" // MAIL FROM
	StepRcpt Step = "RCPT" // RCPT TO
	StepData Step = "DATA" // the reply after the message's final "."
)

// Catcher is the SMTP server and its store of received messages. Its methods are safe
// for concurrent use.
type Catcher struct {
	cfg Config
	srv *smtp.Server

	mu       sync.Mutex
	msgs     []Message // ring: the last cfg.MaxMessages, oldest first
	kept     int64     // the size of msgs' messages in all (Message.size)
	received uint64    // messages accepted since New (kept or dropped)
	changed  chan struct{}
	addr     net.Addr
	fails    map[Step]*failure
	holds    map[Step]bool
	release  chan struct{} // closed by Release or Close: held replies go on
	closed   bool
	// listeners are those Listen and Serve serve on, closed by Close: go-smtp's Server
	// knows a listener only once its Serve runs, so a Close before that (right after
	// Listen, in a goroutine not yet scheduled) closed nothing and the catcher kept
	// accepting on the address.
	listeners []net.Listener
}

// failure is a scripted reply.
type failure struct {
	err   *smtp.SMTPError
	times int // replies left; <= 0: until ClearFailures
}

// New returns a Catcher that is not listening yet (see Listen, Serve).
func New(cfg Config) *Catcher {
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = DefaultMaxMessages
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxKeptBytes <= 0 {
		cfg.MaxKeptBytes = DefaultMaxKeptBytes
	}
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	c := &Catcher{cfg: cfg, changed: make(chan struct{}), fails: map[Step]*failure{}, holds: map[Step]bool{},
		release: make(chan struct{})}
	s := smtp.NewServer(smtp.BackendFunc(func(conn *smtp.Conn) (smtp.Session, error) { return &session{c: c, conn: conn}, nil }))
	s.Domain = cfg.Domain
	s.MaxMessageBytes = cfg.MaxMessageBytes
	s.MaxRecipients = 100
	s.ReadTimeout = time.Minute
	s.WriteTimeout = time.Minute
	s.AllowInsecureAuth = true
	if !cfg.ImplicitTLS {
		s.TLSConfig = cfg.TLSConfig
	}
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
	if c.cfg.ImplicitTLS && c.cfg.TLSConfig == nil {
		return errors.New("smtpcatch: ImplicitTLS needs a TLSConfig")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("smtpcatch: listen %s: %w", addr, err)
	}
	l, ok := c.bind(l)
	if !ok {
		return errors.New("smtpcatch: listen on a closed catcher")
	}
	go func() { _ = c.srv.Serve(l) }()
	return nil
}

// Serve serves SMTP on l (wrapped in TLS when ImplicitTLS) until Close; it returns
// smtp.ErrServerClosed after Close.
func (c *Catcher) Serve(l net.Listener) error {
	if c.cfg.ImplicitTLS && c.cfg.TLSConfig == nil {
		return errors.New("smtpcatch: ImplicitTLS needs a TLSConfig")
	}
	bound, ok := c.bind(l)
	if !ok {
		return smtp.ErrServerClosed
	}
	return c.srv.Serve(bound)
}

// bind records l (its address, and l for Close) and wraps it in TLS when ImplicitTLS;
// false, with l closed, when the catcher is closed already.
func (c *Catcher) bind(l net.Listener) (net.Listener, bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = l.Close()
		return nil, false
	}
	c.addr = l.Addr()
	c.listeners = append(c.listeners, l)
	c.mu.Unlock()
	if c.cfg.ImplicitTLS {
		return tls.NewListener(l, c.cfg.TLSConfig), true
	}
	return l, true
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

// URL is the server as channel.EmailConfig.URL takes it: smtp://host:port (smtps://
// when ImplicitTLS), with the configured credentials.
func (c *Catcher) URL() string {
	u := url.URL{Scheme: "smtp", Host: c.Addr()}
	if c.cfg.ImplicitTLS {
		u.Scheme = "smtps"
	}
	if c.cfg.Username != "" {
		u.User = url.UserPassword(c.cfg.Username, c.cfg.Password)
	}
	return u.String()
}

// Close answers the held replies (Hold), stops listening and closes open connections.
func (c *Catcher) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.release)
	}
	ls := c.listeners
	c.listeners = nil
	c.mu.Unlock()
	err := c.srv.Close()
	for _, l := range ls {
		// Closed by srv.Close when its Serve had registered it already.
		if lerr := l.Close(); lerr != nil && !errors.Is(lerr, net.ErrClosed) && err == nil {
			err = lerr
		}
	}
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

// Received counts the messages accepted since New, including those no longer kept
// (not those refused by a scripted failure).
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
	c.msgs, c.kept = nil, 0
	c.mu.Unlock()
}

// Fail makes the server answer code (with enhanced code e.g. [3]int{5,1,1}, and text)
// at step, the next times times (times <= 0: until ClearFailures). At StepData the
// message is read but neither kept nor counted.
func (c *Catcher) Fail(step Step, code int, enhanced [3]int, text string, times int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fails[step] = &failure{err: &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode(enhanced), Message: text}, times: times}
}

// ClearFailures removes every scripted failure.
func (c *Catcher) ClearFailures() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.fails)
}

// Hold makes the server withhold its reply at step until Release or Close (the client
// sees a server that stopped answering). At StepData the message is kept, and counts
// as received, before the reply is withheld: the provider has it, the client cannot
// know.
func (c *Catcher) Hold(step Step) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holds[step] = true
}

// Release answers every withheld reply (as success) and ends every Hold.
func (c *Catcher) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.holds)
	if !c.closed {
		close(c.release)
		c.release = make(chan struct{})
	}
}

// script takes step's scripted reply: the failure to answer (one of its times spent),
// else the channel to wait on before answering when step is held (nil: answer now).
func (c *Catcher) script(step Step) (<-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.fails[step]; f != nil {
		if f.times > 0 {
			if f.times--; f.times == 0 {
				delete(c.fails, step)
			}
		}
		return nil, f.err
	}
	if c.holds[step] {
		return c.release, nil
	}
	return nil, nil
}

// reply is step's scripted reply: its failure, or nil once its hold (if any) ends.
func (c *Catcher) reply(step Step) error {
	held, err := c.script(step)
	if held != nil {
		<-held
	}
	return err
}

// add counts m, keeps it (dropping the oldest beyond MaxMessages) and wakes
// WaitReceived; it returns m numbered.
func (c *Catcher) add(m Message) Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.received++
	m.ID = c.received
	if keep := c.cfg.MaxMessages; keep > 0 {
		c.msgs = append(c.msgs, m)
		c.kept += m.size()
		drop := 0 // the oldest, beyond the count or the bytes
		for ; drop < len(c.msgs)-1 && (len(c.msgs)-drop > keep || c.kept > c.cfg.MaxKeptBytes); drop++ {
			c.kept -= c.msgs[drop].size()
		}
		if drop > 0 {
			n := copy(c.msgs, c.msgs[drop:])
			clear(c.msgs[n:])
			c.msgs = c.msgs[:n]
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return m
}

// size is about the bytes m holds: its raw message, decoded parts, header and envelope.
func (m Message) size() int64 {
	n := len(m.Raw) + len(m.Text) + len(m.HTML) + len(m.Subject) + len(m.MessageID) + len(m.From)
	for _, to := range m.To {
		n += len(to)
	}
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}

// session is one connection's state and its transaction's envelope.
type session struct {
	c        *Catcher
	conn     *smtp.Conn
	authUser string
	from     string
	to       []string
}

var _ smtp.AuthSession = (*session)(nil)

func (s *session) AuthMechanisms() []string {
	if s.c.cfg.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(mech string) (sasl.Server, error) {
	if s.c.cfg.Username == "" || mech != sasl.Plain {
		return nil, smtp.ErrAuthUnsupported
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.c.cfg.Username || pass != s.c.cfg.Password {
			return smtp.ErrAuthFailed
		}
		s.authUser = user
		return nil
	}), nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.c.cfg.Username != "" && s.authUser == "" {
		return smtp.ErrAuthRequired
	}
	if err := s.c.reply(StepMail); err != nil {
		return err
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := s.c.reply(StepRcpt); err != nil {
		return err
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r) // bounded by the server's MaxMessageBytes (552 beyond)
	if err != nil {
		return err
	}
	held, err := s.c.script(StepData)
	if err != nil {
		return err
	}
	m := Message{ReceivedAt: time.Now().UTC(), From: s.from, To: append([]string(nil), s.to...), Raw: raw, AuthUser: s.authUser}
	_, m.TLS = s.conn.TLSConnectionState()
	if s.c.cfg.MaxMessages < 0 {
		if h, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
			m.Header = h.Header
		}
	} else if p, err := Parse(raw); err == nil {
		m.Subject, m.MessageID, m.Text, m.HTML, m.Header = p.Subject, p.MessageID, p.Text, p.HTML, p.Header
	}
	m = s.c.add(m)
	if s.c.cfg.OnMessage != nil {
		s.c.cfg.OnMessage(m)
	}
	if held != nil {
		<-held
	}
	return nil
}
