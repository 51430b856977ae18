package resolvers

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
)

// preferences returns v's effective preferences, read once per operation however many
// aliases ask (one GetItem).
func (r *Resolver) preferences(ctx context.Context, v inbox.Viewer) (*inbox.Preferences, error) {
	return loader.Once(ctx, "preferences", func(ctx context.Context) (*inbox.Preferences, error) {
		return loader.Bounded(ctx, func(ctx context.Context) (*inbox.Preferences, error) {
			p, err := r.Store.Preferences(ctx, v)
			if err != nil {
				return nil, err
			}
			return &p, nil
		})
	})
}

// updatePreferences converts the input and applies it. In the input, a field given as
// null clears what it names (quietHours, timezone, locale); a field left out keeps its
// value: the generated input type cannot tell the two apart, so the argument as sent
// is read from the operation.
func (r *Resolver) updatePreferences(ctx context.Context, in model.PreferencesInput) (*inbox.Preferences, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	upd, err := preferencesUpdate(in, explicitNulls(ctx))
	if err != nil {
		return nil, err
	}
	p, err := r.Store.UpdatePreferences(ctx, v, upd)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// explicitNulls returns the fields of the current field's input argument that were
// given as null (a literal null or a variable holding null).
func explicitNulls(ctx context.Context) map[string]bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil || !graphql.HasOperationContext(ctx) {
		return nil
	}
	raw, _ := fc.Field.ArgumentMap(graphql.GetOperationContext(ctx).Variables)["input"].(map[string]any)
	nulls := map[string]bool{}
	for k, val := range raw {
		if val == nil {
			nulls[k] = true
		}
	}
	return nulls
}

// preferencesUpdate converts the GraphQL input to the domain's update; nulls names the
// input fields given as null. Target ids must be Target global ids (any other id is
// BAD_USER_INPUT); the target need not have a profile.
func preferencesUpdate(in model.PreferencesInput, nulls map[string]bool) (inbox.PreferencesUpdate, error) {
	var u inbox.PreferencesUpdate
	if in.Channels != nil {
		u.Channels = switchChanges(in.Channels)
	}
	for _, c := range in.Categories {
		if c == nil {
			continue
		}
		var sw inbox.SwitchChanges
		if c.Channels != nil {
			sw = switchChanges(c.Channels)
		}
		u.Categories = append(u.Categories, inbox.CategorySwitches{Category: c.Category, Channels: sw})
	}
	if in.QuietHours != nil {
		u.QuietHours = &inbox.QuietHours{Start: in.QuietHours.Start, End: in.QuietHours.End}
	}
	u.ClearQuietHours = nulls["quietHours"]
	empty := ""
	u.Timezone, u.Locale = in.Timezone, in.Locale
	for _, f := range []struct {
		name string
		dst  **string
	}{{"timezone", &u.Timezone}, {"locale", &u.Locale}} {
		if nulls[f.name] {
			*f.dst = &empty
		} else if *f.dst != nil && **f.dst == "" {
			return u, inbox.Errorf(inbox.CodeBadUserInput, "%s must not be empty (null clears it)", f.name)
		}
	}
	var err error
	if u.MuteTargets, err = targetRefs("muteTargets", in.MuteTargets); err != nil {
		return u, err
	}
	if u.UnmuteTargets, err = targetRefs("unmuteTargets", in.UnmuteTargets); err != nil {
		return u, err
	}
	return u, nil
}

// targetRefs returns the targets that ids name (Target global ids, anchored or as
// Preferences.mutedTargets renders them); BAD_USER_INPUT for any other id, and for more
// than inbox.MaxMutedTargets ids (checked before parsing).
func targetRefs(field string, ids []string) ([]inbox.ProfileRef, error) {
	if len(ids) > inbox.MaxMutedTargets {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "%s takes at most %d targets", field, inbox.MaxMutedTargets)
	}
	refs := make([]inbox.ProfileRef, 0, len(ids))
	for _, id := range ids {
		typ, ref, _, err := parseGlobalID(id)
		if err != nil {
			return nil, err
		}
		if typ != typeTarget || ref.Profile.TargetKind == "" || ref.Profile.ID == "" {
			return nil, inbox.Errorf(inbox.CodeBadUserInput, "%s: %q is not a Target id", field, id)
		}
		refs = append(refs, ref.Profile)
	}
	return refs, nil
}

// mutedTargets resolves p's muted targets through the operation's profile loader (one
// batch for them all): a target with a stored profile has its title and url, one
// without still has its kind and id. Their ids are the viewer's ids of the targets
// (taggedTarget), the very ids the inbox's notifications show for them: unmuteTargets and
// node() take them.
func (r *Resolver) mutedTargets(ctx context.Context, p *inbox.Preferences) ([]*inbox.Target, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*inbox.Target, len(p.MutedTargets))
	g, gctx := errgroup.WithContext(ctx)
	for i, ref := range p.MutedTargets {
		g.Go(func() error {
			got, err := loader.Profile(gctx, r.Store, v.TenantID, ref)
			if err != nil {
				return err
			}
			t := &inbox.Target{Kind: ref.TargetKind, TargetID: ref.ID}
			if got != nil && got.Target != nil {
				t = got.Target
			}
			out[i] = r.taggedTarget(v, t)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
