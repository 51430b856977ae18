package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// announcer is the announcement service of one instance over st (its cache merged into
// st's pages and badges), on st's clock when now is given.
func announcer(st *store.Store, now func() time.Time) *service.Announcements {
	a := service.NewAnnouncements(st, service.AnnouncementOptions{Hash: store.AnnouncementHash, Now: now})
	st.UseAnnouncements(a)
	return a
}

// announce creates one announcement of f's tenant and returns its id.
func announce(t *testing.T, a *service.Announcements, tenant, category, title string) string {
	t.Helper()
	ann, created, err := a.Create(context.Background(), tenant, service.CreateRequest{Input: inbox.AnnouncementInput{
		IdempotencyKey: "ann-" + title + randSuffix(), Type: "news", Category: category, Title: title}})
	if err != nil || !created {
		t.Fatalf("announce %s: created %v, %v", title, created, err)
	}
	return ann.ID
}

// entries lists every entry of v's inbox under q (all pages of 3), newest first.
func (f *fixture) entries(t *testing.T, u string, q inbox.PageQuery) []*inbox.Notification {
	t.Helper()
	q.First = ptr(3)
	var out []*inbox.Notification
	for {
		p := f.page(t, u, q)
		for _, e := range p.Edges {
			out = append(out, e.Node)
		}
		if !p.PageInfo.HasNextPage {
			return out
		}
		q.After = *p.PageInfo.EndCursor
	}
}

// nodeIDs are the refs of ns ("@" and the id for an announcement).
func nodeIDs(ns []*inbox.Notification) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Ref()
	}
	return out
}

// refs are the refs of p's nodes.
func refs(p *inbox.Page) []string {
	out := make([]string, len(p.Edges))
	for i, e := range p.Edges {
		out[i] = e.Node.Ref()
	}
	return out
}

// TestAnnouncementStoredOnceInEveryInbox: an announcement is three writes in one
// transaction whatever the tenant's size, and every user of the tenant, one who never
// received anything included, sees it merged by time with their own notifications and
// counted in their badge; another tenant does not.
func TestAnnouncementStoredOnceInEveryInbox(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	own := f.send(t, 2, "mention", "alice")
	clk.Advance(time.Millisecond)
	f.rec.Reset()
	id := announce(t, a, f.tenant, "news", "Maintenance on Sunday")
	if ops := f.rec.Ops(); countOf(ops, "TransactWriteItems") != 1 || countOf(ops, "PutItem")+countOf(ops, "UpdateItem")+countOf(ops, "BatchWriteItem") != 0 {
		t.Fatalf("an announcement's writes: %v, want one TransactWriteItems", ops)
	}
	clk.Advance(time.Millisecond)
	later := f.send(t, 1, "mention", "alice")

	got := nodeIDs(f.entries(t, "alice", inbox.PageQuery{}))
	want := []string{later[0], "@" + id, own[1], own[0]}
	if !slices.Equal(got, want) {
		t.Fatalf("alice's inbox %v, want %v (merged by time)", got, want)
	}
	carol := f.entries(t, "carol", inbox.PageQuery{})
	if len(carol) != 1 || carol[0].Ref() != "@"+id || carol[0].Kind != inbox.KindAnnouncement || carol[0].Title != "Maintenance on Sunday" || carol[0].Read {
		t.Fatalf("carol (never sent anything) sees %+v", carol)
	}
	for u, n := range map[string]int{"alice": 4, "carol": 1} {
		b, err := f.s.Badge(context.Background(), f.viewer(u))
		if err != nil {
			t.Fatal(err)
		}
		if b.Unread != n || b.Unseen != n || !slices.Contains(b.Categories, inbox.CategoryCount{Category: "news", Unread: 1, Unseen: 1}) {
			t.Fatalf("%s's badge %+v, want %d unread and news 1", u, b, n)
		}
	}
	other := inbox.Viewer{TenantID: "other", UserID: "alice"}
	if p, err := f.s.Inbox(context.Background(), other, inbox.PageQuery{First: ptr(10)}); err != nil || len(p.Edges) != 0 || p.UnreadCount != 0 {
		t.Fatalf("another tenant's alice sees %v (%v)", p, err)
	}
}

func countOf(ops []string, op string) int {
	n := 0
	for _, o := range ops {
		if o == op {
			n++
		}
	}
	return n
}

