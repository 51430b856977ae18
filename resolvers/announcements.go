package resolvers

import (
	"context"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
)

// announcer returns the caller's tenant and the announcement service, once the token has
// the send scope: FORBIDDEN without it, UNAVAILABLE on a gateway without the service.
func (r *Resolver) announcer(ctx context.Context) (string, Announcer, error) {
	c, err := claims(ctx)
	if err != nil {
		return "", nil, err
	}
	if !c.HasScope(auth.ScopeSend) {
		return "", nil, inbox.Errorf(inbox.CodeForbidden, "announcing needs the scope %s", auth.ScopeSend)
	}
	if r.Announcements == nil {
		return "", nil, inbox.Errorf(inbox.CodeUnavailable, "announcements are not available on this gateway")
	}
	return c.TenantID, r.Announcements, nil
}

// sendAnnouncement creates the caller's tenant's announcement in (sendAnnouncement).
func (r *Resolver) sendAnnouncement(ctx context.Context, in model.SendAnnouncementInput) (*model.SendAnnouncementPayload, error) {
	tenant, svc, err := r.announcer(ctx)
	if err != nil {
		return nil, err
	}
	wctx, cancel, err := committing(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	req, _ := sendRequest(model.SendNotificationInput{IdempotencyKey: in.IdempotencyKey, Type: in.Type, Category: in.Category,
		Title: in.Title, Body: in.Body, Payload: in.Payload, Actor: in.Actor, Target: in.Target, Actions: in.Actions,
		Template: in.Template, Data: in.Data, Locale: in.Locale})
	cr := service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: req.IdempotencyKey, Type: req.Type,
		Category: req.Category, Title: req.Title, Body: req.Body, Payload: req.Payload, Actor: req.Actor, Target: req.Target,
		Actions: req.Actions}, Template: req.Template, Data: req.Data, Locale: req.Locale}
	if in.ExpiresAt != nil {
		cr.Input.ExpiresAt = *in.ExpiresAt
	}
	a, created, err := svc.Create(wctx, tenant, cr)
	if err != nil {
		return nil, err
	}
	return &model.SendAnnouncementPayload{Announcement: a, Duplicate: !created}, nil
}

// withdrawAnnouncement withdraws the caller's tenant's announcement id.
func (r *Resolver) withdrawAnnouncement(ctx context.Context, id string) (*inbox.Announcement, error) {
	tenant, svc, err := r.announcer(ctx)
	if err != nil {
		return nil, err
	}
	wctx, cancel, err := committing(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	return svc.Withdraw(wctx, tenant, id)
}

// notificationKind is Notification.kind.
func notificationKind(n *inbox.Notification) model.NotificationKind {
	if n.Kind == inbox.KindAnnouncement {
		return model.NotificationKindAnnouncement
	}
	return model.NotificationKindPersonal
}

// announcementStatus is Announcement.status, now.
func announcementStatus(a *inbox.Announcement) string { return a.Status(time.Now()) }
