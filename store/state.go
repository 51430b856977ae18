package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// State changes of notifications (AP6): read, unread, seen, archive,
// unarchive, snooze, unsnooze, delete, and the scheduler's wake and expire.
//
// Every one runs the same read-compute-write, repeated on conflict (retryConflicts): one
// strongly consistent BatchGetItem of META and the notifications; in memory, each
// notification's contribution to the counters before and after the change (stateOf);
// then one TransactWriteItems of the changed notifications (each conditional on its rev,
// which the write raises) and ONE META update (metaUpdate) carrying the deltas, the new
// clock and the conditions that the watermarks used are unchanged, plus the write of each
// group (groups.go) whose members changed (groupWrites). A transaction
// holds at most 100 actions, so ids go in chunks (49 notifications + at most 49 groups +
// META; 33 when each needs a task too), each chunk exact on its own.

// plan decides one notification's change: the item after it (nil: no change), whether
// the change deletes it, and whether it needs a task written with it (a snooze's wake).
type plan func(m *metaItem, it *notificationItem, clock string, now time.Time) (after *notificationItem, del bool)

// chunkResult is what one chunk's write did.
type chunkResult struct {
	found   map[string]*notificationItem // after the change, by id
	changed []string
	missing []string
	// deferred are ids left for a later chunk: their category would have been one more
	// than catChunk in this chunk's META update.
	deferred []string
	meta     metaItem // as read (the watermarks the write was conditioned on)
}

// applyChunk applies p to v's notifications ids (≤ one chunk) once, retrying conflicts.
// tasks, when set, gives the task to write with a changed notification. *wrote is set
// once a transaction was sent.
func (s *Store) applyChunk(ctx context.Context, v inbox.Viewer, ids []string, p plan,
	tasks func(after *notificationItem) (itemKey, types.TransactWriteItem, bool), wrote *bool) (chunkResult, error) {
	floor := ""
	sent := map[string]bool{} // ids a sent transaction deleted, if it committed
	var groupKeys []string    // of the notifications' groups, once known: read with them
	return retryConflicts(ctx, func() (chunkResult, error) {
		keys := make([]itemKey, 0, len(ids)+1+len(groupKeys))
		keys = append(keys, itemKey{userPK(v), skMeta})
		for _, id := range ids {
			keys = append(keys, itemKey{userPK(v), notifSK(id)})
		}
		for _, gk := range groupKeys {
			keys = append(keys, itemKey{userPK(v), groupSK(gk)})
		}
		got, err := s.batchGet(ctx, keys, batchGetOptions{consistent: true})
		if err != nil {
			return chunkResult{}, err
		}
		meta, items, err := decodeMarkSnapshot(got, v)
		if err != nil {
			return chunkResult{}, err
		}
		var changes []memberChange // of the notifications' groups, applied after the loop
		res := chunkResult{found: map[string]*notificationItem{}, meta: meta}
		clock := s.newID(max(floor, meta.Clock, meta.ReadAllBefore, meta.SeenAllBefore))
		now := s.now()
		b := newMetaUpdate(v)
		b.clock = clock
		var t txn
		// The categories whose counters and watermarks this META update names: at most
		// catChunk, so its expressions stay below DynamoDB's 4 KB (99 notifications in 99
		// categories made an 8 KB condition).
		cats := map[string]bool{}
		for _, id := range ids {
			it, ok := items[id]
			if !ok {
				if sent[id] {
					// Deleted by an earlier attempt of this call whose answer was lost.
					res.changed = append(res.changed, id)
				} else {
					res.missing = append(res.missing, id)
				}
				continue
			}
			before := stateOf(it, &meta)
			after, del := p(&meta, it, clock, now)
			if after == nil && !del {
				res.found[id] = it
				continue
			}
			if c := it.countedCategory(); c != "" && !cats[c] {
				if len(cats) == catChunk {
					res.deferred = append(res.deferred, id)
					continue
				}
				cats[c] = true
			}
			res.changed = append(res.changed, id)
			b.usesWatermarks(&meta, it.countedCategory())
			k := itemKey{userPK(v), notifSK(id)}
			if del {
				b.addState(it.countedCategory(), before, state{})
				da, err := deleteAction(s.table, k, it.Rev)
				if err != nil {
					return chunkResult{}, err
				}
				t.add(k, da)
				changes = append(changes, memberChange{it, nil})
				continue
			}
			st := stateOf(after, &meta)
			if st.active && !st.read {
				after.GSI1PK, after.GSI1SK = unreadPK(v), notifSK(id)
			} else {
				after.GSI1PK, after.GSI1SK = "", ""
			}
			after.Rev = it.Rev + 1
			b.addState(it.countedCategory(), before, st)
			up, err := itemUpdate(s.table, k, it, after)
			if err != nil {
				return chunkResult{}, err
			}
			t.add(k, up)
			changes = append(changes, memberChange{it, after})
			if tasks != nil {
				if tk, ta, ok := tasks(after); ok {
					t.add(tk, ta)
				}
			}
			res.found[id] = after
		}
		if len(t.acts) == 0 {
			return res, nil
		}
		valueUpdates, err := s.groupWrites(ctx, v, got, changes, &groupKeys, &t)
		if err != nil {
			return chunkResult{}, err
		}
		mk := itemKey{userPK(v), skMeta}
		ma, err := b.action(s.table)
		if err != nil {
			return chunkResult{}, err
		}
		t.add(mk, ma)
		*wrote = true
		for _, id := range res.changed {
			if _, ok := res.found[id]; !ok {
				sent[id] = true
			}
		}
		if _, err := s.db.TransactWriteItems(ctx, t.input(ctx)); err != nil {
			if t.conditionFailed(err, mk) {
				floor = max(floor, metaFloor(err))
			}
			for _, gk := range valueUpdates {
				if t.conditionFailed(err, itemKey{userPK(v), groupSK(gk)}) {
					// A notification that is not a member (a group full before it):
					// the retry reads the group and applies the change to what it holds.
					groupKeys = append(groupKeys, gk)
				}
			}
			return chunkResult{}, fmt.Errorf("state transaction: %w", err)
		}
		return res, nil
	})
}

