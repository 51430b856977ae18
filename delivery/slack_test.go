package delivery_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
)

// SLACK end to end, registered as any channel: a send whose template has SLACK to a
// user with a Slack user id writes a SLACK record addressed to it; the handler posts the
// title and body (no slack part) with the bot token to chat.postMessage and records SENT
// with "channel:ts" as the provider's id. Slack's ratelimited (429, Retry-After) is
// transient: the retry is due after Retry-After. A revoked token fails the record at
// once, is logged and counted as the gateway's configuration error, and is not retried.
// A user without a Slack user id is skipped no_slack_user at send time.
func TestDeliverSlack(t *testing.T) {
	t.Parallel()
	f, srv, sl := newSlackFixture(t)
	ctx := context.Background()
	var mu sync.Mutex
	var configErrors []string
	h := delivery.NewHandler(f.st, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelSlack, "", sl),
		Logger: quiet, Clock: f.clk, Backoff: 10 * time.Millisecond, OnConfigError: func(p string) {
			mu.Lock()
			defer mu.Unlock()
			configErrors = append(configErrors, p)
		}})

	id, task := f.send(t, "sent", inbox.ChannelSlack, inbox.ChannelSlack)
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Token != srv.Token || reqs[0].Channel != "U024BE7LH" || reqs[0].Text != "Invoice paid\nThank you" || !reqs[0].OK {
		t.Fatalf("requests: %+v", reqs)
	}
	c := f.record(t, id, inbox.ChannelSlack)
	if c.Status != inbox.DeliverySent || c.Provider != channel.ProviderSlack || c.Attempts != 1 ||
		c.ProviderMessageID != reqs[0].PostedChannel+":"+reqs[0].PostedTS {
		t.Fatalf("record %+v", c)
	}

	srv.Queue(channeltest.SlackRateLimited(30))
	id, task = f.send(t, "limited", inbox.ChannelSlack, inbox.ChannelSlack)
	start := f.clk.Now()
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if c := f.record(t, id, inbox.ChannelSlack); c.Status != inbox.DeliveryQueued || !strings.Contains(c.Error, "ratelimited") {
		t.Fatalf("after ratelimited: %+v", c)
	}
	var next []inbox.Task
	for _, nt := range f.tasks(t, inbox.ChannelSlack, 5*time.Minute) {
		if nt.Ref == id && nt.Due.After(task.Due) {
			next = append(next, nt)
		}
	}
	if len(next) != 1 || next[0].Due.Sub(start) != 30*time.Second {
		t.Fatalf("retry tasks %+v, want one due after Retry-After's 30 s", next)
	}

	srv.Revoke()
	id, task = f.send(t, "revoked", inbox.ChannelSlack, inbox.ChannelSlack)
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if c := f.record(t, id, inbox.ChannelSlack); c.Status != inbox.DeliveryFailed || !strings.Contains(c.Error, "token_revoked") || c.Attempts != 1 {
		t.Fatalf("after token_revoked: %+v", c)
	}
	mu.Lock()
	if !slices.Equal(configErrors, []string{channel.ProviderSlack}) {
		t.Errorf("configuration errors counted: %v", configErrors)
	}
	mu.Unlock()
	for _, nt := range f.tasks(t, inbox.ChannelSlack, time.Hour) {
		if nt.Ref == id && nt.Due.After(task.Due) {
			t.Fatalf("a revoked token is retried: %+v", nt)
		}
	}

	// No Slack user id: skipped when sent, no task.
	if _, err := f.st.PutUserProfile(ctx, viewer, inbox.UserProfile{Addresses: map[string]string{"email": "a@example.com"}}); err != nil {
		t.Fatal(err)
	}
	res, err := service.Writer{Store: f.st}.Send(ctx, tenant, inbox.SendInput{IdempotencyKey: "no-id", Recipients: []string{user}, Type: "invoice.paid",
		Title: "Invoice paid", TemplateChannels: []string{inbox.ChannelInApp, inbox.ChannelSlack}})
	if err != nil {
		t.Fatal(err)
	}
	if c := f.record(t, res.NotificationIDs[0], inbox.ChannelSlack); c.Status != inbox.DeliverySkipped || c.Reason != "no_slack_user" {
		t.Fatalf("without a Slack user id: %+v", c)
	}
}

// newSlackFixture is a fixture whose user a has Slack user id U024BE7LH, a local Slack
// server, and the real adapter pointed at it.
func newSlackFixture(t *testing.T) (*fixture, *channeltest.Slack, channel.Channel) {
	t.Helper()
	f := newFixture(t)
	if _, err := f.st.PutUserProfile(context.Background(), viewer, inbox.UserProfile{Addresses: map[string]string{"slackUserId": "U024BE7LH"}}); err != nil {
		t.Fatal(err)
	}
	srv := channeltest.NewSlack(t)
	sl, err := channel.NewSlack(channel.SlackConfig{BotToken: srv.Token, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return f, srv, sl
}
