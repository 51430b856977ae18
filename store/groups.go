package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Notification groups (Viewer.groups, AP15).
//
// A group is one item per (user, groupKey): pk userPK, sk groupSK(groupKey). Its members
// are its ACTIVE notifications (not archived, snoozed, deleted or expired), each a
// top-level attribute "m#{notification id}" whose value is
//
//	since "#" category "#" actorId
//
// where since is the ULID from which the member is unread — its id when it was never
// marked, the markedAt of an explicit unread mark (or of a wake) — and "" while it is
// explicitly read. A member is unread iff since > the read watermark of its category
// (META: max(readAllBefore, cr#category)), which is exactly the notification's own read
// state (see effectiveRead): markAllRead, global or per category, stays O(1) and never
// writes a group. The category and actor in the value make the counts exact when one
// groupKey mixes categories, and give the distinct actors ("Alice and 3 others") from
// the members alone, so archiving or deleting the newest notification of an actor needs
// no read of the others.
//
// While it has a member, the group is on GSI1 under groupsPK with gsi1sk = notifSK(its
// newest member): one Query lists the groups, the one with the newest notification first,
// and a new notification moves its group to the top. A group without members has no GSI1
// attributes, so it is not listed.
//
// Every write of a member goes with the write of the notification, in its transaction,
// so at every committed state a group's members agree with its notifications:
//   - a send into a group with room: an Update that adds the member (groupItem.sendUpdate;
//     condition: memberCount below the bound);
//   - a read or unread mark of a member: an Update of its attribute alone (condition: it
//     exists; groupValueUpdate), without reading the group;
//   - a change of membership (archive, unarchive, snooze, wake, delete, expire) or a send
//     into a full group: the group read consistently, its new members computed, and a Put
//     on condition that its rev is the one read.
// Each write raises rev, so a Put never overwrites a write it did not read; the Updates
// touch only their own member's attribute (written only with that notification, whose
// rev the transaction holds) and counters they ADD to, so they commute with each other.
// Conflicts are retried like the rest of the write.
// A state change never creates a group (only a send does): a notification written before
// groups existed stays out of them.
//
// A group keeps at most inbox.MaxGroupMembers members, the newest: a notification that
// joins a full group takes the place of its oldest member (which stays in the inbox), and
// one older than every member of a full group does not join it.

const (
	attrGroupKey   = "groupKey"
	attrTargetKind = "targetKind"
	attrTargetID   = "targetId"
	// attrMemberCount is the number of members (kept by every write of a group, so that
	// a send's Update can check the bound without reading the members).
	attrMemberCount = "memberCount"
	// groupMemberPrefix + notification id is a member attribute of a group item.
	groupMemberPrefix = "m#"
)

// groupItem is a group as stored (decoded by decodeGroup, encoded by av).
type groupItem struct {
	UserPK     string
	GroupKey   string
	Type       string
	TargetKind string
	TargetID   string
	Category   string
	Rev        int64
	// Members are the member attributes' values by notification id.
	Members map[string]string
	// Latest is what the group item keeps of its newest member (nil: none kept, as on a
	// group written before it was kept). It is current only while Latest.ID is newest():
	// a write that removes the newest member does not replace it, and a page then reads
	// the notification itself.
	Latest *groupLatest
	// exists is false for a group not stored yet.
	exists bool
}

func (g *groupItem) key() itemKey { return itemKey{g.UserPK, groupSK(g.GroupKey)} }

// clone returns a deep copy of g.
func (g *groupItem) clone() *groupItem {
	c := *g
	c.Members = make(map[string]string, len(g.Members)+1)
	for id, val := range g.Members {
		c.Members[id] = val
	}
	return &c
}

// attrLatest is the group item's map of its newest member's display fields (groupLatest).
const attrLatest = "latest"

// groupLatest is what a groups page shows of a group's newest member
// (inbox.KeptLatestFields), kept on the group item by the write that makes the member
// the newest: a send's Update, or a Put whose members' newest is the notification it
// writes. These fields never change after the send.
type groupLatest struct {
	ID         string `dynamodbav:"id"`
	Type       string `dynamodbav:"type"`
	Category   string `dynamodbav:"category,omitempty"`
	Title      string `dynamodbav:"title,omitempty"`
	Body       string `dynamodbav:"body,omitempty"`
	ActorID    string `dynamodbav:"actorId,omitempty"`
	TargetKind string `dynamodbav:"targetKind,omitempty"`
	TargetID   string `dynamodbav:"targetId,omitempty"`
	CreatedAt  int64  `dynamodbav:"createdAt"`
}

