package app

import (
	"context"
	"strings"
	"testing"
)

// An operator's mistake in a setting that carries a password (INBOX_REDIS_URL, a
// provider's or the JWKS URL with userinfo) stops every command that reads the
// configuration with an error naming the setting and never the password: the error goes
// to stderr, the log stream. A Redis URL that did not parse was quoted whole (url.Parse's
// error), and so were the providers' base URLs and the JWKS URL.
func TestStartErrorsNameTheSettingNotItsPassword(t *testing.T) {
	const pw = "S3cretPw-do-not-print"
	base := map[string]string{
		"INBOX_STORE": "dynamodb", "INBOX_JWT_SECRET": strings.Repeat("j", 32), "INBOX_BROKER": "redis",
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	}
	for _, c := range []struct {
		name, value string
		named       string // what the error must name
	}{
		{"INBOX_REDIS_URL", "redis://:" + pw + "@localhost:63a79/0", "redis"},
		{"INBOX_REDIS_URL", "redis://user:" + pw + "@ho st:6379/0", "redis"},
		{"INBOX_REDIS_URL", "redis://us er:" + pw + "@localhost/0", "redis"},
		{"INBOX_REDIS_URL", "redis://:" + pw + "@localhost:6379/notadb", "redis"},
		{"INBOX_REDIS_URL", "http://:" + pw + "@localhost:6379/0", "redis"},
		{"INBOX_REDIS_URL", "redis://:" + pw + "@127.0.0.1:1/0", "redis"},
		{"INBOX_TWILIO_URL", "https://u:" + pw + "@api.twilio.com/?x=1", "INBOX_TWILIO_URL"},
		{"INBOX_FCM_URL", "ftp://u:" + pw + "@fcm.googleapis.com", "INBOX_FCM_URL"},
		{"INBOX_APNS_URL", "https://u:" + pw + "@api.push.apple.com#x", "INBOX_APNS_URL"},
		{"INBOX_PUBLIC_URL", "https://u:" + pw + "@gw.example.com/?a=b", "INBOX_PUBLIC_URL"},
		{"INBOX_SMTP_URL", "smtp://u:" + pw + "@ho st:25", "INBOX_SMTP_URL"},
		{"INBOX_JWKS_URL", "http://u:" + pw + "@idp.example.com/jwks", "JWKS URL"},
		{"INBOX_JWKS_URL", "https://u:" + pw + "@idp example.com/jwks", "JWKS URL"},
		{"INBOX_JWKS_URL", "u:" + pw + "@idp.example.com/jwks", "JWKS URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(k, v)
			}
			if c.name == "INBOX_JWKS_URL" { // the verifier is built before the broker
				t.Setenv("INBOX_JWT_SECRET", "")
			}
			t.Setenv(c.name, c.value)
			for _, args := range [][]string{{"serve"}, {"worker"}, {"relay"}, {"import-github", "no-such-file.json"}} {
				if c.name == "INBOX_JWKS_URL" && args[0] != "serve" {
					continue // only serve verifies tokens
				}
				err := Run(context.Background(), args)
				if err == nil {
					t.Fatalf("%s with %s=%s started", args[0], c.name, c.value)
				}
				if msg := err.Error(); strings.Contains(msg, pw) || !strings.Contains(msg, c.named) {
					t.Errorf("%s with %s=%s: %q; want an error naming %s without the password", args[0], c.name, c.value, msg, c.named)
				}
			}
		})
	}
}
