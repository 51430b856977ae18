package store

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

// Item marshalling runs for every notification written (MarshalMap) and every one read
// (UnmarshalMap + toNotification): 20 of each on every inbox page.

func benchItem() *notificationItem {
	v := inbox.Viewer{TenantID: "acme", UserID: "u00042"}
	id := benchID
	return &notificationItem{
		PK: userPK(v), SK: notifSK(id), GSI1PK: unreadPK(v), GSI1SK: notifSK(id), EntityType: entityNotification,
		ID: id, Type: "review_requested", Category: "github", Title: "octocat requested your review on #1347",
		Body: "Could you take a look at the latest changes?", ActorID: "octocat", TargetKind: "pull_request",
		TargetID: "1347", Payload: `{"repo":"inboxgw/gateway","number":1347}`, CreatedAt: time.Now().UnixMilli(),
	}
}

var (
	sinkItem  map[string]types.AttributeValue
	sinkNotif *inbox.Notification
)

func BenchmarkMarshalNotificationItem(b *testing.B) {
	it := benchItem()
	b.ReportAllocs()
	for b.Loop() {
		m, err := attributevalue.MarshalMap(it)
		if err != nil {
			b.Fatal(err)
		}
		sinkItem = m
	}
}

func BenchmarkUnmarshalNotificationItem(b *testing.B) {
	raw, err := attributevalue.MarshalMap(benchItem())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		it := new(notificationItem)
		if err := attributevalue.UnmarshalMap(raw, it); err != nil {
			b.Fatal(err)
		}
		sinkNotif = toNotification(it, nil)
	}
}

func BenchmarkToNotification(b *testing.B) {
	it := benchItem()
	b.Run("unread", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkNotif = toNotification(it, nil)
		}
	})
	b.Run("read-by-watermark", func(b *testing.B) {
		wm := increment(ulid.MustParseStrict(it.ID)).String()
		b.ReportAllocs()
		for b.Loop() {
			sinkNotif = toNotification(it, &metaItem{ReadAllBefore: wm})
		}
	})
}

// BenchmarkBuildPage is the per-page work after the Query: decode-free conversion of a
// page of 20 items into edges with cursors.
func BenchmarkBuildPage(b *testing.B) {
	st := &Store{cursors: randomCursorKey()}
	items := make([]*notificationItem, 21)
	for i := range items {
		items[i] = benchItem()
	}
	b.ReportAllocs()
	for b.Loop() {
		pg := pageArgs{ix: IndexInbox, want: 20, now: time.Now()}
		meta := metaItem{UnreadCount: 3}
		p := st.buildPage(benchViewer, pg.entries(append([]*notificationItem(nil), items...), &meta), meta, pg)
		sinkNotif = p.Edges[0].Node
	}
}
