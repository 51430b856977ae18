package service_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/service"
)

// setStore is an AnnouncementStore whose set the test sets; it counts the set's reads.
type setStore struct {
	mu    sync.Mutex
	set   *inbox.AnnouncementSet
	loads int
}

func (s *setStore) NewID() string { return "01KANN0000000000000000000" }
func (s *setStore) CreateAnnouncement(context.Context, string, inbox.AnnouncementInput, string, string, int64) (*inbox.Announcement, bool, error) {
	panic("not used")
}
func (s *setStore) Announcement(context.Context, string, string) (*inbox.Announcement, error) {
	panic("not used")
}
func (s *setStore) WithdrawAnnouncement(context.Context, string, string) (*inbox.Announcement, bool, error) {
	panic("not used")
}
func (s *setStore) ReplayAnnouncement(context.Context, string, string, string) (*inbox.Announcement, bool, error) {
	panic("not used")
}
func (s *setStore) LoadAnnouncements(context.Context, string) (*inbox.AnnouncementSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads++
	return s.set, nil
}

// TestAnnouncementCacheReadsOncePerChange: a tenant's set is read once, then served from
// the cache until an invalidation names a newer sequence, InvalidateAll (the broker came
// back) or MaxAge; an invalidation of a sequence the cache has already reads nothing.
func TestAnnouncementCacheReadsOncePerChange(t *testing.T) {
	clk := clocktest.New()
	st := &setStore{set: &inbox.AnnouncementSet{Seq: 3}}
	a := service.NewAnnouncements(st, service.AnnouncementOptions{Now: clk.Now, MaxAge: time.Minute})
	ctx := context.Background()
	read := func(want int) {
		t.Helper()
		for range 3 {
			if _, err := a.Announcements(ctx, "acme", false); err != nil {
				t.Fatal(err)
			}
		}
		if st.loads != want {
			t.Fatalf("%d reads of the set, want %d", st.loads, want)
		}
	}
	read(1)
	a.Invalidate("acme", 3) // the cache has it
	read(1)
	st.set = &inbox.AnnouncementSet{Seq: 4}
	a.Invalidate("acme", 4)
	read(2)
	clk.Advance(time.Millisecond)
	a.InvalidateAll()
	clk.Advance(time.Millisecond)
	read(3)
	clk.Advance(time.Minute)
	read(4)
	if got := a.Cached("acme"); got == nil || got.Seq != 4 {
		t.Fatalf("cached %+v", got)
	}
}
