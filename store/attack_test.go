package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// A user with notifications in 300 categories (64 bytes each) could never mark all read
// or seen: one UpdateItem zeroed every category counter, and its expression outgrew
// DynamoDB's 4 KB (ValidationException). The mark-alls now zero them in steps.
func TestMarkAllWithManyCategories(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := f.viewer("alice")
	// A few categories: still one GetItem and one UpdateItem.
	for _, c := range []string{"a", "b", "c"} {
		f.sendIn(t, inbox.SendInput{Category: c})
	}
	f.rec.Reset()
	if _, err := f.s.MarkAllSeen(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); len(ops) != 2 || ops[0] != "GetItem" || ops[1] != "UpdateItem" {
		t.Fatalf("markAllSeen ops = %v", ops)
	}
	if _, err := f.s.MarkAll(ctx, alice, nil); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		f.sendIn(t, inbox.SendInput{Category: fmt.Sprintf("%s%03d", strings.Repeat("c", 61), i)})
	}
	if b := f.checkExact(t, alice); b.Unread != n || b.Unseen != n || len(b.Categories) != n {
		t.Fatalf("before: unread %d unseen %d categories %d", b.Unread, b.Unseen, len(b.Categories))
	}
	b, err := f.s.MarkAllSeen(ctx, alice)
	if err != nil {
		t.Fatalf("markAllSeen with %d categories: %v", n, err)
	}
	if b.Unseen != 0 || b.Unread != n || len(b.Categories) != n {
		t.Fatalf("markAllSeen: unread %d unseen %d categories %d", b.Unread, b.Unseen, len(b.Categories))
	}
	f.checkExact(t, alice)
	later := f.sendIn(t, inbox.SendInput{Category: "later"})
	res, err := f.s.MarkAll(ctx, alice, nil)
	if err != nil {
		t.Fatalf("markAllRead with %d categories: %v", n, err)
	}
	if res.Badge.Unread != 0 || res.Badge.Unseen != 0 || len(res.Badge.Categories) != 0 {
		t.Fatalf("markAllRead: %+v", res.Badge)
	}
	f.checkExact(t, alice)
	ns, err := f.s.Notifications(ctx, alice, []string{later})
	if err != nil || len(ns) != 1 || !ns[0].Read || !ns[0].Seen {
		t.Fatalf("the notification sent before markAll: %+v %v", ns, err)
	}
	f.checkExact(t, alice)
}
