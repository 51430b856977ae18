package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// metaUpdates counts the UpdateItem calls on META that rec kept (KeepInputs).
func metaUpdates(f *fixture) int {
	n := 0
	for _, r := range f.rec.Requests() {
		if in, ok := r.Input.(*dynamodb.UpdateItemInput); ok {
			if sk, ok := in.Key["sk"].(*types.AttributeValueMemberS); ok && sk.Value == "N~META" {
				n++
			}
		}
	}
	return n
}

// A user with notifications in 300 categories (64 bytes each) could never mark all read
// or seen: one UpdateItem zeroed every category counter, and its expression outgrew
// DynamoDB's 4 KB (ValidationException). The mark-alls now zero them in steps of
// store.CatChunk categories: 2×CatChunk+1 categories take two steps and the final write
// (each step as large as any of a bigger inbox's; TestCatChunkKeepsMetaExpressionsSmall
// proves a step stays below 4 KB).
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
	const n = 2*store.CatChunk + 1
	for i := range n {
		f.sendIn(t, inbox.SendInput{Category: fmt.Sprintf("%s%03d", strings.Repeat("c", 61), i)})
	}
	if b := f.checkExact(t, alice); b.Unread != n || b.Unseen != n || len(b.Categories) != n {
		t.Fatalf("before: unread %d unseen %d categories %d", b.Unread, b.Unseen, len(b.Categories))
	}
	f.rec.KeepInputs()
	f.rec.Reset()
	b, err := f.s.MarkAllSeen(ctx, alice)
	if err != nil {
		t.Fatalf("markAllSeen with %d categories: %v", n, err)
	}
	if b.Unseen != 0 || b.Unread != n || len(b.Categories) != n {
		t.Fatalf("markAllSeen: unread %d unseen %d categories %d", b.Unread, b.Unseen, len(b.Categories))
	}
	if u := metaUpdates(f); u != 3 {
		t.Errorf("markAllSeen of %d categories wrote META %d times, want 3 (two steps of %d, then the rest)", n, u, store.CatChunk)
	}
	f.checkExact(t, alice)
	later := f.sendIn(t, inbox.SendInput{Category: "later"})
	f.rec.Reset()
	res, err := f.s.MarkAll(ctx, alice, nil)
	if err != nil {
		t.Fatalf("markAllRead with %d categories: %v", n, err)
	}
	if res.Badge.Unread != 0 || res.Badge.Unseen != 0 || len(res.Badge.Categories) != 0 {
		t.Fatalf("markAllRead: %+v", res.Badge)
	}
	if u := metaUpdates(f); u != 3 {
		t.Errorf("markAllRead of %d categories wrote META %d times, want 3 (two steps of %d, then the rest)", n+1, u, store.CatChunk)
	}
	f.checkExact(t, alice)
	ns, err := f.s.Notifications(ctx, alice, []string{later})
	if err != nil || len(ns) != 1 || !ns[0].Read || !ns[0].Seen {
		t.Fatalf("the notification sent before markAll: %+v %v", ns, err)
	}
	f.checkExact(t, alice)
}

// A mark of ids whose notifications are in more categories than one META update may name
// (store.CatChunk; 99 notifications in 99 categories made an 8 KB condition) changes them
// in steps: every op on CatChunk+1 ids in as many categories.
func TestMarkManyIDsInManyCategories(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.viewer("alice")
	const n = store.CatChunk + 1
	var ids []string
	for i := range n {
		ids = append(ids, f.sendIn(t, inbox.SendInput{Category: fmt.Sprintf("%s%03d", strings.Repeat("d", 61), i)}))
	}
	for _, op := range []inbox.StateOp{inbox.OpSeen, inbox.OpRead, inbox.OpUnread, inbox.OpArchive, inbox.OpUnarchive} {
		res, err := f.s.ApplyState(context.Background(), alice, inbox.StateChange{Op: op, IDs: ids})
		if err != nil {
			t.Fatalf("op %d on %d ids in %d categories: %v", op, n, n, err)
		}
		if len(res.NotFound) != 0 {
			t.Fatalf("op %d: notFound %v", op, res.NotFound)
		}
		f.checkExact(t, alice)
	}
	if _, err := f.s.Delete(context.Background(), alice, ids); err != nil {
		t.Fatalf("delete %d ids in %d categories: %v", n, n, err)
	}
	f.checkExact(t, alice)
	if b := f.badge(t); b.Unread != 0 || b.Unseen != 0 || len(b.Categories) != 0 {
		t.Fatalf("after delete: %+v", b)
	}
}
