package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// A bulk load through OutsideNotificationItem and OutsideMetaItem leaves an inbox whose
// badge (global and per category) equals a recount, and which later writes keep exact:
// a category markAllRead, a send and markAllSeen.
func TestOutsideMetaItemBulkLoad(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	base := time.Now().Add(-time.Hour)
	var ns []inbox.Notification
	for i := range 30 {
		n := inbox.Notification{ID: ulid.MustNew(ulid.Timestamp(base.Add(time.Duration(i)*time.Second)), ulid.DefaultEntropy()).String(),
			Type: "t", Category: []string{"ci", "social", ""}[i%3], Title: "bulk", CreatedAt: base}
		ns = append(ns, n)
		item, err := store.OutsideNotificationItem(v, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := store.OutsideMetaItem(v, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: meta}); err != nil {
		t.Fatal(err)
	}
	b := f.checkExact(t, v)
	want := []inbox.CategoryCount{{Category: "ci", Unread: 10, Unseen: 10}, {Category: "social", Unread: 10, Unseen: 10}}
	if b.Unread != 30 || b.Unseen != 30 || len(b.Categories) != 2 || b.Categories[0] != want[0] || b.Categories[1] != want[1] {
		t.Fatalf("badge after the bulk load %+v, want 30 unread and unseen, categories %+v", b, want)
	}
	if _, err := f.s.MarkAll(ctx, v, []string{"ci"}); err != nil {
		t.Fatal(err)
	}
	if b := f.checkExact(t, v); b.Unread != 20 || b.Unseen != 20 {
		t.Fatalf("badge after markAllRead(ci) %+v, want 20 unread and unseen", b)
	}
	f.sendIn(t, inbox.SendInput{Category: "ci"})
	if b := f.checkExact(t, v); b.Unread != 21 {
		t.Fatalf("badge after a send %+v, want 21 unread", b)
	}
	if _, err := f.s.MarkAllSeen(ctx, v); err != nil {
		t.Fatal(err)
	}
	if b := f.checkExact(t, v); b.Unread != 21 || b.Unseen != 0 {
		t.Fatalf("badge after markAllSeen %+v, want 21 unread, 0 unseen", b)
	}
}

func TestOutsideMetaItemRefusesBadInput(t *testing.T) {
	t.Parallel()
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	if _, err := store.OutsideMetaItem(v, []inbox.Notification{{ID: "not-a-ulid"}}); err == nil {
		t.Fatal("OutsideMetaItem took an id that is not a ULID")
	}
	if _, err := store.OutsideMetaItem(inbox.Viewer{TenantID: "acme"}, nil); err == nil {
		t.Fatal("OutsideMetaItem took a viewer without a user")
	}
	raw, err := store.OutsideMetaItem(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := raw["unreadCount"].(*types.AttributeValueMemberN); !ok || n.Value != "0" {
		t.Fatalf("an empty inbox's META has unreadCount %#v, want 0", raw["unreadCount"])
	}
}
