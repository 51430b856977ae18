package resolvers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/gqlscalar"
	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
	"github.com/inboxgw/gateway/routing"
	"github.com/inboxgw/gateway/service"
)

// maxNodes bounds nodes(ids).
const maxNodes = 100

// inbox reads one page; a page read from the top offers its badge to unreadCount. Pages
// with the same arguments in one operation (aliases) are read once (loader.Once).
//
// Errors: BAD_USER_INPUT for after with before and neither first nor last (the store
// would page forward from after and ignore before), and the store's.
func (r *Resolver) inbox(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error) {
	if q.After != "" && q.Before != "" && q.First == nil && q.Last == nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "after and before together need first or last: pass first with after, or last with before")
	}
	// The store reads the page's actors and targets with it when the selection renders
	// them: in the BatchGetItem that also brings META to a page after the first.
	q.Profiles = selectsProfiles(ctx)
	q.ActivityProfiles = q.Profiles && selectsActivityActors(ctx)
	p, err := loader.Once(ctx, pageKey(q), func(ctx context.Context) (*inbox.Page, error) {
		return loader.Bounded(ctx, func(ctx context.Context) (*inbox.Page, error) { return r.Store.Inbox(ctx, v, q) })
	})
	if fromTop(q) {
		if b := loader.Badge(ctx); b != nil {
			b.Offer(pageBadge(p, err))
		}
	}
	if err != nil {
		return nil, err
	}
	if l := loader.For(ctx); l != nil {
		for ref, prof := range p.Profiles {
			l.Prime(ctx, ref, prof)
		}
	}
	// A page read by an alias that did not select profiles (the memo's first) leaves
	// them to one prefetch; refs primed above are not read again.
	if q.Profiles {
		if err := loader.Prefetch(ctx, r.Store, v.TenantID, p.Nodes()); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// pageKey names a page query in the operation's memo: every argument, unambiguously.
func pageKey(q inbox.PageQuery) string {
	n := func(p *int) string {
		if p == nil {
			return "-"
		}
		return strconv.Itoa(*p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "inbox\x00%s\x00%s\x00%q\x00%q\x00%t", n(q.First), n(q.Last), q.After, q.Before, q.UnreadOnly)
	for _, t := range q.Types {
		fmt.Fprintf(&b, "\x00%q", t)
	}
	fmt.Fprintf(&b, "\x01%q", q.Archived)
	for _, c := range q.Categories {
		fmt.Fprintf(&b, "\x00%q", c)
	}
	return b.String()
}

// prefetchProfiles loads the actors and targets of notifications in one batch, right after
// the query that found them, when the selection below the current field asks for them.
// The page's field resolvers then find them in the loader's cache: two sequential round
// trips for a page, with no batch window to wait for.
func (r *Resolver) prefetchProfiles(ctx context.Context, v inbox.Viewer, ns []*inbox.Notification) error {
	if !selectsProfiles(ctx) {
		return nil
	}
	return loader.Prefetch(ctx, r.Store, v.TenantID, ns)
}

// selectsProfiles reports whether the selection below the current field asks for an
// actor or a target.
func selectsProfiles(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	return fc != nil && selects(graphql.GetOperationContext(ctx), fc.Field.Selections, 0)
}

// selectsActivityActors reports whether the selection below the current field asks for
// a notification's activities' actors.
func selectsActivityActors(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return false
	}
	oc := graphql.GetOperationContext(ctx)
	var walk func(set ast.SelectionSet, depth int) bool
	walk = func(set ast.SelectionSet, depth int) bool {
		if depth > 4 {
			return false
		}
		for _, f := range graphql.CollectFields(oc, set, selectableTypes) {
			if f.Name == "activities" {
				for _, af := range graphql.CollectFields(oc, f.Selections, []string{"Activity"}) {
					if af.Name == "actor" {
						return true
					}
				}
				continue
			}
			if walk(f.Selections, depth+1) {
				return true
			}
		}
		return false
	}
	return walk(fc.Field.Selections, 0)
}

// selectableTypes are the object types whose fragments selects looks into.
var selectableTypes = []string{"NotificationConnection", "NotificationEdge", "Notification", "Node", "MarkReadPayload"}

// selects reports whether a selection set asks, at any depth up to 4, for a field named
// actor or target.
func selects(oc *graphql.OperationContext, set ast.SelectionSet, depth int) bool {
	if depth > 4 {
		return false
	}
	for _, f := range graphql.CollectFields(oc, set, selectableTypes) {
		if f.Name == "actor" || f.Name == "target" {
			return true
		}
		if selects(oc, f.Selections, depth+1) {
			return true
		}
	}
	return false
}

func pageBadge(p *inbox.Page, err error) (int, bool) {
	if err != nil || p == nil || !p.HasUnreadCount {
		return 0, false
	}
	return p.UnreadCount, true
}

// fromTop reports whether a page's Query starts at the top of the inbox, newest first:
// then it returns the META item, and so the badge, with the page.
func fromTop(q inbox.PageQuery) bool {
	return q.After == "" && q.Before == "" && q.Last == nil
}

// unreadCount returns the badge: from a sibling inbox page read from the top when the
// operation has one (no extra DynamoDB call), else with a GetItem of META.
func (r *Resolver) unreadCount(ctx context.Context, v inbox.Viewer) (int, error) {
	if b := loader.Badge(ctx); b != nil && siblingInboxFromTop(ctx) {
		if c, ok := b.Await(ctx); ok {
			return c, nil
		}
	}
	// Once per operation, however many aliases ask (a viewer-level read).
	return loader.Once(ctx, "badge", func(ctx context.Context) (int, error) {
		return loader.Bounded(ctx, func(ctx context.Context) (int, error) {
			b, err := r.badge(ctx, v)
			return b.Unread, err
		})
	})
}

// siblingInboxFromTop reports whether the Viewer selection this field belongs to also
// selects an inbox page that starts at the top.
func siblingInboxFromTop(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Parent == nil || fc.Parent.Field.Field == nil {
		return false
	}
	oc := graphql.GetOperationContext(ctx)
	for _, f := range graphql.CollectFields(oc, fc.Parent.Field.Selections, []string{"Viewer"}) {
		if f.Name != "inbox" {
			continue
		}
		args := f.ArgumentMap(oc.Variables)
		if args["after"] == nil && args["before"] == nil && args["last"] == nil {
			return true
		}
	}
	return false
}

// mutationTimeout bounds a mutation's writes once they started when ctx has no deadline
// (see committing).
const mutationTimeout = 30 * time.Second

// committing returns the context of a mutation's writes: the client going away (an
// aborted fetch, a completed WebSocket operation) does not cancel it. Once a write may
// have reached DynamoDB it must finish and publish its change: cancelled after the commit,
// the store would return the context's error, skip the publish, and leave every live badge
// of the viewer wrong until its next change. The request's own deadline still bounds it
// (INBOX_MUTATION_TIMEOUT, set by the HTTP layer), or mutationTimeout when it has none.
// A mutation whose client is already gone is not started.
func committing(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		return wctx, cancel, nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mutationTimeout)
	return wctx, cancel, nil
}