func latestOf(it *notificationItem) *groupLatest {
	return &groupLatest{ID: it.ID, Type: it.Type, Category: it.Category, Title: it.Title, Body: it.Body,
		ActorID: it.ActorID, TargetKind: it.TargetKind, TargetID: it.TargetID, CreatedAt: it.CreatedAt}
}

// keptLatest returns g's newest member as kept on the item, under m's watermarks, with
// the fields of inbox.KeptLatestFields; nil when the item keeps none for it.
func (g *groupItem) keptLatest(m *metaItem) *inbox.Notification {
	l := g.Latest
	if l == nil || l.ID != g.newest() {
		return nil
	}
	return &inbox.Notification{ID: l.ID, Type: l.Type, Category: l.Category, Title: l.Title, Body: l.Body,
		CreatedAt: time.UnixMilli(l.CreatedAt).UTC(), ActorID: l.ActorID, TargetKind: l.TargetKind, TargetID: l.TargetID,
		GroupKey: g.GroupKey, Read: !parseMember(l.ID, g.Members[l.ID]).unread(m), Actions: []inbox.Action{}}
}

// member is a decoded member value.
type member struct {
	id, since, category, actor string
}

func memberValue(it *notificationItem) string {
	since := it.ID
	switch it.Mark {
	case markRead:
		since = ""
	case markUnread:
		since = it.MarkedAt
	}
	return since + "#" + it.Category + "#" + it.ActorID
}

func parseMember(id, val string) member {
	since, rest, _ := strings.Cut(val, "#")
	cat, actor, _ := strings.Cut(rest, "#")
	return member{id: id, since: since, category: cat, actor: actor}
}

// unread reports whether a member is unread under m's watermarks.
func (mb member) unread(m *metaItem) bool {
	return mb.since != "" && mb.since > m.readWM(mb.category)
}

// inGroup reports whether it is (or, active, would be) a member of a group: sent by this
// version (counted in every counter) with a group key.
func inGroup(it *notificationItem) bool {
	return it.GroupKey != "" && it.Counted >= countersV2
}

// apply makes g's membership of it follow it's state: a member with its current value
// while active, none otherwise (after == nil: deleted). It reports whether g changed.
func (g *groupItem) apply(id string, after *notificationItem) bool {
	if after == nil || after.ArchivedAt != 0 || after.SnoozedUntil != 0 {
		if _, ok := g.Members[id]; !ok {
			return false
		}
		delete(g.Members, id)
		return true
	}
	val := memberValue(after)
	if old, ok := g.Members[id]; ok {
		if old == val {
			return false
		}
		g.Members[id] = val
		return true
	}
	if len(g.Members) >= inbox.MaxGroupMembers {
		oldest := g.oldest()
		if id < oldest {
			return false // older than every member of a full group: it stays out
		}
		delete(g.Members, oldest)
	}
	g.Members[id] = val
	if id == g.newest() {
		g.Latest = latestOf(after)
	}
	return true
}

func (g *groupItem) oldest() string {
	o := ""
	for id := range g.Members {
		if o == "" || id < o {
			o = id
		}
	}
	return o
}

func (g *groupItem) newest() string {
	n := ""
	for id := range g.Members {
		n = max(n, id)
	}
	return n
}

// members returns g's members newest first.
func (g *groupItem) members() []member {
	out := make([]member, 0, len(g.Members))
	for id, val := range g.Members {
		out = append(out, parseMember(id, val))
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(b.id, a.id) })
	return out
}

