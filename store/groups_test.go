package store_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// sendG sends one notification to alice of typ about issue target by actor, in category
// cat, with groupKey gk (default when ""), and returns its id.
func (f *fixture) sendG(t *testing.T, typ, target, actor, cat, gk string, exp time.Time) string {
	t.Helper()
	res, err := writer(f.s).Send(context.Background(), f.tenant, inbox.SendInput{
		IdempotencyKey: "g" + randSuffix(), Recipients: []string{"alice"}, Type: typ, Category: cat, GroupKey: gk,
		Actor: &inbox.Actor{ActorID: actor, Name: actor}, Target: &inbox.Target{Kind: "issue", TargetID: target},
		ExpiresAt: exp,
	})
	if err != nil || len(res.NotificationIDs) != 1 {
		t.Fatalf("send: %v %+v", err, res)
	}
	return res.NotificationIDs[0]
}

// allGroups reads every group of v, page by page (size n).
func (f *fixture) allGroups(t *testing.T, v inbox.Viewer, q inbox.GroupQuery, n int) []*inbox.NotificationGroup {
	t.Helper()
	q.First = ptr(n)
	var out []*inbox.NotificationGroup
	for {
		p, err := f.s.Groups(context.Background(), v, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Edges) > n || (p.PageInfo.HasNextPage && len(p.Edges) < n) {
			t.Fatalf("page of %d groups for first %d, hasNext %v", len(p.Edges), n, p.PageInfo.HasNextPage)
		}
		out = append(out, p.Nodes()...)
		if !p.PageInfo.HasNextPage {
			return out
		}
		q.After = *p.PageInfo.EndCursor
	}
}

// checkGroups fails unless every group of v agrees with a recount of its members: count
// = members, unreadCount = members unread (as Notifications reports them), each member an
// active notification of the group's key, every active notification of a group a member
// while the group has room, and the list ordered by newest member.
func (f *fixture) checkGroups(t *testing.T, v inbox.Viewer) {
	t.Helper()
	ctx := context.Background()
	gs := f.allGroups(t, v, inbox.GroupQuery{}, 7)
	// Active notifications by group key, from the inbox itself.
	active := map[string][]string{}
	q := inbox.PageQuery{First: ptr(100)}
	for {
		p := f.page(t, v.UserID, q)
		for _, e := range p.Edges {
			if e.Node.GroupKey != "" && e.Node.Type != "old" {
				active[e.Node.GroupKey] = append(active[e.Node.GroupKey], e.Node.ID)
			}
		}
		if !p.PageInfo.HasNextPage {
			break
		}
		q.After = *p.PageInfo.EndCursor
	}
	keys := []string{}
	for _, g := range gs {
		keys = append(keys, g.GroupKey)
	}
	members, err := f.s.GroupMembers(ctx, v, keys)
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for _, g := range gs {
		ids := members[g.GroupKey]
		if g.Count != len(ids) || g.Count == 0 {
			t.Fatalf("group %s: count %d, members %d", g.GroupKey, g.Count, len(ids))
		}
		ns, err := f.s.Notifications(ctx, v, ids)
		if err != nil {
			t.Fatal(err)
		}
		unread := 0
		for i, n := range ns {
			if n == nil || n.Archived || n.SnoozedUntil != nil || n.GroupKey != g.GroupKey {
				t.Fatalf("group %s has member %s that is not an active notification of it: %+v", g.GroupKey, ids[i], n)
			}
			if !n.Read {
				unread++
			}
		}
		if g.UnreadCount != unread || g.Read() != (unread == 0) {
			t.Fatalf("group %s: unreadCount %d, recount %d", g.GroupKey, g.UnreadCount, unread)
		}
		if want := active[g.GroupKey]; len(want) <= inbox.MaxGroupMembers && len(want) != len(ids) {
			t.Fatalf("group %s: %d members, %d active notifications", g.GroupKey, len(ids), len(want))
		}
		if g.Latest == nil || g.Latest.ID != ids[0] {
			t.Fatalf("group %s: latest %+v, newest member %s", g.GroupKey, g.Latest, ids[0])
		}
		if prev != "" && g.Latest.ID > prev {
			t.Fatalf("groups out of order at %s", g.GroupKey)
		}
		prev = g.Latest.ID
		delete(active, g.GroupKey)
		// memberCount (kept by Updates that ADD and Puts that set it) equals the members.
		raw := f.groupItem(t, v, g.GroupKey)
		n := 0
		for name := range raw {
			if strings.HasPrefix(name, "m#") {
				n++
			}
		}
		if mc := raw["memberCount"].(*types.AttributeValueMemberN).Value; mc != strconv.Itoa(n) || n > inbox.MaxGroupMembers {
			t.Fatalf("group %s: memberCount %s, %d member attributes", g.GroupKey, mc, n)
		}
	}
	for k, ids := range active {
		t.Fatalf("group %s has %d active notifications but is not listed", k, len(ids))
	}
}