// viewerWrite returns the caller (viewer) and a context for a write on its behalf
// (committing), the two things every state mutation starts with; cancel must be called
// when err is nil.
func viewerWrite(ctx context.Context) (inbox.Viewer, context.Context, context.CancelFunc, error) {
	v, err := viewer(ctx)
	if err != nil {
		return inbox.Viewer{}, nil, nil, err
	}
	wctx, cancel, err := committing(ctx)
	if err != nil {
		return inbox.Viewer{}, nil, nil, err
	}
	return v, wctx, cancel, nil
}

// badge reads the viewer's badge once per operation (one GetItem of META), however many
// fields ask (unreadCount, unseenCount, badge).
func (r *Resolver) badge(ctx context.Context, v inbox.Viewer) (inbox.Badge, error) {
	return loader.Once(ctx, "badge full", func(ctx context.Context) (inbox.Badge, error) {
		return loader.Bounded(ctx, func(ctx context.Context) (inbox.Badge, error) { return r.Store.Badge(ctx, v) })
	})
}

// markAllCategories returns the categories markAllRead narrows to: nil (every category)
// without a filter or with a filter that leaves categories out. An empty list is
// BAD_USER_INPUT: it names no category, and read as "no narrowing" it would mark every
// notification read, which a UI passing its (empty) selection never means.
func markAllCategories(filter *model.MarkAllFilter) ([]string, error) {
	if filter == nil || filter.Categories == nil {
		return nil, nil
	}
	if len(filter.Categories) == 0 {
		return nil, inbox.Errorf(inbox.CodeBadUserInput,
			"markAllRead: filter.categories is empty; name at least one category, or leave the filter out to mark every notification read")
	}
	return filter.Categories, nil
}

