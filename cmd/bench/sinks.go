package main

// Local providers for scenarios 16 and 17: an SMTP server (the project's smtpcatch, the
// server of the dev catcher and of the tests) and a webhook receiver (net/http), both on
// loopback listeners, that accept everything, count what they received and tell a
// waiter when a message it expects arrives. They keep no message: a 100,000-message
// run holds only counters and the keys somebody waits for.

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inboxgw/gateway/channel/smtpcatch"
)

// sinkLatency is how long both sinks wait before answering a message (the SMTP DATA
// reply, the webhook's 204): -deliver-latency, a hosted provider's answer time. 0: at once.
var sinkLatency time.Duration

// receipts counts received messages and reports the arrival of the keys (an email's
// Subject, a webhook's webhook-id) somebody expects.
type receipts struct {
	n     atomic.Int64
	bytes atomic.Int64
	mu    sync.Mutex
	want  map[string]chan time.Time
}

// expect returns a channel that receives the arrival time of key (once). Call it before
// the message can arrive.
func (r *receipts) expect(key string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	r.mu.Lock()
	if r.want == nil {
		r.want = map[string]chan time.Time{}
	}
	r.want[key] = ch
	r.mu.Unlock()
	return ch
}

// forget drops the expectation of key (a waiter that gave up).
func (r *receipts) forget(key string) {
	r.mu.Lock()
	delete(r.want, key)
	r.mu.Unlock()
}

// got records one message of size bytes that carries key ("" when none).
func (r *receipts) got(key string, size int) {
	at := time.Now()
	r.n.Add(1)
	r.bytes.Add(int64(size))
	if key == "" {
		return
	}
	r.mu.Lock()
	ch, ok := r.want[key]
	delete(r.want, key)
	r.mu.Unlock()
	if ok {
		ch <- at
	}
}

// smtpSink is a local SMTP server that accepts every message (no auth, no TLS): the
// project's smtpcatch server keeping no message, its OnMessage counting and reporting
// the Subject (raw, as the sender wrote it: the bench's subjects are ASCII, never
// encoded) before the DATA reply.
type smtpSink struct {
	receipts
	addr string
	srv  *smtpcatch.Catcher
}

// startSMTPSink starts an SMTP server on a loopback port.
func startSMTPSink() (*smtpSink, error) {
	s := &smtpSink{}
	s.srv = smtpcatch.New(smtpcatch.Config{MaxMessages: smtpcatch.KeepNone, OnMessage: func(m smtpcatch.Message) {
		s.got(m.Header.Get("Subject"), len(m.Raw))
		time.Sleep(sinkLatency)
	}})
	if err := s.srv.Listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	s.addr = s.srv.Addr()
	return s, nil
}

func (s *smtpSink) close() { _ = s.srv.Close() }

// webhookSink is a local HTTP server that answers 204 to every POST; the webhook-id
// header is the key a waiter expects.
type webhookSink struct {
	receipts
	url string
	srv *http.Server
}

func startWebhookSink() (*webhookSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &webhookSink{url: "http://" + ln.Addr().String() + "/hook"}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		if err != nil || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.got(r.Header.Get("webhook-id"), int(n))
		time.Sleep(sinkLatency)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *webhookSink) close() { _ = s.srv.Close() }