// memberChange is one notification's change, for its group: after is nil when deleted.
type memberChange struct{ it, after *notificationItem }

// groupWrites adds to t the writes of the groups of changes and returns the keys of the
// groups written by a value update (below).
//
// A change that keeps a notification's membership (it stays active: read, unread) only
// changes its member attribute: an Update SET m#{id} on condition that the attribute
// exists, with rev raised, needs no read of the group. Such writes commute with each other
// (each member attribute is written only with its notification, whose rev the
// transaction holds), and a Put of the group conditioned on the rev it read fails after
// them. When the condition fails (the notification is not a member), the key joins
// *known and the retry reads the group.
//
// A change of membership (archive, unarchive, snooze, wake, delete, expire) reads the
// group (consistent BatchGetItem, unless it was read with the items: keys in *known,
// which it joins) and Puts it with its new members on condition that its rev is the one
// read. A group that does not exist is left alone (its notifications predate groups).
func (s *Store) groupWrites(ctx context.Context, v inbox.Viewer, got map[itemKey]map[string]types.AttributeValue,
	changes []memberChange, known *[]string, t *txn) ([]string, error) {
	loaded := map[string]*groupItem{}
	for _, gk := range *known {
		raw, ok := got[itemKey{userPK(v), groupSK(gk)}]
		if !ok {
			loaded[gk] = &groupItem{UserPK: userPK(v), GroupKey: gk, Members: map[string]string{}}
			continue
		}
		g, err := decodeGroup(raw)
		if err != nil {
			return nil, fmt.Errorf("decode group: %w", err)
		}
		loaded[gk] = g
	}
	active := func(it *notificationItem) bool { return it != nil && it.ArchivedAt == 0 && it.SnoozedUntil == 0 }
	var missing []string
	for _, c := range changes {
		gk := c.it.GroupKey
		if !inGroup(c.it) || active(c.it) == active(c.after) {
			continue
		}
		if _, ok := loaded[gk]; !ok && !slices.Contains(missing, gk) {
			missing = append(missing, gk)
		}
	}
	if len(missing) > 0 {
		more, err := s.readGroups(ctx, v, missing)
		if err != nil {
			return nil, err
		}
		for gk, g := range more {
			loaded[gk] = g
		}
		*known = append(*known, missing...)
	}
	puts := map[string]*groupItem{}
	values := map[string]map[string]string{}
	var order []string
	for _, c := range changes {
		gk := c.it.GroupKey
		if !inGroup(c.it) {
			continue
		}
		if g, ok := loaded[gk]; ok {
			if !g.exists {
				continue
			}
			ng, ok := puts[gk]
			if !ok {
				ng = g.clone()
			}
			if ng.apply(c.it.ID, c.after) {
				puts[gk] = ng
			}
			continue
		}
		// Membership kept: active before and after (else it was read above).
		if !active(c.it) || memberValue(c.it) == memberValue(c.after) {
			continue
		}
		if values[gk] == nil {
			values[gk] = map[string]string{}
			order = append(order, gk)
		}
		values[gk][c.it.ID] = memberValue(c.after)
	}
	for gk, ng := range puts {
		old := loaded[gk]
		ng.Rev = old.Rev + 1
		p, err := ng.put(s.table, v, old)
		if err != nil {
			return nil, err
		}
		t.add(ng.key(), p)
	}
	for _, gk := range order {
		u, err := groupValueUpdate(s.table, v, gk, values[gk])
		if err != nil {
			return nil, err
		}
		t.add(itemKey{userPK(v), groupSK(gk)}, u)
	}
	return order, nil
}