// groupItem reads v's group item key as stored.
func (f *fixture) groupItem(t *testing.T, v inbox.Viewer, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "T#" + v.TenantID + "#U#" + v.UserID},
			"sk": &types.AttributeValueMemberS{Value: "G#" + key}}, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("group item %s: %v", key, err)
	}
	return out.Item
}

func (f *fixture) groupRev(t *testing.T, v inbox.Viewer, key string) string {
	t.Helper()
	return f.groupItem(t, v, key)["rev"].(*types.AttributeValueMemberN).Value
}

func groupOf(gs []*inbox.NotificationGroup, key string) *inbox.NotificationGroup {
	for _, g := range gs {
		if g.GroupKey == key {
			return g
		}
	}
	return nil
}

// TestGroupsFollowEveryChange: counts, actors and order after sends, marks, the mark-alls
// (which never write a group), archive/unarchive, snooze/wake, delete and expire.
func TestGroupsFollowEveryChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	c1 := f.sendG(t, "comment", "42", "bob", "issues", "", time.Time{})
	c2 := f.sendG(t, "comment", "42", "carol", "issues", "", time.Time{})
	d1 := f.sendG(t, "comment", "7", "dave", "issues", "", time.Time{})
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	c3 := f.sendG(t, "comment", "42", "bob", "social", "", exp) // same group, other category
	l1 := f.sendG(t, "like", "7", "erin", "social", "likes", time.Time{})
	const g42, g7 = "comment|issue:42", "comment|issue:7"
	gs := f.allGroups(t, v, inbox.GroupQuery{}, 10)
	if len(gs) != 3 || gs[0].GroupKey != "likes" || gs[1].GroupKey != g42 || gs[2].GroupKey != g7 {
		t.Fatalf("groups %v", gs)
	}
	g := gs[1]
	if g.Count != 3 || g.UnreadCount != 3 || !slices.Equal(g.ActorIDs, []string{"bob", "carol"}) || g.Latest.ID != c3 ||
		g.Type != "comment" || g.TargetID != "42" || g.Category != "social" {
		t.Fatalf("group 42: %+v", g)
	}
	f.checkGroups(t, v)
	// A new notification moves its group to the top.
	d2 := f.sendG(t, "comment", "7", "frank", "issues", "", time.Time{})
	gs = f.allGroups(t, v, inbox.GroupQuery{}, 2)
	if gs[0].GroupKey != g7 || gs[0].Count != 2 || !slices.Equal(gs[0].ActorIDs, []string{"frank", "dave"}) {
		t.Fatalf("after a new one: %+v", gs[0])
	}
	mustApply := func(op inbox.StateOp, ids ...string) {
		t.Helper()
		ch := inbox.StateChange{Op: op, IDs: ids}
		if op == inbox.OpSnooze {
			ch.Until = time.Now().Add(time.Hour)
		}
		if _, err := f.s.ApplyState(ctx, v, ch); err != nil {
			t.Fatal(err)
		}
		f.checkGroups(t, v)
	}
	mustApply(inbox.OpRead, c1, d1)
	if g := groupOf(f.allGroups(t, v, inbox.GroupQuery{}, 10), g42); g.UnreadCount != 2 || g.Count != 3 {
		t.Fatalf("after a read: %+v", g)
	}
	mustApply(inbox.OpUnread, c1)
	// markAll per category: only the category's members turn read; no group is written.
	rev := f.groupRev(t, v, g42)
	if _, err := f.s.MarkAll(ctx, v, []string{"issues"}); err != nil {
		t.Fatal(err)
	}
	if g := groupOf(f.allGroups(t, v, inbox.GroupQuery{}, 10), g42); g.UnreadCount != 1 || g.Count != 3 {
		t.Fatalf("after markAll issues: %+v", g)
	}
	f.checkGroups(t, v)
	if got := f.groupRev(t, v, g42); got != rev {
		t.Fatalf("markAll wrote the group: rev %s -> %s", rev, got)
	}
	mustApply(inbox.OpUnread, c2)
	if _, err := f.s.MarkAll(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.allGroups(t, v, inbox.GroupQuery{}, 10) {
		if g.UnreadCount != 0 || !g.Read() {
			t.Fatalf("after markAll: %+v", g)
		}
	}
	if got := f.groupRev(t, v, g42); got == rev {
		t.Fatalf("the unread mark did not write the group")
	}
	f.checkGroups(t, v)
	mustApply(inbox.OpArchive, c3)
	if g := groupOf(f.allGroups(t, v, inbox.GroupQuery{}, 10), g42); g.Count != 2 || g.Latest.ID != c2 || !slices.Equal(g.ActorIDs, []string{"carol", "bob"}) {
		t.Fatalf("after archiving the newest: %+v", g)
	}
	mustApply(inbox.OpUnarchive, c3)
	mustApply(inbox.OpSnooze, c3, l1)
	if groupOf(f.allGroups(t, v, inbox.GroupQuery{}, 10), "likes") != nil {
		t.Fatal("a group without active members is listed")
	}
	ns, _ := f.s.Notifications(ctx, v, []string{l1})
	if err := f.s.Wake(ctx, v, l1, strconv.FormatInt(ns[0].SnoozedUntil.UnixMilli(), 10)); err != nil {
		t.Fatal(err)
	}
	f.checkGroups(t, v)
	if g := groupOf(f.allGroups(t, v, inbox.GroupQuery{}, 10), "likes"); g == nil || g.UnreadCount != 1 {
		t.Fatalf("after the wake: %+v", g)
	}
	mustApply(inbox.OpUnsnooze, c3)
	if err := f.s.Expire(ctx, v, c3, strconv.FormatInt(exp.UnixMilli(), 10)); err != nil {
		t.Fatal(err)
	}
	f.checkGroups(t, v)
	if _, err := f.s.Delete(ctx, v, []string{d1, d2}); err != nil {
		t.Fatal(err)
	}
	f.checkGroups(t, v)
	gs = f.allGroups(t, v, inbox.GroupQuery{}, 10)
	if len(gs) != 2 || groupOf(gs, g7) != nil || groupOf(gs, g42).Count != 2 {
		t.Fatalf("after expire and delete: %+v", gs)
	}
	// A group id's members, and none for a key without a group.
	m, err := f.s.GroupMembers(ctx, v, []string{g42, "nope"})
	if err != nil || !slices.Equal(m[g42], []string{c2, c1}) || m["nope"] != nil {
		t.Fatalf("members %v %v", m, err)
	}
	if g, err := f.s.Group(ctx, v, g42); err != nil || g == nil || g.Count != 2 {
		t.Fatalf("Group: %+v %v", g, err)
	}
	if g, err := f.s.Group(ctx, f.viewer("bob"), g42); err != nil || g != nil {
		t.Fatalf("another user's group: %+v %v", g, err)
	}
}

