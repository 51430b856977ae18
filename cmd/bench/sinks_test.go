package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
)

// The SMTP sink counts every message, keeps none, and tells the waiter of a Subject when
// that message arrives (the e2e scenario's measurement); a forgotten Subject is counted
// and reported to nobody.
func TestSMTPSinkCountsAndReportsSubjects(t *testing.T) {
	s, err := startSMTPSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	email, err := channel.NewEmail(channel.EmailConfig{URL: "smtp://" + s.addr, From: deliverFrom, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	send := func(i int, subject string) {
		t.Helper()
		if _, err := email.Send(context.Background(), channel.Message{To: fmt.Sprintf("u%d@bench.example", i),
			IdempotencyKey: fmt.Sprintf("k%d", i), Subject: subject, Text: "body"}); err != nil {
			t.Fatal(err)
		}
	}
	arrived := s.expect("bench 1")
	s.expect("bench 2")
	s.forget("bench 2")
	send(1, "bench 1")
	send(2, "bench 2")
	send(3, "unexpected")
	select {
	case at := <-arrived:
		if time.Since(at) > 5*time.Second {
			t.Fatalf("arrival time %v", at)
		}
	default:
		t.Fatal("the expected subject was not reported before the DATA reply")
	}
	if n := s.n.Load(); n != 3 {
		t.Fatalf("counted %d messages, want 3", n)
	}
	if got := len(s.srv.Messages()); got != 0 {
		t.Fatalf("the sink kept %d messages", got)
	}
}
