package store_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// staleSource is an instance's announcement cache that has not heard of the newest
// announcements yet: while held is set, it answers it to every non-fresh read (the
// invalidation is still on its way, or was lost and MaxAge has not passed).
type staleSource struct {
	a    *service.Announcements
	held *inbox.AnnouncementSet
}

func (s *staleSource) Announcements(ctx context.Context, tenant string, fresh bool) (*inbox.AnnouncementSet, error) {
	if s.held != nil && !fresh {
		return s.held, nil
	}
	return s.a.Announcements(ctx, tenant, fresh)
}

// TestAnnouncementMarkOnStaleSetKeepsNewerMarks: a user marks a new announcement read
// through an instance that knows it, then marks an older one through an instance whose
// cached set predates the new one. The second write prunes the marks of announcements
// "no longer active", and must not take the new announcement's mark for one: it would
// come back unread (and the badge would count it again).
func TestAnnouncementMarkOnStaleSetKeepsNewerMarks(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	src := &staleSource{a: a}
	f.s.UseAnnouncements(src)
	ctx := context.Background()
	alice := f.viewer("alice")

	old := announce(t, a, f.tenant, "", "Old")
	before, err := a.Announcements(ctx, f.tenant, true)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Millisecond)
	newer := announce(t, a, f.tenant, "", "Newer")
	if _, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: inbox.OpRead, IDs: []string{"@" + newer}}); err != nil {
		t.Fatal(err)
	}
	src.held = before // the other instance: its set has "Old" only
	if _, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: inbox.OpArchive, IDs: []string{"@" + old}}); err != nil {
		t.Fatal(err)
	}
	src.held = nil
	b, err := f.s.Badge(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if b.Unread != 0 {
		t.Fatalf("badge %+v: the mark of %s (read) was pruned by a write on a set that predates it", b, newer)
	}
}

// annMarks lists the announcement marks ("an#" attributes) on v's META.
func (f *fixture) annMarks(t *testing.T, v inbox.Viewer) []string {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "T#" + v.TenantID + "#U#" + v.UserID},
			"sk": &types.AttributeValueMemberS{Value: "N~META"}}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for k := range out.Item {
		if id, ok := strings.CutPrefix(k, "an#"); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// TestAnnouncementMarksOfInactiveArePruned: a user who marks every announcement keeps
// no more marks than the tenant has active ones: the marks of withdrawn and expired
// announcements leave META with the user's next mark, once a set read later proves them
// inactive; the mark of an announcement still active stays.
func TestAnnouncementMarksOfInactiveArePruned(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	ctx := context.Background()
	alice := f.viewer("alice")
	mark := func(id string) {
		t.Helper()
		if _, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: inbox.OpRead, IDs: []string{"@" + id}}); err != nil {
			t.Fatal(err)
		}
	}
	withdrawn := announce(t, a, f.tenant, "", "Withdrawn")
	short, _, err := a.Create(ctx, f.tenant, service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: "short",
		Type: "news", Title: "Short", ExpiresAt: clk.Now().Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	kept := announce(t, a, f.tenant, "", "Kept")
	mark(withdrawn)
	mark(short.ID)
	mark(kept)
	if _, err := a.Withdraw(ctx, f.tenant, withdrawn); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	last := announce(t, a, f.tenant, "", "Last")
	mark(last)
	want := []string{kept, last}
	sort.Strings(want)
	if got := f.annMarks(t, alice); !slicesEqual(got, want) {
		t.Fatalf("META's marks %v, want %v (the withdrawn and expired ones pruned)", got, want)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAnnouncementMarkAllHundredTwice: a user marks the tenant's 100 active announcements
// read in one call (one GetItem and one UpdateItem of META), the tenant replaces all of
// them, and the user marks the 100 new ones: one update sets 100 marks and removes the
// 100 old ones, within DynamoDB's expression limits; then archives and deletes them all.
func TestAnnouncementMarkAllHundredTwice(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	ctx := context.Background()
	alice := f.viewer("alice")
	fill := func(round string) []string {
		ids := make([]string, inbox.MaxActiveAnnouncements)
		for i := range ids {
			clk.Advance(time.Millisecond)
			ann, _, err := a.Create(ctx, f.tenant, service.CreateRequest{Input: inbox.AnnouncementInput{
				IdempotencyKey: round + strings.Repeat("k", 200) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: "news", Title: round}})
			if err != nil {
				t.Fatalf("%s %d: %v", round, i, err)
			}
			ids[i] = "@" + ann.ID
		}
		return ids
	}
	first := fill("one")
	f.rec.Reset()
	res, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: inbox.OpRead, IDs: first})
	if err != nil || res.Changed != 100 || res.Badge.Unread != 0 {
		t.Fatalf("mark 100 read: changed %d badge %+v %v", res.Changed, res.Badge, err)
	}
	if ops := f.rec.Ops(); countOf(ops, "UpdateItem") != 1 || len(ops) > 3 {
		t.Fatalf("marking 100 announcements: %v", ops)
	}
	for _, id := range first {
		if _, err := a.Withdraw(ctx, f.tenant, id[1:]); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Hour)
	second := fill("two")
	for _, op := range []inbox.StateOp{inbox.OpRead, inbox.OpArchive} {
		if res, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: op, IDs: second}); err != nil || res.Changed != 100 {
			t.Fatalf("%v of 100 after 100 withdrawn: %+v %v", op, res.Changed, err)
		}
	}
	if got := f.annMarks(t, alice); len(got) != 100 {
		t.Fatalf("META holds %d marks, want 100 (the withdrawn ones pruned)", len(got))
	}
	if res, err := f.s.Delete(ctx, alice, second); err != nil || len(res.DeletedIDs) != 100 || res.Badge.Unread != 0 {
		t.Fatalf("delete 100: %d %+v %v", len(res.DeletedIDs), res.Badge, err)
	}
	if b := f.badge(t); b.Unread != 0 || b.Unseen != 0 {
		t.Fatalf("badge %+v", b)
	}
}

