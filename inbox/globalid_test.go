package inbox

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestGlobalID(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	long := strings.Repeat("x", 300)
	for _, c := range []struct{ got, want string }{
		{GlobalID(TypeNotification, "01JB"), enc("Notification:01JB")},
		{(&Notification{ID: "01JB"}).GlobalID(), enc("Notification:01JB")},
		{(&Actor{ActorID: "octocat"}).GlobalID(), enc("Actor:octocat")},
		{(&Target{Kind: "issue", TargetID: "42"}).GlobalID(), enc("Target:issue\x0042")},
		{(&Viewer{TenantID: "acme", UserID: "u1"}).GlobalID(), enc("Viewer:acme\x00u1")},
		{(&Actor{ActorID: long}).GlobalID(), enc("Actor:" + long)},
		{(&Target{Kind: long, TargetID: long}).GlobalID(), enc("Target:" + long + "\x00" + long)},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = (&Target{Kind: "issue", TargetID: "42"}).GlobalID() }); n > 1 {
		t.Errorf("GlobalID: %v allocations, want 1", n)
	}
}
