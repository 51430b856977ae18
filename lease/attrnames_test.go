package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/lease"
	"github.com/inboxgw/gateway/store"
)

// SetAttributes writes each name as one top-level attribute, dots included, and refuses a
// name with '[' or ']' before writing anything. The expression builder reads "x[0]" as
// element 0 of the list x (and refuses "a[b]"), so without the check a holder's
// "x[0]" overwrote an element of its own list attribute x instead of being refused (and
// before the builder, the name was kept whole): a name is one attribute or an error,
// never a path into another attribute, and a call with one bad name writes none of its
// attributes.
func TestSetAttributesNamesAreWholeAttributes(t *testing.T) {
	t.Parallel()
	db, table := setup(t)
	ctx := context.Background()
	clk := clocktest.New()
	key := store.SchedShardLeaseKey(5)
	l := lease.New(db, table, key, lease.Options{Owner: "a", Duration: 10 * time.Second, Clock: clk})
	if st, err := l.TryAcquire(ctx); err != nil || !st.Held {
		t.Fatalf("acquire: %+v %v", st, err)
	}
	list := &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}, &types.AttributeValueMemberN{Value: "2"}}}
	if err := l.SetAttributes(ctx, map[string]types.AttributeValue{"x": list, "a.b": &types.AttributeValueMemberN{Value: "3"}}); err != nil {
		t.Fatal(err)
	}
	item := func() map[string]types.AttributeValue {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	if num(item(), "a.b") != "3" {
		t.Fatalf("a dotted name is not one top-level attribute: %v", item())
	}
	for _, name := range []string{"x[0]", "x[1]", "x[0][0]", "a.b[0]", "x[", "x]", "[0]", "a[b]", "]"} {
		err := l.SetAttributes(ctx, map[string]types.AttributeValue{
			name: &types.AttributeValueMemberN{Value: "99"}, "checkpoint": &types.AttributeValueMemberN{Value: "7"}})
		if err == nil {
			t.Errorf("name %q accepted", name)
		}
		it := item()
		got, _ := it["x"].(*types.AttributeValueMemberL)
		if got == nil || len(got.Value) != 2 || num(map[string]types.AttributeValue{"v": got.Value[0]}, "v") != "1" ||
			num(map[string]types.AttributeValue{"v": got.Value[1]}, "v") != "2" {
			t.Errorf("name %q changed the list x: %v", name, it["x"])
		}
		if _, ok := it["checkpoint"]; ok {
			t.Errorf("name %q: the call's other attribute was written", name)
		}
		if _, ok := it[name]; ok {
			t.Errorf("name %q was written", name)
		}
	}
}