// groupValueUpdate is the Update of members' values of v's group gk (by notification
// id), on condition that each is a member; rev is raised.
func groupValueUpdate(table string, v inbox.Viewer, gk string, vals map[string]string) (types.TransactWriteItem, error) {
	var names exprNames
	up := expression.Add(expression.Name(attrRev), expression.Value(1))
	var conds []expression.ConditionBuilder
	for _, id := range slices.Sorted(maps.Keys(vals)) {
		m := names.name(groupMemberPrefix + id)
		up = up.Set(m, expression.Value(vals[id]))
		conds = append(conds, m.AttributeExists())
	}
	x, err := buildUpdate(up, conds, &names)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build group member update: %w", err)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(table),
		Key:                       itemKey{userPK(v), groupSK(gk)}.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}}, nil
}

// itemUpdate is the conditional Update of a notification from old to nw: SET or REMOVE of
// the state attributes that differ (and of GSI1's, always), on condition that the item
// exists with old's rev.
func itemUpdate(table string, k itemKey, old, nw *notificationItem) (types.TransactWriteItem, error) {
	up := expression.Set(expression.Name(attrRev), expression.Value(nw.Rev))
	field := func(attr string, o, n any, zero bool) {
		switch {
		case o == n:
		case zero:
			up = up.Remove(expression.Name(attr))
		default:
			up = up.Set(expression.Name(attr), expression.Value(n))
		}
	}
	field(attrMark, old.Mark, nw.Mark, nw.Mark == "")
	field(attrMarkedAt, old.MarkedAt, nw.MarkedAt, nw.MarkedAt == "")
	field(attrReadAt, old.ReadAt, nw.ReadAt, nw.ReadAt == 0)
	field(attrSeenAt, old.SeenAt, nw.SeenAt, nw.SeenAt == 0)
	field(attrArchivedAt, old.ArchivedAt, nw.ArchivedAt, nw.ArchivedAt == 0)
	field(attrSnoozedUntil, old.SnoozedUntil, nw.SnoozedUntil, nw.SnoozedUntil == 0)
	// GSI1 membership is always written, never diffed: the sweep removes it without
	// raising rev, so the item read may still show attributes the sweep has removed.
	field(attrGSI1PK, nil, nw.GSI1PK, nw.GSI1PK == "")
	field(attrGSI1SK, nil, nw.GSI1SK, nw.GSI1SK == "")
	x, err := buildUpdate(up, []expression.ConditionBuilder{revCondition(old.Rev)}, nil)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build notification update: %w", err)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(table),
		Key:                       k.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}}, nil
}

// revCondition is "the item exists with rev" (absent rev is 0).
func revCondition(rev int64) expression.ConditionBuilder {
	r := expression.Name(attrRev)
	if rev == 0 {
		return itemPresent().And(r.AttributeNotExists())
	}
	return itemPresent().And(r.Equal(expression.Value(rev)))
}

// deleteAction is the conditional Delete of a notification with rev.
func deleteAction(table string, k itemKey, rev int64) (types.TransactWriteItem, error) {
	x, err := expression.NewBuilder().WithCondition(revCondition(rev)).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build notification delete: %w", err)
	}
	return types.TransactWriteItem{Delete: &types.Delete{
		TableName:                 aws.String(table),
		Key:                       k.av(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}}, nil
}

