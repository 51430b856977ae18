package channel_test

import (
	"context"
	"testing"

	"github.com/inboxgw/gateway/channel"
)

// named is an adapter that only has a name.
type named string

func (n named) Provider() string { return string(n) }
func (n named) Send(context.Context, channel.Message) (channel.Result, error) {
	return channel.Result{Provider: string(n)}, nil
}

func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	r := channel.NewRegistry().
		Register("EMAIL", "", named("smtp")).
		Register("PUSH", "apns", named("apns")).
		Register("PUSH", "fcm", named("fcm")).
		Register("SMS", "", nil) // unconfigured: nothing registered
	for _, c := range []struct{ ch, platform, want string }{
		{"EMAIL", "", "smtp"},
		{"EMAIL", "apns", "smtp"}, // a channel's adapter serves every platform
		{"PUSH", "apns", "apns"},
		{"PUSH", "fcm", "fcm"},
		{"PUSH", "web", ""}, // no adapter for that platform, none for the whole channel
		{"PUSH", "", ""},
		{"SMS", "", ""},
		{"SLACK", "", ""},
	} {
		got := ""
		if a := r.Lookup(c.ch, c.platform); a != nil {
			got = a.Provider()
		}
		if got != c.want {
			t.Errorf("Lookup(%q, %q) = %q, want %q", c.ch, c.platform, got, c.want)
		}
	}
	for ch, want := range map[string]bool{"EMAIL": true, "PUSH": true, "SMS": false, "WEBHOOK": false} {
		if r.Has(ch) != want {
			t.Errorf("Has(%q) = %v", ch, !want)
		}
	}
	rs := r.Routes()
	if len(rs) != 3 || rs[0].Channel != "EMAIL" || rs[1].Platform != "apns" || rs[2].Platform != "fcm" {
		t.Errorf("Routes() = %+v", rs)
	}
	var none *channel.Registry
	if none.Lookup("EMAIL", "") != nil || none.Has("EMAIL") || none.Routes() != nil {
		t.Error("the nil registry has adapters")
	}
}

func TestRegistryRefusesARouteTwice(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("a second registration of PUSH/apns was accepted")
		}
	}()
	channel.NewRegistry().Register("PUSH", "apns", named("a")).Register("PUSH", "apns", named("b"))
}
