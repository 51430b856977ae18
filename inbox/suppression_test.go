package inbox_test

import (
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// TestNormalizeAddressFoldsOnlyASCII: an email address is lower-cased in ASCII only.
// strings.ToLower maps the Kelvin sign (U+212A), a letter net/mail accepts in an
// address, onto an ASCII 'k': a user who set their address to "\u212Aim@example.com"
// and let it bounce put the other mailbox kim@example.com on the tenant's list (the
// lower-cased form is the list's key), and its owner got no more email.
func TestNormalizeAddressFoldsOnlyASCII(t *testing.T) {
	norm := func(a string) string {
		t.Helper()
		n, err := inbox.NormalizeAddress(inbox.ChannelEmail, a)
		if err != nil {
			t.Fatalf("%q: %v", a, err)
		}
		return n
	}
	spec, _ := inbox.Spec(inbox.ChannelEmail)
	if err := spec.ValidAddress("\u212Aim@example.com"); err != nil {
		t.Fatalf("the Kelvin sign's address is not a valid profile email (%v): the case tests nothing", err)
	}
	if a, b := norm("\u212Aim@example.com"), norm("kim@example.com"); a == b {
		t.Fatalf("%q and kim@example.com share the list's key %q", "\u212Aim@example.com", a)
	}
	for in, want := range map[string]string{" Kim@Example.COM ": "kim@example.com", "ÉLÈVE@X.test": "ÉlÈve@x.test", "a+Tag@X.test": "a+tag@x.test"} {
		if got := norm(in); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
	if n, _ := inbox.NormalizeAddress(inbox.ChannelSMS, " +14155550100 "); n != "+14155550100" {
		t.Errorf("sms: %q", n)
	}
}