// stateIDs converts global ids to notification ULIDs: keys (distinct), the given id of
// each key, and the ids (as given) that cannot name a notification. BAD_USER_INPUT for no
// ids or more than limit distinct ids (limit < 0: no limit).
func stateIDs(ids []string, limit int) (keys []string, given map[string]string, invalid []string, err error) {
	distinct := map[string]bool{}
	given = map[string]string{}
	for _, id := range ids {
		if distinct[id] {
			continue
		}
		distinct[id] = true
		key, err := notificationULID(id)
		if err != nil {
			invalid = append(invalid, id)
			continue
		}
		if _, ok := given[key]; !ok {
			given[key] = id
			keys = append(keys, key)
		}
	}
	switch {
	case len(distinct) == 0:
		return nil, nil, nil, inbox.Errorf(inbox.CodeBadUserInput, "ids must not be empty")
	case limit >= 0 && len(distinct) > limit:
		return nil, nil, nil, inbox.Errorf(inbox.CodeBadUserInput, "at most %d ids per call", limit)
	}
	return keys, given, invalid, nil
}

// notFoundAsGiven maps the store's not-found keys back to the ids given, after invalid
// and the group ids of groups that do not exist; a key a group id was expanded to is not
// listed (the group existed; its member left it meanwhile).
func notFoundAsGiven(invalid, missing, keys []string, given map[string]string, members map[string]bool) []string {
	out := append(append([]string{}, invalid...), missing...)
	for _, k := range keys {
		if id := given[k]; !members[id] {
			out = append(out, id)
		}
	}
	return out
}

// targets validates ids (at most inbox.MaxStateIDs distinct notification or group ids)
// and expands the group ids to their members (expandGroups).
func (r *Resolver) targets(ctx context.Context, v inbox.Viewer, ids []string) (keys []string, given map[string]string, invalid, missing []string, members map[string]bool, err error) {
	if _, _, _, err := stateIDs(ids, inbox.MaxStateIDs); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	expanded, members, missing, err := r.expandGroups(ctx, v, ids)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	if len(expanded) == 0 {
		return nil, map[string]string{}, nil, missing, members, nil
	}
	if len(expanded) > maxExpandedIDs {
		return nil, nil, nil, nil, nil, inbox.Errorf(inbox.CodeBadUserInput,
			"the ids name %d notifications once group ids are expanded; at most %d a call", len(expanded), maxExpandedIDs)
	}
	keys, given, invalid, err = stateIDs(expanded, -1)
	return keys, given, invalid, missing, members, err
}

// maxExpandedIDs bounds the notifications one state mutation changes once its group ids
// are expanded (a group holds at most 100 active members): 100 groups would otherwise
// make one request write 10,000 notifications. It is checked before anything is written.
const maxExpandedIDs = 500

// state applies a state change to notifications by global id, a group id to the group's
// active notifications: ids that name none of the viewer's notifications or groups are
// returned in notFound (as given), the rest applied, in chunks of inbox.MaxStateIDs
// notifications (the badge is the last chunk's).
func (r *Resolver) state(ctx context.Context, ids []string, ch inbox.StateChange) (*inbox.MarkResult, error) {
	v, wctx, cancel, err := viewerWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	keys, given, invalid, missing, members, err := r.targets(wctx, v, ids)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		// Nothing to apply: the store still checks the change (a snooze's until) and
		// reads the badge; "-" names no notification.
		keys = []string{"-"}
	}
	out := inbox.MarkResult{Notifications: []*inbox.Notification{}}
	var notFound []string
	for start := 0; start < len(keys); start += inbox.MaxStateIDs {
		ch.IDs = keys[start:min(start+inbox.MaxStateIDs, len(keys))]
		res, err := r.Store.ApplyState(wctx, v, ch)
		if err != nil {
			return nil, err
		}
		out.Notifications = append(out.Notifications, res.Notifications...)
		out.Changed += res.Changed
		out.UnreadCount, out.Badge = res.UnreadCount, res.Badge
		notFound = append(notFound, slices.DeleteFunc(res.NotFound, func(k string) bool { return k == "-" })...)
	}
	out.NotFound = notFoundAsGiven(invalid, missing, notFound, given, members)
	if err := r.prefetchProfiles(ctx, v, out.Notifications); err != nil {
		return nil, err
	}
	return &out, nil
}

