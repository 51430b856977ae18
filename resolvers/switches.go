package resolvers

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
)

// switches converts channel switches (by channel) to ChannelSwitches: each channel's
// switch is the field whose JSON name is its inbox.ChannelSpec.Switch (gqlgen names a
// generated model's JSON fields as the schema does). A switch the schema lacks is an
// error, not a dropped field.
func switches(s inbox.ChannelSwitches) (*model.ChannelSwitches, error) {
	byName := make(map[string]bool, len(inbox.SwitchChannels))
	for _, c := range inbox.SwitchChannels {
		spec, _ := inbox.Spec(c)
		byName[spec.Switch] = s[c]
	}
	b, err := json.Marshal(byName)
	if err != nil {
		return nil, fmt.Errorf("channel switches: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var out model.ChannelSwitches
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("channel switches: %w", err)
	}
	return &out, nil
}

// switchChanges converts partial channel switches (ChannelSwitchesInput, a map by
// switch name whose values are *bool, nil for null) to the domain's, by channel. A
// switch left out or given as null changes nothing.
func switchChanges(in map[string]any) inbox.SwitchChanges {
	out := inbox.SwitchChanges{}
	for _, c := range inbox.SwitchChannels {
		spec, _ := inbox.Spec(c)
		switch v := in[spec.Switch].(type) {
		case *bool:
			if v != nil {
				out[c] = *v
			}
		case bool:
			out[c] = v
		}
	}
	return out
}
