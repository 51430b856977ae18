package channel

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestProviderRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"120":                           2 * time.Minute,
		"0":                             0,
		"-5":                            0,
		"soon":                          0,
		"Wed, 25 Nov 2026 12:01:30 GMT": 90 * time.Second,
		"Wed, 25 Nov 2026 11:59:00 GMT": 0,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := providerRetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

func TestProviderTransportError(t *testing.T) {
	e := providerTransportError(ProviderFCM, context.DeadlineExceeded)
	if e.Kind != Transient || e.Status != 0 || !errors.Is(e, context.DeadlineExceeded) || e.Error() != "fcm: transient: timed out: context deadline exceeded" {
		t.Fatalf("%v", e)
	}
	e = providerTransportError(ProviderTwilio, errors.New("connection refused"))
	if e.Kind != Transient || e.Error() != "twilio: transient: connection refused" {
		t.Fatalf("%v", e)
	}
}
