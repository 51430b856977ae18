package rest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
)

// deref returns *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// ptr returns &v, or nil for the zero value (a member the answer leaves out).
func ptr[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// feed converts a page of an inbox: nextCursor is set when there is a next page.
func feed(p *inbox.Page) gen.Feed {
	f := gen.Feed{Items: make([]gen.Notification, 0, len(p.Edges))}
	for _, e := range p.Edges {
		f.Items = append(f.Items, notification(e.Node))
	}
	if p.PageInfo.HasNextPage && p.PageInfo.EndCursor != nil {
		f.NextCursor = p.PageInfo.EndCursor
	}
	return f
}

// notification converts one notification of a feed.
func notification(n *inbox.Notification) gen.Notification {
	out := gen.Notification{
		Id: n.Ref(), Type: n.Type, Category: ptr(n.Category), Title: ptr(n.Title), Body: ptr(n.Body),
		Read: n.Read, ReadAt: n.ReadAt, Seen: n.Seen, SeenAt: n.SeenAt,
		Archived: n.Archived, ArchivedAt: n.ArchivedAt, SnoozedUntil: n.SnoozedUntil,
		CreatedAt: n.CreatedAt, ExpiresAt: n.ExpiresAt, GroupKey: ptr(n.GroupKey),
		Actions: make([]gen.Action, 0, len(n.Actions)),
	}
	if n.ActorID != "" {
		out.Actor = &gen.FeedActor{Id: n.ActorID}
	}
	if n.TargetID != "" {
		out.Target = &gen.FeedTarget{Id: n.TargetID, Kind: n.TargetKind}
	}
	if len(n.Payload) > 0 {
		data := json.RawMessage(n.Payload)
		out.Data = &data
	}
	for _, a := range n.Actions {
		out.Actions = append(out.Actions, gen.Action{Label: a.Label, Url: a.URL})
	}
	count := max(1, n.ActivityCount)
	out.ActivityCount = &count
	if n.ActivityCount > 0 {
		acts := make([]gen.Activity, 0, len(n.Activities))
		for _, a := range n.Activities {
			ga := gen.Activity{CreatedAt: a.CreatedAt}
			if a.ActorID != "" {
				ga.Actor = &gen.FeedActor{Id: a.ActorID}
			}
			if len(a.Data) > 0 {
				d := json.RawMessage(a.Data)
				ga.Data = &d
			}
			acts = append(acts, ga)
		}
		out.Activities = &acts
	}
	return out
}

// switches converts channel switches (by channel) to the API's: each channel's switch is
// the member named by its inbox.ChannelSpec.Switch.
func switches(s inbox.ChannelSwitches) (gen.ChannelSwitches, error) {
	m := make(map[string]any, len(inbox.SwitchChannels))
	for _, c := range inbox.SwitchChannels {
		spec, _ := inbox.Spec(c)
		m[spec.Switch] = s[c]
	}
	var out gen.ChannelSwitches
	return out, fromMembers(m, &out)
}

// switchesInput converts partial switches (by channel) to the API's, each set one the
// member named by its channel's Switch.
func switchesInput(c map[string]bool) (gen.ChannelSwitchesInput, error) {
	m := make(map[string]any, len(c))
	for _, ch := range inbox.SwitchChannels {
		if v, ok := c[ch]; ok {
			spec, _ := inbox.Spec(ch)
			m[spec.Switch] = v
		}
	}
	var out gen.ChannelSwitchesInput
	return out, fromMembers(m, &out)
}

// preferences converts effective preferences (the GraphQL Preferences shape; muted
// targets by kind and targetId).
func preferences(p inbox.Preferences) (gen.Preferences, error) {
	sw, err := switches(p.Channels)
	if err != nil {
		return gen.Preferences{}, err
	}
	out := gen.Preferences{
		Channels:     sw,
		Categories:   make([]gen.CategoryPreference, 0, len(p.Categories)),
		MutedTargets: make([]gen.TargetRef, 0, len(p.MutedTargets)),
		Timezone:     ptr(p.Timezone),
		Locale:       ptr(p.Locale),
	}
	for _, c := range p.Categories {
		sw, err := switches(c.Channels)
		if err != nil {
			return gen.Preferences{}, err
		}
		out.Categories = append(out.Categories, gen.CategoryPreference{Category: c.Category, Critical: c.Critical, Channels: sw})
	}
	for _, t := range p.MutedTargets {
		out.MutedTargets = append(out.MutedTargets, gen.TargetRef{Kind: t.TargetKind, TargetId: t.ID})
	}
	if p.QuietHours != nil {
		out.QuietHours = &gen.QuietHours{Start: p.QuietHours.Start, End: p.QuietHours.End}
	}
	return out, nil
}

// switchChanges converts partial channel switches: each channel's is the member named by
// its inbox.ChannelSpec.Switch; one left out or null changes nothing.
func switchChanges(in *gen.ChannelSwitchesInput) (inbox.SwitchChanges, error) {
	out := inbox.SwitchChanges{}
	if in == nil {
		return out, nil
	}
	m, err := members(*in)
	if err != nil {
		return nil, err
	}
	for _, c := range inbox.SwitchChannels {
		spec, _ := inbox.Spec(c)
		var v *bool
		if raw, ok := m[spec.Switch]; ok {
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("rest: switch %s: %w", spec.Switch, err)
			}
		}
		if v != nil {
			out[c] = *v
		}
	}
	return out, nil
}

// switchCategories converts partial per-category switches.
func switchCategories(in []gen.CategoryPreferenceInput) ([]inbox.CategorySwitches, error) {
	var out []inbox.CategorySwitches
	for _, c := range in {
		sw, err := switchChanges(&c.Channels)
		if err != nil {
			return nil, err
		}
		out = append(out, inbox.CategorySwitches{Category: c.Category, Channels: sw})
	}
	return out, nil
}

