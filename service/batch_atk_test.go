package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
)

// TestBatchCloseAfterWatermarkKeepsItsID: attack: a markAllSeen between the end of a
// batch's window and its close (the scheduler's lag, a crash) puts the inbox's
// watermark above the batch's pre-assigned id (a ULID of its close time). The close must
// still write the notification under the id every joined send was answered with, and
// its status must leave `batching`.
func TestBatchCloseAfterWatermarkKeepsItsID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ctx := context.Background()
	b := inbox.Batch{Key: "wm", Window: time.Second}
	sent, err := svc.Send(ctx, tenant, batched("wm1", []string{"ann"}, "bob", b))
	if err != nil {
		t.Fatal(err)
	}
	id := sent.Result.NotificationIDs[0]
	time.Sleep(1200 * time.Millisecond) // the window ends; the close task has not run yet
	v := inbox.Viewer{TenantID: tenant, UserID: "ann"}
	if _, err := e.st.MarkAllSeen(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.MarkAll(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	closeNow(t, svc, "ann", "wm", id)
	n := e.onlyNotification(t, "ann")
	if n.ID != id {
		t.Errorf("the close wrote %s, but the sends were answered %s", n.ID, id)
	}
	if st, err := e.st.Status(ctx, tenant, id); err != nil || st.Status == inbox.NotificationBatching {
		t.Errorf("status of the answered id after the close: %+v, %v", st, err)
	}
	if _, unread := e.inboxOf(t, "ann"); unread != 1 {
		t.Errorf("unread %d after the close, want 1", unread)
	}
	// A markAllRead after the close reads it, exactly.
	if _, err := e.st.MarkAll(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	if _, unread := e.inboxOf(t, "ann"); unread != 0 {
		t.Errorf("unread %d after markAllRead, want 0", unread)
	}
}
