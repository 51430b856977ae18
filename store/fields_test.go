package store

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/fill"
)

// One change for one new field: each item struct with EVERY field set (by reflection, so
// a field added later is covered too) goes through the hand-written fast decoder, which
// must take it (not fall back to attributevalue) and return it unchanged.
func TestFastDecodersKnowEveryField(t *testing.T) {
	t.Parallel()
	checkFast(t, &notificationItem{}, func(m map[string]types.AttributeValue, dst *notificationItem) bool { return fastNotification(m, dst) })
	checkFast(t, &metaItem{}, func(m map[string]types.AttributeValue, dst *metaItem) bool { return fastMeta(m, dst) })
	checkFast(t, &profileItem{}, func(m map[string]types.AttributeValue, dst *profileItem) bool { return fastProfile(m, dst) })
}

func checkFast[T any](t *testing.T, full *T, fast func(map[string]types.AttributeValue, *T) bool) {
	t.Helper()
	name := reflect.TypeFor[T]().Name()
	if err := fill.Fill(full); err != nil {
		t.Fatal(err)
	}
	m, err := attributevalue.MarshalMap(full)
	if err != nil {
		t.Fatal(err)
	}
	if n := reflect.TypeFor[T]().NumField(); len(m) != n {
		t.Fatalf("%s: %d attributes for %d fields", name, len(m), n)
	}
	for k, av := range m {
		var one T
		if !fast(map[string]types.AttributeValue{k: av}, &one) {
			t.Errorf("%s: the fast decoder (store/decode.go) does not know attribute %q: every item with it takes the slow path", name, k)
		}
	}
	var got T
	if !fast(m, &got) {
		t.Fatalf("%s: the fast decoder refused a full item", name)
	}
	if !reflect.DeepEqual(&got, full) {
		t.Fatalf("%s: fast decoder lost fields:\n got %+v\nwant %+v", name, got, *full)
	}
}

// Every field of inbox.Notification survives the way through the table: the item an
// outside writer (and the store's send) writes, the decoder, and the conversion back to
// the domain type. A field added to inbox.Notification but forgotten in the item struct,
// outsideItem or toNotification fails here. Read and ReadAt are derived from the marks
// (an outside write is unread).
func TestNotificationFieldsRoundTripThroughTheItem(t *testing.T) {
	t.Parallel()
	var n inbox.Notification
	if err := fill.Fill(&n); err != nil {
		t.Fatal(err)
	}
	n.ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	m, err := OutsideNotificationItem(v, n)
	if err != nil {
		t.Fatal(err)
	}
	var it notificationItem
	if err := decodeNotification(m, &it); err != nil {
		t.Fatal(err)
	}
	got := toNotification(&it, "")
	want := n
	want.Read, want.ReadAt = false, nil
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("through the item:\n got %+v\nwant %+v", *got, want)
	}
	if got.Payload == nil || string(got.Payload) != string(n.Payload) {
		t.Fatalf("payload %s, want %s", got.Payload, n.Payload)
	}
}
