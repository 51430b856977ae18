package store_test

import (
	"context"
	"sort"
	"strings"
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
