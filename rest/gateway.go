package rest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/routing"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/tmpl"
)

// AcceptFunc persists a send under the tenant's idempotency key and answers the 202 body
// (rest.Backend.Accept's shape): the send service's, mapped onto the document's types.
type AcceptFunc func(ctx context.Context, tenant, key string, req gen.SendRequest) (res gen.Accepted, replayed bool, err error)

// GatewayStore is what Gateway needs of the store beyond feeds and preferences
// (*store.Store has it).
type GatewayStore interface {
	InboxStore
	Status(ctx context.Context, tenantID, notificationID string) (inbox.NotificationStatus, error)
	UpdateSegment(ctx context.Context, tenantID, id string, add, remove []string) (store.SegmentChange, error)
	SegmentCount(ctx context.Context, tenantID, id string) (int, error)
	GetSegment(ctx context.Context, tenantID, id string, limit int, cursor string) (store.SegmentPage, error)
	PutUserProfile(ctx context.Context, v inbox.Viewer, p inbox.UserProfile) (inbox.UserProfile, error)
	PutTenantSettings(ctx context.Context, tenantID string, set inbox.TenantSettings) (inbox.TenantSettings, error)
	ConfiguredPreferences(tenantID string) inbox.TenantPreferences
	RegisterDevice(ctx context.Context, v inbox.Viewer, token, platform string) (inbox.Device, error)
	UnregisterDevice(ctx context.Context, v inbox.Viewer, tokenOrID string) (bool, error)
	ApplyProviderEvent(ctx context.Context, ev inbox.ProviderEvent) (bool, error)
	UserProfile(ctx context.Context, v inbox.Viewer) (inbox.UserProfile, error)
	TenantSettings(ctx context.Context, tenantID string) (inbox.TenantSettings, error)
	AddSuppression(ctx context.Context, tenantID string, sup inbox.Suppression) (bool, error)
	RemoveSuppression(ctx context.Context, tenantID, channel, address string) (bool, error)
	Suppressions(ctx context.Context, tenantID, channel, cursor string, limit int) ([]inbox.Suppression, string, error)
}

// Gateway is the service API's Backend over the gateway's pieces, and the mapping of the
// document's types onto theirs: the store (feeds, preferences, status, segments, user
// profiles, tenant settings, devices, provider events), the templates service and
// broadcasts, announcements. Sends go to Sends (NewGateway sets it to the send service's Accept); while
// it is nil, POST /v1/notifications answers UNAVAILABLE (503). app.Build composes it.
type Gateway struct {
	Store      GatewayStore
	Templates  *tmpl.Service
	Broadcasts *service.Broadcasts
	// Sends accepts POST /v1/notifications; nil: UNAVAILABLE.
	Sends AcceptFunc
	// Announcements serves /v1/announcements; nil: UNAVAILABLE.
	Announcements *service.Announcements
}

var _ Backend = (*Gateway)(nil)

// NewGateway is the Backend over st, the templates service, the broadcasts (whose shard
// runs are the scheduler's), the send service svc, which accepts every send, and the
// tenants' announcements ann.
func NewGateway(st GatewayStore, templates *tmpl.Service, broadcasts *service.Broadcasts, svc *service.Service, ann *service.Announcements) *Gateway {
	return &Gateway{Store: st, Templates: templates, Broadcasts: broadcasts, Sends: serviceAccept(svc), Announcements: ann}
}

