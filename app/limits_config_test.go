package app

import (
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/httpapi"
)

// The limit settings of issue 8 (the query and APQ cache budgets, INBOX_INTROSPECTION, the request
// deadlines and the HTTP server timeouts) have defaults and bounds.
func TestLimitConfigDefaultsAndBounds(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.QueryCacheBytes != httpapi.DefaultQueryCacheBytes || cfg.APQCacheBytes != httpapi.DefaultAPQCacheBytes || cfg.QueryTimeout != httpapi.DefaultQueryTimeout ||
		cfg.MutationTimeout != httpapi.DefaultMutationTimeout || cfg.QueryTimeout >= cfg.MutationTimeout ||
		cfg.ReadHeaderTimeout != httpapi.DefaultTimeouts.ReadHeader || cfg.ReadTimeout != httpapi.DefaultTimeouts.Read ||
		cfg.WriteTimeout != httpapi.DefaultTimeouts.Write || cfg.IdleTimeout != httpapi.DefaultTimeouts.Idle ||
		cfg.WriteTimeout <= cfg.MutationTimeout {
		t.Errorf("defaults = %+v", cfg)
	}
	for _, tc := range []struct{ name, value string }{
		{"INBOX_INTROSPECTION", "yes"},
		{"INBOX_QUERY_CACHE_BYTES", "1000"},
		{"INBOX_QUERY_CACHE_BYTES", "-1"},
		{"INBOX_APQ_CACHE_BYTES", "100"},
		{"INBOX_QUERY_TIMEOUT", "0s"},
		{"INBOX_MUTATION_TIMEOUT", "1h"},
		{"INBOX_READ_HEADER_TIMEOUT", "1ms"},
		{"INBOX_READ_TIMEOUT", "0s"},
		{"INBOX_WRITE_TIMEOUT", "-1s"},
		{"INBOX_IDLE_TIMEOUT", "0s"},
		{"INBOX_ANONYMOUS_CONCURRENCY", "0"},
		{"INBOX_ANONYMOUS_CONCURRENCY", "1001"},
	} {
		t.Setenv(tc.name, tc.value)
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%s: %v, want an error naming it", tc.name, tc.value, err)
		}
		t.Setenv(tc.name, "")
	}
	t.Setenv("INBOX_INTROSPECTION", "on")
	t.Setenv("INBOX_QUERY_TIMEOUT", "2s")
	if cfg, err := LoadConfig(); err != nil || cfg.Introspection != "on" || cfg.QueryTimeout != 2*time.Second {
		t.Errorf("INBOX_INTROSPECTION=on, INBOX_QUERY_TIMEOUT=2s: %+v, %v", cfg, err)
	}
}

// INBOX_COMPLEXITY_LIMIT below 1 is refused at start: every document costs at least 1, so
// a limit of 0 (or a negative one) started a gateway that refused every request with
// COMPLEXITY_LIMIT_EXCEEDED while its probes said it was ready; 0 is not "no limit".
func TestComplexityLimitBounds(t *testing.T) {
	for _, v := range []string{"0", "-5"} {
		t.Setenv("INBOX_COMPLEXITY_LIMIT", v)
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "INBOX_COMPLEXITY_LIMIT") {
			t.Errorf("INBOX_COMPLEXITY_LIMIT=%s: %v, want an error naming it", v, err)
		}
	}
	t.Setenv("INBOX_COMPLEXITY_LIMIT", "1")
	if cfg, err := LoadConfig(); err != nil || cfg.ComplexityLimit != 1 {
		t.Errorf("INBOX_COMPLEXITY_LIMIT=1: %+v, %v", cfg.ComplexityLimit, err)
	}
}

// The transport settings are bounded: a keep-alive under 1 s or an init timeout of 0.
func TestTransportConfigBounds(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"INBOX_KEEPALIVE", "1ms"},
		{"INBOX_KEEPALIVE", "-1s"},
		{"INBOX_KEEPALIVE", "0s"},
		{"INBOX_WS_INIT_TIMEOUT", "0s"},
	} {
		t.Setenv(tc.name, tc.value)
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%s: %v, want an error naming it", tc.name, tc.value, err)
		}
		t.Setenv(tc.name, map[string]string{"INBOX_KEEPALIVE": "15s", "INBOX_WS_INIT_TIMEOUT": "10s"}[tc.name])
	}
	if _, err := LoadConfig(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// The send pipeline's settings (issue 10) default to a 24 h idempotency window, 16 and 4
// lane workers and a 10 s send recovery, and refuse at start what the service would
// silently replace by its default (0 or negative) or what cannot be meant (a window under
// a minute, beyond MaxIdempotencyTTL; a recovery under 100 ms or over an hour).
func TestSendPipelineConfigDefaultsAndBounds(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.IdempotencyTTL != 24*time.Hour || cfg.LaneTransactional != 16 || cfg.LaneBulk != 4 || cfg.SendRecovery != 10*time.Second {
		t.Errorf("defaults: INBOX_IDEMPOTENCY_TTL %v, INBOX_LANE_TRANSACTIONAL %d, INBOX_LANE_BULK %d, INBOX_SEND_RECOVERY %v, want 24h, 16, 4, 10s",
			cfg.IdempotencyTTL, cfg.LaneTransactional, cfg.LaneBulk, cfg.SendRecovery)
	}
	for _, tc := range []struct{ name, value string }{
		{"INBOX_IDEMPOTENCY_TTL", "0s"},
		{"INBOX_IDEMPOTENCY_TTL", "30s"},
		{"INBOX_IDEMPOTENCY_TTL", "8785h"},
		{"INBOX_LANE_TRANSACTIONAL", "0"},
		{"INBOX_LANE_TRANSACTIONAL", "1025"},
		{"INBOX_LANE_BULK", "-1"},
		{"INBOX_LANE_BULK", "1025"},
		{"INBOX_SEND_RECOVERY", "0s"},
		{"INBOX_SEND_RECOVERY", "-1s"},
		{"INBOX_SEND_RECOVERY", "99ms"},
		{"INBOX_SEND_RECOVERY", "61m"},
	} {
		t.Setenv(tc.name, tc.value)
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%s: %v, want an error naming it", tc.name, tc.value, err)
		}
		t.Setenv(tc.name, "")
	}
	t.Setenv("INBOX_IDEMPOTENCY_TTL", "720h")
	t.Setenv("INBOX_LANE_BULK", "1")
	t.Setenv("INBOX_SEND_RECOVERY", "1s")
	if cfg, err := LoadConfig(); err != nil || cfg.IdempotencyTTL != 720*time.Hour || cfg.LaneBulk != 1 || cfg.SendRecovery != time.Second {
		t.Errorf("INBOX_IDEMPOTENCY_TTL=720h, INBOX_LANE_BULK=1, INBOX_SEND_RECOVERY=1s: %v, %v, %v, %v", cfg.IdempotencyTTL, cfg.LaneBulk, cfg.SendRecovery, err)
	}
}
