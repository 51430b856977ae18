package resolvers

import (
	"context"
	"time"

	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
)

// deliveries resolves Notification.deliveries: ONE Query of the notification's status
// partition (store.Status, AP22). The records are the viewer's only: a status whose
// user is not the viewer answers none, as one that does not exist (a notification is
// only ever resolved from the viewer's own items, so this guards against an id that
// reaches another user's status, and never tells whether it exists).
func (r *notificationResolver) deliveries(ctx context.Context, obj *inbox.Notification) ([]*model.Delivery, error) {
	v, err := viewer(ctx)
	if err != nil {
		return nil, err
	}
	st, err := r.Store.Status(ctx, v.TenantID, obj.ID)
	switch {
	case inbox.ErrorCode(err) == inbox.CodeNotFound:
		return []*model.Delivery{}, nil
	case err != nil:
		return nil, err
	case st.UserID != v.UserID:
		return []*model.Delivery{}, nil
	}
	out := make([]*model.Delivery, 0, len(st.Channels))
	for _, c := range st.Channels {
		d := &model.Delivery{Channel: model.Channel(c.Channel), Status: model.DeliveryStatus(c.Status),
			Provider: optString(c.Provider), Attempts: c.Attempts, UpdatedAt: deliveryUpdatedAt(st, c), Error: optString(c.Error),
			Key: c.Key, DeviceID: optString(c.DeviceID), ProviderMessageID: optString(c.ProviderMessageID),
			SentAt: optDeliveryTime(c.SentAt), DeliveredAt: optDeliveryTime(c.DeliveredAt), OpenedAt: optDeliveryTime(c.OpenedAt),
			DeferredUntil: optDeliveryTime(c.DeferredUntil)}
		if d.Key == "" {
			d.Key = c.Channel // a record written before records kept their key: one per channel
		}
		if c.Reason != "" {
			d.Error = &c.Reason
		}
		out = append(out, d)
	}
	return out, nil
}

// deliveryUpdatedAt is when record c last changed: its UpdatedAt, or for a record
// written before records kept one, its latest known time (delivered, sent, else the
// notification's creation).
func deliveryUpdatedAt(st inbox.NotificationStatus, c inbox.ChannelStatus) time.Time {
	at := st.CreatedAt
	for _, t := range []time.Time{c.UpdatedAt, c.SentAt, c.DeliveredAt, c.OpenedAt} {
		if t.After(at) {
			at = t
		}
	}
	return at
}

// optDeliveryTime returns &t, or nil for the zero time (a record's time not reached).
func optDeliveryTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// optString returns &s, or nil for "".
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