// serviceAccept maps POST /v1/notifications onto the send service's Accept: the 202 body
// (one id per recipient; notificationId too for a send to recipientUserId) and whether it
// is a replay. Errors are the service's (CONFLICT for a key reused with another body).
func serviceAccept(svc *service.Service) AcceptFunc {
	return func(ctx context.Context, tenant, key string, req gen.SendRequest) (gen.Accepted, bool, error) {
		r := service.SendRequest{IdempotencyKey: key, Type: req.Type, Category: deref(req.Category), Title: deref(req.Title),
			Body: deref(req.Body), Segment: deref(req.Segment), Template: deref(req.Template), Locale: deref(req.Locale),
			GroupKey: deref(req.GroupKey), SendAt: deref(req.SendAt), ExpiresAt: deref(req.ExpiresAt),
			Priority: service.Priority(deref(req.Priority)), IncludeActor: deref(req.IncludeActor)}
		if req.Throttle != nil {
			t, err := routing.ParseThrottle(deref(req.Throttle.Key), req.Throttle.Limit, req.Throttle.Window)
			if err != nil {
				return gen.Accepted{}, false, err
			}
			r.Throttle = &t
		}
		if req.Batch != nil {
			b, err := routing.ParseBatch(deref(req.Batch.Key), req.Batch.Window, req.Batch.MaxItems)
			if err != nil {
				return gen.Accepted{}, false, err
			}
			r.Batch = &b
		}
		single := req.RecipientUserId != nil
		switch {
		case single:
			r.Recipients = []string{*req.RecipientUserId}
		case req.Recipients != nil:
			r.Recipients = *req.Recipients
		}
		if req.Data != nil {
			// The document: data is the template's variables and the notification's payload.
			r.Data = inbox.JSON(*req.Data)
			r.Payload = r.Data
		}
		if req.Actor != nil {
			r.Actor = &inbox.Actor{ActorID: req.Actor.Id, Name: deref(req.Actor.Name), AvatarURL: deref(req.Actor.AvatarUrl), URL: deref(req.Actor.Url)}
		}
		if req.Target != nil {
			r.Target = &inbox.Target{Kind: req.Target.Kind, TargetID: req.Target.Id, Title: deref(req.Target.Title), URL: deref(req.Target.Url)}
		}
		for _, a := range deref(req.Actions) {
			r.Actions = append(r.Actions, inbox.Action{Label: a.Label, URL: a.Url})
		}
		for _, c := range deref(req.ChannelsHint) {
			r.Channels = append(r.Channels, strings.ToUpper(string(c)))
		}
		var acc service.Accepted
		if r.Batch == nil {
			var err error
			if acc, err = svc.Accept(ctx, tenant, r); err != nil {
				return gen.Accepted{}, false, err
			}
		} else {
			// A batch's notification id is known once each recipient joined: the send is
			// processed before the answer (it stays accepted, and its recovery task
			// completes it, should that fail).
			sent, err := svc.Send(ctx, tenant, r)
			if err != nil {
				return gen.Accepted{}, false, err
			}
			acc = sent.Accepted
			if sent.Processed {
				acc.NotificationIDs = sent.Result.NotificationIDs
			}
		}
		out := gen.Accepted{RequestId: acc.RequestID, NotificationIds: acc.NotificationIDs}
		if out.NotificationIds == nil {
			out.NotificationIds = []string{}
		}
		if acc.BroadcastID != "" {
			out.BroadcastId = &acc.BroadcastID
		}
		if single && len(acc.NotificationIDs) == 1 {
			out.NotificationId = &acc.NotificationIDs[0]
		}
		return out, acc.Replayed, nil
	}
}

// Accept hands the send to Sends, or answers UNAVAILABLE while there is none.
func (b *Gateway) Accept(ctx context.Context, tenant, key string, req gen.SendRequest) (gen.Accepted, bool, error) {
	if b.Sends == nil {
		return gen.Accepted{}, false, inbox.Errorf(inbox.CodeUnavailable, "sending is not available on this gateway")
	}
	return b.Sends(ctx, tenant, key, req)
}

// Feed reads a page of the user's inbox.
func (b *Gateway) Feed(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error) {
	return b.Store.Inbox(ctx, v, q)
}

// GetPreferences reads the user's effective preferences.
func (b *Gateway) GetPreferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error) {
	return b.Store.Preferences(ctx, v)
}

// UpdatePreferences changes the user's own preferences.
func (b *Gateway) UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error) {
	return b.Store.UpdatePreferences(ctx, v, upd)
}

