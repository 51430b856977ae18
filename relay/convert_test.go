package relay

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/inboxgw/gateway/inbox"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

const pk = "T#acme#U#dora"

func notif(extra map[string]types.AttributeValue) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{"pk": s(pk), "sk": s("N#01J0000000000000000000000A"), "entityType": s("Notification"),
		"id": s("01J0000000000000000000000A"), "type": s("mention"), "createdAt": n("1700000000000")}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func meta(extra map[string]types.AttributeValue) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{"pk": s(pk), "sk": s("N~META"), "entityType": s("InboxMeta"),
		"gsi1pk": s(pk + "#UNREAD"), "gsi1sk": s("N~META")}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestRecordChangeKinds: each record shape becomes the change (kind, ids, badge) the
// relay documents.
func TestRecordChangeKinds(t *testing.T) {
	v := inbox.Viewer{TenantID: "acme", UserID: "dora"}
	ids := []string{"01J0000000000000000000000A"}
	ttl := &types.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")}
	cases := []struct {
		name     string
		rec      types.Record
		ok       bool
		kind     inbox.EventKind
		version  int64
		wantBadg *inbox.Badge
	}{
		{"insert", types.Record{EventName: "INSERT", Dynamodb: &types.StreamRecord{NewImage: notif(nil)}}, true, inbox.EventAdded, 0, nil},
		{"delete", types.Record{EventName: "REMOVE", Dynamodb: &types.StreamRecord{OldImage: notif(nil)}}, true, inbox.EventDeleted, 0, nil},
		{"ttl", types.Record{EventName: "REMOVE", UserIdentity: ttl, Dynamodb: &types.StreamRecord{OldImage: notif(nil)}}, true, inbox.EventExpired, 0, nil},
		{"archive", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{OldImage: notif(nil),
			NewImage: notif(map[string]types.AttributeValue{"archivedAt": n("1")})}}, true, inbox.EventArchived, 0, nil},
		{"unarchive", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{OldImage: notif(map[string]types.AttributeValue{"archivedAt": n("1")}),
			NewImage: notif(nil)}}, true, inbox.EventUnarchived, 0, nil},
		{"snooze", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{OldImage: notif(nil),
			NewImage: notif(map[string]types.AttributeValue{"snoozedUntil": n("5")})}}, true, inbox.EventSnoozed, 0, nil},
		{"wake, marked unread too", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{
			OldImage: notif(map[string]types.AttributeValue{"snoozedUntil": n("5"), "mark": s("R"), "markedAt": s("01A")}),
			NewImage: notif(map[string]types.AttributeValue{"mark": s("U"), "markedAt": s("01B")})}}, true, inbox.EventWoke, 0, nil},
		{"read (and seen)", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{OldImage: notif(nil),
			NewImage: notif(map[string]types.AttributeValue{"mark": s("R"), "markedAt": s("01A"), "seenAt": n("1")})}}, true, inbox.EventRead, 0, nil},
		{"unread again", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{
			OldImage: notif(map[string]types.AttributeValue{"mark": s("U"), "markedAt": s("01A")}),
			NewImage: notif(map[string]types.AttributeValue{"mark": s("U"), "markedAt": s("01B")})}}, true, inbox.EventUnread, 0, nil},
		{"seen", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{OldImage: notif(nil),
			NewImage: notif(map[string]types.AttributeValue{"seenAt": n("1")})}}, true, inbox.EventSeen, 0, nil},
		{"sweep: nothing visible", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{
			OldImage: notif(map[string]types.AttributeValue{"gsi1pk": s(pk + "#UNREAD")}), NewImage: notif(nil)}}, false, "", 0, nil},
		{"meta", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{
			OldImage: meta(map[string]types.AttributeValue{"version": n("3"), "unreadCount": n("1")}),
			NewImage: meta(map[string]types.AttributeValue{"version": n("4"), "unreadCount": n("2"), "unseenCount": n("3"),
				"cu#social": n("2"), "cs#social": n("2"), "cs#billing": n("1"), "cu#billing": n("0"), "cu#old": n("0"), "cs#old": n("0")})}},
			true, inbox.EventNone, 4, &inbox.Badge{Unread: 2, Unseen: 3, Version: 4, Categories: []inbox.CategoryCount{
				{Category: "billing", Unseen: 1}, {Category: "social", Unread: 2, Unseen: 2}},
				// The user's announcement marks (none): what a badge stream composes with.
				Marks: &inbox.AnnouncementMarks{}}},
		{"meta without a raised version", types.Record{EventName: "MODIFY", Dynamodb: &types.StreamRecord{
			OldImage: meta(map[string]types.AttributeValue{"version": n("4"), "unreadCount": n("1")}),
			NewImage: meta(map[string]types.AttributeValue{"version": n("4"), "unreadCount": n("2")})}}, true, inbox.EventNone, 0, &inbox.Badge{}},
		{"relay lease", types.Record{EventName: "INSERT", Dynamodb: &types.StreamRecord{NewImage: map[string]types.AttributeValue{
			"pk": s("RELAY#LEASE"), "sk": s("LEASE"), "entityType": s("RelayLease")}}}, false, "", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok, err := recordChange(&tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, c)
			}
			if !ok {
				return
			}
			if c.Viewer != v || c.Kind != tc.kind || c.Version != tc.version {
				t.Fatalf("change %+v, want kind %q version %d", c, tc.kind, tc.version)
			}
			if tc.wantBadg != nil {
				if !reflect.DeepEqual(c.Badge, *tc.wantBadg) {
					t.Fatalf("badge %+v, want %+v", c.Badge, *tc.wantBadg)
				}
				return
			}
			if !reflect.DeepEqual(c.IDs, ids) {
				t.Fatalf("ids %v", c.IDs)
			}
			if (c.Notification != nil) != (tc.kind == inbox.EventAdded) {
				t.Fatalf("notification %+v for kind %s", c.Notification, c.Kind)
			}
		})
	}
}