// TestAnnouncementCreateAndWithdrawWithLostAnswers: DynamoDB commits a create and a
// withdrawal, and their answers are lost (every attempt's, then only the first's): the
// caller's retry with the same key gets the first announcement back (no second one),
// another instance sees exactly one, the change is published with the table's sequence,
// and a withdrawal whose answer was lost is withdrawn once.
func TestAnnouncementCreateAndWithdrawWithLostAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := 0 // how many TransactWriteItems answers to lose from now on
	var mu sync.Mutex
	j := newInjector(func(op string, _ int, _ any) (faultKind, string) {
		mu.Lock()
		defer mu.Unlock()
		if op == "TransactWriteItems" && lose > 0 {
			lose--
			return lostAnswer, "InternalServerError"
		}
		return pass, ""
	})
	s := f.faulty(t, j)
	pub := &recorder{}
	a := service.NewAnnouncements(s, service.AnnouncementOptions{Hash: store.AnnouncementHash, Publisher: pub})
	s.UseAnnouncements(a)
	other := announcer(f.s, nil)
	req := service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: "lost", Type: "news", Title: "Once"}}

	mu.Lock()
	lose = 100 // every attempt of this call
	mu.Unlock()
	if _, _, err := a.Create(ctx, f.tenant, req); err == nil {
		t.Fatal("every answer lost, the create succeeded")
	} else if c := inbox.ErrorCode(err); c != inbox.CodeUnavailable && c != inbox.CodeThrottled {
		t.Fatalf("lost answers: %v (code %q), want a retryable code", err, c)
	}
	mu.Lock()
	lose = 1 // the retry's first attempt
	mu.Unlock()
	got, created, err := a.Create(ctx, f.tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	set, err := other.Announcements(ctx, f.tenant, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Items) != 1 || set.Items[0].ID != got.ID || set.Seq != 1 {
		t.Fatalf("after lost answers: %d announcements (seq %d), the replay answered %s (created %v)", len(set.Items), set.Seq, got.ID, created)
	}
	if cs := pub.take(); len(cs) == 0 || cs[len(cs)-1].Version != 1 || cs[len(cs)-1].Kind != inbox.EventAnnouncements {
		t.Fatalf("published %+v, want the tenant's sequence 1", cs)
	}
	if c, _ := a.Announcements(ctx, f.tenant, false); len(c.Active(time.Now())) != 1 {
		t.Fatalf("the instance's cache: %+v", c)
	}
	if b, err := f.s.Badge(ctx, f.viewer("zoe")); err != nil || b.Unread != 1 {
		t.Fatalf("badge %+v %v", b, err)
	}

	mu.Lock()
	lose = 1
	mu.Unlock()
	w, err := a.Withdraw(ctx, f.tenant, got.ID)
	if err != nil || w.WithdrawnAt == nil {
		t.Fatalf("withdraw with a lost answer: %+v %v", w, err)
	}
	other = announcer(f.s, nil) // another instance, its first read
	set, err = other.Announcements(ctx, f.tenant, true)
	if err != nil || len(set.Items) != 0 || set.Seq != 2 {
		t.Fatalf("after the withdrawal: %+v (seq %d) %v, want none at seq 2", set.Items, set.Seq, err)
	}
	if cs := pub.take(); len(cs) == 0 || cs[len(cs)-1].Version != 2 {
		t.Fatalf("published %+v, want sequence 2", cs)
	}
	if b, err := f.s.Badge(ctx, f.viewer("zoe")); err != nil || b.Unread != 0 {
		t.Fatalf("badge after the withdrawal %+v %v", b, err)
	}
}