// Status reads the notification's status records (store.Status: one Query): the
// summary, and per record (one per channel, and per device for push) its key, device,
// provider and provider message id, times, with the document's lower-case channel and
// status names; error is the skip reason of a skipped record, else the failure.
func (b *Gateway) Status(ctx context.Context, tenant, id string) (gen.NotificationStatus, error) {
	st, err := b.Store.Status(ctx, tenant, id)
	if err != nil {
		return gen.NotificationStatus{}, err
	}
	out := gen.NotificationStatus{Id: st.ID, UserId: st.UserID, Status: gen.NotificationStatusStatus(st.Status),
		CreatedAt: st.CreatedAt, Channels: make([]gen.DeliveryRecord, 0, len(st.Channels))}
	for _, c := range st.Channels {
		key := c.Key
		if key == "" { // a record written before records had keys: its key was its channel
			key = c.Channel
		}
		rec := gen.DeliveryRecord{Channel: gen.Channel(strings.ToLower(c.Channel)), Key: key, DeviceId: ptr(c.DeviceID),
			Status: gen.DeliveryRecordStatus(strings.ToLower(c.Status)), Attempts: c.Attempts, Provider: ptr(c.Provider),
			ProviderMessageId: ptr(c.ProviderMessageID), SentAt: nonZero(c.SentAt), DeliveredAt: nonZero(c.DeliveredAt),
			OpenedAt: nonZero(c.OpenedAt), UpdatedAt: nonZero(c.UpdatedAt), DeferredUntil: nonZero(c.DeferredUntil), Error: ptr(c.Error)}
		if c.Reason != "" {
			rec.Error = &c.Reason
		}
		out.Channels = append(out.Channels, rec)
	}
	return out, nil
}

// StartBroadcast maps the request onto a service.BroadcastSpec and starts it (see
// broadcastSpec). A replay of the key with the same body answers the broadcast's id
// without rendering again (even after its sendAt has passed); with another body it is
// CONFLICT. A new request with a sendAt in the past is BAD_USER_INPUT.
func (b *Gateway) StartBroadcast(ctx context.Context, tenant, key string, req gen.BroadcastRequest) (gen.BroadcastAccepted, bool, error) {
	hash, err := requestHash(req)
	if err != nil {
		return gen.BroadcastAccepted{}, false, err
	}
	id := service.BroadcastID(key)
	// A replay is answered from the broadcast as written: the template may have a newer
	// version since, which would render differently, yet the request is the same.
	switch bc, err := b.Broadcasts.Get(ctx, tenant, id); {
	case err == nil && bc.Hash == hash:
		return gen.BroadcastAccepted{BroadcastId: id}, true, nil
	case err == nil:
		return gen.BroadcastAccepted{}, false, inbox.Errorf(CodeConflict, "Idempotency-Key %q was used for another broadcast", key)
	case inbox.ErrorCode(err) != inbox.CodeNotFound:
		return gen.BroadcastAccepted{}, false, err
	}
	if req.SendAt != nil && !req.SendAt.After(time.Now()) {
		return gen.BroadcastAccepted{}, false, inbox.Errorf(inbox.CodeBadUserInput, "sendAt is in the past")
	}
	spec, err := b.broadcastSpec(ctx, tenant, key, req)
	if err != nil {
		return gen.BroadcastAccepted{}, false, err
	}
	spec.Hash = hash
	id, created, err := b.Broadcasts.Begin(ctx, tenant, spec)
	if err != nil {
		return gen.BroadcastAccepted{}, false, err
	}
	return gen.BroadcastAccepted{BroadcastId: id}, !created, nil
}

// requestHash identifies a broadcast request: the SHA-256 of its JSON (the generated
// struct's fixed member order), 32 hex digits.
func requestHash(req gen.BroadcastRequest) (string, error) {
	js, err := json.Marshal(req)
	if err != nil {
		return "", inbox.Errorf(inbox.CodeBadUserInput, "the request cannot be encoded: %v", err)
	}
	sum := sha256.Sum256(js)
	return hex.EncodeToString(sum[:16]), nil
}

