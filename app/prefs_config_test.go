package app

import (
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// INBOX_DEFAULT_PREFERENCES and INBOX_CRITICAL_CATEGORIES become the store's tenant
// defaults; a bad value stops the start with the variable named.
func TestPreferencesConfig(t *testing.T) {
	t.Setenv("INBOX_DEFAULT_PREFERENCES", `{"channels": {"sms": false}, "timezone": "Europe/Berlin"}`)
	t.Setenv("INBOX_CRITICAL_CATEGORIES", "security,billing")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.TenantPreferences
	if d.Channels[inbox.ChannelSMS] || !d.Channels[inbox.ChannelInApp] || !d.Channels[inbox.ChannelSlack] || d.Timezone != "Europe/Berlin" || !d.IsCritical("billing") || d.IsCritical("marketing") {
		t.Fatalf("defaults: %+v", d)
	}
	for _, bad := range []string{`{"timezone": "Nowhere/Else"}`, `{"channel": {}}`, `not json`} {
		t.Setenv("INBOX_DEFAULT_PREFERENCES", bad)
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "INBOX_DEFAULT_PREFERENCES") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
