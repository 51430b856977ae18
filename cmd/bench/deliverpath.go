package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// deliverFrom is the sender of the bench's email.
const deliverFrom = "Inbox Bench <bench@bench.example>"

// deliverRate is the provider rate limit of scenario 16's path (sends a second): far
// above what one process reaches, so the limiter is crossed on every send (as in the
// gateway) but never waits.
const deliverRate = 1e6

// deliverRigs builds scenario 16's email and webhook rigs: the delivery handler over st
// with the adapters behind their rate limits (as app builds them), the same adapters
// alone, and the raw clients, all sending to the sinks.
func (b *harness) deliverRigs(st *store.Store, rr *rawRecords, smtpS *smtpSink, hookS *webhookSink, secret string, secretKey []byte, conc int) ([]deliverRig, error) {
	email, err := channel.NewEmail(channel.EmailConfig{URL: "smtp://" + smtpS.addr, From: deliverFrom, Timeout: delivery.DefaultTimeout})
	if err != nil {
		return nil, fmt.Errorf("email adapter: %w", err)
	}
	hookClient := &http.Client{Transport: &http.Transport{MaxIdleConns: 4 * conc, MaxIdleConnsPerHost: 4 * conc}}
	hook := channel.NewWebhook(channel.WebhookConfig{Client: hookClient, Timeout: delivery.DefaultTimeout})
	h := delivery.NewHandler(st, delivery.Options{Logger: b.log, Channels: channel.NewRegistry().
		Register(inbox.ChannelEmail, "", channel.Limit(email, deliverRate, int(deliverRate))).
		Register(inbox.ChannelWebhook, "", channel.Limit(hook, deliverRate, int(deliverRate)))})
	mailer, err := newRawMailer(smtpS.addr)
	if err != nil {
		return nil, err
	}
	hooker := newRawHooker(hookS.url, secretKey, conc)
	in := deliverSend()
	msg := func(i int64, key string) channel.Message {
		u := deliverUser(int(i % deliverUsers))
		id := fmt.Sprintf("bench-%s-%d-%d", key, time.Now().UnixNano(), i)
		return channel.Message{TenantID: tenant, UserID: u, NotificationID: id, Key: key, Attempt: 1, IdempotencyKey: id}
	}
	return []deliverRig{
		{channel: inbox.ChannelEmail, provider: email.Provider(), path: h.Handle, sink: &smtpS.receipts,
			adapter: func(ctx context.Context, i int64) error {
				m := msg(i, inbox.ChannelEmail)
				m.To, m.Subject, m.Text = deliverEmail(m.UserID), in.Title, in.Body
				_, err := email.Send(ctx, m)
				return err
			},
			records: func(ctx context.Context, t inbox.Task) error {
				return rr.deliver(ctx, t, func(ctx context.Context) (string, error) {
					return t.Ref + "@bench.example", mailer.send(ctx, rawMail{From: deliverFrom, To: deliverEmail(t.Viewer.UserID), Subject: in.Title, Text: in.Body})
				})
			},
			raw: func(ctx context.Context, i int64) error {
				u := deliverUser(int(i % deliverUsers))
				return mailer.send(ctx, rawMail{From: deliverFrom, To: deliverEmail(u), Subject: in.Title, Text: in.Body})
			}},
		{channel: inbox.ChannelWebhook, provider: hook.Provider(), path: h.Handle, sink: &hookS.receipts,
			adapter: func(ctx context.Context, i int64) error {
				m := msg(i, inbox.ChannelWebhook)
				m.To, m.Payload, m.Secret = hookS.url, deliverPayload(i), secret
				_, err := hook.Send(ctx, m)
				return err
			},
			records: func(ctx context.Context, t inbox.Task) error {
				return rr.deliver(ctx, t, func(ctx context.Context) (string, error) {
					id := "raw-" + t.Ref
					return id, hooker.send(ctx, id, deliverPayload(0))
				})
			},
			raw: func(ctx context.Context, i int64) error {
				return hooker.send(ctx, fmt.Sprintf("raw-%d-%d", time.Now().UnixNano(), i), deliverPayload(i))
			}},
	}, nil
}