// decodeGroup decodes a group item (nil raw: ok false).
func decodeGroup(raw map[string]types.AttributeValue) (*groupItem, error) {
	g := &groupItem{Members: map[string]string{}, exists: true}
	var et string
	for name, val := range raw {
		switch {
		case name == attrPK:
			avStr(val, &g.UserPK)
		case name == attrEntityType:
			avStr(val, &et)
		case name == attrGroupKey:
			avStr(val, &g.GroupKey)
		case name == attrType:
			avStr(val, &g.Type)
		case name == attrTargetKind:
			avStr(val, &g.TargetKind)
		case name == attrTargetID:
			avStr(val, &g.TargetID)
		case name == attrCategory:
			avStr(val, &g.Category)
		case name == attrRev:
			if !avInt64(val, &g.Rev) {
				return nil, fmt.Errorf("group rev is not a number")
			}
		case name == attrLatest:
			var l groupLatest
			if err := attributevalue.Unmarshal(val, &l); err != nil {
				return nil, fmt.Errorf("group latest: %w", err)
			}
			g.Latest = &l
		case strings.HasPrefix(name, groupMemberPrefix):
			var s string
			if !avStr(val, &s) {
				return nil, fmt.Errorf("group member %q is not a string", name)
			}
			g.Members[name[len(groupMemberPrefix):]] = s
		}
	}
	if et != entityGroup {
		return nil, fmt.Errorf("item is not a notification group")
	}
	return g, nil
}

// put is the conditional Put of g as the next revision of old (nil or !old.exists: a new
// group, on condition that none exists).
func (g *groupItem) put(table string, v inbox.Viewer, old *groupItem) (types.TransactWriteItem, error) {
	s := func(x string) types.AttributeValue { return &types.AttributeValueMemberS{Value: x} }
	item := map[string]types.AttributeValue{
		attrPK: s(g.UserPK), attrSK: s(groupSK(g.GroupKey)), attrEntityType: s(entityGroup),
		attrGroupKey: s(g.GroupKey), attrType: s(g.Type),
		attrRev:         &types.AttributeValueMemberN{Value: strconv.FormatInt(g.Rev, 10)},
		attrMemberCount: &types.AttributeValueMemberN{Value: strconv.Itoa(len(g.Members))},
	}
	if g.TargetKind != "" {
		item[attrTargetKind], item[attrTargetID] = s(g.TargetKind), s(g.TargetID)
	}
	if g.Category != "" {
		item[attrCategory] = s(g.Category)
	}
	for id, val := range g.Members {
		item[groupMemberPrefix+id] = s(val)
	}
	if len(g.Members) > 0 {
		item[attrGSI1PK], item[attrGSI1SK] = s(groupsPK(v)), s(notifSK(g.newest()))
	}
	if g.Latest != nil && g.Latest.ID == g.newest() {
		l, err := attributevalue.Marshal(g.Latest)
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("encode group latest: %w", err)
		}
		item[attrLatest] = l
	}
	cond := itemAbsent()
	if old != nil && old.exists {
		cond = expression.Name(attrRev).Equal(expression.Value(old.Rev))
	}
	p, err := condPut(table, item, cond)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: p}, nil
}

// sendUpdate is a send's write of its notification it into v's group g when g was not
// full when read: an Update that SETs the member, the group's type, target and category
// (the notification's) and its GSI1 position (the notification is the newest of the
// inbox: a send commits above META's clock), and ADDs 1 to memberCount and rev, on
// condition that the group still has room. Concurrent sends into one group then commute;
// a Put of the group conditioned on the rev it read fails after one.
func (g *groupItem) sendUpdate(table string, v inbox.Viewer, it *notificationItem) (types.TransactWriteItem, error) {
	return g.memberUpdate(table, v, it, true, nil)
}

// memberUpdate is the Update that SETs it's member attribute and ADDs 1 to memberCount
// and rev, on condition that the group has room (and that cond holds, when set); when
// moves, it also SETs (or REMOVEs) the group's type, target, category and GSI1 position
// to the notification's (sendUpdate).
func (g *groupItem) memberUpdate(table string, v inbox.Viewer, it *notificationItem, moves bool, cond *expression.ConditionBuilder) (types.TransactWriteItem, error) {
	var names exprNames
	up := expression.Set(names.name(groupMemberPrefix+it.ID), expression.Value(memberValue(it)))
	if moves {
		up = up.Set(expression.Name(attrGSI1PK), expression.Value(groupsPK(v))).
			Set(expression.Name(attrGSI1SK), expression.Value(notifSK(it.ID))).
			Set(expression.Name(attrEntityType), expression.Value(entityGroup)).
			Set(expression.Name(attrGroupKey), expression.Value(g.GroupKey)).
			Set(expression.Name(attrType), expression.Value(it.Type)).
			Set(expression.Name(attrLatest), expression.Value(latestOf(it)))
		tk, tid, cat := expression.Name(attrTargetKind), expression.Name(attrTargetID), expression.Name(attrCategory)
		if it.TargetKind != "" {
			up = up.Set(tk, expression.Value(it.TargetKind)).Set(tid, expression.Value(it.TargetID))
		} else {
			up = up.Remove(tk).Remove(tid)
		}
		if it.Category != "" {
			up = up.Set(cat, expression.Value(it.Category))
		} else {
			up = up.Remove(cat)
		}
	}
	n := expression.Name(attrMemberCount)
	up = up.Add(n, expression.Value(1)).Add(expression.Name(attrRev), expression.Value(1))
	conds := []expression.ConditionBuilder{n.AttributeNotExists().Or(n.LessThan(expression.Value(inbox.MaxGroupMembers)))}
	if cond != nil {
		conds = append(conds, *cond)
	}
	x, err := buildUpdate(up, conds, &names)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build group update: %w", err)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(table),
		Key:                       g.key().av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}}, nil
}