// TestAnnouncementStatePerUser: read, unread, seen, archive, unarchive and delete of an
// announcement are one user's; markAllRead and markAllSeen cover the announcements before
// them and not the ones after; a withdrawal takes it out of every inbox and badge; a
// snooze is refused without writing anything.
func TestAnnouncementStatePerUser(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	ctx := context.Background()
	alice, bob := f.viewer("alice"), f.viewer("bob")
	f.send(t, 1, "mention", "alice")
	clk.Advance(time.Millisecond)
	id := announce(t, a, f.tenant, "", "Welcome")
	ref := "@" + id
	badge := func(v inbox.Viewer) inbox.Badge {
		t.Helper()
		b, err := f.s.Badge(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	apply := func(op inbox.StateOp, want int) {
		t.Helper()
		res, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: op, IDs: []string{ref}})
		if err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		if res.Badge.Unread != want || badge(alice).Unread != want || res.UnreadCount != want {
			t.Fatalf("after %v: result %d (%+v), badge %+v, want %d", op, res.UnreadCount, res.Badge, badge(alice), want)
		}
		if len(res.Notifications) != 1 || res.Notifications[0].Ref() != ref || len(res.NotFound) != 0 {
			t.Fatalf("after %v: %+v", op, res)
		}
	}
	apply(inbox.OpRead, 1)
	if n := f.entries(t, "alice", inbox.PageQuery{})[0]; n.Ref() != ref || !n.Read || n.ReadAt == nil {
		t.Fatalf("read, the page shows %+v", n)
	}
	if b := badge(bob); b.Unread != 1 {
		t.Fatalf("alice's read changed bob's badge: %+v", b)
	}
	apply(inbox.OpUnread, 2)
	apply(inbox.OpSeen, 2)
	if b := badge(alice); b.Unseen != 1 {
		t.Fatalf("seen: %+v", b)
	}
	apply(inbox.OpArchive, 1)
	if ids := nodeIDs(f.entries(t, "alice", inbox.PageQuery{})); slices.Contains(ids, ref) {
		t.Fatalf("archived, still in the inbox: %v", ids)
	}
	if ids := nodeIDs(f.entries(t, "alice", inbox.PageQuery{Archived: inbox.ArchivedOnly})); !slices.Equal(ids, []string{ref}) {
		t.Fatalf("archived only: %v", ids)
	}
	apply(inbox.OpUnarchive, 2)
	if _, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: inbox.OpSnooze, IDs: []string{ref}, Until: clk.Now().Add(time.Hour)}); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("snoozing an announcement: %v, want BAD_USER_INPUT", err)
	}
	if b := badge(alice); b.Unread != 2 {
		t.Fatalf("a refused snooze changed the badge: %+v", b)
	}

	if _, err := f.s.MarkAll(ctx, alice, nil); err != nil {
		t.Fatal(err)
	}
	if b := badge(alice); b.Unread != 0 {
		t.Fatalf("markAllRead left %+v", b)
	}
	if _, err := f.s.MarkAllSeen(ctx, alice); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Millisecond)
	id2 := announce(t, a, f.tenant, "", "Newer")
	if b := badge(alice); b.Unread != 1 || b.Unseen != 1 {
		t.Fatalf("an announcement after the watermarks: %+v, want 1 unread and unseen", b)
	}
	if b := badge(bob); b.Unread != 2 {
		t.Fatalf("bob: %+v", b)
	}

	res, err := f.s.Delete(ctx, bob, []string{ref})
	if err != nil || len(res.NotFound) != 0 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if ids := nodeIDs(f.entries(t, "bob", inbox.PageQuery{Archived: inbox.ArchivedInclude})); !slices.Equal(ids, []string{"@" + id2}) {
		t.Fatalf("bob's inbox after deleting %s: %v", ref, ids)
	}
	if r, err := f.s.ApplyState(ctx, bob, inbox.StateChange{Op: inbox.OpUnread, IDs: []string{ref}}); err != nil || !slices.Equal(r.NotFound, []string{ref}) {
		t.Fatalf("a deleted announcement is not found: %+v %v", r, err)
	}
	if b := badge(bob); b.Unread != 1 {
		t.Fatalf("bob after delete: %+v", b)
	}

	if _, err := a.Withdraw(ctx, f.tenant, id2); err != nil {
		t.Fatal(err)
	}
	if b := badge(alice); b.Unread != 0 {
		t.Fatalf("withdrawn, still counted: %+v", b)
	}
	if b := badge(bob); b.Unread != 0 {
		t.Fatalf("bob: withdrawn, still counted: %+v", b)
	}
	if r, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: inbox.OpRead, IDs: []string{"@" + id2, "@NOTAULID"}}); err != nil || len(r.NotFound) != 2 {
		t.Fatalf("a withdrawn or forged announcement id: %+v %v", r, err)
	}
	if got, err := a.Get(ctx, f.tenant, id2); err != nil || got.Status(clk.Now()) != "withdrawn" {
		t.Fatalf("get after withdraw: %+v %v", got, err)
	}
	clk.Advance(inbox.DefaultAnnouncementTTL)
	if b := badge(bob); b.Unread != 0 {
		t.Fatalf("expired, still counted: %+v", b)
	}
}

