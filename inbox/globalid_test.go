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
		{(&Actor{ActorID: "octocat", Via: "01JB"}).GlobalID(), enc("Actor:01JB\x00octocat")},
		{(&Target{Kind: "issue", TargetID: "42", Via: "01JB"}).GlobalID(), enc("Target:01JB\x00issue\x0042")},
		{(&Actor{ActorID: "octocat"}).GlobalID(), enc("Actor:\x00octocat")},
		{(&Viewer{TenantID: "acme", UserID: "u1"}).GlobalID(), enc("Viewer:acme\x00u1")},
		{(&Actor{ActorID: long, Via: "01JB"}).GlobalID(), enc("Actor:01JB\x00" + long)},
		{(&Target{Kind: long, TargetID: long, Via: "01JB"}).GlobalID(), enc("Target:01JB\x00" + long + "\x00" + long)},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = (&Target{Kind: "issue", TargetID: "42", Via: "01JBX4J7Q8S9T0V1W2X3Y4Z5A6"}).GlobalID() }); n > 1 {
		t.Errorf("GlobalID: %v allocations, want 1", n)
	}
}