// TestAnnouncementHostileContentRefused: an announcement reaches every inbox of the
// tenant, so it is held to a notification's rules at least: actions need a label of
// 1..100 characters and an absolute http(s) URL (a javascript: link would run in every
// user's inbox UI), a category is an id of at most 64 bytes (markAllRead takes no other);
// expiresAt is in the future and at most a year ahead. Nothing is written for a refusal.
func TestAnnouncementHostileContentRefused(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	ctx := context.Background()
	ok := inbox.Action{Label: "Open", URL: "https://example.com/x"}
	for name, in := range map[string]inbox.AnnouncementInput{
		"javascript action":   {Actions: []inbox.Action{{Label: "Open", URL: "javascript:alert(document.cookie)"}}},
		"relative action":     {Actions: []inbox.Action{ok, {Label: "Open", URL: "/settings"}}},
		"empty label":         {Actions: []inbox.Action{{Label: "", URL: ok.URL}}},
		"huge label":          {Actions: []inbox.Action{{Label: strings.Repeat("x", 101), URL: ok.URL}}},
		"huge url":            {Actions: []inbox.Action{{Label: "x", URL: "https://example.com/" + strings.Repeat("x", 2048)}}},
		"six actions":         {Actions: []inbox.Action{ok, ok, ok, ok, ok, ok}},
		"category with #":     {Category: "a#b"},
		"category control":    {Category: "a\x00b"},
		"category 65 bytes":   {Category: strings.Repeat("c", 65)},
		"expires now":         {ExpiresAt: clk.Now()},
		"expires in the past": {ExpiresAt: clk.Now().Add(-time.Hour)},
		"expires past a year": {ExpiresAt: clk.Now().Add(inbox.MaxAnnouncementTTL + time.Second)},
		"no title nor body":   {Title: "-"},
		"huge body":           {Body: strings.Repeat("b", inbox.MaxPayloadBytes+1)},
		"huge actor name":     {Actor: &inbox.Actor{ActorID: "x", Name: strings.Repeat("n", 420<<10)}},
		"huge target url":     {Target: &inbox.Target{TargetID: "x", Kind: "k", URL: "https://e.com/" + strings.Repeat("u", inbox.MaxAnnouncementProfileField)}},
		"control in key":      {IdempotencyKey: "k\x01"},
	} {
		in.Type = "news"
		if in.Title == "" {
			in.Title = "t"
		} else if in.Title == "-" {
			in.Title = ""
		}
		if in.IdempotencyKey == "" {
			in.IdempotencyKey = "hostile-" + strings.ReplaceAll(name, " ", "-")
		}
		if _, _, err := a.Create(ctx, f.tenant, service.CreateRequest{Input: in}); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v, want BAD_USER_INPUT", name, err)
		}
	}
	if set, err := f.s.LoadAnnouncements(ctx, f.tenant); err != nil || len(set.Items) != 0 || set.Seq != 0 {
		t.Fatalf("refusals wrote %+v (seq %d) %v", set.Items, set.Seq, err)
	}
	edge := inbox.AnnouncementInput{IdempotencyKey: "edge", Type: "news", Title: "t", Category: strings.Repeat("c", 64),
		Actions: []inbox.Action{ok, ok, ok, ok, ok}, ExpiresAt: clk.Now().Add(inbox.MaxAnnouncementTTL)}
	if _, created, err := a.Create(ctx, f.tenant, service.CreateRequest{Input: edge}); err != nil || !created {
		t.Fatalf("the edges allowed: %v %v", created, err)
	}
}

