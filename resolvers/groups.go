package resolvers

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql"

	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
)

// Actors per group: NotificationGroup.actors(first) defaults to defaultGroupActors and
// takes at most maxGroupActors.
const (
	defaultGroupActors = 3
	maxGroupActors     = 10
)

// groups reads a page of the viewer's groups. The store reads the profiles of the first
// actors (as many as the selection's actors(first) asks) and targets with the page, in
// its one BatchGetItem; they prime the operation's loader, so the actors and target
// fields make no further call.
//
// Errors: BAD_USER_INPUT for archived other than EXCLUDE (groups are of active
// notifications), and the store's.
func (r *Resolver) groups(ctx context.Context, v inbox.Viewer, first *int, after *string, filter *model.InboxFilter) (*inbox.GroupPage, error) {
	q := inbox.GroupQuery{First: first, Actors: selectedActors(ctx), KeptLatest: keptLatestOnly(ctx)}
	if after != nil {
		q.After = *after
	}
	if filter != nil {
		if filter.Archived != nil && *filter.Archived != model.ArchivedFilterExclude {
			return nil, inbox.Errorf(inbox.CodeBadUserInput, "groups are of active notifications: archived must be EXCLUDE")
		}
		q.UnreadOnly = filter.UnreadOnly != nil && *filter.UnreadOnly
		q.Types = filter.Types
		q.Categories = filter.Categories
	}
	p, err := loader.Bounded(ctx, func(ctx context.Context) (*inbox.GroupPage, error) { return r.Store.Groups(ctx, v, q) })
	if err != nil {
		return nil, err
	}
	if l := loader.For(ctx); l != nil {
		for ref, prof := range p.Profiles {
			l.Prime(ctx, ref, prof)
		}
	}
	return p, nil
}

// selectedActors is how many actors per group the selection below the current field
// renders: the largest actors(first) (default 3, at most 10), or 0 when it selects
// neither actors nor target (then no profile is read with the page).
func selectedActors(ctx context.Context) int {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return 0
	}
	oc := graphql.GetOperationContext(ctx)
	n := 0
	var walk func(set []graphql.CollectedField, depth int)
	walk = func(set []graphql.CollectedField, depth int) {
		for _, f := range set {
			switch f.Name {
			case "actors":
				k := defaultGroupActors
				if v, ok := f.ArgumentMap(oc.Variables)["first"].(int64); ok {
					k = int(v)
				} else if v, ok := f.ArgumentMap(oc.Variables)["first"].(int); ok {
					k = v
				}
				n = max(n, min(max(k, 0), maxGroupActors))
			case "target":
				n = max(n, 1)
			}
			if depth < 3 {
				walk(graphql.CollectFields(oc, f.Selections, []string{"NotificationGroupConnection", "NotificationGroupEdge", "NotificationGroup"}), depth+1)
			}
		}
	}
	walk(graphql.CollectFields(oc, fc.Field.Selections, []string{"NotificationGroupConnection"}), 0)
	return n
}

// keptLatestOnly reports whether the selection below the current field renders, of each
// group's latest notification, only fields the group item keeps (inbox.KeptLatestFields):
// then the store reads no notification for the page. A selection without latest also
// qualifies (updatedAt is the kept createdAt).
func keptLatestOnly(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return false
	}
	oc := graphql.GetOperationContext(ctx)
	ok := true
	var walk func(set []graphql.CollectedField, depth int)
	walk = func(set []graphql.CollectedField, depth int) {
		for _, f := range set {
			if f.Name == "latest" {
				for _, lf := range graphql.CollectFields(oc, f.Selections, []string{"Notification", "Node"}) {
					if !slices.Contains(inbox.KeptLatestFields, lf.Name) {
						ok = false
					}
				}
				continue
			}
			if depth < 3 {
				walk(graphql.CollectFields(oc, f.Selections, []string{"NotificationGroupConnection", "NotificationGroupEdge", "NotificationGroup"}), depth+1)
			}
		}
	}
	walk(graphql.CollectFields(oc, fc.Field.Selections, []string{"NotificationGroupConnection"}), 0)
	return ok
}

// groupTarget is the group's target, with the viewer's id for it (taggedTarget).
func (r *Resolver) groupTarget(ctx context.Context, g *inbox.NotificationGroup) (*inbox.Target, error) {
	if g.TargetID == "" || g.Latest == nil {
		return nil, nil
	}
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	p, err := r.profile(ctx, inbox.ProfileRef{TargetKind: g.TargetKind, ID: g.TargetID})
	if err != nil || p == nil || p.Target == nil {
		return nil, err
	}
	return r.taggedTarget(v, p.Target), nil
}

// groupActors is the group's first actors, newest first, each anchored on its newest
// notification in the group; actors without a profile are left out.
func (r *Resolver) groupActors(ctx context.Context, g *inbox.NotificationGroup, first *int) ([]*inbox.Actor, error) {
	n := defaultGroupActors
	if first != nil {
		n = *first
	}
	if n < 0 || n > maxGroupActors {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "actors(first) must be between 0 and %d", maxGroupActors)
	}
	out := []*inbox.Actor{}
	for i, id := range g.ActorIDs[:min(n, len(g.ActorIDs))] {
		p, err := r.profile(ctx, inbox.ProfileRef{ID: id})
		if err != nil {
			return nil, err
		}
		if p != nil && p.Actor != nil {
			out = append(out, anchoredActor(p.Actor, &inbox.Notification{ID: g.ActorVia[i]}))
		}
	}
	return out, nil
}

// groupKeyOf returns the group key a NotificationGroup global id names (ok false for
// an id of another type or one that is not well formed).
func groupKeyOf(id string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return "", false
	}
	key, found := strings.CutPrefix(string(b), inbox.TypeNotificationGroup+":")
	if !found || inbox.CheckID("groupKey", key) != nil {
		return "", false
	}
	return key, true
}

// expandGroups replaces the group ids among ids by the global ids of their active
// members (one consistent BatchGetItem of the groups). members are the member ids added
// (not to be reported in notFound: the group existed); missing are the group ids (as
// given) of groups that do not exist, reported in notFound. Ids of other types pass
// through unchanged.
func (r *Resolver) expandGroups(ctx context.Context, v inbox.Viewer, ids []string) (out []string, members map[string]bool, missing []string, err error) {
	byKey := map[string]string{}
	var keys []string
	for _, id := range ids {
		if k, ok := groupKeyOf(id); ok {
			if _, dup := byKey[k]; !dup {
				byKey[k] = id
				keys = append(keys, k)
			}
			continue
		}
		out = append(out, id)
	}
	if len(keys) == 0 {
		return ids, nil, nil, nil
	}
	got, err := r.Store.GroupMembers(ctx, v, keys)
	if err != nil {
		return nil, nil, nil, err
	}
	members = map[string]bool{}
	for _, k := range keys {
		ms, ok := got[k]
		if !ok {
			missing = append(missing, byKey[k])
			continue
		}
		for _, m := range ms {
			gid := globalID(typeNotification, m)
			if !members[gid] {
				members[gid] = true
				out = append(out, gid)
			}
		}
	}
	return out, members, missing, nil
}
