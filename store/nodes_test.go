package store_test

import (
	"context"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// Nodes answers a profile only through a notification of the viewer that names it, all
// in one BatchGetItem (issue 8, item 6).
func TestNodesAnswersProfilesOnlyThroughTheViewersNotification(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.send(t, 1, "t", "alice")[0]
	bob := f.send(t, 1, "t", "bob")[0]
	actor := inbox.ProfileRef{ID: "bob"}
	target := inbox.ProfileRef{TargetKind: "issue", ID: "42"}
	refs := []inbox.NodeRef{
		{Notification: alice},                                        // 0: alice's notification
		{Notification: alice, Profile: actor},                        // 1: its actor
		{Notification: alice, Profile: target},                       // 2: its target
		{Notification: bob, Profile: target},                         // 3: bob's notification: not alice's
		{Notification: alice, Profile: inbox.ProfileRef{ID: "x"}},    // 4: a profile alice's notification does not name
		{Notification: "01HZX8Y3T9M2V6Q4R8S0W1A2B3", Profile: actor}, // 5: no such notification
		{Notification: "not-a-ulid", Profile: actor},                 // 6: could not be a key
		{Notification: bob},                                          // 7: bob's notification itself
	}
	f.rec.Reset()
	got, err := f.s.Nodes(context.Background(), f.viewer("alice"), refs)
	if err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); len(ops) != 1 || ops[0] != "BatchGetItem" {
		t.Fatalf("calls %v, want one BatchGetItem", ops)
	}
	if got[0].Notification == nil || got[0].Notification.ID != alice {
		t.Errorf("alice's notification: %+v", got[0])
	}
	if a := got[1].Actor; a == nil || a.Name != "Bob" || a.Via != alice {
		t.Errorf("actor through alice's notification: %+v", got[1])
	}
	if tg := got[2].Target; tg == nil || tg.Title != "Issue 42" || tg.Via != alice {
		t.Errorf("target through alice's notification: %+v", got[2])
	}
	for _, i := range []int{3, 4, 5, 6, 7} {
		if got[i] != (inbox.NodeResult{}) {
			t.Errorf("ref %d %+v resolved to %+v, want nothing", i, refs[i], got[i])
		}
	}
}