// TestGroupsPagesAndFilters: pagination never repeats or skips, filters never return a
// short page, and a cursor is bound to its viewer.
func TestGroupsPagesAndFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	var want []string
	for i := range 9 {
		typ, cat := "comment", "issues"
		if i%3 == 0 {
			typ, cat = "like", "social"
		}
		f.sendG(t, typ, strconv.Itoa(i), "bob", cat, "", time.Time{})
		want = append([]string{typ + "|issue:" + strconv.Itoa(i)}, want...)
	}
	keys := func(gs []*inbox.NotificationGroup) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.GroupKey)
		}
		return out
	}
	if got := keys(f.allGroups(t, v, inbox.GroupQuery{}, 2)); !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	likes := keys(f.allGroups(t, v, inbox.GroupQuery{Types: []string{"like"}}, 2))
	social := keys(f.allGroups(t, v, inbox.GroupQuery{Categories: []string{"social"}}, 1))
	if !slices.Equal(likes, []string{"like|issue:6", "like|issue:3", "like|issue:0"}) || !slices.Equal(likes, social) {
		t.Fatalf("filters: %v %v", likes, social)
	}
	ms, _ := f.s.GroupMembers(ctx, v, []string{"comment|issue:8", "comment|issue:1"})
	if _, err := f.s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpRead, IDs: append(ms["comment|issue:8"], ms["comment|issue:1"]...)}); err != nil {
		t.Fatal(err)
	}
	unread := keys(f.allGroups(t, v, inbox.GroupQuery{UnreadOnly: true}, 2))
	if len(unread) != 7 || slices.Contains(unread, "comment|issue:8") || slices.Contains(unread, "comment|issue:1") {
		t.Fatalf("unread only: %v", unread)
	}
	p, err := f.s.Groups(ctx, v, inbox.GroupQuery{First: ptr(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Groups(ctx, f.viewer("bob"), inbox.GroupQuery{After: *p.PageInfo.EndCursor}); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("another viewer's cursor: %v", err)
	}
	if _, err := f.s.Groups(ctx, v, inbox.GroupQuery{First: ptr(101)}); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("first 101: %v", err)
	}
	// One Query and one BatchGetItem a page.
	f.rec.Reset()
	if _, err := f.s.Groups(ctx, v, inbox.GroupQuery{First: ptr(5), Actors: 3}); err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"Query", "BatchGetItem"}) {
		t.Fatalf("a page of groups took %v", ops)
	}
}