// opPlan returns the plan of a StateChange.
func opPlan(ch inbox.StateChange) plan {
	until := ch.Until.UnixMilli()
	return func(m *metaItem, it *notificationItem, clock string, now time.Time) (*notificationItem, bool) {
		st := stateOf(it, m)
		nw := *it
		ms := now.UnixMilli()
		switch ch.Op {
		case inbox.OpRead:
			if !st.read {
				nw.Mark, nw.MarkedAt, nw.ReadAt = markRead, clock, ms
			}
			if !st.seen {
				nw.SeenAt = ms // read implies seen
			}
		case inbox.OpUnread:
			if st.read {
				nw.Mark, nw.MarkedAt, nw.ReadAt = markUnread, clock, 0
			}
		case inbox.OpSeen:
			if !st.seen {
				nw.SeenAt = ms
			}
		case inbox.OpArchive:
			if it.ArchivedAt == 0 {
				nw.ArchivedAt = ms
			}
		case inbox.OpUnarchive:
			nw.ArchivedAt = 0
		case inbox.OpSnooze:
			nw.SnoozedUntil = until
		case inbox.OpUnsnooze:
			nw.SnoozedUntil = 0
		}
		if nw.Mark == it.Mark && nw.MarkedAt == it.MarkedAt && nw.ReadAt == it.ReadAt && nw.SeenAt == it.SeenAt &&
			nw.ArchivedAt == it.ArchivedAt && nw.SnoozedUntil == it.SnoozedUntil {
			return nil, false
		}
		return &nw, false
	}
}

// eventOf is the event kind of a state op.
func eventOf(op inbox.StateOp) inbox.EventKind {
	return map[inbox.StateOp]inbox.EventKind{
		inbox.OpRead: inbox.EventRead, inbox.OpUnread: inbox.EventUnread, inbox.OpSeen: inbox.EventSeen,
		inbox.OpArchive: inbox.EventArchived, inbox.OpUnarchive: inbox.EventUnarchived,
		inbox.OpSnooze: inbox.EventSnoozed, inbox.OpUnsnooze: inbox.EventWoke,
	}[op]
}

// distinctIDs returns ids without repeats (first occurrence kept), or BAD_USER_INPUT for
// none or more than inbox.MaxStateIDs.
func distinctIDs(ids []string) ([]string, error) {
	out := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	switch {
	case len(out) == 0:
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "ids must not be empty")
	case len(out) > inbox.MaxStateIDs:
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "at most %d ids per call", inbox.MaxStateIDs)
	}
	return out, nil
}

// run applies p to ids in chunks of at most chunk ids and catChunk categories (ids over the
// categories wait for the next chunk). It returns the notifications found
// (after), the ids changed and the ids not found (as given), in the order of ids.
func (s *Store) run(ctx context.Context, v inbox.Viewer, ids []string, chunk int, p plan,
	tasks func(after *notificationItem) (itemKey, types.TransactWriteItem, bool), wrote *bool) (found []*inbox.Notification, changed, notFound []string, err error) {
	var valid []string
	for _, id := range ids {
		if ValidNotificationID(id) {
			valid = append(valid, id)
		}
	}
	after := map[string]*inbox.Notification{}
	changedSet := map[string]bool{}
	for queue := valid; len(queue) > 0; {
		part := queue[:min(chunk, len(queue))]
		res, err := s.applyChunk(ctx, v, part, p, tasks, wrote)
		if err != nil {
			return nil, nil, nil, err
		}
		// A chunk changes at least its first notification, so the deferred ones are fewer
		// than the chunk and the queue shrinks.
		queue = append(res.deferred, queue[len(part):]...)
		for id, it := range res.found {
			after[id] = toNotification(it, &res.meta)
		}
		for _, id := range res.changed {
			changedSet[id] = true
		}
	}
	for _, id := range ids {
		if n, ok := after[id]; ok {
			found = append(found, n)
		}
		if changedSet[id] {
			changed = append(changed, id)
		}
		if _, ok := after[id]; !ok && !changedSet[id] {
			notFound = append(notFound, id)
		}
	}
	return found, changed, notFound, nil
}

// published reads v's badge after a write and publishes it with kind and ids (kind
// EventNone when ids is empty: nothing changed, but an earlier attempt may have committed
// unpublished).
// When the read fails after a write, it publishes a re-read hint.
func (s *Store) published(ctx context.Context, v inbox.Viewer, kind inbox.EventKind, ids []string, wrote bool) (inbox.Badge, error) {
	m, err := s.getMeta(ctx, v, true)
	if err != nil {
		if wrote {
			s.publish(ctx, inbox.Change{Viewer: v})
		}
		return inbox.Badge{}, err
	}
	b := m.badge()
	if len(ids) == 0 {
		kind = inbox.EventNone
	}
	s.publish(ctx, inbox.Change{Viewer: v, UnreadCount: b.Unread, Version: m.Version, Badge: b, Kind: kind, IDs: ids})
	return b, nil
}

