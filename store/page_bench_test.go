package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

// The first page's work in the gateway past its DynamoDB calls (issue 21 item 7): merging
// the tenant's cached announcements into 21 items read, composing the badge, building the
// edges. Run with and without 20 active announcements, as scenario 19 of the bench does.

func benchPageInputs(anns int) ([]*notificationItem, *inbox.AnnouncementSet, time.Time) {
	now := time.Now()
	var items []*notificationItem
	set := &inbox.AnnouncementSet{Seq: int64(anns), ReadAt: now}
	k := 0
	for i := range 30 {
		at := now.Add(time.Duration(i-60) * time.Minute)
		items = append(items, &notificationItem{ID: ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String(), Type: "issue_comment.created",
			Category: "github", Title: fmt.Sprintf("n%d", i), ActorID: fmt.Sprintf("actor%d", i%7), TargetKind: "issue", TargetID: fmt.Sprint(i), CreatedAt: at.UnixMilli()})
		if i%3 != 2 && k < anns {
			k++
			a := &inbox.Announcement{ID: ulid.MustNew(ulid.Timestamp(at.Add(time.Second)), ulid.DefaultEntropy()).String(), TenantID: "acme", Type: "announcement",
				Category: "product", Title: fmt.Sprintf("a%d", k), Body: "Every project now has a dashboard.", CreatedAt: at, ExpiresAt: now.Add(24 * time.Hour),
				Actor: &inbox.Actor{ActorID: "team", Name: "The team", URL: "https://example.com/team"}}
			set.Items = append([]*inbox.Announcement{a}, set.Items...)
		}
	}
	// The Query's order (newest first), want+1 of them.
	for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
		items[i], items[j] = items[j], items[i]
	}
	return items[:21], set, now
}

func benchBuildPage(b *testing.B, anns int) {
	items, set, now := benchPageInputs(anns)
	s := &Store{cursors: newCursorKey([]byte("bench-cursor-key-0123456789abcdef"))}
	meta := metaItem{UnreadCount: 30}
	if anns == 0 {
		set = &inbox.AnnouncementSet{ReadAt: now}
	}
	b.ReportAllocs()
	for b.Loop() {
		pg := pageArgs{ix: IndexInbox, want: 20, set: set, now: now}
		p := s.buildPage(benchViewer, pg.entries(items, &meta), meta, pg)
		if len(p.Edges) != 20 {
			b.Fatal(len(p.Edges))
		}
	}
}

func BenchmarkBuildPageNoAnnouncements(b *testing.B) { benchBuildPage(b, 0) }
func BenchmarkBuildPage20Announcements(b *testing.B) { benchBuildPage(b, 20) }