// broadcastSpec maps a broadcast request onto the service's spec: type, category, data
// as the notifications' payload, priority as the lane (default bulk), sendAt. With a
// template (then title and body must be left out), the template's latest version is
// pinned and checked to render every locale with data (tmpl.Service.Pin: BAD_USER_INPUT
// for an unknown template or an undefined variable, before anything is written), and the
// broadcast keeps the template, its pinned version and data: each page renders it in each
// recipient's locale (their preferences' locale, else the template's default), after a
// restart too.
func (b *Gateway) broadcastSpec(ctx context.Context, tenant, key string, req gen.BroadcastRequest) (service.BroadcastSpec, error) {
	spec := service.BroadcastSpec{IdempotencyKey: key, Segment: deref(req.Segment), Recipients: deref(req.Recipients),
		Lane: string(deref(req.Priority)), SendAt: deref(req.SendAt)}
	in := inbox.SendInput{Type: req.Type, Category: deref(req.Category), Title: deref(req.Title), Body: deref(req.Body)}
	if req.Data != nil {
		in.Payload = inbox.JSON(*req.Data)
	}
	if tpl := deref(req.Template); tpl != "" {
		if req.Title != nil || req.Body != nil {
			return spec, inbox.Errorf(inbox.CodeBadUserInput, "give title and body, or a template, not both")
		}
		v, err := b.Templates.Pin(ctx, tenant, tpl, "", in.Payload)
		if err != nil {
			return spec, err
		}
		// Each page renders the pinned version in each recipient's locale (after a
		// restart too: the broadcast keeps the template, version and data).
		spec.Template, spec.TemplateVersion, spec.Data = tpl, v, in.Payload
	}
	spec.Send = in
	return spec, nil
}

// GetBroadcast reads a broadcast's progress.
func (b *Gateway) GetBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error) {
	bc, err := b.Broadcasts.Get(ctx, tenant, id)
	if err != nil {
		return gen.Broadcast{}, err
	}
	return broadcast(bc), nil
}

// CancelBroadcast cancels a broadcast and answers it as it stands.
func (b *Gateway) CancelBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error) {
	bc, err := b.Broadcasts.Cancel(ctx, tenant, id)
	if err != nil {
		return gen.Broadcast{}, err
	}
	return broadcast(bc), nil
}

// broadcast converts a broadcast's head.
func broadcast(bc inbox.Broadcast) gen.Broadcast {
	return gen.Broadcast{Id: bc.ID, Status: gen.BroadcastStatus(bc.Status), Recipients: int64(bc.Recipients),
		Written: int64(bc.Written), Skipped: int64(bc.Skipped), Failed: int64(bc.Failed),
		StartedAt: nonZero(bc.StartedAt), FinishedAt: nonZero(bc.FinishedAt)}
}

// announcements returns the announcement service, or UNAVAILABLE while there is none.
func (b *Gateway) announcements() (*service.Announcements, error) {
	if b.Announcements == nil {
		return nil, inbox.Errorf(inbox.CodeUnavailable, "announcements are not available on this gateway")
	}
	return b.Announcements, nil
}

// CreateAnnouncement maps the request onto service.Announcements.Create.
func (b *Gateway) CreateAnnouncement(ctx context.Context, tenant, key string, req gen.AnnouncementRequest) (gen.AnnouncementAccepted, bool, error) {
	svc, err := b.announcements()
	if err != nil {
		return gen.AnnouncementAccepted{}, false, err
	}
	in := inbox.AnnouncementInput{IdempotencyKey: key, Type: req.Type, Category: deref(req.Category),
		Title: deref(req.Title), Body: deref(req.Body), ExpiresAt: deref(req.ExpiresAt)}
	cr := service.CreateRequest{Template: deref(req.Template), Locale: deref(req.Locale)}
	if req.Data != nil {
		// As for a send: data is the template's variables and the announcement's payload.
		cr.Data = inbox.JSON(*req.Data)
		in.Payload = cr.Data
	}
	if req.Actor != nil {
		in.Actor = &inbox.Actor{ActorID: req.Actor.Id, Name: deref(req.Actor.Name), AvatarURL: deref(req.Actor.AvatarUrl), URL: deref(req.Actor.Url)}
	}
	if req.Target != nil {
		in.Target = &inbox.Target{Kind: req.Target.Kind, TargetID: req.Target.Id, Title: deref(req.Target.Title), URL: deref(req.Target.Url)}
	}
	for _, a := range deref(req.Actions) {
		in.Actions = append(in.Actions, inbox.Action{Label: a.Label, URL: a.Url})
	}
	cr.Input = in
	a, created, err := svc.Create(ctx, tenant, cr)
	if err != nil {
		return gen.AnnouncementAccepted{}, false, err
	}
	return gen.AnnouncementAccepted{AnnouncementId: a.ID}, !created, nil
}