// readGroups reads v's groups keys (consistent BatchGetItem); missing ones are new
// (exists false) groups.
func (s *Store) readGroups(ctx context.Context, v inbox.Viewer, keys []string) (map[string]*groupItem, error) {
	out := make(map[string]*groupItem, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	ks := make([]itemKey, len(keys))
	for i, k := range keys {
		ks[i] = itemKey{userPK(v), groupSK(k)}
	}
	got, err := s.batchGet(ctx, ks, batchGetOptions{consistent: true})
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		raw, ok := got[ks[i]]
		if !ok {
			out[k] = &groupItem{UserPK: userPK(v), GroupKey: k, Members: map[string]string{}}
			continue
		}
		g, err := decodeGroup(raw)
		if err != nil {
			return nil, fmt.Errorf("decode group: %w", err)
		}
		out[k] = g
	}
	return out, nil
}

// toGroup converts a stored group to the domain type under m's watermarks, with latest its
// newest member (nil: not read; then Latest is what the item keeps of it, if anything).
func toGroup(g *groupItem, m *metaItem, latest *notificationItem) *inbox.NotificationGroup {
	out := &inbox.NotificationGroup{GroupKey: g.GroupKey, Type: g.Type, TargetKind: g.TargetKind,
		TargetID: g.TargetID, Category: g.Category, Count: len(g.Members), ActorIDs: []string{}, ActorVia: []string{}}
	seen := map[string]bool{}
	for _, mb := range g.members() {
		if mb.unread(m) {
			out.UnreadCount++
		}
		if mb.actor != "" && !seen[mb.actor] {
			seen[mb.actor] = true
			out.ActorIDs = append(out.ActorIDs, mb.actor)
			out.ActorVia = append(out.ActorVia, mb.id)
		}
	}
	if latest != nil {
		out.Latest = toNotification(latest, m)
	} else {
		out.Latest = g.keptLatest(m)
	}
	if out.Latest != nil {
		out.UpdatedAt = out.Latest.CreatedAt
	}
	return out
}

// GroupMembers returns the ids of the active members of v's groups keys (newest first),
// by key; a key with no group is absent (AP15: one consistent BatchGetItem). A key that
// could not be one is absent too.
func (s *Store) GroupMembers(ctx context.Context, v inbox.Viewer, keys []string) (map[string][]string, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	var valid []string
	for _, k := range keys {
		if inbox.CheckID("groupKey", k) == nil && !slices.Contains(valid, k) {
			valid = append(valid, k)
		}
	}
	gs, err := s.readGroups(ctx, v, valid)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for k, g := range gs {
		if !g.exists {
			continue
		}
		ids := []string{}
		for _, mb := range g.members() {
			ids = append(ids, mb.id)
		}
		out[k] = ids
	}
	return out, nil
}

// Group returns v's group key, nil when it does not exist or has no active member: a
// GetItem of the group, then one BatchGetItem of META and its newest member.
func (s *Store) Group(ctx context.Context, v inbox.Viewer, key string) (*inbox.NotificationGroup, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	if inbox.CheckID("groupKey", key) != nil {
		return nil, nil
	}
	gs, err := s.readGroups(ctx, v, []string{key})
	if err != nil {
		return nil, err
	}
	g := gs[key]
	if !g.exists || len(g.Members) == 0 {
		return nil, nil
	}
	p, err := s.groupsPage(ctx, v, []*groupItem{g}, 0, false)
	if err != nil || len(p) == 0 {
		return nil, err
	}
	return p[0].group, nil
}

