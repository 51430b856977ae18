package resolvers

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/inboxgw/gateway/graph"
	"github.com/inboxgw/gateway/inbox"
)

// The schema's ChannelSwitches and ChannelSwitchesInput have one field per registered
// switch (inbox.ChannelSpec.Switch) and no other: a channel registered with a switch the
// schema lacks fails here, named.
func TestSchemaSwitchesAreTheRegisteredOnes(t *testing.T) {
	var want []string
	for _, c := range inbox.SwitchChannels {
		s, _ := inbox.Spec(c)
		want = append(want, s.Switch)
	}
	slices.Sort(want)
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	for _, typ := range []string{"ChannelSwitches", "ChannelSwitchesInput"} {
		def := schema.Types[typ]
		if def == nil {
			t.Fatalf("no type %s", typ)
		}
		var got []string
		for _, f := range def.Fields {
			got = append(got, f.Name)
		}
		slices.Sort(got)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s has no field for the registered switch %q (schema.graphqls)", typ, w)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("%s.%s is no registered switch", typ, g)
			}
		}
	}
}

// Every registered switch round-trips through the GraphQL conversions: on alone in the
// domain's switches, it is the one true field of ChannelSwitches under its name; set,
// cleared or null in the input (a map by switch name), it changes its channel only as
// given.
func TestSwitchesRoundTripEveryChannel(t *testing.T) {
	for _, c := range inbox.SwitchChannels {
		spec, _ := inbox.Spec(c)
		out, err := switches(inbox.ChannelSwitches{c: true})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		b, _ := json.Marshal(out)
		var fields map[string]bool
		if err := json.Unmarshal(b, &fields); err != nil {
			t.Fatal(err)
		}
		for name, on := range fields {
			if on != (name == spec.Switch) {
				t.Errorf("%s on alone: field %s = %v", c, name, on)
			}
		}
		if len(fields) != len(inbox.SwitchChannels) {
			t.Errorf("ChannelSwitches has %d fields, %d switches are registered", len(fields), len(inbox.SwitchChannels))
		}
		on, off := true, false
		for _, tc := range []struct {
			in   any
			want inbox.SwitchChanges
		}{{&on, inbox.SwitchChanges{c: true}}, {&off, inbox.SwitchChanges{c: false}}, {(*bool)(nil), inbox.SwitchChanges{}}} {
			if got := switchChanges(map[string]any{spec.Switch: tc.in}); !maps.Equal(got, tc.want) {
				t.Errorf("%s: input %v = %v, want %v", c, tc.in, got, tc.want)
			}
		}
	}
	if got := switchChanges(map[string]any{"fax": new(bool)}); len(got) != 0 {
		t.Errorf("an unregistered switch changed %v", got)
	}
}