// TestAnnouncementForgedIDsAcrossTenants: ids naming another tenant's announcement, or
// garbage after "@", in a state change (mixed with the user's own and repeated), a
// delete, node resolution, GET and DELETE of the announcement: nothing of the other
// tenant is shown or changed, the user's own ids are applied, every forged one is not
// found; and an idempotency key used by one tenant is free in another.
func TestAnnouncementForgedIDsAcrossTenants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := announcer(f.s, nil)
	ctx := context.Background()
	req := func(title string) service.CreateRequest {
		return service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: "same-key", Type: "news", Title: title}}
	}
	theirs, created, err := a.Create(ctx, "rival", req("Rival's"))
	if err != nil || !created {
		t.Fatal(created, err)
	}
	ours, created, err := a.Create(ctx, f.tenant, req("Ours, other content, same key"))
	if err != nil || !created || ours.ID == theirs.ID {
		t.Fatalf("the same key in another tenant: %+v %v %v", ours, created, err)
	}
	own := f.send(t, 1, "mention", "alice")[0]
	alice := f.viewer("alice")
	forged := []string{"@" + theirs.ID, "@", "@@x", "@" + theirs.ID, "@garbage", "@" + strings.ToLower(theirs.ID), own, own, "@" + ours.ID}
	res, err := f.s.ApplyState(ctx, alice, inbox.StateChange{Op: inbox.OpRead, IDs: forged})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeIDs(res.Notifications); !slicesEqual(got, []string{own, "@" + ours.ID}) {
		t.Fatalf("found %v", got)
	}
	for _, n := range res.Notifications {
		if n.Title == "Rival's" {
			t.Fatalf("the rival's announcement leaked: %+v", n)
		}
	}
	if len(res.NotFound) != 5 || res.Badge.Unread != 0 {
		t.Fatalf("not found %v (want the 5 forged ones), badge %+v", res.NotFound, res.Badge)
	}
	del, err := f.s.Delete(ctx, alice, []string{"@" + theirs.ID, "@", "@@"})
	if err != nil || len(del.DeletedIDs) != 0 || len(del.NotFound) != 3 {
		t.Fatalf("delete of forged ids: %+v %v", del, err)
	}
	if marks := f.annMarks(t, alice); !slicesEqual(marks, []string{ours.ID}) {
		t.Fatalf("alice's META marks %v, want only her tenant's", marks)
	}
	refs := []inbox.NodeRef{{Notification: "@" + theirs.ID}, {Notification: "@"}, {Notification: "@@x"}, {Notification: "@" + ours.ID},
		{Notification: "@" + theirs.ID, Profile: inbox.ProfileRef{ID: "x"}}}
	nodes, err := f.s.Nodes(ctx, alice, refs)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if got := n.Notification != nil || n.Actor != nil || n.Target != nil; got != (i == 3) {
			t.Fatalf("node %q: %+v", refs[i].Notification, n)
		}
	}
	if _, err := a.Get(ctx, f.tenant, theirs.ID); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Fatalf("GET of the rival's id: %v", err)
	}
	if _, err := a.Withdraw(ctx, f.tenant, theirs.ID); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Fatalf("DELETE of the rival's id: %v", err)
	}
	if got, err := a.Get(ctx, "rival", theirs.ID); err != nil || got.WithdrawnAt != nil {
		t.Fatalf("the rival's announcement after: %+v %v", got, err)
	}
	if b, err := f.s.Badge(ctx, inbox.Viewer{TenantID: "rival", UserID: "alice"}); err != nil || b.Unread != 1 {
		t.Fatalf("the rival's alice: %+v %v", b, err)
	}
}

