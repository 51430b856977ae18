package app

import (
	"fmt"

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