// deleteNotifications deletes notifications by global id, a group id's active
// notifications (notFound as in state).
func (r *Resolver) deleteNotifications(ctx context.Context, ids []string) (*inbox.DeleteResult, error) {
	v, wctx, cancel, err := viewerWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	keys, given, invalid, missing, members, err := r.targets(wctx, v, ids)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		keys = []string{"-"} // names no notification: the store reads the badge
	}
	out := inbox.DeleteResult{DeletedIDs: []string{}}
	var notFound []string
	for start := 0; start < len(keys); start += inbox.MaxStateIDs {
		res, err := r.Store.Delete(wctx, v, keys[start:min(start+inbox.MaxStateIDs, len(keys))])
		if err != nil {
			return nil, err
		}
		for _, k := range res.DeletedIDs {
			out.DeletedIDs = append(out.DeletedIDs, given[k])
		}
		out.Badge = res.Badge
		notFound = append(notFound, slices.DeleteFunc(res.NotFound, func(k string) bool { return k == "-" })...)
	}
	out.NotFound = notFoundAsGiven(invalid, missing, notFound, given, members)
	return &out, nil
}

// profile loads an actor or target of the viewer's tenant through the operation's loader.
func (r *Resolver) profile(ctx context.Context, ref inbox.ProfileRef) (*inbox.Profile, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	return loader.Profile(ctx, r.Store, v.TenantID, ref)
}