// ApplyState applies one state change to v's notifications ch.IDs (AP6; see the top of
// this file): markRead (also marks seen), markUnread (seen
// stays), markSeen, archive (leaves the unread list and the counters), unarchive,
// snooze (leaves them until ch.Until, with a wake task in the same transaction) and
// unsnooze (back now, read state kept). Notifications already in the state are not
// written. Ids that are not ULIDs, not v's or not there are returned in NotFound (as
// given) and the rest applied. The Badge is read back after the write (GetItem) and
// published with the event of the op and the ids found (changed now or already in the
// op's state: a client's retry of a call whose answer was lost still publishes the event).
//
// Errors: BAD_USER_INPUT for no ids, more than inbox.MaxStateIDs distinct ids, an unknown
// op, or a snooze whose Until is not in the future or more than inbox.MaxSnooze ahead
// (nothing is written then); THROTTLED or UNAVAILABLE when DynamoDB stayed throttled,
// failing or contended (the change may have committed in part; repeating it is safe).
func (s *Store) ApplyState(ctx context.Context, v inbox.Viewer, ch inbox.StateChange) (inbox.MarkResult, error) {
	if err := checkViewer(v); err != nil {
		return inbox.MarkResult{}, err
	}
	if ch.Op < inbox.OpRead || ch.Op > inbox.OpUnsnooze {
		return inbox.MarkResult{}, inbox.Errorf(inbox.CodeBadUserInput, "unknown state change")
	}
	ids, err := distinctIDs(ch.IDs)
	if err != nil {
		return inbox.MarkResult{}, err
	}
	own, anns := inbox.SplitAnnouncementIDs(ids)
	if len(anns) > 0 {
		return s.applyMixed(ctx, v, ch, own, anns)
	}
	return s.applyOwn(ctx, v, ch, ids)
}

// applyOwn is ApplyState of v's own notifications ids (distinct, checked).
func (s *Store) applyOwn(ctx context.Context, v inbox.Viewer, ch inbox.StateChange, ids []string) (inbox.MarkResult, error) {
	chunk := maxChunk
	var tasks func(*notificationItem) (itemKey, types.TransactWriteItem, bool)
	if ch.Op == inbox.OpSnooze {
		now := s.now()
		if !ch.Until.After(now) || ch.Until.After(now.Add(inbox.MaxSnooze)) {
			return inbox.MarkResult{}, inbox.Errorf(inbox.CodeBadUserInput, "until must be in the future and at most %d days ahead", int(inbox.MaxSnooze.Hours()/24))
		}
		chunk = 33 // each notification with its wake task and its group: 3 × 33 + META
		tasks = func(after *notificationItem) (itemKey, types.TransactWriteItem, bool) {
			k, a := s.taskAction(inbox.TaskWake, v, after.ID, time.UnixMilli(after.SnoozedUntil), strconv.FormatInt(after.SnoozedUntil, 10))
			return k, a, true
		}
	}
	wrote := false
	found, changed, notFound, err := s.run(ctx, v, ids, chunk, opPlan(ch), tasks, &wrote)
	if err != nil {
		if wrote {
			s.publish(ctx, inbox.Change{Viewer: v})
		}
		return inbox.MarkResult{}, err
	}
	// The event names every notification found, not only those this call changed: a
	// notification found unchanged is already in the op's state (opPlan writes nothing
	// then), perhaps by an earlier attempt whose answer was lost after its commit, which
	// could publish only a re-read hint; without this, an inboxEvents subscriber would
	// never hear of that change. A repeat of a change already delivered is harmless (a
	// subscriber applies events idempotently; at the same META version it is dropped).
	inState := make([]string, len(found))
	for i, n := range found {
		inState[i] = n.ID
	}
	b, err := s.published(ctx, v, eventOf(ch.Op), inState, wrote)
	if err != nil {
		return inbox.MarkResult{}, err
	}
	if b, err = s.compose(ctx, v, b); err != nil {
		return inbox.MarkResult{}, err
	}
	return inbox.MarkResult{Notifications: found, Changed: len(changed), UnreadCount: b.Unread,
		NotFound: orEmpty(notFound), Badge: b}, nil
}

