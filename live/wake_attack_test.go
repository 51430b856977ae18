package live

import (
	"strings"
	"testing"
	"time"
)

// A wake-up message that does not decode is logged through its error, which quotes at
// most its first 64 bytes: a message of a megabyte, or one of a hundred short lines,
// published on the channel by anyone with access to Redis, does not reach the log whole.
func TestBadWakeUpErrorIsClipped(t *testing.T) {
	t.Parallel()
	for name, msg := range map[string]string{
		"huge":           strings.Repeat("x", 1<<20),
		"many fields":    strings.Repeat("a\\n", 200),
		"bad shard":      "origin " + strings.Repeat("9", 300) + " 1",
		"bad due":        "origin 1 " + strings.Repeat("z", 300),
		"utf-8 cut":      "a" + strings.Repeat("é", 100) + " x 2",
		"long but valid": strings.Repeat("o", 600) + " 1 2",
	} {
		_, _, _, err := decodeWake(msg)
		if err == nil {
			t.Errorf("%s: decoded", name)
			continue
		}
		if n := len(err.Error()); n > 200 {
			t.Errorf("%s: error of %d bytes: %.100s…", name, n, err)
		}
		if !strings.Contains(err.Error(), "bytes)") {
			t.Errorf("%s: %v: does not say how long the message was", name, err)
		}
	}
	origin, shard, due, err := decodeWake(encodeWake("abc123", 7, time.UnixMilli(1_800_000_000_456)))
	if err != nil || origin != "abc123" || shard != 7 || due.UnixMilli() != 1_800_000_000_456 {
		t.Errorf("a good wake-up: %q %d %v %v", origin, shard, due, err)
	}
	if _, _, _, err := decodeWake("a b"); err == nil || !strings.Contains(err.Error(), `"a b"`) {
		t.Errorf("a short bad wake-up is quoted whole: %v", err)
	}
}