// loadNodes resolves global ids of any type, aligned with ids; nil for ids that name
// nothing of the viewer's (a profile only through a notification of the viewer that
// names it). The ids of every node and nodes field of the operation go through its node
// loader: one BatchGetItem reads the notifications, the notifications that anchor
// profile ids and the profiles together; then, when the selection asks for them, the
// actors and targets of the notifications found, with one more.
func (r *Resolver) loadNodes(ctx context.Context, ids []string) ([]gqlscalar.Node, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) > maxNodes {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "at most %d ids", maxNodes)
	}
	rootRefs := r.rootNodeRefs(ctx, v)
	out := make([]gqlscalar.Node, len(ids))
	var (
		targets   []inbox.ProfileRef
		targetIdx []int
	)
	refs := make([]inbox.NodeRef, 0, len(ids))
	idx := make([]int, 0, len(ids))
	vid := v.GlobalID()
	for i, id := range ids {
		typ, ref, ok, err := parseGlobalID(id)
		if err != nil {
			return nil, err
		}
		if key, ok := groupKeyOf(id); ok {
			// A group (Relay refetch of Viewer.groups' nodes): its own read.
			g, err := loader.Bounded(ctx, func(ctx context.Context) (*inbox.NotificationGroup, error) { return r.Store.Group(ctx, v, key) })
			if err != nil {
				return nil, err
			}
			if g != nil {
				out[i] = g
			}
			continue
		}
		if id == vid {
			// The viewer is refetchable as a Node (Relay): its own id only; another
			// user's viewer id is null like any id that names nothing of the viewer's.
			self := v
			out[i] = &self
			continue
		}
		if ok && typ == typeTarget {
			// A target id carries the viewer's tag, not a notification (taggedTarget): with
			// the viewer's tag it is read below, otherwise it names nothing.
			if ref.Notification == r.Store.ProfileTag(v, ref.Profile) {
				targets = append(targets, ref.Profile)
				targetIdx = append(targetIdx, i)
			}
			continue
		}
		// An unanchored profile id names nothing: null.
		if ok {
			refs = append(refs, ref)
			idx = append(idx, i)
		}
	}
	if len(targets) > 0 {
		// The targets asked, through the operation's profile loader: aliases and repeats
		// of one target read it once.
		g, gctx := errgroup.WithContext(ctx)
		for j, i := range targetIdx {
			g.Go(func() error {
				p, err := loader.Profile(gctx, r.Store, v.TenantID, targets[j])
				if err == nil && p != nil && p.Target != nil {
					out[i] = r.taggedTarget(v, p.Target)
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	if len(refs) == 0 {
		return out, nil
	}
	got, err := loader.Nodes(ctx, r.Store, v, refs)
	if err != nil {
		return nil, err
	}
	l := loader.For(ctx)
	var found []*inbox.Notification
	for j, i := range idx {
		switch res := got[j]; {
		case res.Notification != nil:
			out[i] = res.Notification
			found = append(found, res.Notification)
		case res.Actor != nil:
			out[i] = res.Actor
			if l != nil {
				l.Prime(ctx, refs[j].Profile, &inbox.Profile{Actor: res.Actor})
			}
		case res.Target != nil:
			out[i] = res.Target
			if l != nil {
				l.Prime(ctx, refs[j].Profile, &inbox.Profile{Target: res.Target})
			}
		}
	}
	if len(found) > 0 && len(rootRefs) > 0 {
		// The profiles of every notification the root node fields found, in one
		// prefetch (when this field selects them; prefetches are single-flight).
		all, err := loader.Nodes(ctx, r.Store, v, rootRefs)
		if err != nil {
			return nil, err
		}
		for _, res := range all {
			if res.Notification != nil {
				found = append(found, res.Notification)
			}
		}
	}
	if len(found) > 0 {
		if err := r.prefetchProfiles(ctx, v, found); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxRootNodeRefs bounds how many distinct refs enqueueRootNodes hands over at once (the
// complexity limit bounds a document's node fields long before).
const maxRootNodeRefs = 1000

// rootNodeRefs returns the refs of every root node and nodes field of the operation,
// worked out once per operation and read in one store call (loader.Preload) before the
// first of them is resolved: aliases of node over a few ids then share one read however
// their resolvers are scheduled. Ids that are not well formed are left to their own
// field, which reports them. When the read fails, the fields read through the node
// loader as usual (and report its error).
func (r *Resolver) rootNodeRefs(ctx context.Context, v inbox.Viewer) []inbox.NodeRef {
	if !graphql.HasOperationContext(ctx) {
		return nil
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation != ast.Query {
		return nil
	}
	refs, _ := loader.Once(ctx, "root nodes", func(ctx context.Context) ([]inbox.NodeRef, error) {
		seen := make(map[inbox.NodeRef]bool)
		var refs []inbox.NodeRef
		add := func(id any) {
			s, _ := id.(string)
			if _, ref, ok, err := parseGlobalID(s); err == nil && ok && !seen[ref] && len(refs) < maxRootNodeRefs {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
		for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Query"}) {
			switch f.Name {
			case "node":
				add(f.ArgumentMap(oc.Variables)["id"])
			case "nodes":
				switch ids := f.ArgumentMap(oc.Variables)["ids"].(type) {
				case []any:
					for _, id := range ids[:min(len(ids), maxNodes)] {
						add(id)
					}
				case []string:
					for _, id := range ids[:min(len(ids), maxNodes)] {
						add(id)
					}
				}
			}
		}
		// A failed read is not retried here: the fields read through the node loader.
		_ = loader.Preload(ctx, r.Store, v, refs)
		return refs, nil
	})
	return refs
}

// notification returns the viewer's notification with ULID key, or nil, through the
// operation's node loader (aliases batch and repeat for free).
func (r *Resolver) notification(ctx context.Context, v inbox.Viewer, key string) (*inbox.Notification, error) {
	got, err := loader.Nodes(ctx, r.Store, v, []inbox.NodeRef{{Notification: key}})
	if err != nil {
		return nil, err
	}
	return got[0].Notification, nil
}

// anchoredActor returns a's copy anchored on notification n (its id names n; see
// inbox.GlobalID): profiles are shared by the notifications of a tenant.
func anchoredActor(a *inbox.Actor, n *inbox.Notification) *inbox.Actor {
	c := *a
	c.Via = n.ID
	return &c
}

// embeddedActor is an announcement's actor (it carries its own, Notification.Embedded),
// anchored on the announcement's key "@<ULID>", which node() resolves through the
// tenant's announcements.
func embeddedActor(n *inbox.Notification) *inbox.Actor {
	if n.Embedded.Actor == nil {
		return nil
	}
	c := *n.Embedded.Actor
	c.Via = inbox.AnnouncementRef + n.ID
	return &c
}

// taggedTarget returns t's copy whose global id is the viewer's for it (Via = the store's
// ProfileTag of v and t): the same id wherever v meets the target, in any notification
// or group and in v's muted targets, so a client cache keeps one object per target; node()
// resolves it for v alone.
func (r *Resolver) taggedTarget(v inbox.Viewer, t *inbox.Target) *inbox.Target {
	c := *t
	c.Via = r.Store.ProfileTag(v, inbox.ProfileRef{TargetKind: t.Kind, ID: t.TargetID})
	return &c
}

// sendRequest maps the GraphQL input to the send service's request.
func sendRequest(in model.SendNotificationInput) (service.SendRequest, error) {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	out := service.SendRequest{
		IdempotencyKey: in.IdempotencyKey,
		Recipients:     in.Recipients,
		Type:           in.Type,
		Category:       s(in.Category),
		Title:          s(in.Title),
		Body:           s(in.Body),
		Payload:        inbox.JSON(in.Payload),
		GroupKey:       s(in.GroupKey),
		Template:       s(in.Template),
		Data:           inbox.JSON(in.Data),
		Locale:         s(in.Locale),
	}
	if in.ExpiresAt != nil {
		out.ExpiresAt = *in.ExpiresAt
	}
	if in.IncludeActor != nil {
		out.IncludeActor = *in.IncludeActor
	}
	if in.Throttle != nil {
		t, err := routing.ParseThrottle(s(in.Throttle.Key), in.Throttle.Limit, in.Throttle.Window)
		if err != nil {
			return out, err
		}
		out.Throttle = &t
	}
	if in.Batch != nil {
		b, err := routing.ParseBatch(s(in.Batch.Key), in.Batch.Window, in.Batch.MaxItems)
		if err != nil {
			return out, err
		}
		out.Batch = &b
	}
	if in.SendAt != nil {
		out.SendAt = *in.SendAt
	}
	if in.Priority != nil {
		out.Priority = service.Priority(strings.ToLower(string(*in.Priority)))
	}
	for _, c := range in.Channels {
		out.Channels = append(out.Channels, string(c))
	}
	for _, a := range in.Actions {
		if a != nil {
			out.Actions = append(out.Actions, inbox.Action{Label: a.Label, URL: a.URL})
		}
	}
	if in.Actor != nil {
		out.Actor = &inbox.Actor{ActorID: in.Actor.ID, Name: s(in.Actor.Name), AvatarURL: s(in.Actor.AvatarURL), URL: s(in.Actor.URL)}
	}
	if in.Target != nil {
		out.Target = &inbox.Target{TargetID: in.Target.ID, Kind: in.Target.Kind, Title: s(in.Target.Title), URL: s(in.Target.URL)}
	}
	return out, nil
}

// sendPayload is sendNotification's answer: the processing's outcome when the service
// waited for it (a transactional send), else the accepted ids (a bulk or scheduled send,
// duplicate when it was a replay).
func sendPayload(sent service.Sent) *model.SendNotificationPayload {
	ids, accepted, dup := sent.Result.NotificationIDs, sent.Result.Accepted, sent.Result.Duplicate
	if !sent.Processed {
		ids, accepted, dup = sent.NotificationIDs, len(sent.NotificationIDs), sent.Replayed
	}
	out := &model.SendNotificationPayload{NotificationIds: make([]string, len(ids)), Accepted: accepted, Duplicate: dup}
	for i, id := range ids {
		out.NotificationIds[i] = globalID(typeNotification, id)
	}
	return out
}

// activities is Notification.activities: a batched notification's kept activities,
// oldest first, at most first (0..inbox.MaxBatchActivities; BAD_USER_INPUT outside);
// an unbatched notification's one activity is itself (its actor, payload and time).
// Each is anchored on n, so its actor's id names n (Actor.Via).
func activities(n *inbox.Notification, first *int) ([]*inbox.Activity, error) {
	limit := inbox.MaxBatchActivities
	if first != nil {
		if *first < 0 || *first > inbox.MaxBatchActivities {
			return nil, inbox.Errorf(inbox.CodeBadUserInput, "activities(first:) must be from 0 to %d", inbox.MaxBatchActivities)
		}
		limit = *first
	}
	src := n.Activities
	via := n.ID
	switch {
	case n.Embedded != nil:
		// An announcement: its one activity's actor is its own, anchored on "@<ULID>".
		src = []inbox.Activity{{ActorID: n.ActorID, Actor: embeddedActor(n), Data: n.Payload, CreatedAt: n.CreatedAt}}
		via = inbox.AnnouncementRef + n.ID
	case n.ActivityCount == 0:
		src = []inbox.Activity{{ActorID: n.ActorID, Data: n.Payload, CreatedAt: n.CreatedAt}}
	}
	out := make([]*inbox.Activity, 0, min(limit, len(src)))
	for _, a := range src[:min(limit, len(src))] {
		a.Via = via
		out = append(out, &a)
	}
	return out, nil
}