// TestGroupBound: a group keeps its newest 100 members; the older notifications stay in
// the inbox.
func TestGroupBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	var ids []string
	for range inbox.MaxGroupMembers + 2 {
		ids = append(ids, f.sendG(t, "comment", "1", "bob", "", "", time.Time{}))
	}
	m, err := f.s.GroupMembers(ctx, v, []string{"comment|issue:1"})
	if err != nil {
		t.Fatal(err)
	}
	got := m["comment|issue:1"]
	if len(got) != inbox.MaxGroupMembers || slices.Contains(got, ids[0]) || slices.Contains(got, ids[1]) {
		t.Fatalf("%d members", len(got))
	}
	// An evicted one older than every member does not come back when it changes.
	if _, err := f.s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpRead, IDs: ids[:2]}); err != nil {
		t.Fatal(err)
	}
	// Archiving a member makes room; the group then counts 99 (evicted ones stay out).
	if _, err := f.s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpArchive, IDs: ids[50:51]}); err != nil {
		t.Fatal(err)
	}
	g, err := f.s.Group(ctx, v, "comment|issue:1")
	if err != nil || g.Count != inbox.MaxGroupMembers-1 || g.UnreadCount != inbox.MaxGroupMembers-1 {
		t.Fatalf("group %+v %v", g, err)
	}
	if n := len(f.page(t, "alice", inbox.PageQuery{First: ptr(100), Archived: inbox.ArchivedInclude}).Edges); n != 100 {
		t.Fatalf("inbox page %d", n)
	}
}

// TestGroupsIgnoreOutsideNotifications: a notification an outside writer added (no
// group item, counted in unreadCount alone) changes state without touching groups.
func TestGroupsIgnoreOutsideNotifications(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	in, err := store.OutsideSendInput(f.table, v, inbox.Notification{ID: "01J00000000000000000000000", Type: "old", GroupKey: "legacy", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.TransactWriteItems(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpRead, IDs: []string{"01J00000000000000000000000"}}); err != nil {
		t.Fatal(err)
	}
	if gs := f.allGroups(t, v, inbox.GroupQuery{}, 5); len(gs) != 0 {
		t.Fatalf("groups %+v", gs)
	}
	f.checkExact(t, v)
}

// TestGroupFullUnderConcurrency races sends past the 100-member bound of one group (the
// Update path while it has room, the Put path once full) with read and unread marks (the
// member-only Update), archive and unarchive (the Put path); afterwards the group agrees
// with its notifications (checkGroups, memberCount included) and holds at most 100.
func TestGroupFullUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	p := &pool{exp: map[string]int64{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	report := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				res, err := writer(f.s).Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: "full" + randSuffix(), Recipients: []string{"alice"},
					Type: "comment", Actor: &inbox.Actor{ActorID: "a" + strconv.Itoa((w+i)%5)}, Target: &inbox.Target{Kind: "issue", TargetID: "1"}})
				report(err)
				if err == nil {
					p.add(res.NotificationIDs, 0)
				}
			}
		}()
	}
	ops := []inbox.StateOp{inbox.OpRead, inbox.OpUnread, inbox.OpArchive, inbox.OpUnarchive}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 15 {
				if ids := p.pick(r, 2); len(ids) > 0 {
					_, err := f.s.ApplyState(ctx, v, inbox.StateChange{Op: ops[r.IntN(len(ops))], IDs: ids})
					report(err)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("concurrent op: %v", err)
	}
	f.checkExact(t, v)
	g, err := f.s.Group(ctx, v, "comment|issue:1")
	if err != nil || g == nil || g.Count > inbox.MaxGroupMembers || g.ActorCount() != 5 {
		t.Fatalf("group after the race: %+v %v", g, err)
	}
}
