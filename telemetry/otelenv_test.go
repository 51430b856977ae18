package telemetry_test

import (
	"strings"
	"testing"

	"github.com/inboxgw/gateway/telemetry"
)

// Hostile OTEL_BSP_* values, which the SDK's batch span processor takes as they are
// (a negative size panicked in makechan at the start, a huge one allocated its queue, a
// delay of zero or less exported in a busy loop), are refused by FromEnv with an error
// naming the variable; sane ones still give a tracing.
func TestFromEnvRefusesHostileBatchSettings(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	for _, c := range []struct{ key, value string }{
		{"OTEL_BSP_MAX_QUEUE_SIZE", "-1"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "100000000000"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "lots"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-5"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0"},
		{"OTEL_BSP_SCHEDULE_DELAY", "-1"},
		{"OTEL_BSP_SCHEDULE_DELAY", "0"},
		{"OTEL_BSP_EXPORT_TIMEOUT", "-1"},
		{"OTEL_BSP_EXPORT_TIMEOUT", "1e9"},
	} {
		t.Run(c.key+"="+c.value, func(t *testing.T) {
			t.Setenv(c.key, c.value)
			var tr *telemetry.Tracing
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("FromEnv panicked: %v", p)
					}
				}()
				tr, err = telemetry.FromEnv(t.Context())
			}()
			if err == nil {
				_ = tr.Shutdown(t.Context())
				t.Fatalf("accepted")
			}
			if !strings.Contains(err.Error(), c.key) {
				t.Errorf("the error does not name the variable: %v", err)
			}
		})
	}
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4096")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "256")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "1000")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "0")
	tr, err := telemetry.FromEnv(t.Context())
	if err != nil || !tr.Enabled() {
		t.Fatalf("sane batch settings: %v", err)
	}
	_ = tr.Shutdown(t.Context())
}