// templateParts converts a template input's channel parts: each channel's part is the
// member named by its inbox.ChannelSpec.Part (left out or null: none), each field of it
// the member named by the field's Content name.
func templateParts(in gen.TemplateInput) (map[string]inbox.Content, error) {
	m, err := members(in)
	if err != nil {
		return nil, err
	}
	out := map[string]inbox.Content{}
	for _, c := range inbox.PartChannels {
		spec, _ := inbox.Spec(c)
		var fields map[string]*string
		if raw, ok := m[spec.Part]; ok {
			if err := json.Unmarshal(raw, &fields); err != nil {
				return nil, fmt.Errorf("rest: template part %s: %w", spec.Part, err)
			}
		}
		if fields == nil {
			continue
		}
		var content inbox.Content
		for _, f := range spec.Fields {
			content.SetField(f.Name, deref(fields[f.Name]))
		}
		out[c] = content
	}
	return out, nil
}

// withTemplateParts sets out's channel parts from parts: each as the member named by its
// channel's Part, with every field of the channel's (as its Content name).
func withTemplateParts(out *gen.Template, parts map[string]inbox.Content) error {
	m := map[string]any{}
	for _, c := range inbox.PartChannels {
		content, ok := parts[c]
		if !ok {
			continue
		}
		spec, _ := inbox.Spec(c)
		fields := make(map[string]string, len(spec.Fields))
		for _, f := range spec.Fields {
			fields[f.Name] = content.Field(f.Name)
		}
		m[spec.Part] = fields
	}
	return fromMembers(m, out)
}

// targetRefs converts targets.
func targetRefs(in *[]gen.TargetRef) []inbox.ProfileRef {
	var out []inbox.ProfileRef
	for _, t := range deref(in) {
		out = append(out, inbox.ProfileRef{TargetKind: t.Kind, ID: t.TargetId})
	}
	return out
}

// preferencesUpdate converts a change of preferences: a member left out keeps its value,
// quietHours, timezone and locale given as null clear theirs ("" is refused: null clears).
func preferencesUpdate(in gen.PreferencesInput) (inbox.PreferencesUpdate, error) {
	u := inbox.PreferencesUpdate{
		MuteTargets:   targetRefs(in.MuteTargets),
		UnmuteTargets: targetRefs(in.UnmuteTargets),
	}
	var err error
	if u.Channels, err = switchChanges(in.Channels); err != nil {
		return u, err
	}
	if u.Categories, err = switchCategories(deref(in.Categories)); err != nil {
		return u, err
	}
	switch {
	case in.QuietHours.IsNull():
		u.ClearQuietHours = true
	case in.QuietHours.IsSpecified():
		q := in.QuietHours.MustGet()
		u.QuietHours = &inbox.QuietHours{Start: q.Start, End: q.End}
	}
	for _, f := range []struct {
		name string
		in   interface {
			IsNull() bool
			IsSpecified() bool
			GetOrEmpty() string
		}
		dst **string
	}{{"timezone", in.Timezone, &u.Timezone}, {"locale", in.Locale, &u.Locale}} {
		switch {
		case f.in.IsNull():
			empty := ""
			*f.dst = &empty
		case f.in.IsSpecified():
			v := f.in.GetOrEmpty()
			if v == "" {
				return u, inbox.Errorf(inbox.CodeBadUserInput, "%s must not be empty (null clears it)", f.name)
			}
			*f.dst = &v
		}
	}
	return u, nil
}

// device converts a push device.
func device(d inbox.Device) gen.Device {
	return gen.Device{Id: d.ID, Token: d.Token, Platform: gen.Platform(d.Platform), CreatedAt: d.CreatedAt}
}

// members returns the JSON members of v (a generated type: its members by their JSON
// names, as the API's document names them).
func members(v any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("rest: members of %T: %w", v, err)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("rest: members of %T: %w", v, err)
	}
	return out, nil
}

// fromMembers fills *out (a generated type) from its JSON members m. A member out has no
// field for is an error: a name a channel registers (inbox.ChannelSpec's Switch, Part or
// AddressKey) that the API's document lacks, never silently dropped.
func fromMembers(m map[string]any, out any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("rest: %T from members: %w", out, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("rest: %T from members: %w", out, err)
	}
	return nil
}

// profileInput converts a profile input: each channel's address is the input's member
// named by its inbox.ChannelSpec.AddressKey.
func profileInput(in gen.UserProfileInput) (inbox.UserProfile, error) {
	m, err := members(in)
	if err != nil {
		return inbox.UserProfile{}, err
	}
	p := inbox.UserProfile{Locale: deref(in.Locale), Timezone: deref(in.Timezone)}
	for _, k := range inbox.AddressKeys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return inbox.UserProfile{}, fmt.Errorf("rest: profile member %s: %w", k, err)
		}
		if p.Addresses == nil {
			p.Addresses = map[string]string{}
		}
		p.Addresses[k] = v
	}
	return p, nil
}

// profile converts user id's stored profile p: each address as the member named by its
// channel's AddressKey (left out when "").
func profile(id string, p inbox.UserProfile) (gen.UserProfile, error) {
	m := map[string]any{"id": id}
	for _, k := range inbox.AddressKeys {
		if v := p.Address(k); v != "" {
			m[k] = v
		}
	}
	out := gen.UserProfile{}
	if err := fromMembers(m, &out); err != nil {
		return gen.UserProfile{}, err
	}
	out.Locale, out.Timezone = ptr(p.Locale), ptr(p.Timezone)
	return out, nil
}
