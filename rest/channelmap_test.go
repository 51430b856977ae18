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

// Every registered switch round-trips through the REST conversions by its Switch name:
// on alone, it is the one true member of the answer's switches; as a partial input it
// sets its channel only, and null or left out changes nothing.
func TestSwitchesRoundTripEveryChannel(t *testing.T) {
	for _, c := range inbox.SwitchChannels {
		spec, _ := inbox.Spec(c)
		out, err := switches(inbox.ChannelSwitches{c: true})
		if err != nil {
			t.Fatalf("%s: switch %q: %v", c, spec.Switch, err)
		}
		m, err := members(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != len(inbox.SwitchChannels) {
			t.Errorf("the answer's switches have %d members, %d switches are registered", len(m), len(inbox.SwitchChannels))
		}
		for name, raw := range m {
			if (string(raw) == "true") != (name == spec.Switch) {
				t.Errorf("%s on alone: member %s = %s", c, name, raw)
			}
		}
		for _, v := range []bool{true, false} {
			in, err := switchesInput(map[string]bool{c: v})
			if err != nil {
				t.Fatalf("%s: input switch %q: %v", c, spec.Switch, err)
			}
			got, err := switchChanges(&in)
			if err != nil || !maps.Equal(got, inbox.SwitchChanges{c: v}) {
				t.Errorf("%s = %v: round trip %v, %v", c, v, got, err)
			}
		}
		var null gen.ChannelSwitchesInput
		if err := fromMembers(map[string]any{spec.Switch: nil}, &null); err != nil {
			t.Fatal(err)
		}
		if got, err := switchChanges(&null); err != nil || len(got) != 0 {
			t.Errorf("%s null: %v, %v", c, got, err)
		}
	}
}

// Every registered template part round-trips through the REST conversions by its Part
// name, every field by its Content name: a channel registered with a part (or a field)
// the API's document lacks fails here, named.
func TestTemplatePartsRoundTripEveryChannel(t *testing.T) {
	for _, c := range inbox.PartChannels {
		spec, _ := inbox.Spec(c)
		var content inbox.Content
		for _, f := range spec.Fields {
			content.SetField(f.Name, spec.Part+"."+f.Name)
		}
		parts := map[string]inbox.Content{c: content}
		out := gen.Template{Id: "t", Locale: "en"}
		if err := withTemplateParts(&out, parts); err != nil {
			t.Errorf("%s: part %q: %v", c, spec.Part, err)
			continue
		}
		if out.Id != "t" || out.Locale != "en" {
			t.Errorf("%s: the template's other members changed: %+v", c, out)
		}
		m, err := members(out)
		if err != nil {
			t.Fatal(err)
		}
		var in gen.TemplateInput
		if err := fromMembers(map[string]any{"locale": "en", spec.Part: m[spec.Part]}, &in); err != nil {
			t.Errorf("%s: input part %q: %v", c, spec.Part, err)
			continue
		}
		got, err := templateParts(in)
		if err != nil || !maps.Equal(got, parts) {
			t.Errorf("%s: round trip %+v, %v; want %+v", c, got, err, parts)
		}
		// An empty part is a part (its check names what it lacks); null is none.
		in = gen.TemplateInput{}
		if err := fromMembers(map[string]any{"locale": "en", spec.Part: map[string]any{}}, &in); err != nil {
			t.Fatal(err)
		}
		if got, err := templateParts(in); err != nil || !maps.Equal(got, map[string]inbox.Content{c: {}}) {
			t.Errorf("%s: empty part %+v, %v", c, got, err)
		}
		in = gen.TemplateInput{}
		if err := fromMembers(map[string]any{"locale": "en", spec.Part: nil}, &in); err != nil {
			t.Fatal(err)
		}
		if got, err := templateParts(in); err != nil || len(got) != 0 {
			t.Errorf("%s: null part %+v, %v", c, got, err)
		}
	}
}