// loadedGroup is a group of a page with what the page's BatchGetItem read for it.
type loadedGroup struct {
	group *inbox.NotificationGroup
	item  *groupItem
}

// groupsPage completes groups with ONE BatchGetItem: META (the watermarks), each group's
// newest member, and, with actors > 0, the profiles of each group's first actors and
// target (left in the store's profile cache and returned in profiles). Groups whose
// newest member is gone (a change committed after the Query) are left out.
func (s *Store) groupsPage(ctx context.Context, v inbox.Viewer, gs []*groupItem, actors int, kept bool) ([]loadedGroup, error) {
	out, _, _, err := s.completeGroups(ctx, v, gs, actors, kept)
	return out, err
}

// completeGroups is groupsPage returning META and the profiles too. With kept, a group
// whose item keeps its newest member's display fields (groupItem.keptLatest) is completed
// from them: its newest notification is not read.
func (s *Store) completeGroups(ctx context.Context, v inbox.Viewer, gs []*groupItem, actors int, kept bool) ([]loadedGroup, metaItem, map[inbox.ProfileRef]*inbox.Profile, error) {
	keys := []itemKey{{userPK(v), skMeta}}
	// newest[i] is the key of gs[i]'s newest member when it is read (zero: kept).
	newest := make([]itemKey, len(gs))
	for i, g := range gs {
		if kept && g.Latest != nil && g.Latest.ID == g.newest() {
			continue
		}
		newest[i] = itemKey{userPK(v), notifSK(g.newest())}
		keys = append(keys, newest[i])
	}
	pb := s.newProfileBatch(v.TenantID)
	want := func(r inbox.ProfileRef) { keys = pb.want(r, keys) }
	if actors > 0 {
		for _, g := range gs {
			n := 0
			seen := map[string]bool{}
			for _, mb := range g.members() {
				if n == actors {
					break
				}
				if mb.actor != "" && !seen[mb.actor] {
					seen[mb.actor] = true
					n++
					want(inbox.ProfileRef{ID: mb.actor})
				}
			}
			if g.TargetKind != "" {
				want(inbox.ProfileRef{TargetKind: g.TargetKind, ID: g.TargetID})
			}
		}
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{})
	if err != nil {
		return nil, metaItem{}, nil, err
	}
	var meta metaItem
	if raw, ok := got[keys[0]]; ok {
		if err := decodeMeta(raw, &meta); err != nil {
			return nil, metaItem{}, nil, fmt.Errorf("decode meta: %w", err)
		}
	}
	profiles, err := pb.decode(got)
	if err != nil {
		return nil, metaItem{}, nil, err
	}
	out := make([]loadedGroup, 0, len(gs))
	for i, g := range gs {
		if newest[i] == (itemKey{}) {
			if lg := toGroup(g, &meta, nil); lg.Latest != nil {
				out = append(out, loadedGroup{group: lg, item: g})
			}
			continue
		}
		raw, ok := got[newest[i]]
		if !ok {
			continue
		}
		var it notificationItem
		if err := decodeNotification(raw, &it); err != nil {
			return nil, metaItem{}, nil, fmt.Errorf("decode notification: %w", err)
		}
		out = append(out, loadedGroup{group: toGroup(g, &meta, &it), item: g})
	}
	return out, meta, profiles, nil
}

