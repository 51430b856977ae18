package inbox

import (
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// ulidAt is a ULID of t (the smallest of its millisecond).
func ulidAt(t time.Time) string {
	var u ulid.ULID
	if err := u.SetTime(ulid.Timestamp(t)); err != nil {
		panic(err)
	}
	return u.String()
}

func TestStateOfAnnouncementLaterOfMarkAndWatermarkWins(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a := &Announcement{ID: ulidAt(t0), Category: "news", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	before, after := ulidAt(t0.Add(-time.Minute)), ulidAt(t0.Add(time.Minute))
	later := ulidAt(t0.Add(2 * time.Minute))
	cases := []struct {
		name       string
		m          *AnnouncementMarks
		read, seen bool
	}{
		{"no marks", nil, false, false},
		{"a watermark before it", &AnnouncementMarks{ReadWM: before, SeenWM: before}, false, false},
		{"the read watermark after it", &AnnouncementMarks{ReadWM: after}, true, true},
		{"its category's read watermark", &AnnouncementMarks{CatReadWM: map[string]string{"news": after}}, true, true},
		{"another category's", &AnnouncementMarks{CatReadWM: map[string]string{"other": after}}, false, false},
		{"the seen watermark alone", &AnnouncementMarks{SeenWM: after}, false, true},
		{"marked unread after the watermark", &AnnouncementMarks{ReadWM: after,
			ByID: map[string]AnnouncementMark{a.ID: {Mark: MarkUnread, MarkedAt: later, SeenAt: 1}}}, false, true},
		{"marked unread before the watermark", &AnnouncementMarks{ReadWM: later,
			ByID: map[string]AnnouncementMark{a.ID: {Mark: MarkUnread, MarkedAt: after}}}, true, true},
		{"marked read", &AnnouncementMarks{ByID: map[string]AnnouncementMark{a.ID: {Mark: MarkRead, MarkedAt: after, ReadAt: 1, SeenAt: 1}}}, true, true},
	}
	for _, c := range cases {
		st := StateOfAnnouncement(a, c.m)
		if st.Read != c.read || st.Seen != c.seen {
			t.Errorf("%s: read %v seen %v, want %v %v", c.name, st.Read, st.Seen, c.read, c.seen)
		}
	}
}

func TestComposeBadgeCountsActiveUnarchivedUndeleted(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(min int, cat string) *Announcement {
		at := t0.Add(time.Duration(min) * time.Minute)
		return &Announcement{ID: ulidAt(at), Category: cat, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	}
	a, b, c, d, e := mk(1, "news"), mk(2, ""), mk(3, "news"), mk(4, ""), mk(-90, "")
	withdrawn := t0
	d.WithdrawnAt = &withdrawn
	set := &AnnouncementSet{Seq: 7, Items: []*Announcement{d, c, b, a, e}}
	own := Badge{Unread: 2, Unseen: 3, Categories: []CategoryCount{{Category: "alpha", Unread: 1, Unseen: 1}}, Marks: &AnnouncementMarks{
		ByID: map[string]AnnouncementMark{
			b.ID: {ArchivedAt: 1},
			c.ID: {Mark: MarkRead, MarkedAt: ulidAt(t0.Add(10 * time.Minute)), ReadAt: 1, SeenAt: 1},
		}}}
	now := t0.Add(5 * time.Minute)
	got := ComposeBadge(own, set, now)
	// a counts (unread, unseen, news); b archived; c read; d withdrawn; e expired.
	if got.Unread != 3 || got.Unseen != 4 || got.AnnouncementSeq != 7 {
		t.Fatalf("composed %+v", got)
	}
	want := []CategoryCount{{Category: "alpha", Unread: 1, Unseen: 1}, {Category: "news", Unread: 1, Unseen: 1}}
	if !slices.Equal(got.Categories, want) {
		t.Fatalf("categories %+v, want %+v", got.Categories, want)
	}
	// Composing again (a new set) starts from the user's own counters, not the sum.
	again := ComposeBadge(got, &AnnouncementSet{Seq: 8}, now)
	if again.Unread != 2 || again.Unseen != 3 || len(again.Categories) != 1 || own.Categories[0].Unread != 1 {
		t.Fatalf("recomposed %+v (own %+v)", again, own)
	}
}

func TestApplyAnnouncementOpIsIdempotentAndRefusesSnooze(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a := &Announcement{ID: ulidAt(t0), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	m := &AnnouncementMarks{}
	clock := ulidAt(t0.Add(time.Minute))
	now := t0.Add(time.Minute)
	step := func(op StateOp, wantChanged bool) {
		t.Helper()
		next, ch, err := ApplyAnnouncementOp(op, a, m, clock, now)
		if err != nil || ch != wantChanged {
			t.Fatalf("%v: changed %v err %v, want %v", op, ch, err, wantChanged)
		}
		m.ByID = map[string]AnnouncementMark{a.ID: next}
	}
	step(OpRead, true)
	step(OpRead, false)
	if st := StateOfAnnouncement(a, m); !st.Read || !st.Seen {
		t.Fatalf("read: %+v", st)
	}
	step(OpUnread, true)
	step(OpUnread, false)
	if st := StateOfAnnouncement(a, m); st.Read || !st.Seen {
		t.Fatalf("unread keeps it seen: %+v", st)
	}
	step(OpArchive, true)
	step(OpArchive, false)
	step(OpUnarchive, true)
	step(OpUnarchive, false)
	// Read by the watermark, then marked unread: it stays seen, as a notification does.
	m = &AnnouncementMarks{ReadWM: clock}
	clock = ulidAt(t0.Add(2 * time.Minute))
	step(OpUnread, true)
	if st := StateOfAnnouncement(a, m); st.Read || !st.Seen {
		t.Fatalf("unread after markAllRead: %+v, want unread and seen", st)
	}
	for _, op := range []StateOp{OpSnooze, OpUnsnooze} {
		if _, _, err := ApplyAnnouncementOp(op, a, m, clock, now); ErrorCode(err) != CodeBadUserInput {
			t.Fatalf("%v: %v, want BAD_USER_INPUT", op, err)
		}
	}
}

func TestAnnouncementVisibleFilters(t *testing.T) {
	a := &Announcement{Type: "news", Category: "c"}
	cases := []struct {
		st   AnnouncementState
		q    PageQuery
		want bool
	}{
		{AnnouncementState{}, PageQuery{}, true},
		{AnnouncementState{Deleted: true}, PageQuery{Archived: ArchivedInclude}, false},
		{AnnouncementState{Read: true}, PageQuery{UnreadOnly: true}, false},
		{AnnouncementState{Archived: true}, PageQuery{}, false},
		{AnnouncementState{Archived: true}, PageQuery{Archived: ArchivedOnly}, true},
		{AnnouncementState{}, PageQuery{Archived: ArchivedOnly}, false},
		{AnnouncementState{}, PageQuery{Categories: []string{"d"}}, false},
		{AnnouncementState{}, PageQuery{Types: []string{"news"}}, true},
		{AnnouncementState{}, PageQuery{Types: []string{"mention"}}, false},
	}
	for i, c := range cases {
		if got := AnnouncementVisible(a, c.st, c.q); got != c.want {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}

func TestSplitAnnouncementIDs(t *testing.T) {
	own, anns := SplitAnnouncementIDs([]string{"A", "@B", "C", "@", "@D"})
	if !slices.Equal(own, []string{"A", "C"}) || !slices.Equal(anns, []string{"B", "", "D"}) {
		t.Fatalf("own %v, announcements %v", own, anns)
	}
}
