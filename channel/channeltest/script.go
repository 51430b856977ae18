package channeltest

import (
	"net/http"
	"sync"
)

// script is what a local provider server shares with its test: the answers scripted for
// its next requests (A, in order; the zero A is the server's ordinary behaviour), the
// requests it received (R), and its end, which releases requests left hanging.
type script[A, R any] struct {
	mu      sync.Mutex
	answers []A
	reqs    []R
	closed  chan struct{}
}

func newScript[A, R any]() *script[A, R] { return &script[A, R]{closed: make(chan struct{})} }

// queue adds answers for the next requests that pass the server's checks.
func (s *script[A, R]) queue(a ...A) {
	s.mu.Lock()
	s.answers = append(s.answers, a...)
	s.mu.Unlock()
}

// next takes the next scripted answer (the zero A when none is left).
func (s *script[A, R]) next() (a A) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.answers) > 0 {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	return a
}

// record keeps one received request.
func (s *script[A, R]) record(r R) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
}

// requests returns the requests received so far.
func (s *script[A, R]) requests() []R {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]R(nil), s.reqs...)
}

// hang answers nothing until the client gives r up or the server closes.
func (s *script[A, R]) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closed:
	}
}

// close releases every hanging request; call it before closing the HTTP server.
func (s *script[A, R]) close() { close(s.closed) }