// GetAnnouncement reads an announcement.
func (b *Gateway) GetAnnouncement(ctx context.Context, tenant, id string) (gen.Announcement, error) {
	svc, err := b.announcements()
	if err != nil {
		return gen.Announcement{}, err
	}
	a, err := svc.Get(ctx, tenant, id)
	if err != nil {
		return gen.Announcement{}, err
	}
	return announcement(a, svc.Now()), nil
}

// WithdrawAnnouncement withdraws an announcement and answers it after.
func (b *Gateway) WithdrawAnnouncement(ctx context.Context, tenant, id string) (gen.Announcement, error) {
	svc, err := b.announcements()
	if err != nil {
		return gen.Announcement{}, err
	}
	a, err := svc.Withdraw(ctx, tenant, id)
	if err != nil {
		return gen.Announcement{}, err
	}
	return announcement(a, svc.Now()), nil
}

// announcement maps an announcement onto the document's, with its status at now.
func announcement(a *inbox.Announcement, now time.Time) gen.Announcement {
	return gen.Announcement{Id: a.ID, Type: a.Type, Category: ptr(a.Category), Title: ptr(a.Title), Body: ptr(a.Body),
		CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, WithdrawnAt: a.WithdrawnAt, Status: gen.AnnouncementStatus(a.Status(now))}
}

// UpdateSegment adds and removes members, then reads the count (one BatchGetItem).
func (b *Gateway) UpdateSegment(ctx context.Context, tenant, id string, add, remove []string) (gen.SegmentMembersChanged, error) {
	ch, err := b.Store.UpdateSegment(ctx, tenant, id, add, remove)
	if err != nil {
		return gen.SegmentMembersChanged{}, err
	}
	n, err := b.Store.SegmentCount(ctx, tenant, id)
	if err != nil {
		return gen.SegmentMembersChanged{}, err
	}
	return gen.SegmentMembersChanged{Id: id, Added: ch.Added, Removed: ch.Removed, Count: int64(n)}, nil
}

// GetSegment reads the count and a page of members. A segment without members is
// NOT_FOUND: as for broadcasts, which refuse it as an unknown segment, a segment exists
// while it has members.
func (b *Gateway) GetSegment(ctx context.Context, tenant, id string, limit int, cursor string) (gen.Segment, error) {
	p, err := b.Store.GetSegment(ctx, tenant, id, limit, cursor)
	if err != nil {
		return gen.Segment{}, err
	}
	if p.Count == 0 && len(p.Members) == 0 {
		return gen.Segment{}, inbox.Errorf(inbox.CodeNotFound, "unknown segment %q (it has no members)", id)
	}
	return gen.Segment{Id: id, Count: int64(p.Count), Members: p.Members, NextCursor: ptr(p.NextCursor)}, nil
}

// PutTemplate stores a new version (tmpl.Service.Put: every part must parse).
func (b *Gateway) PutTemplate(ctx context.Context, tenant, id string, in gen.TemplateInput) (gen.TemplateVersion, error) {
	parts, err := templateParts(in)
	if err != nil {
		return gen.TemplateVersion{}, err
	}
	ti := inbox.TemplateInput{Locale: in.Locale, Title: deref(in.Title), Body: deref(in.Body), Parts: parts}
	v, err := b.Templates.Put(ctx, tenant, id, ti)
	if err != nil {
		return gen.TemplateVersion{}, err
	}
	return gen.TemplateVersion{Id: id, Version: int64(v)}, nil
}

// GetTemplate reads the sources at version for locale (with the store's fallback); the
// answer's version and locale are those of the content found.
func (b *Gateway) GetTemplate(ctx context.Context, tenant, id, locale string, version int64) (gen.Template, error) {
	if version > inbox.MaxTemplateVersion {
		return gen.Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
	}
	t, err := b.Templates.Get(ctx, tenant, id, locale, int(version))
	if err != nil {
		return gen.Template{}, err
	}
	out := gen.Template{Id: id, Version: int64(t.Version), Locale: t.Locale, DefaultLocale: ptr(t.DefaultLocale),
		Title: &t.Title, Body: ptr(t.Body)}
	if err := withTemplateParts(&out, t.Parts); err != nil {
		return gen.Template{}, err
	}
	return out, nil
}

