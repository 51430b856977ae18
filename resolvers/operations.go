package resolvers

import (
	"context"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/inboxgw/gateway/gqlscalar"
	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
)

// maxNodes bounds nodes(ids).
const maxNodes = 100

// inbox reads one page; a page read from the top offers its badge to unreadCount.
func (r *Resolver) inbox(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error) {
	p, err := r.Store.Inbox(ctx, v, q)
	if fromTop(q) {
		if b := loader.Badge(ctx); b != nil {
			b.Offer(pageBadge(p, err))
		}
	}
	if err != nil {
		return nil, err
	}
	if err := r.prefetchProfiles(ctx, v, p.Nodes()); err != nil {
		return nil, err
	}
	return p, nil
}

// prefetchProfiles loads the actors and targets of notifications in one batch, right after
// the query that found them, when the selection below the current field asks for them.
// The page's field resolvers then find them in the loader's cache: two sequential round
// trips for a page, with no batch window to wait for.
func (r *Resolver) prefetchProfiles(ctx context.Context, v inbox.Viewer, ns []*inbox.Notification) error {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || !selects(graphql.GetOperationContext(ctx), fc.Field.Selections, 0) {
		return nil
	}
	return loader.Prefetch(ctx, r.Store, v.TenantID, ns)
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
	c, _, err := r.Store.Badge(ctx, v)
	return c, err
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

// mark marks notifications by global id.
func (r *Resolver) mark(ctx context.Context, ids []string, read bool) (*inbox.MarkResult, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		if keys[i], err = notificationULID(id); err != nil {
			return nil, err
		}
	}
	wctx, cancel, err := committing(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	res, err := r.Store.Mark(wctx, v, keys, read)
	if err != nil {
		return nil, err
	}
	if err := r.prefetchProfiles(ctx, v, res.Notifications); err != nil {
		return nil, err
	}
	return &res, nil
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
// nothing of the viewer's. Notifications are read with one BatchGetItem; then the actors
// and targets asked for directly and those of the notifications (when selected) with one
// more.
func (r *Resolver) loadNodes(ctx context.Context, ids []string) ([]gqlscalar.Node, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) > maxNodes {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "at most %d ids", maxNodes)
	}
	out := make([]gqlscalar.Node, len(ids))
	var notifIdx, refIdx []int
	var notifKeys []string
	var refs []inbox.ProfileRef
	for i, id := range ids {
		typ, key, err := parseGlobalID(id)
		if err != nil {
			return nil, err
		}
		switch typ {
		case typeNotification:
			notifIdx = append(notifIdx, i)
			notifKeys = append(notifKeys, key)
		case typeActor:
			refIdx = append(refIdx, i)
			refs = append(refs, inbox.ProfileRef{ID: key})
		case typeTarget:
			if kind, tid, ok := cutNUL(key); ok {
				refIdx = append(refIdx, i)
				refs = append(refs, inbox.ProfileRef{TargetKind: kind, ID: tid})
			}
		case typeViewer:
			// Viewer has an id but does not implement Node in the schema: returning it
			// here made the generated Node marshaler panic. It names no Node: null.
		}
	}
	var found []*inbox.Notification
	if len(notifKeys) > 0 {
		got, err := r.Store.Notifications(ctx, v, notifKeys)
		if err != nil {
			return nil, err
		}
		for j, i := range notifIdx {
			if got[j] != nil {
				out[i] = got[j]
				found = append(found, got[j])
			}
		}
	}
	if fc := graphql.GetFieldContext(ctx); fc != nil && selects(graphql.GetOperationContext(ctx), fc.Field.Selections, 0) {
		for _, n := range found {
			if n.ActorID != "" {
				refs = append(refs, inbox.ProfileRef{ID: n.ActorID})
			}
			if n.TargetID != "" {
				refs = append(refs, inbox.ProfileRef{TargetKind: n.TargetKind, ID: n.TargetID})
			}
		}
	}
	if len(refs) == 0 {
		return out, nil
	}
	profiles, err := r.Store.Profiles(ctx, v.TenantID, refs)
	if err != nil {
		return nil, err
	}
	if l := loader.For(ctx); l != nil {
		for i, ref := range refs {
			l.Prime(ctx, ref, profiles[i])
		}
	}
	for j, i := range refIdx {
		switch p := profiles[j]; {
		case p == nil:
		case p.Actor != nil:
			out[i] = p.Actor
		case p.Target != nil:
			out[i] = p.Target
		}
	}
	return out, nil
}

func cutNUL(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i], s[i+1:], i > 0 && i+1 < len(s)
		}
	}
	return "", "", false
}

// sendInput converts the GraphQL input to the domain's.
func sendInput(in model.SendNotificationInput) inbox.SendInput {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	out := inbox.SendInput{
		IdempotencyKey: in.IdempotencyKey,
		Recipients:     in.Recipients,
		Type:           in.Type,
		Category:       s(in.Category),
		Title:          s(in.Title),
		Body:           s(in.Body),
		Payload:        inbox.JSON(in.Payload),
	}
	if in.Actor != nil {
		out.Actor = &inbox.Actor{ActorID: in.Actor.ID, Name: s(in.Actor.Name), AvatarURL: s(in.Actor.AvatarURL), URL: s(in.Actor.URL)}
	}
	if in.Target != nil {
		out.Target = &inbox.Target{TargetID: in.Target.ID, Kind: in.Target.Kind, Title: s(in.Target.Title), URL: s(in.Target.URL)}
	}
	return out
}