// maxChunk is the most notifications one transaction changes: 100 actions
// (TransactWriteItems' limit), at most one per notification, one per group of them, and
// META's.
const maxChunk = 49

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Mark marks v's notifications ids read or unread: ApplyState with OpRead or OpUnread.
func (s *Store) Mark(ctx context.Context, v inbox.Viewer, ids []string, read bool) (inbox.MarkResult, error) {
	op := inbox.OpUnread
	if read {
		op = inbox.OpRead
	}
	return s.ApplyState(ctx, v, inbox.StateChange{Op: op, IDs: ids})
}

// Delete deletes v's notifications ids: each DeleteItem (condition: its rev as read) with
// the META update of its contribution, in chunks, as ApplyState. DeletedIDs are the ids
// deleted (also those an earlier attempt of this call deleted with its answer lost),
// NotFound the others (as given). The badge is read back and published with
// EventDeleted. Errors as ApplyState's.
func (s *Store) Delete(ctx context.Context, v inbox.Viewer, ids []string) (inbox.DeleteResult, error) {
	if err := checkViewer(v); err != nil {
		return inbox.DeleteResult{}, err
	}
	ids, err := distinctIDs(ids)
	if err != nil {
		return inbox.DeleteResult{}, err
	}
	own, anns := inbox.SplitAnnouncementIDs(ids)
	if len(anns) > 0 {
		return s.deleteMixed(ctx, v, own, anns)
	}
	return s.deleteOwn(ctx, v, ids)
}

// deleteOwn is Delete of v's own notifications ids (distinct, checked).
func (s *Store) deleteOwn(ctx context.Context, v inbox.Viewer, ids []string) (inbox.DeleteResult, error) {
	del := func(*metaItem, *notificationItem, string, time.Time) (*notificationItem, bool) { return nil, true }
	wrote := false
	_, changed, notFound, err := s.run(ctx, v, ids, maxChunk, del, nil, &wrote)
	if err != nil {
		if wrote {
			s.publish(ctx, inbox.Change{Viewer: v})
		}
		return inbox.DeleteResult{}, err
	}
	b, err := s.published(ctx, v, inbox.EventDeleted, changed, wrote)
	if err != nil {
		return inbox.DeleteResult{}, err
	}
	if b, err = s.compose(ctx, v, b); err != nil {
		return inbox.DeleteResult{}, err
	}
	return inbox.DeleteResult{DeletedIDs: orEmpty(changed), NotFound: orEmpty(notFound), Badge: b}, nil
}

// Wake is the scheduler's handler of a TaskWake task: when v's notification id is still
// snoozed until token (ms), it comes back, explicitly unread (a mark above every
// watermark), and rejoins the unread list; published as EventWoke. A task that no longer
// matches (unsnoozed, snoozed again, deleted) does nothing. Safe to repeat.
func (s *Store) Wake(ctx context.Context, v inbox.Viewer, id, token string) error {
	return s.byTask(ctx, v, id, inbox.EventWoke, func(m *metaItem, it *notificationItem, clock string, now time.Time) (*notificationItem, bool) {
		if it.SnoozedUntil == 0 || strconv.FormatInt(it.SnoozedUntil, 10) != token {
			return nil, false
		}
		nw := *it
		nw.SnoozedUntil = 0
		nw.Mark, nw.MarkedAt, nw.ReadAt = markUnread, clock, 0
		return &nw, false
	})
}

// Expire is the scheduler's handler of a TaskExpire task: when v's notification id still
// expires at token (ms), it is deleted like Delete does; published as EventExpired. A
// task that no longer matches does nothing. Safe to repeat.
func (s *Store) Expire(ctx context.Context, v inbox.Viewer, id, token string) error {
	return s.byTask(ctx, v, id, inbox.EventExpired, func(m *metaItem, it *notificationItem, clock string, now time.Time) (*notificationItem, bool) {
		return nil, it.ExpireAt != 0 && strconv.FormatInt(it.ExpireAt, 10) == token
	})
}

func (s *Store) byTask(ctx context.Context, v inbox.Viewer, id string, kind inbox.EventKind, p plan) error {
	if err := checkViewer(v); err != nil {
		return err
	}
	if !ValidNotificationID(id) {
		return nil
	}
	wrote := false
	res, err := s.applyChunk(ctx, v, []string{id}, p, nil, &wrote)
	if err != nil {
		if wrote {
			s.publish(ctx, inbox.Change{Viewer: v})
		}
		return err
	}
	if len(res.changed) == 0 {
		return nil
	}
	_, err = s.published(ctx, v, kind, res.changed, true)
	return err
}