// PutUser replaces the user's channel profile.
func (b *Gateway) PutUser(ctx context.Context, tenant, id string, in gen.UserProfileInput) (gen.UserProfile, error) {
	pin, err := profileInput(in)
	if err != nil {
		return gen.UserProfile{}, err
	}
	p, err := b.Store.PutUserProfile(ctx, inbox.Viewer{TenantID: tenant, UserID: id}, pin)
	if err != nil {
		return gen.UserProfile{}, err
	}
	return profile(id, p)
}

// PutTenantSettings replaces the tenant's settings. The settings are whole: a member left
// out takes the configured default (store.ConfiguredPreferences; the configured
// retention; no webhook). defaultPreferences' channels change the configured channel
// defaults; its categories, quiet hours, timezone and locale, and criticalCategories,
// replace the configured ones when given. The answer leaves the webhook secret out.
func (b *Gateway) PutTenantSettings(ctx context.Context, tenant string, in gen.TenantSettingsInput) (gen.TenantSettings, error) {
	var set inbox.TenantSettings
	if in.DefaultPreferences != nil || in.CriticalCategories != nil {
		p := b.Store.ConfiguredPreferences(tenant)
		if d := in.DefaultPreferences; d != nil {
			sw, err := switchChanges(d.Channels)
			if err != nil {
				return gen.TenantSettings{}, err
			}
			p.Channels = sw.Over(p.Channels)
			if d.Categories != nil {
				if p.Categories, err = switchCategories(*d.Categories); err != nil {
					return gen.TenantSettings{}, err
				}
			}
			if d.QuietHours != nil {
				p.QuietHours = &inbox.QuietHours{Start: d.QuietHours.Start, End: d.QuietHours.End}
			}
			if d.Timezone != nil {
				p.Timezone = *d.Timezone
			}
			if d.Locale != nil {
				p.Locale = *d.Locale
			}
		}
		if in.CriticalCategories != nil {
			p.Critical = nil
			for _, c := range *in.CriticalCategories {
				if !slices.Contains(p.Critical, c) {
					p.Critical = append(p.Critical, c)
				}
			}
		}
		set.Preferences = &p
	}
	if w := in.Webhook; w != nil {
		set.WebhookURL, set.WebhookSecret = w.Url, w.Secret
	}
	if d := in.RetentionDays; d != nil {
		r := time.Duration(*d) * 24 * time.Hour
		set.Retention = &r
	}
	stored, err := b.Store.PutTenantSettings(ctx, tenant, set)
	if err != nil {
		return gen.TenantSettings{}, err
	}
	return tenantSettings(stored)
}

// tenantSettings converts stored settings (without the webhook secret).
func tenantSettings(s inbox.TenantSettings) (gen.TenantSettings, error) {
	var out gen.TenantSettings
	if p := s.Preferences; p != nil {
		crit := append([]string{}, p.Critical...)
		out.CriticalCategories = &crit
		sw, err := switchesInput(p.Channels)
		if err != nil {
			return gen.TenantSettings{}, err
		}
		d := gen.DefaultPreferences{Channels: &sw, Timezone: ptr(p.Timezone), Locale: ptr(p.Locale)}
		cats := make([]gen.CategoryPreferenceInput, 0, len(p.Categories))
		for _, c := range p.Categories {
			csw, err := switchesInput(c.Channels)
			if err != nil {
				return gen.TenantSettings{}, err
			}
			cats = append(cats, gen.CategoryPreferenceInput{Category: c.Category, Channels: csw})
		}
		d.Categories = &cats
		if q := p.QuietHours; q != nil {
			d.QuietHours = &gen.QuietHours{Start: q.Start, End: q.End}
		}
		out.DefaultPreferences = &d
	}
	if s.WebhookURL != "" {
		out.Webhook = &struct {
			Url string `json:"url"`
		}{Url: s.WebhookURL}
	}
	if s.Retention != nil {
		days := int(*s.Retention / (24 * time.Hour))
		out.RetentionDays = &days
	}
	return out, nil
}