// Groups returns one page of v's groups, the group with the newest active notification
// first (AP15): one Query of GSI1 under groupsPK (descending, Limit first+1; following
// LastEvaluatedKey only while a filter leaves the page short), then ONE BatchGetItem of
// META, each group's newest member and the profiles of its first q.Actors actors and its
// target. With UnreadOnly, META is also read with a GetItem sent alongside the first
// Query (the filter needs its watermarks): still two round trips.
//
// Types and Categories narrow by the group's type and category (a FilterExpression);
// UnreadOnly keeps groups with an unread member. A filter never returns a short page
// while more groups match. Cursors are bound to v and to the list (IndexGroups).
//
// Errors: BAD_USER_INPUT for first outside 0..inbox.MaxPageSize, more than 20 types or
// categories, a bad category, or an invalid cursor.
func (s *Store) Groups(ctx context.Context, v inbox.Viewer, q inbox.GroupQuery) (*inbox.GroupPage, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	want := inbox.DefaultPageSize
	if q.First != nil {
		want = *q.First
	}
	if want < 0 || want > inbox.MaxPageSize {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "first must be between 0 and %d", inbox.MaxPageSize)
	}
	if len(q.Types) > inbox.MaxFilterTypes {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "at most 20 types")
	}
	if _, err := checkCategories(q.Categories); err != nil {
		return nil, err
	}
	after := ""
	if q.After != "" {
		var err error
		if after, err = s.DecodeCursor(v, IndexGroups, q.After); err != nil {
			return nil, err
		}
	}
	// The unread filter needs META's watermarks: a GetItem sent alongside the first Query.
	var (
		meta    metaItem
		metaErr error
		metaGot = make(chan struct{})
	)
	if q.UnreadOnly {
		go func() {
			defer close(metaGot)
			meta, metaErr = s.getMeta(ctx, v, false)
		}()
	} else {
		close(metaGot)
	}
	in := s.groupsQueryInput(v, q, after)
	var gs []*groupItem
	limit := int32(want + 1)
	for {
		in.Limit = aws.Int32(limit)
		out, err := s.db.Query(ctx, in)
		<-metaGot
		if err == nil {
			err = metaErr
		}
		if err != nil {
			return nil, fmt.Errorf("groups query: %w", err)
		}
		for _, raw := range out.Items {
			g, err := decodeGroup(raw)
			if err != nil {
				return nil, fmt.Errorf("decode group: %w", err)
			}
			if len(g.Members) == 0 {
				continue
			}
			if q.UnreadOnly && toGroup(g, &meta, nil).UnreadCount == 0 {
				continue
			}
			gs = append(gs, g)
		}
		if len(gs) > want || out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
		limit = min(1000, max(2*limit, int32(4*(want+1-len(gs)))))
	}
	more := len(gs) > want
	if more {
		gs = gs[:want]
	}
	loaded, _, profiles, err := s.completeGroups(ctx, v, gs, q.Actors, q.KeptLatest)
	if err != nil {
		return nil, err
	}
	p := &inbox.GroupPage{Edges: make([]inbox.GroupEdge, 0, len(loaded)), Profiles: profiles}
	for _, lg := range loaded {
		p.Edges = append(p.Edges, inbox.GroupEdge{Cursor: s.EncodeCursor(v, IndexGroups, lg.item.newest()), Node: lg.group})
	}
	p.PageInfo.HasNextPage = more
	p.PageInfo.HasPreviousPage = after != ""
	if len(p.Edges) > 0 {
		p.PageInfo.StartCursor = &p.Edges[0].Cursor
		p.PageInfo.EndCursor = &p.Edges[len(p.Edges)-1].Cursor
	}
	return p, nil
}

// groupsQueryInput is the Query of AP15: GSI1 under groupsPK, gsi1sk below the cursor's
// notification (gsi1sk values are distinct: each is a different notification's), newest
// first, with the type and category filters. Every gsi1sk there is a notification's
// sort key, below skMeta.
func (s *Store) groupsQueryInput(v inbox.Viewer, q inbox.GroupQuery, after string) *dynamodb.QueryInput {
	hi := skMeta
	if after != "" {
		hi = notifSK(after)
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		IndexName:              aws.String(gsi1Name),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk < :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": attrGSI1PK, "#sk": attrGSI1SK,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: groupsPK(v)},
			":hi": &types.AttributeValueMemberS{Value: hi},
		},
		ScanIndexForward: aws.Bool(false),
	}
	var parts []string
	filterIn := func(attr, ph, prefix string, vals []string) {
		if len(vals) == 0 {
			return
		}
		in.ExpressionAttributeNames[ph] = attr
		var names []string
		for i, t := range slices.Compact(slices.Sorted(slices.Values(vals))) {
			n := fmt.Sprintf(":%s%d", prefix, i)
			names = append(names, n)
			in.ExpressionAttributeValues[n] = &types.AttributeValueMemberS{Value: t}
		}
		parts = append(parts, ph+" IN ("+strings.Join(names, ", ")+")")
	}
	filterIn(attrType, "#type", "t", q.Types)
	filterIn(attrCategory, "#cat", "c", q.Categories)
	if len(parts) > 0 {
		in.FilterExpression = aws.String(strings.Join(parts, " AND "))
	}
	return in
}
