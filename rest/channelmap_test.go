package rest

import (
	"maps"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
)

// Every registered channel's address round-trips through the REST profile under its
// AddressKey: a channel registered with an address the API's document lacks fails here,
// named (the conversion is by JSON name, not per field).
func TestProfileAddressesRoundTripEveryChannel(t *testing.T) {
	for _, s := range inbox.Specs() {
		if s.AddressKey == "" {
			continue
		}
		in := inbox.UserProfile{Addresses: map[string]string{s.AddressKey: "addr-" + s.Name}, Locale: "de-DE", Timezone: "Europe/Berlin"}
		out, err := profile("u", in)
		if err != nil {
			t.Errorf("%s: address %q: %v", s.Name, s.AddressKey, err)
			continue
		}
		if out.Id != "u" || deref(out.Locale) != "de-DE" || deref(out.Timezone) != "Europe/Berlin" {
			t.Errorf("%s: profile %+v", s.Name, out)
		}
		m, err := members(out)
		if err != nil {
			t.Fatal(err)
		}
		var back gen.UserProfileInput
		if err := fromMembers(map[string]any{s.AddressKey: "addr-" + s.Name, "locale": "de-DE"}, &back); err != nil {
			t.Errorf("%s: input member %q: %v", s.Name, s.AddressKey, err)
			continue
		}
		got, err := profileInput(back)
		if err != nil || !maps.Equal(got.Addresses, in.Addresses) || got.Locale != "de-DE" || len(m) != 4 {
			t.Errorf("%s: round trip %+v %v (answer members %v)", s.Name, got, err, m)
		}
	}
	// A name the generated type lacks is an error, not a dropped field.
	if _, err := profile("u", inbox.UserProfile{Addresses: map[string]string{"fax": "x"}}); err != nil {
		t.Errorf("an unregistered address is not read at all: %v", err)
	}
	var p gen.UserProfile
	if err := fromMembers(map[string]any{"fax": "x"}, &p); err == nil {
		t.Error("a member the generated type lacks was dropped")
	}
}
