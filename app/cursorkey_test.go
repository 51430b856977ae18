package app

import (
	"bytes"
	"strings"
	"testing"
)

// The cursor key: INBOX_CURSOR_SECRET (at least 32 bytes) or derived from the JWT secret,
// the same for every instance with the same configuration.
func TestCursorKeyConfig(t *testing.T) {
	t.Setenv("INBOX_CURSOR_SECRET", "too-short")
	if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "INBOX_CURSOR_SECRET") {
		t.Fatalf("short INBOX_CURSOR_SECRET: %v", err)
	}
	jwt := strings.Repeat("j", 32)
	a, errA := cursorKey(Config{JWTSecret: jwt})
	b, errB := cursorKey(Config{JWTSecret: jwt})
	c, errC := cursorKey(Config{JWTSecret: strings.Repeat("k", 32)})
	if errA != nil || errB != nil || errC != nil || !bytes.Equal(a, b) || bytes.Equal(a, c) || bytes.Equal(a, []byte(jwt)) {
		t.Fatalf("derived keys: %x %x %x (%v %v %v)", a, b, c, errA, errB, errC)
	}
	own := strings.Repeat("c", 40)
	if k, err := cursorKey(Config{JWTSecret: jwt, CursorSecret: own}); err != nil || string(k) != own {
		t.Fatalf("INBOX_CURSOR_SECRET: %q, %v", k, err)
	}
}
