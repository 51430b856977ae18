package rest

import (
	"errors"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
)

// A tenant's webhook secret is checked when it is stored, the way the webhook channel
// keys its signatures: a "whsec_" secret must be base64 of its key (else every delivery
// would fail later, permanently, with nothing telling the caller at PUT time).
func TestCheckSettingsWebhookSecret(t *testing.T) {
	t.Parallel()
	const u = "https://hooks.example.com/inbox"
	for _, tc := range []struct {
		name, secret, wantErr string
	}{
		{"standard webhooks form", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ""},
		{"raw bytes", "0123456789abcdef0123456789", ""},
		{"too short", "short", "at least 24 bytes"},
		{"whsec_ not base64", "whsec_!!!!notbase64!!!!!!!!!!!", "base64"},
		{"whsec_ base64url", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2La_-Sw", "base64"},
	} {
		err := checkSettings(gen.TenantSettingsInput{Webhook: &gen.WebhookSettingsInput{Url: u, Secret: tc.secret}})
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var ie *inbox.Error
		if !errors.As(err, &ie) || ie.Code != inbox.CodeBadUserInput || !strings.Contains(ie.Message, tc.wantErr) {
			t.Errorf("%s: got %v, want BAD_USER_INPUT with %q", tc.name, err, tc.wantErr)
		}
	}
}
