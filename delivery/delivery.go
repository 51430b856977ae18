package delivery

import (
	"context"
	"fmt"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// Store is what the handler needs of the store (*store.Store implements it).
type Store interface {
	// SkipDelivery marks a QUEUED delivery record (key: inbox.DeliveryKey) SKIPPED with
	// reason; false when it was not QUEUED (already handled) or is gone.
	SkipDelivery(ctx context.Context, tenantID, notificationID, key, reason string) (bool, error)
}

// Handler handles store.TaskDeliver tasks (see the package doc). It is idempotent: a
// task run twice (after a crash or a lease takeover) finds its record handled and
// writes nothing.
type Handler struct {
	st Store
}

// NewHandler returns the deliver handler over st.
func NewHandler(st Store) *Handler { return &Handler{st: st} }

// Register registers h for store.TaskDeliver on s (before s.Run).
func (h *Handler) Register(s *sched.Scheduler) { s.Register(store.TaskDeliver, h) }

// Handle delivers task t: t.Viewer's tenant, notification t.Ref, record key t.Token
// (inbox.DeliveryKey). With no provider for any channel, it marks the record SKIPPED
// (inbox.ReasonNoProvider). A task without a tenant, notification or valid key is
// malformed and dropped (nil: retrying cannot mend it). Errors are the store's, retried
// by the scheduler.
func (h *Handler) Handle(ctx context.Context, t inbox.Task) error {
	if _, _, err := inbox.ParseDeliveryKey(t.Token); t.Viewer.TenantID == "" || t.Ref == "" || err != nil {
		return nil
	}
	if _, err := h.st.SkipDelivery(ctx, t.Viewer.TenantID, t.Ref, t.Token, inbox.ReasonNoProvider); err != nil {
		return fmt.Errorf("delivery: %s of %s: %w", t.Token, t.Ref, err)
	}
	return nil
}
