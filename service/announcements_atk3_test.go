package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/service"
)

// withdrawStore is a gatedStore whose withdrawals succeed.
type withdrawStore struct{ gatedStore }

func (s *withdrawStore) WithdrawAnnouncement(_ context.Context, tenant, id string) (*inbox.Announcement, bool, error) {
	return &inbox.Announcement{ID: id, TenantID: tenant}, true, nil
}

// TestAnnouncementInvalidationDuringAWithdrawalsReadIsKept: a withdrawal on an instance
// that does not cache the tenant reads the set to publish its sequence (republish) and
// caches what it read; an invalidation of a newer sequence (a create on another instance)
// that comes while that read runs must make the set it caches stale, as it does for any
// other read of the tenant, not be dropped for a tenant "neither cached nor loading" and
// leave the older set served until MaxAge.
func TestAnnouncementInvalidationDuringAWithdrawalsReadIsKept(t *testing.T) {
	clk := clocktest.New()
	st := &withdrawStore{gatedStore{setStore: setStore{set: &inbox.AnnouncementSet{Seq: 5}}, entered: make(chan struct{}), gate: make(chan struct{})}}
	a := service.NewAnnouncements(st, service.AnnouncementOptions{Now: clk.Now, MaxAge: time.Hour})
	ctx := context.Background()
	done := make(chan error)
	go func() {
		_, err := a.Withdraw(ctx, "acme", "01KANN0000000000000000000")
		done <- err
	}()
	<-st.entered // the withdrawal's read of seq 5 runs
	clk.Advance(time.Millisecond)
	a.Invalidate("acme", 6) // another instance's create committed meanwhile
	st.mu.Lock()
	st.set = &inbox.AnnouncementSet{Seq: 6}
	st.mu.Unlock()
	close(st.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() {
		for range st.entered {
		}
	}()
	set, err := a.Announcements(ctx, "acme", false)
	if err != nil {
		t.Fatal(err)
	}
	if set.Seq != 6 {
		t.Fatalf("after an invalidation of seq 6 during the withdrawal's read: the cache serves seq %d, want 6", set.Seq)
	}
}
