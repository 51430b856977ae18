package channeltest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
)

func emailTo(t *testing.T, url string, timeout time.Duration) channel.Channel {
	t.Helper()
	ch, err := channel.NewEmail(channel.EmailConfig{URL: url, From: "a@example.com", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

var msg = channel.Message{To: "b@example.org", IdempotencyKey: "k1", Subject: "s", Text: "t"}

func TestSMTPFailTimesThenClears(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	ch := emailTo(t, srv.URL(), 5*time.Second)
	srv.Fail(channeltest.StepData, 451, [3]int{4, 3, 0}, "later", 2)
	for i := range 2 {
		if _, err := ch.Send(context.Background(), msg); err == nil {
			t.Fatalf("send %d succeeded", i)
		}
	}
	if _, err := ch.Send(context.Background(), msg); err != nil {
		t.Fatalf("third send: %v", err)
	}
	srv.Fail(channeltest.StepRcpt, 550, [3]int{5, 1, 1}, "no", 0)
	for range 3 {
		if _, err := ch.Send(context.Background(), msg); err == nil {
			t.Fatal("send succeeded while failing until cleared")
		}
	}
	srv.ClearFailures()
	if _, err := ch.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Messages()); n != 2 {
		t.Fatalf("%d messages kept, want 2", n)
	}
}

func TestSMTPHoldAndRelease(t *testing.T) {
	t.Parallel()
	srv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	srv.Hold(channeltest.StepData)
	ch := emailTo(t, srv.URL(), 10*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := ch.Send(context.Background(), msg)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := srv.WaitMessages(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("send returned while the reply was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	srv.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("send still blocked after Release")
	}
}

func TestWebhookReceiverScript(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef-secret"
	recv, url := channeltest.StartWebhook(t, secret)
	recv.Respond(channeltest.WebhookResponse{Status: 503}, channeltest.WebhookResponse{Status: 202})
	recv.SetDefault(channeltest.WebhookResponse{Status: 410})
	ch := channel.NewWebhook(channel.WebhookConfig{Timeout: 5 * time.Second})
	m := channel.Message{To: url, Secret: secret, IdempotencyKey: "id1", Payload: []byte(`{}`)}
	var kinds []string
	for range 3 {
		_, err := ch.Send(context.Background(), m)
		if err == nil {
			kinds = append(kinds, "ok")
			continue
		}
		k, _ := channel.Classify(err)
		kinds = append(kinds, k.String())
	}
	if want := "transient ok permanent"; strings.Join(kinds, " ") != want {
		t.Fatalf("answers %q, want %q", strings.Join(kinds, " "), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if reqs, err := recv.WaitRequests(ctx, 3); err != nil || len(reqs) != 3 {
		t.Fatalf("%d requests: %v", len(reqs), err)
	}
}
