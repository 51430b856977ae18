package app

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/providerhook"
	"github.com/inboxgw/gateway/rest"
)

// providerHooks are the provider callbacks cfg configures: Twilio's status callbacks
// with an auth token and a public URL (Twilio signs the URL it calls), SendGrid's event
// webhook with its verification key. Errors: a setting that cannot be used (a public URL
// that is not absolute http(s), a key that is not ECDSA P-256, a negative maximum age).
func providerHooks(cfg Config) ([]rest.ProviderHook, error) {
	var hooks []rest.ProviderHook
	if cfg.CallbackMaxAge < 0 {
		return nil, fmt.Errorf("INBOX_CALLBACK_MAX_AGE must not be negative, not %v", cfg.CallbackMaxAge)
	}
	if cfg.TwilioAuthToken != "" && cfg.PublicURL != "" {
		tw, err := providerhook.NewTwilio(providerhook.TwilioConfig{AuthToken: cfg.TwilioAuthToken, PublicURL: cfg.PublicURL})
		if err != nil {
			return nil, err
		}
		hooks = append(hooks, tw)
	}
	if cfg.SendGridWebhookKey != "" {
		sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: cfg.SendGridWebhookKey, MaxAge: cfg.CallbackMaxAge})
		if err != nil {
			return nil, err
		}
		hooks = append(hooks, sg)
	}
	return hooks, nil
}

// callbackParallelism bounds the records one callback updates at once (a SendGrid batch
// holds up to providerhook.MaxEvents events, each one UpdateItem).
const callbackParallelism = 8

// RegisterDevice registers a push device of the user (store.RegisterDevice).
func (b *RESTBackend) RegisterDevice(ctx context.Context, v inbox.Viewer, token, platform string) (inbox.Device, error) {
	return b.Store.RegisterDevice(ctx, v, token, platform)
}

// UnregisterDevice removes the user's device by token or id (store.UnregisterDevice).
func (b *RESTBackend) UnregisterDevice(ctx context.Context, v inbox.Viewer, tokenOrID string) (bool, error) {
	return b.Store.UnregisterDevice(ctx, v, tokenOrID)
}

// ApplyProviderEvents applies a callback's events (store.ApplyProviderEvent: one
// conditional UpdateItem each, at most callbackParallelism at once) and counts those that
// changed a record. Events of one record are applied in the callback's order (a
// "delivered" before an "open" of the same mail); the first error fails the callback,
// which the provider then retries (applying an event twice changes nothing).
func (b *RESTBackend) ApplyProviderEvents(ctx context.Context, events []inbox.ProviderEvent) (int, error) {
	byRef := map[inbox.DeliveryRef][]inbox.ProviderEvent{}
	var refs []inbox.DeliveryRef
	for _, ev := range events {
		if _, ok := byRef[ev.Ref]; !ok {
			refs = append(refs, ev.Ref)
		}
		byRef[ev.Ref] = append(byRef[ev.Ref], ev)
	}
	var applied atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(callbackParallelism)
	for _, ref := range refs {
		g.Go(func() error {
			for _, ev := range byRef[ref] {
				changed, err := b.Store.ApplyProviderEvent(gctx, ev)
				if err != nil {
					return err
				}
				if changed {
					applied.Add(1)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return int(applied.Load()), nil
}