// nonZero returns &t, or nil for the zero time.
func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// callbackParallelism bounds the records one callback updates at once (a SendGrid batch
// holds up to providerhook.MaxEvents events, each one UpdateItem).
const callbackParallelism = 8

// RegisterDevice registers a push device of the user (store.RegisterDevice).
func (b *Gateway) RegisterDevice(ctx context.Context, v inbox.Viewer, token, platform string) (inbox.Device, error) {
	return b.Store.RegisterDevice(ctx, v, token, platform)
}

// UnregisterDevice removes the user's device by token or id (store.UnregisterDevice).
func (b *Gateway) UnregisterDevice(ctx context.Context, v inbox.Viewer, tokenOrID string) (bool, error) {
	return b.Store.UnregisterDevice(ctx, v, tokenOrID)
}

// ApplyProviderEvents applies a callback's events (store.ApplyProviderEvent: one
// conditional UpdateItem each, at most callbackParallelism at once) and counts those that
// changed a record. Events of one record are applied in the callback's order (a
// "delivered" before an "open" of the same mail); the first error fails the callback,
// which the provider then retries (applying an event twice changes nothing).
func (b *Gateway) ApplyProviderEvents(ctx context.Context, events []inbox.ProviderEvent) (int, error) {
	byRef := map[inbox.DeliveryRef][]inbox.ProviderEvent{}
	var refs []inbox.DeliveryRef
	for _, ev := range events {
		if _, ok := byRef[ev.Ref]; !ok {
			refs = append(refs, ev.Ref)
		}
		byRef[ev.Ref] = append(byRef[ev.Ref], ev)
	}
	var applied atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(callbackParallelism)
	for _, ref := range refs {
		g.Go(func() error {
			for _, ev := range byRef[ref] {
				if ev.Suppress != nil {
					// The tenant is the signed ref's. An address the list cannot hold is
					// left off; the event still applies to its record.
					if _, err := b.Store.AddSuppression(gctx, ev.Ref.TenantID, *ev.Suppress); err != nil && inbox.ErrorCode(err) != inbox.CodeBadUserInput {
						return err
					}
				}
				if ev.Status == "" {
					continue
				}
				changed, err := b.Store.ApplyProviderEvent(gctx, ev)
				if err != nil {
					return err
				}
				if changed {
					applied.Add(1)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return int(applied.Load()), nil
}

// ListSuppressions is store.Suppressions mapped onto the document's page (channels in
// lower case).
func (b *Gateway) ListSuppressions(ctx context.Context, tenant, channel, cursor string, limit int) (gen.SuppressionPage, error) {
	list, next, err := b.Store.Suppressions(ctx, tenant, channel, cursor, limit)
	if err != nil {
		return gen.SuppressionPage{}, err
	}
	out := gen.SuppressionPage{Items: make([]gen.Suppression, len(list))}
	for i, sp := range list {
		out.Items[i] = gen.Suppression{Channel: gen.SuppressibleChannel(strings.ToLower(sp.Channel)), Address: sp.Address,
			Reason: sp.Reason, CreatedAt: sp.CreatedAt}
		if sp.Detail != "" {
			out.Items[i].Detail = &sp.Detail
		}
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

// DeleteSuppression is store.RemoveSuppression.
func (b *Gateway) DeleteSuppression(ctx context.Context, tenant, channel, address string) (bool, error) {
	return b.Store.RemoveSuppression(ctx, tenant, channel, address)
}

// GetUser reads the user's channel profile (store.UserProfile: one GetItem).
func (b *Gateway) GetUser(ctx context.Context, tenant, id string) (gen.UserProfile, error) {
	p, err := b.Store.UserProfile(ctx, inbox.Viewer{TenantID: tenant, UserID: id})
	if err != nil {
		return gen.UserProfile{}, err
	}
	return profile(id, p)
}

// GetTenantSettings reads the tenant's stored settings (store.TenantSettings: one
// GetItem), as PUT answers them.
func (b *Gateway) GetTenantSettings(ctx context.Context, tenant string) (gen.TenantSettings, error) {
	set, err := b.Store.TenantSettings(ctx, tenant)
	if err != nil {
		return gen.TenantSettings{}, err
	}
	return tenantSettings(set)
}