// metaOnly runs one META-only write (a mark-all): build makes the update from META as
// read and the new watermark wm (also the new clock); retried on conflict.
func (s *Store) metaOnly(ctx context.Context, v inbox.Viewer, build func(m *metaItem, wm string) *metaUpdate) (metaItem, string, error) {
	floor := ""
	type out struct {
		m  metaItem
		wm string
	}
	wrote := false
	o, err := retryConflicts(ctx, func() (out, error) {
		m, err := s.getMeta(ctx, v, true)
		if err != nil {
			return out{}, err
		}
		wm := s.newID(max(floor, m.Clock, m.ReadAllBefore, m.SeenAllBefore))
		b := build(&m, wm)
		b.clock = wm
		wrote = true
		in, err := b.updateItem(s.table)
		if err != nil {
			return out{}, err
		}
		res, err := s.db.UpdateItem(ctx, in)
		if err != nil {
			floor = max(floor, metaFloor(err))
			return out{}, err
		}
		nm, err := decodeMetaAV(res.Attributes)
		if err != nil {
			return out{}, fmt.Errorf("decode meta: %w", err)
		}
		return out{nm, wm}, nil
	})
	if err != nil && wrote {
		s.publish(ctx, inbox.Change{Viewer: v})
	}
	return o.m, o.wm, err
}

// MarkAll marks v's notifications read (AP7), O(1) in notifications: one consistent
// GetItem of META and one UpdateItem.
//
// Without categories: readAllBefore and seenAllBefore become a new ULID above META's
// clock, and every counter (global and per category) 0, on condition that META's
// version is the one read (so a category counter created meanwhile is never missed);
// while more than catChunk categories count, they are first marked in steps of catChunk
// (markAllMeta), so a user with hundreds of categories can still mark all.
// With categories (checked like ids, at most 64 bytes each): per category c, cr#c and
// cz#c become the new ULID, cu#c and cs#c 0, and the global counters drop by their
// values, on condition that cu#c and cs#c are those read. Either is retried on conflict.
//
// It returns and publishes (EventAllRead) the badge read back. Errors: BAD_USER_INPUT for a
// bad category; THROTTLED or UNAVAILABLE as ApplyState (repeating it is safe).
func (s *Store) MarkAll(ctx context.Context, v inbox.Viewer, categories []string) (inbox.MarkAllResult, error) {
	if err := checkViewer(v); err != nil {
		return inbox.MarkAllResult{}, err
	}
	cats, err := checkCategories(categories)
	if err != nil {
		return inbox.MarkAllResult{}, err
	}
	var m metaItem
	var wm string
	if len(cats) == 0 {
		m, wm, err = s.markAllMeta(ctx, v, false, func(m *metaItem, wm string) *metaUpdate {
			b := newMetaUpdate(v)
			b.set(attrReadWM, wm).set(attrSeenWM, wm).set(attrUnread, 0).set(attrUnseen, 0)
			// Only the non-zero counters: the version condition keeps the others 0.
			for c, st := range m.Cats {
				if st.Unread != 0 {
					b.set(catUnread+c, 0)
				}
				if st.Unseen != 0 {
					b.set(catUnseen+c, 0)
				}
			}
			return b.require(attrVersion, m.Version, m.Version != 0)
		})
	} else {
		m, wm, err = s.metaOnly(ctx, v, func(m *metaItem, wm string) *metaUpdate {
			return markCats(newMetaUpdate(v), m, wm, cats, false)
		})
	}
	if err != nil {
		return inbox.MarkAllResult{}, fmt.Errorf("mark all read: %w", err)
	}
	s.sweeper.enqueue(v)
	b := m.badge()
	s.publish(ctx, inbox.Change{Viewer: v, UnreadCount: b.Unread, Version: m.Version, Badge: b, Kind: inbox.EventAllRead})
	if b, err = s.compose(ctx, v, b); err != nil {
		return inbox.MarkAllResult{}, err
	}
	return inbox.MarkAllResult{UnreadCount: b.Unread, ReadAllBefore: ulidTime(wm), Badge: b}, nil
}

