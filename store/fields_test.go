package store

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fullItem is a notification item with every field set (by kind): a field added to
// notificationItem that the fast decoder or toNotification forgets fails the tests below.
func fullItem(t *testing.T) *notificationItem {
	t.Helper()
	it := &notificationItem{}
	v := reflect.ValueOf(it).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case f.Type() == reflect.TypeOf([]actionItem(nil)):
			f.Set(reflect.ValueOf([]actionItem{{Label: "Open", URL: "https://example.com/a"}, {Label: "Mute", URL: "https://example.com/m"}}))
		case f.Type() == reflect.TypeOf([]activityItem(nil)):
			f.Set(reflect.ValueOf([]activityItem{{ActorID: "ann", ActorName: "Ann", Data: `{"n":1}`, CreatedAt: 1_700_000_000_001}, {ActorID: "bob", CreatedAt: 1_700_000_000_002}}))
		case f.Kind() == reflect.Int:
			f.SetInt(int64(100 + i))
		case f.Kind() == reflect.String:
			f.SetString(name + "-value")
		case f.Kind() == reflect.Int64:
			f.SetInt(1_700_000_000_000 + int64(i))
		default:
			t.Fatalf("fullItem: field %s of kind %s: teach this test its values", name, f.Kind())
		}
	}
	it.ID = benchID
	it.Mark, it.MarkedAt, it.Payload = markRead, benchID, `{"a":1}`
	return it
}

// The fast decoder takes an item with every field (it does not fall back to
// attributevalue) and gives what attributevalue gives.
func TestFastDecoderKnowsEveryField(t *testing.T) {
	it := fullItem(t)
	raw, err := attributevalue.MarshalMap(it)
	if err != nil {
		t.Fatal(err)
	}
	var got notificationItem
	if !fastNotification(raw, &got) {
		t.Fatalf("the fast decoder does not know some attribute of %v", slices.Sorted(maps.Keys(raw)))
	}
	if !reflect.DeepEqual(&got, it) {
		t.Fatalf("fast decoder:\n got  %+v\n want %+v", got, *it)
	}
	checkAgree(t, "full notification", []map[string]types.AttributeValue{raw}, decodeNotification)

	m := map[string]types.AttributeValue{
		"pk": s("T#t#U#u"), "sk": s(skMeta), "entityType": s(entityMeta), "unreadCount": n("3"), "unseenCount": n("4"),
		"readAllBefore": s(benchID), "seenAllBefore": s(benchID), "clock": s(benchID), "version": n("9"),
		catUnread + "work": n("2"), catUnseen + "work": n("3"), catReadWM + "work": s(benchID), catSeenWM + "news": s(benchID),
	}
	var meta metaItem
	if !fastMeta(m, &meta) {
		t.Fatal("the fast META decoder does not take per-category attributes")
	}
	if err := decodeMeta(m, &meta); err != nil {
		t.Fatal(err)
	}
	if w := meta.cat("work"); w.Unread != 2 || w.Unseen != 3 || w.ReadWM != benchID || !w.HasUnread || !w.HasUnseen {
		t.Fatalf("category work = %+v", w)
	}
	if nw := meta.cat("news"); nw.SeenWM != benchID || nw.HasUnread {
		t.Fatalf("category news = %+v", nw)
	}
	if b := meta.badge(); len(b.Categories) != 1 || b.Categories[0].Category != "work" || b.Unseen != 4 {
		t.Fatalf("badge = %+v", b)
	}
}

// toNotification fills every field of inbox.Notification from a full item.
func TestToNotificationFillsEveryField(t *testing.T) {
	n := toNotification(fullItem(t), nil)
	v := reflect.ValueOf(n).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Kind" || name == "Embedded" {
			// An announcement's alone (inbox.AnnouncementNotification): a user's own
			// notification is of no kind (PERSONAL) and its actor and target are profiles.
			if !v.Field(i).IsZero() {
				t.Errorf("toNotification sets the announcement's %s", name)
			}
			continue
		}
		if v.Field(i).IsZero() {
			t.Errorf("toNotification leaves %s empty", name)
		}
	}
	if len(n.Actions) != 2 || n.Actions[1].URL != "https://example.com/m" {
		t.Fatalf("actions = %+v", n.Actions)
	}
}
