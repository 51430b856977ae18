package store

import (
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The hand decoders of decode.go must give exactly what attributevalue.UnmarshalMap gives
// (the value and whether it fails, with the same message) on every item: those the store
// writes and odd ones a foreign writer could leave.

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// variants returns base and copies of it with one attribute changed, added or removed.
func variants(t *testing.T, base map[string]types.AttributeValue, strField, intField string) []map[string]types.AttributeValue {
	t.Helper()
	with := func(k string, v types.AttributeValue) map[string]types.AttributeValue {
		m := maps.Clone(base)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	// renamed moves an attribute to another name. (Keeping both "pk" and "PK" would make
	// attributevalue's own answer depend on map iteration order.)
	renamed := func(from, to string) map[string]types.AttributeValue {
		m := maps.Clone(base)
		if v, ok := m[from]; ok {
			delete(m, from)
			m[to] = v
		}
		return m
	}
	return []map[string]types.AttributeValue{
		base,
		{},
		with(strField, nil),
		with(strField, &types.AttributeValueMemberNULL{Value: true}),
		with(strField, n("42")), // N into a string field: attributevalue takes its text
		with(strField, &types.AttributeValueMemberBOOL{Value: true}), // an error
		with(strField, &types.AttributeValueMemberSS{Value: []string{"a"}}),
		with(intField, &types.AttributeValueMemberNULL{Value: true}),
		with(intField, s("7")), // S into an integer field: an error
		with(intField, n("1.5")),
		with(intField, n("-12")),
		with(intField, n("99999999999999999999")), // overflows int64
		with(intField, n("1e3")),
		with("somethingElse", s("x")), // unknown attribute: ignored
		renamed("pk", "PK"),           // a name matching a tag only case-insensitively
		renamed(strField, "Xyz"),      // an attribute under an unknown name
		with("expiresAt", n("1700000000")),
	}
}

func checkAgree[T any](t *testing.T, name string, items []map[string]types.AttributeValue, fast func(map[string]types.AttributeValue, *T) error) {
	t.Helper()
	for i, raw := range items {
		var want, got T
		werr := attributevalue.UnmarshalMap(raw, &want)
		gerr := fast(raw, &got)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%s item %d %v: errors differ: attributevalue %v, hand %v", name, i, raw, werr, gerr)
			continue
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Errorf("%s item %d: values differ\n attributevalue %+v\n hand           %+v", name, i, want, got)
		}
	}
}

func TestHandDecodersAgreeWithAttributevalue(t *testing.T) {
	t.Parallel()
	full := benchItem()
	full.Mark, full.MarkedAt, full.ReadAt = markRead, benchID, time.Now().UnixMilli()
	sparse := &notificationItem{PK: "T#t#U#u", SK: notifSK(benchID), EntityType: entityNotification, ID: benchID, Type: "x", CreatedAt: 1}
	var notifs []map[string]types.AttributeValue
	for _, it := range []*notificationItem{full, sparse} {
		m, err := attributevalue.MarshalMap(it)
		if err != nil {
			t.Fatal(err)
		}
		notifs = append(notifs, variants(t, m, "title", "createdAt")...)
		notifs = append(notifs, variants(t, m, "id", "readAt")...)
	}
	checkAgree(t, "notification", notifs, decodeNotification)

	var metas []map[string]types.AttributeValue
	for _, it := range []metaItem{
		{PK: "T#t#U#u", SK: skMeta, GSI1PK: "T#t#U#u#UNREAD", GSI1SK: skMeta, EntityType: entityMeta, UnreadCount: 12, ReadAllBefore: benchID, Clock: benchID, Version: 99},
		{PK: "T#t#U#u", SK: skMeta, EntityType: entityMeta},
	} {
		m, err := attributevalue.MarshalMap(it)
		if err != nil {
			t.Fatal(err)
		}
		metas = append(metas, variants(t, m, "readAllBefore", "unreadCount")...)
		metas = append(metas, variants(t, m, "clock", "version")...)
	}
	checkAgree(t, "meta", metas, decodeMeta)

	var profiles []map[string]types.AttributeValue
	for _, it := range []profileItem{
		{PK: "T#t#ACTOR#octocat", SK: skProfile, EntityType: entityActor, ActorID: "octocat", Name: "The Octocat", AvatarURL: "https://a/x.png", URL: "https://github.com/octocat"},
		{PK: "T#t#TARGET#pull_request#1", SK: skProfile, EntityType: entityTarget, TargetID: "1", Kind: "pull_request", Title: "Fix", URL: "https://x/1"},
	} {
		m, err := attributevalue.MarshalMap(it)
		if err != nil {
			t.Fatal(err)
		}
		// Profiles have no integer field: "kind" stands in, so the number cases are the
		// string field ones again.
		profiles = append(profiles, variants(t, m, "name", "kind")...)
		profiles = append(profiles, variants(t, m, "url", "title")...)
	}
	checkAgree(t, "profile", profiles, decodeProfile)
}

func BenchmarkDecodeNotificationItem(b *testing.B) {
	m, err := attributevalue.MarshalMap(benchItem())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("attributevalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var it notificationItem
			if err := attributevalue.UnmarshalMap(m, &it); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var it notificationItem
			if err := decodeNotification(m, &it); err != nil {
				b.Fatal(err)
			}
		}
	})
}