// MarkAllSeen marks v's notifications seen, O(1): seenAllBefore becomes a new ULID above
// META's clock, unseenCount and every cs#c 0, on condition that META's version is the one
// read (one GetItem and one UpdateItem, retried on conflict; more than catChunk categories
// with unseen ones first take steps, see markAllMeta). It returns and publishes
// (EventAllSeen) the badge read back. Errors as MarkAll's.
func (s *Store) MarkAllSeen(ctx context.Context, v inbox.Viewer) (inbox.Badge, error) {
	if err := checkViewer(v); err != nil {
		return inbox.Badge{}, err
	}
	m, _, err := s.markAllMeta(ctx, v, true, func(m *metaItem, wm string) *metaUpdate {
		b := newMetaUpdate(v).set(attrSeenWM, wm).set(attrUnseen, 0)
		// Only the non-zero counters: the version condition keeps the others 0.
		for c, st := range m.Cats {
			if st.Unseen != 0 {
				b.set(catUnseen+c, 0)
			}
		}
		return b.require(attrVersion, m.Version, m.Version != 0)
	})
	if err != nil {
		return inbox.Badge{}, fmt.Errorf("mark all seen: %w", err)
	}
	b := m.badge()
	s.publish(ctx, inbox.Change{Viewer: v, UnreadCount: b.Unread, Version: m.Version, Badge: b, Kind: inbox.EventAllSeen})
	return s.compose(ctx, v, b)
}

// catChunk is the most categories one mark-all UpdateItem zeroes. An update expression
// is at most 4 KB, about 130 categories of a global markAll (two counters each): with
// more categories counting, a markAll could never be written (found with 300).
const catChunk = 20

// markAllMeta writes a global mark-all (final: every counter to 0 under META's version)
// when at most catChunk categories have non-zero counters (only unseen ones when
// seenOnly). While more have, it first marks catChunk of them at a time as a per-category
// markAll would (seenOnly: their seen watermark and unseen counter only), each write
// exact on its own, so a crash between the steps leaves an exact inbox with some
// categories marked. The usual case is one GetItem and one UpdateItem, as metaOnly.
func (s *Store) markAllMeta(ctx context.Context, v inbox.Viewer, seenOnly bool, final func(m *metaItem, wm string) *metaUpdate) (metaItem, string, error) {
	for {
		partial := false
		m, wm, err := s.metaOnly(ctx, v, func(m *metaItem, wm string) *metaUpdate {
			cats := nonZeroCats(m, seenOnly)
			if partial = len(cats) > catChunk; partial {
				return markCats(newMetaUpdate(v), m, wm, cats[:catChunk], seenOnly)
			}
			return final(m, wm)
		})
		if err != nil || !partial {
			return m, wm, err
		}
	}
}

// nonZeroCats returns m's categories with a non-zero unread or unseen counter (only
// unseen when seenOnly), sorted.
func nonZeroCats(m *metaItem, seenOnly bool) []string {
	var out []string
	for c, st := range m.Cats {
		if st.Unseen != 0 || !seenOnly && st.Unread != 0 {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// markCats adds to b the per-category markAll of cats (watermarks to wm, counters to 0,
// the global counters down by theirs, on condition that the counters are those of m);
// seenOnly: the seen watermark and unseen counter only.
func markCats(b *metaUpdate, m *metaItem, wm string, cats []string, seenOnly bool) *metaUpdate {
	for _, c := range cats {
		st := m.cat(c)
		b.set(catSeenWM+c, wm).require(catUnseen+c, st.Unseen, st.HasUnseen)
		if st.HasUnseen {
			b.set(catUnseen+c, 0)
		}
		if st.Unseen != 0 {
			b.add(attrUnseen, -st.Unseen)
		}
		if seenOnly {
			continue
		}
		b.set(catReadWM+c, wm).require(catUnread+c, st.Unread, st.HasUnread)
		if st.HasUnread {
			b.set(catUnread+c, 0)
		}
		if st.Unread != 0 {
			b.add(attrUnread, -st.Unread)
		}
	}
	return b
}

// MaxCategoryBytes is the longest category accepted.
const MaxCategoryBytes = 64

// checkCategory checks a category like an id (inbox.CheckID), at most MaxCategoryBytes.
func checkCategory(c string) error {
	if err := inbox.CheckID("category", c); err != nil {
		return err
	}
	if len(c) > MaxCategoryBytes {
		return inbox.Errorf(inbox.CodeBadUserInput, "category must be at most %d bytes", MaxCategoryBytes)
	}
	return nil
}

// checkCategories checks categories and returns them without repeats (at most 20).
func checkCategories(cs []string) ([]string, error) {
	if len(cs) > 20 {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "at most 20 categories")
	}
	var out []string
	for _, c := range cs {
		if err := checkCategory(c); err != nil {
			return nil, err
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}