// TestImageConvertsEveryType: a stream image of every attribute type, nested maps and
// lists included, becomes the same image in the dynamodb package's types (what the store
// decodes); an absent image stays absent; a value of a type the SDK does not know makes
// the record undecodable (an error the relay logs) rather than an image missing that
// attribute.
func TestImageConvertsEveryType(t *testing.T) {
	in := map[string]types.AttributeValue{
		"s": s("text"), "n": n("42"), "b": &types.AttributeValueMemberB{Value: []byte{1, 2}},
		"bool": &types.AttributeValueMemberBOOL{Value: true}, "null": &types.AttributeValueMemberNULL{Value: true},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{3}, {4}}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x"), n("1"),
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"deep": &types.AttributeValueMemberBOOL{}}}}},
		}},
	}
	want := map[string]ddbtypes.AttributeValue{
		"s": &ddbtypes.AttributeValueMemberS{Value: "text"}, "n": &ddbtypes.AttributeValueMemberN{Value: "42"},
		"b": &ddbtypes.AttributeValueMemberB{Value: []byte{1, 2}}, "bool": &ddbtypes.AttributeValueMemberBOOL{Value: true},
		"null": &ddbtypes.AttributeValueMemberNULL{Value: true}, "ss": &ddbtypes.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns": &ddbtypes.AttributeValueMemberNS{Value: []string{"1", "2"}}, "bs": &ddbtypes.AttributeValueMemberBS{Value: [][]byte{{3}, {4}}},
		"m": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{
			"l": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{&ddbtypes.AttributeValueMemberS{Value: "x"},
				&ddbtypes.AttributeValueMemberN{Value: "1"},
				&ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"deep": &ddbtypes.AttributeValueMemberBOOL{}}}}},
		}},
	}
	got, err := image(in)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("image = %#v, %v; want %#v", got, err, want)
	}
	if got, err := image(nil); got != nil || err != nil {
		t.Fatalf("image(nil) = %#v, %v; want nil", got, err)
	}

	unknown := notif(map[string]types.AttributeValue{"future": &types.UnknownUnionMember{Tag: "X"}})
	if _, err := image(unknown); err == nil {
		t.Fatal("an image with a value of an unknown type converted")
	}
	if _, ok, err := recordChange(&types.Record{EventName: "INSERT", Dynamodb: &types.StreamRecord{NewImage: unknown}}); err == nil || ok {
		t.Fatalf("a record with a value of an unknown type: ok %v, err %v; want an error", ok, err)
	}
}
