package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// failWith is an adapter whose every send fails with err.
type failWith struct{ err error }

func (f failWith) Provider() string { return "fake" }

func (f failWith) Send(context.Context, channel.Message) (channel.Result, error) {
	return channel.Result{}, f.err
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

// What a provider says of a failed send is the provider's text: the record keeps (and
// the log line shows) at most delivery.MaxErrorBytes of it, valid UTF-8, whatever its
// length, so a long answer neither bloats every status read nor makes the record's
// write fail (a retry's record keeps the message's content as well, and an item holds
// 400 KB): the record is settled as the answer says, once. Through Slack (its "error"
// long, permanent and transient) and through any adapter (a message cut inside a
// character, bytes that are no UTF-8).
func TestDeliverProviderErrorTextIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		slack  *channeltest.SlackAnswer
		err    error
		status string
	}{
		{name: "slack permanent, 60 KB", slack: &channeltest.SlackAnswer{Error: strings.Repeat("no_such_thing_", 60<<10/14)}, status: inbox.DeliveryFailed},
		{name: "slack transient 503, 600 KB", slack: &channeltest.SlackAnswer{Status: 503, Error: strings.Repeat("é", 300<<10)}, status: inbox.DeliveryQueued},
		{name: "slack config, 100 KB", slack: &channeltest.SlackAnswer{Status: 401, Error: strings.Repeat("x", 100<<10)}, status: inbox.DeliveryFailed},
		{name: "any adapter, cut in a character", err: &channel.Error{Provider: "fake", Kind: channel.Permanent, Err: errors.New(strings.Repeat("🚀", 1000))}, status: inbox.DeliveryFailed},
		{name: "any adapter, not UTF-8", err: &channel.Error{Provider: "fake", Kind: channel.Transient, Err: errors.New(strings.Repeat("\xff\xfe ok ", 200))}, status: inbox.DeliveryQueued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			if _, err := f.st.PutUserProfile(ctx, viewer, inbox.UserProfile{Addresses: map[string]string{"slackUserId": "U024BE7LH"}}); err != nil {
				t.Fatal(err)
			}
			var adapter channel.Channel = failWith{tc.err}
			if tc.slack != nil {
				srv := channeltest.NewSlack(t)
				srv.Queue(*tc.slack)
				sl, err := channel.NewSlack(channel.SlackConfig{BotToken: srv.Token, BaseURL: srv.URL})
				if err != nil {
					t.Fatal(err)
				}
				adapter = sl
			}
			logs := &syncBuffer{}
			h := delivery.NewHandler(f.st, delivery.Options{Channels: channel.NewRegistry().Register(inbox.ChannelSlack, "", adapter),
				Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: f.clk, Backoff: 10 * time.Millisecond})
			id, task := f.send(t, "long", inbox.ChannelSlack, inbox.ChannelSlack)
			if err := h.Handle(ctx, task); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			c := f.record(t, id, inbox.ChannelSlack)
			if c.Status != tc.status || c.Attempts != 1 || c.Error == "" || len(c.Error) > delivery.MaxErrorBytes || !utf8.ValidString(c.Error) {
				t.Fatalf("record %s, %d attempts, error of %d bytes (valid UTF-8: %v), want %s with at most %d bytes",
					c.Status, c.Attempts, len(c.Error), utf8.ValidString(c.Error), tc.status, delivery.MaxErrorBytes)
			}
			for _, l := range logs.lines() {
				if len(l) > 4*delivery.MaxErrorBytes {
					t.Errorf("a log line of %d bytes: %.200s…", len(l), l)
				}
			}
		})
	}
}

// A Slack delivery under DynamoDB faults (throttled, failing, or answered and the answer
// lost) at its claim and at its SENT record, once and as often as the store retries: the
// scheduler runs the task again until it succeeds, and Slack got the message once, the
// record SENT with the id of the message Slack posted (chat.postMessage has no
// idempotency key: the claim alone keeps a second post away).
func TestDeliverSlackUnderDynamoDBFaults(t *testing.T) {
	t.Parallel()
	for _, point := range []struct {
		name string
		op   string
		nth  int
	}{{"claim", "UpdateItem", 1}, {"DeliverySent", "UpdateItem", 2}} {
		for _, fl := range []struct {
			name string
			f    ddbfault.Fault
		}{{"throttled", ddbfault.Throttling}, {"outage", ddbfault.Outage}, {"answer lost", ddbfault.AnswerLost}} {
			for _, n := range []int{1, store.DefaultRetryPolicy.Attempts} {
				t.Run(fmt.Sprintf("%s/%s/x%d", point.name, fl.name, n), func(t *testing.T) {
					t.Parallel()
					f, srv, sl := newSlackFixture(t)
					ctx := context.Background()
					e := &faultEnv{clk: f.clk, chans: channel.NewRegistry().Register(inbox.ChannelSlack, "", sl), key: inbox.ChannelSlack}
					e.id, e.first = f.send(t, "slack-fault", inbox.ChannelSlack, inbox.ChannelSlack)
					trig := &opTrigger{op: point.op, nth: point.nth, n: n, fault: fl.f}
					fst := faultyStore(t, f, trig)
					runErr := e.handler(fst).Handle(ctx, e.first)
					trig.mu.Lock()
					fired := trig.fired
					trig.mu.Unlock()
					if !fired {
						t.Fatal("the fault never fired")
					}
					err := runErr
					for i := 0; err != nil && i < 5; i++ {
						if errors.Is(err, delivery.ErrBusy) {
							f.clk.Advance(faultTimeout + faultMargin)
						}
						err = e.handler(f.st).Handle(ctx, e.first)
					}
					if err != nil {
						t.Fatalf("the task never succeeded: %v (first run: %v)", err, runErr)
					}
					reqs := srv.Requests()
					if len(reqs) != 1 {
						t.Fatalf("Slack got %d posts, want 1 (first run: %v)", len(reqs), runErr)
					}
					c := f.record(t, e.id, e.key)
					if c.Status != inbox.DeliverySent || c.Attempts != 1 || c.Provider != channel.ProviderSlack {
						t.Fatalf("record %+v (first run: %v)", c, runErr)
					}
					// An unconfirmed record (the worker's own SENT lost for good, the claim
					// expired) says so; one confirmed carries the posted message's id.
					if !strings.HasPrefix(c.Error, "unconfirmed") && c.ProviderMessageID != reqs[0].PostedChannel+":"+reqs[0].PostedTS {
						t.Fatalf("record %+v, Slack posted %s:%s", c, reqs[0].PostedChannel, reqs[0].PostedTS)
					}
				})
			}
		}
	}
}