// TestAnnouncementPagesMergeByCursor pages forward and backward through an inbox whose
// announcements interleave its notifications: every entry once, in order, whatever the
// page size, and a badge that agrees with the unread list.
func TestAnnouncementPagesMergeByCursor(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	var all []string
	for i := range 9 {
		clk.Advance(time.Millisecond)
		if i%3 == 1 {
			all = append(all, "@"+announce(t, a, f.tenant, "", fmt.Sprintf("a%d", i)))
		} else {
			all = append(all, f.send(t, 1, "t", "alice")...)
		}
	}
	newest := reversed(all)
	for _, size := range []int{1, 2, 4, 20} {
		var got []string
		q := inbox.PageQuery{First: ptr(size)}
		for {
			p := f.page(t, "alice", q)
			got = append(got, refs(p)...)
			if !p.PageInfo.HasNextPage {
				break
			}
			q.After = *p.PageInfo.EndCursor
		}
		if !slices.Equal(got, newest) {
			t.Fatalf("forward by %d: %v, want %v", size, got, newest)
		}
		got = nil
		q = inbox.PageQuery{Last: ptr(size)}
		for {
			p := f.page(t, "alice", q)
			got = append(refs(p), got...)
			if !p.PageInfo.HasPreviousPage {
				break
			}
			q.Before = *p.PageInfo.StartCursor
		}
		if !slices.Equal(got, newest) {
			t.Fatalf("backward by %d: %v, want %v", size, got, newest)
		}
	}
	if _, err := f.s.ApplyState(context.Background(), f.viewer("alice"), inbox.StateChange{Op: inbox.OpRead, IDs: []string{all[1], all[0]}}); err != nil {
		t.Fatal(err)
	}
	unread := nodeIDs(f.entries(t, "alice", inbox.PageQuery{UnreadOnly: true}))
	if len(unread) != 7 || slices.Contains(unread, all[1]) {
		t.Fatalf("unread list %v", unread)
	}
	if u, count := f.unreadTruth(t, "alice"); u != 7 || count != 7 {
		t.Fatalf("unread %d, count %d, want 7", u, count)
	}
}

// TestAnnouncementCapAndReplay: a replayed key answers the first announcement and writes
// nothing; the same key with other content is CONFLICT; past MaxActiveAnnouncements a
// create is refused until one is withdrawn.
func TestAnnouncementCapAndReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := announcer(f.s, nil)
	ctx := context.Background()
	req := service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: "k1", Type: "news", Title: "one"}}
	first, created, err := a.Create(ctx, f.tenant, req)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	again, created, err := a.Create(ctx, f.tenant, req)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("replay: %+v created %v %v", again, created, err)
	}
	req.Input.Title = "other"
	if _, _, err := a.Create(ctx, f.tenant, req); inbox.ErrorCode(err) != inbox.CodeConflict {
		t.Fatalf("a key reused with other content: %v, want CONFLICT", err)
	}
	for i := 1; i < inbox.MaxActiveAnnouncements; i++ {
		if _, _, err := a.Create(ctx, f.tenant, service.CreateRequest{Input: inbox.AnnouncementInput{
			IdempotencyKey: fmt.Sprint("cap", i), Type: "news", Title: "x"}}); err != nil {
			t.Fatalf("announcement %d: %v", i+1, err)
		}
	}
	over := service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: "over", Type: "news", Title: "x"}}
	if _, _, err := a.Create(ctx, f.tenant, over); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("announcement %d: %v, want BAD_USER_INPUT", inbox.MaxActiveAnnouncements+1, err)
	}
	if _, err := a.Withdraw(ctx, f.tenant, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, created, err := a.Create(ctx, f.tenant, over); err != nil || !created {
		t.Fatalf("after a withdrawal: %v %v", created, err)
	}
	if b, err := f.s.Badge(ctx, f.viewer("zed")); err != nil || b.Unread != inbox.MaxActiveAnnouncements {
		t.Fatalf("badge %+v %v, want %d", b, err, inbox.MaxActiveAnnouncements)
	}
}