// TestAnnouncementWithdrawnLeavesWithinAWeek: a tenant that creates year-long
// announcements and withdraws them (staying under the cap of active ones) must not make
// every set load read its withdrawn items for a year: a withdrawn item's TTL is a week
// after the withdrawal.
func TestAnnouncementWithdrawnLeavesWithinAWeek(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	ctx := context.Background()
	ann, _, err := a.Create(ctx, f.tenant, service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: "year",
		Type: "news", Title: "t", ExpiresAt: clk.Now().Add(inbox.MaxAnnouncementTTL)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Withdraw(ctx, f.tenant, ann.ID); err != nil {
		t.Fatal(err)
	}
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "T#" + f.tenant + "#ANN"},
			"sk": &types.AttributeValueMemberS{Value: "A#" + ann.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := out.Item["expiresAt"].(*types.AttributeValueMemberN)
	if ttl == nil {
		t.Fatalf("no TTL on %v", out.Item)
	}
	if limit := clk.Now().Add(8 * 24 * time.Hour).Unix(); ttl.Value > fmt.Sprint(limit) || len(ttl.Value) != len(fmt.Sprint(limit)) {
		t.Fatalf("withdrawn item's TTL %s, want at most %d (a week after the withdrawal)", ttl.Value, limit)
	}
	if got, err := a.Get(ctx, f.tenant, ann.ID); err != nil || got.Status(clk.Now()) != "withdrawn" {
		t.Fatalf("GET after: %+v %v", got, err)
	}
}

// TestAnnouncementMarkThrottled: a mark of announcements whose META update is throttled
// (every attempt) ends THROTTLED with nothing written; once DynamoDB takes writes again
// the same call applies exactly once.
func TestAnnouncementMarkThrottled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var mu sync.Mutex
	throttle := true
	j := newInjector(func(op string, _ int, _ any) (faultKind, string) {
		mu.Lock()
		defer mu.Unlock()
		if op == "UpdateItem" && throttle {
			return fail, "ProvisionedThroughputExceededException"
		}
		return pass, ""
	})
	s := f.faulty(t, j)
	a := announcer(s, nil)
	ctx := context.Background()
	id := announce(t, a, f.tenant, "news", "Throttled")
	alice := f.viewer("alice")
	ch := inbox.StateChange{Op: inbox.OpArchive, IDs: []string{"@" + id}}
	if _, err := s.ApplyState(ctx, alice, ch); inbox.ErrorCode(err) != inbox.CodeThrottled {
		t.Fatalf("throttled mark: %v (code %q), want THROTTLED", err, inbox.ErrorCode(err))
	}
	if marks := f.annMarks(t, alice); len(marks) != 0 {
		t.Fatalf("a throttled mark wrote %v", marks)
	}
	mu.Lock()
	throttle = false
	mu.Unlock()
	res, err := s.ApplyState(ctx, alice, ch)
	if err != nil || res.Changed != 1 || res.Badge.Unread != 0 {
		t.Fatalf("after: %+v %v", res, err)
	}
}

// TestAnnouncementBogusInvalidationDoesNotDisableTheCache: a tenant change announcing a
// sequence the table never reached (a forged or corrupt broker message) makes the next
// read load the set, and that load, begun after the change came, proves it wrong: the
// reads after it are served from the cache again (before: every page and badge of the
// tenant cost a Query forever).
func TestAnnouncementBogusInvalidationDoesNotDisableTheCache(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	f := newFixture(t, store.WithClock(clk.Now))
	a := announcer(f.s, clk.Now)
	ctx := context.Background()
	announce(t, a, f.tenant, "", "One")
	a.Invalidate(f.tenant, 1<<60)
	clk.Advance(time.Millisecond) // the load begins after the change came
	if _, err := a.Announcements(ctx, f.tenant, false); err != nil {
		t.Fatal(err)
	}
	f.rec.Reset()
	for range 3 {
		if set, err := a.Announcements(ctx, f.tenant, false); err != nil || len(set.Items) != 1 {
			t.Fatalf("%+v %v", set, err)
		}
	}
	if n := countOf(f.rec.Ops(), "Query"); n != 0 {
		t.Fatalf("%d Queries for 3 reads after a bogus invalidation was disproved, want 0 (cached)", n)
	}
}
