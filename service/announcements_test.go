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

// gatedStore is a setStore whose loads wait for the test's gate once entered.
type gatedStore struct {
	setStore
	entered chan struct{}
	gate    chan struct{}
}

func (s *gatedStore) LoadAnnouncements(ctx context.Context, tenant string) (*inbox.AnnouncementSet, error) {
	s.mu.Lock()
	set := s.set
	s.loads++
	s.mu.Unlock()
	s.entered <- struct{}{}
	<-s.gate
	return set, nil
}

// TestAnnouncementInvalidationsOfOtherTenantsAreNotKept: every instance hears every
// tenant's announcement changes; those of tenants it neither caches nor is reading leave
// nothing behind (a fleet of many tenants would grow the stale marks without bound), while
// an invalidation that comes during a read of an uncached tenant still makes that read's
// older set stale.
func TestAnnouncementInvalidationsOfOtherTenantsAreNotKept(t *testing.T) {
	clk := clocktest.New()
	st := &gatedStore{setStore: setStore{set: &inbox.AnnouncementSet{Seq: 1}}, entered: make(chan struct{}), gate: make(chan struct{})}
	a := service.NewAnnouncements(st, service.AnnouncementOptions{Now: clk.Now, MaxAge: time.Hour, Tenants: 8})
	for i := range 50 {
		a.Invalidate("tenant"+string(rune('a'+i%26))+string(rune('a'+i/26)), 7)
	}
	if n := a.StaleMarks(); n != 0 {
		t.Fatalf("%d stale marks kept for tenants never read here, want 0", n)
	}

	ctx := context.Background()
	done := make(chan *inbox.AnnouncementSet)
	go func() {
		set, err := a.Announcements(ctx, "acme", false)
		if err != nil {
			t.Error(err)
		}
		done <- set
	}()
	<-st.entered // the read of seq 1 runs
	clk.Advance(time.Millisecond)
	a.Invalidate("acme", 2) // a create committed meanwhile
	st.mu.Lock()
	st.set = &inbox.AnnouncementSet{Seq: 2}
	st.mu.Unlock()
	close(st.gate)
	if set := <-done; set.Seq != 1 {
		t.Fatalf("the first read answered seq %d", set.Seq)
	}
	go func() { <-st.entered }()
	set, err := a.Announcements(ctx, "acme", false)
	if err != nil || set.Seq != 2 {
		t.Fatalf("after the invalidation during the read: seq %d, %v; want the set read again (2)", set.Seq, err)
	}
	if n := a.StaleMarks(); n != 0 {
		t.Fatalf("%d stale marks after the read answered them", n)
	}
}
