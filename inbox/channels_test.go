package inbox_test

import (
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// Every channel is registered once, with names no other channel uses, and the lists the
// domain derives from the registrations agree with them.
func TestChannelRegistrations(t *testing.T) {
	switches, parts := map[string]bool{}, map[string]bool{}
	for _, c := range inbox.Channels {
		s, ok := inbox.Spec(c)
		if !ok || s.Name != c {
			t.Fatalf("Spec(%q) = %+v, %v", c, s, ok)
		}
		if s.Switch != "" {
			if switches[s.Switch] {
				t.Errorf("switch %q registered twice", s.Switch)
			}
			switches[s.Switch] = true
			if inbox.ChannelBySwitch(s.Switch) != c {
				t.Errorf("ChannelBySwitch(%q) = %q", s.Switch, inbox.ChannelBySwitch(s.Switch))
			}
		}
		if s.Part != "" {
			if parts[s.Part] || len(s.Fields) == 0 || s.Fallback == nil {
				t.Errorf("part %q: twice, without fields or without a fallback: %+v", s.Part, s)
			}
			parts[s.Part] = true
			var c inbox.Content
			for _, f := range s.Fields {
				if !c.SetField(f.Name, "x") {
					t.Errorf("%s: field %q is none of Content's", s.Name, f.Name)
				}
			}
		}
		if (s.AddressKey == "") != (s.NoAddress == "") || (s.AddressKey == "") != (s.ValidAddress == nil) {
			t.Errorf("%s: an address needs its skip reason and its check, and only then", c)
		}
	}
	filters := map[string]*inbox.Escaping{}
	for _, e := range inbox.Escapings() {
		if e.Filter == "" || e.Filter == "raw" || e.Func == nil || filters[e.Filter] != nil {
			t.Errorf("escaping %+v: no filter name, raw's, no function, or a name twice", e)
		}
		filters[e.Filter] = e
	}
	for _, s := range inbox.Specs() {
		for _, f := range s.Fields {
			if f.Escape != nil && filters[f.Escape.Filter] != f.Escape {
				t.Errorf("%s.%s: escaping %q is another's filter name", s.Name, f.Name, f.Escape.Filter)
			}
		}
	}
	if len(switches) != len(inbox.SwitchChannels) || len(parts) != len(inbox.PartChannels) {
		t.Errorf("SwitchChannels %v, PartChannels %v", inbox.SwitchChannels, inbox.PartChannels)
	}
	if _, ok := inbox.Spec("FAX"); ok || inbox.ValidChannel("FAX") || inbox.ChannelBySwitch("fax") != "" {
		t.Error("an unregistered channel is known")
	}
}

// Tenant settings store switches as JSON. Those written when the switches were a struct
// ({"InApp": true, ..., with null for a channel not set}) read as the same switches,
// and a channel registered since (SLACK) is on in the tenant's defaults, as in
// DefaultTenantPreferences; a partial change leaves it unset.
func TestSwitchesStoredAsJSONBeforeSlack(t *testing.T) {
	var p inbox.TenantPreferences
	legacy := `{"Channels":{"InApp":true,"Email":false,"Push":true,"SMS":false},
		"Categories":[{"Category":"marketing","Channels":{"InApp":null,"Email":false,"Push":null,"SMS":true}}]}`
	if err := json.Unmarshal([]byte(legacy), &p); err != nil {
		t.Fatal(err)
	}
	want := inbox.ChannelSwitches{inbox.ChannelInApp: true, inbox.ChannelEmail: false, inbox.ChannelPush: true,
		inbox.ChannelSMS: false, inbox.ChannelSlack: true}
	if !maps.Equal(p.Channels, want) {
		t.Errorf("channels: %v, want %v", p.Channels, want)
	}
	cat := inbox.SwitchChanges{inbox.ChannelEmail: false, inbox.ChannelSMS: true}
	if len(p.Categories) != 1 || !maps.Equal(p.Categories[0].Channels, cat) {
		t.Errorf("categories: %+v, want %v", p.Categories, cat)
	}
	// Written now (by channel name) and read back: the same.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var again inbox.TenantPreferences
	if err := json.Unmarshal(b, &again); err != nil || !maps.Equal(again.Channels, want) || !maps.Equal(again.Categories[0].Channels, cat) {
		t.Errorf("round trip %s: %+v %v", b, again, err)
	}
}

// A profile's Slack user id is a Slack member id or nothing.
func TestSlackUserIDValidation(t *testing.T) {
	for _, ok := range []string{"", "U024BE7LH", "W012A3CDE", "U0123456789ABCDEFGHIJ"} {
		if err := (inbox.UserProfile{Addresses: map[string]string{"slackUserId": ok}}).Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"u024be7lh", "C024BE7LH", "U", "U1", "U024 BE7", "U024BE7LH\n", "@ada", "U" + string(make([]byte, 40))} {
		if err := (inbox.UserProfile{Addresses: map[string]string{"slackUserId": bad}}).Validate(); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// Each channel's address is checked by the channel's own check, under its AddressKey,
// with the message naming it; an address under a key no channel registers is refused
// (the store would drop it), and every address reads back by its spec.
func TestProfileAddressesByChannel(t *testing.T) {
	cases := []struct {
		key, ok, bad, msg string
	}{
		{"email", "ada@example.com", "Ada <ada@example.com>", "email must be an address such as ada@example.com (at most 254 bytes)"},
		{"email", "a@b", "no-at-sign", "email must be an address such as ada@example.com (at most 254 bytes)"},
		{"phone", "+4915112345678", "+0151", "phone must be an E.164 number such as +4915112345678"},
		{"phone", "+12", "4915112345678", "phone must be an E.164 number such as +4915112345678"},
		{"slackUserId", "U024BE7LH", "C024BE7LH", "slackUserId must be a Slack member id such as U024BE7LH"},
	}
	for _, c := range cases {
		if err := (inbox.UserProfile{Addresses: map[string]string{c.key: c.ok}}).Validate(); err != nil {
			t.Errorf("%s %q: %v", c.key, c.ok, err)
		}
		err := (inbox.UserProfile{Addresses: map[string]string{c.key: c.bad}}).Validate()
		var e *inbox.Error
		if !errors.As(err, &e) || e.Code != inbox.CodeBadUserInput || e.Message != c.msg {
			t.Errorf("%s %q: %v, want %q", c.key, c.bad, err, c.msg)
		}
	}
	for _, k := range []string{"fax", "Email", "locale"} {
		if err := (inbox.UserProfile{Addresses: map[string]string{k: "x"}}).Validate(); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("address %q: %v", k, err)
		}
	}
	p := inbox.UserProfile{Addresses: map[string]string{}}
	for _, k := range inbox.AddressKeys {
		p.Addresses[k] = "to-" + k
	}
	n := 0
	for _, s := range inbox.Specs() {
		if s.AddressKey == "" {
			if s.Address(p) != "" {
				t.Errorf("%s has no address key but an address", s.Name)
			}
			continue
		}
		n++
		if s.Address(p) != "to-"+s.AddressKey {
			t.Errorf("%s: address %q", s.Name, s.Address(p))
		}
	}
	if n != len(inbox.AddressKeys) || n < 3 {
		t.Errorf("%d channels with an address, AddressKeys %v", n, inbox.AddressKeys)
	}
}
