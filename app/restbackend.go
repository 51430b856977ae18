package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/tmpl"
)

// AcceptFunc persists a send under the tenant's idempotency key and answers the 202 body
// (rest.Backend.Accept's shape): the send service's, mapped onto the document's types.
type AcceptFunc func(ctx context.Context, tenant, key string, req gen.SendRequest) (res gen.Accepted, replayed bool, err error)

// RESTStore is what RESTBackend needs of the store beyond feeds and preferences
// (*store.Store has it).
type RESTStore interface {
	rest.InboxStore
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
}

// RESTBackend is the service API's rest.Backend over the gateway's pieces: the store
// (feeds, preferences, status, segments, user profiles, tenant settings), the templates
// service and broadcasts. Sends go to Sends, which the composition root sets to the send
// service; while it is nil, POST /v1/notifications answers UNAVAILABLE (503).
type RESTBackend struct {
	Store      RESTStore
	Templates  *tmpl.Service
	Broadcasts *service.Broadcasts
	// Sends accepts POST /v1/notifications; nil: UNAVAILABLE.
	Sends AcceptFunc
}

var _ rest.Backend = (*RESTBackend)(nil)

// newRESTBackend is the backend over st and the send pipeline p: templates, broadcasts
// (whose shard tasks run on the scheduler, NewScheduler) and sends through p's service.
func newRESTBackend(st *store.Store, p *pipeline) *RESTBackend {
	return &RESTBackend{Store: st, Templates: p.templates, Broadcasts: p.broadcasts, Sends: serviceAccept(p.svc)}
}

// serviceAccept maps POST /v1/notifications onto the send service's Accept: the 202 body
// (one id per recipient; notificationId too for a send to recipientUserId) and whether it
// is a replay. Errors are the service's (CONFLICT for a key reused with another body).
func serviceAccept(svc *service.Service) AcceptFunc {
	return func(ctx context.Context, tenant, key string, req gen.SendRequest) (gen.Accepted, bool, error) {
		r := service.SendRequest{IdempotencyKey: key, Type: req.Type, Category: deref(req.Category), Title: deref(req.Title),
			Body: deref(req.Body), Segment: deref(req.Segment), Template: deref(req.Template), Locale: deref(req.Locale),
			GroupKey: deref(req.GroupKey), SendAt: deref(req.SendAt), ExpiresAt: deref(req.ExpiresAt),
			Priority: service.Priority(deref(req.Priority))}
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
		acc, err := svc.Accept(ctx, tenant, r)
		if err != nil {
			return gen.Accepted{}, false, err
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
func (b *RESTBackend) Accept(ctx context.Context, tenant, key string, req gen.SendRequest) (gen.Accepted, bool, error) {
	if b.Sends == nil {
		return gen.Accepted{}, false, inbox.Errorf(inbox.CodeUnavailable, "sending is not available on this gateway")
	}
	return b.Sends(ctx, tenant, key, req)
}

// Feed reads a page of the user's inbox.
func (b *RESTBackend) Feed(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error) {
	return b.Store.Inbox(ctx, v, q)
}

// GetPreferences reads the user's effective preferences.
func (b *RESTBackend) GetPreferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error) {
	return b.Store.Preferences(ctx, v)
}

// UpdatePreferences changes the user's own preferences.
func (b *RESTBackend) UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error) {
	return b.Store.UpdatePreferences(ctx, v, upd)
}

// Status reads the notification's status records (store.Status: one Query): the
// summary, and per record (one per channel, and per device for push) its key, device,
// provider and provider message id, times, with the document's lower-case channel and
// status names; error is the skip reason of a skipped record, else the failure.
func (b *RESTBackend) Status(ctx context.Context, tenant, id string) (gen.NotificationStatus, error) {
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
		rec := gen.DeliveryRecord{Channel: gen.Channel(strings.ToLower(c.Channel)), Key: key, DeviceId: nonEmpty(c.DeviceID),
			Status: gen.DeliveryRecordStatus(strings.ToLower(c.Status)), Attempts: c.Attempts, Provider: nonEmpty(c.Provider),
			ProviderMessageId: nonEmpty(c.ProviderMessageID), SentAt: nonZero(c.SentAt), DeliveredAt: nonZero(c.DeliveredAt),
			OpenedAt: nonZero(c.OpenedAt), UpdatedAt: nonZero(c.UpdatedAt), DeferredUntil: nonZero(c.DeferredUntil), Error: nonEmpty(c.Error)}
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
func (b *RESTBackend) StartBroadcast(ctx context.Context, tenant, key string, req gen.BroadcastRequest) (gen.BroadcastAccepted, bool, error) {
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
		return gen.BroadcastAccepted{}, false, inbox.Errorf(rest.CodeConflict, "Idempotency-Key %q was used for another broadcast", key)
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
func (b *RESTBackend) broadcastSpec(ctx context.Context, tenant, key string, req gen.BroadcastRequest) (service.BroadcastSpec, error) {
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
func (b *RESTBackend) GetBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error) {
	bc, err := b.Broadcasts.Get(ctx, tenant, id)
	if err != nil {
		return gen.Broadcast{}, err
	}
	return broadcast(bc), nil
}

// CancelBroadcast cancels a broadcast and answers it as it stands.
func (b *RESTBackend) CancelBroadcast(ctx context.Context, tenant, id string) (gen.Broadcast, error) {
	bc, err := b.Broadcasts.Cancel(ctx, tenant, id)
	if err != nil {
		return gen.Broadcast{}, err
	}
	return broadcast(bc), nil
}

// broadcast converts a broadcast's head.
func broadcast(bc store.Broadcast) gen.Broadcast {
	return gen.Broadcast{Id: bc.ID, Status: gen.BroadcastStatus(bc.Status), Recipients: int64(bc.Recipients),
		Written: int64(bc.Written), Skipped: int64(bc.Skipped), Failed: int64(bc.Failed),
		StartedAt: nonZero(bc.StartedAt), FinishedAt: nonZero(bc.FinishedAt)}
}

// UpdateSegment adds and removes members, then reads the count (one BatchGetItem).
func (b *RESTBackend) UpdateSegment(ctx context.Context, tenant, id string, add, remove []string) (gen.SegmentMembersChanged, error) {
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
func (b *RESTBackend) GetSegment(ctx context.Context, tenant, id string, limit int, cursor string) (gen.Segment, error) {
	p, err := b.Store.GetSegment(ctx, tenant, id, limit, cursor)
	if err != nil {
		return gen.Segment{}, err
	}
	if p.Count == 0 && len(p.Members) == 0 {
		return gen.Segment{}, inbox.Errorf(inbox.CodeNotFound, "unknown segment %q (it has no members)", id)
	}
	return gen.Segment{Id: id, Count: int64(p.Count), Members: p.Members, NextCursor: nonEmpty(p.NextCursor)}, nil
}

// PutTemplate stores a new version (tmpl.Service.Put: every part must parse).
func (b *RESTBackend) PutTemplate(ctx context.Context, tenant, id string, in gen.TemplateInput) (gen.TemplateVersion, error) {
	ti := store.TemplateInput{Locale: in.Locale, Title: deref(in.Title), Body: deref(in.Body)}
	if e := in.Email; e != nil {
		ti.Email = &store.TemplateEmail{Subject: deref(e.Subject), HTML: deref(e.Html), Text: deref(e.Text)}
	}
	if p := in.Push; p != nil {
		ti.Push = &store.TemplatePush{Title: deref(p.Title), Body: deref(p.Body)}
	}
	if s := in.Sms; s != nil {
		ti.SMS = &store.TemplateSMS{Text: deref(s.Text)}
	}
	v, err := b.Templates.Put(ctx, tenant, id, ti)
	if err != nil {
		return gen.TemplateVersion{}, err
	}
	return gen.TemplateVersion{Id: id, Version: int64(v)}, nil
}

// GetTemplate reads the sources at version for locale (with the store's fallback); the
// answer's version and locale are those of the content found.
func (b *RESTBackend) GetTemplate(ctx context.Context, tenant, id, locale string, version int64) (gen.Template, error) {
	if version > store.MaxTemplateVersion {
		return gen.Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
	}
	t, err := b.Templates.Get(ctx, tenant, id, locale, int(version))
	if err != nil {
		return gen.Template{}, err
	}
	out := gen.Template{Id: id, Version: int64(t.Version), Locale: t.Locale, DefaultLocale: nonEmpty(t.DefaultLocale),
		Title: &t.Title, Body: nonEmpty(t.Body)}
	if e := t.Email; e != nil {
		out.Email = &gen.EmailContent{Subject: &e.Subject, Html: &e.HTML, Text: &e.Text}
	}
	if p := t.Push; p != nil {
		out.Push = &gen.PushContent{Title: &p.Title, Body: &p.Body}
	}
	if s := t.SMS; s != nil {
		out.Sms = &gen.SMSContent{Text: &s.Text}
	}
	return out, nil
}

// PutUser replaces the user's channel profile.
func (b *RESTBackend) PutUser(ctx context.Context, tenant, id string, in gen.UserProfileInput) (gen.UserProfile, error) {
	p, err := b.Store.PutUserProfile(ctx, inbox.Viewer{TenantID: tenant, UserID: id}, inbox.UserProfile{
		Email: deref(in.Email), Phone: deref(in.Phone), Locale: deref(in.Locale), Timezone: deref(in.Timezone)})
	if err != nil {
		return gen.UserProfile{}, err
	}
	return gen.UserProfile{Id: id, Email: nonEmpty(p.Email), Phone: nonEmpty(p.Phone), Locale: nonEmpty(p.Locale), Timezone: nonEmpty(p.Timezone)}, nil
}

// PutTenantSettings replaces the tenant's settings. The settings are whole: a member left
// out takes the configured default (store.ConfiguredPreferences; the configured
// retention; no webhook). defaultPreferences' channels change the configured channel
// defaults; its categories, quiet hours, timezone and locale, and criticalCategories,
// replace the configured ones when given. The answer leaves the webhook secret out.
func (b *RESTBackend) PutTenantSettings(ctx context.Context, tenant string, in gen.TenantSettingsInput) (gen.TenantSettings, error) {
	var set inbox.TenantSettings
	if in.DefaultPreferences != nil || in.CriticalCategories != nil {
		p := b.Store.ConfiguredPreferences(tenant)
		if d := in.DefaultPreferences; d != nil {
			p.Channels = switchChanges(d.Channels).Over(p.Channels)
			if d.Categories != nil {
				p.Categories = nil
				for _, c := range *d.Categories {
					p.Categories = append(p.Categories, inbox.CategorySwitches{Category: c.Category, Channels: switchChanges(&c.Channels)})
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
	return tenantSettings(stored), nil
}

// tenantSettings converts stored settings (without the webhook secret).
func tenantSettings(s inbox.TenantSettings) gen.TenantSettings {
	var out gen.TenantSettings
	if p := s.Preferences; p != nil {
		crit := append([]string{}, p.Critical...)
		out.CriticalCategories = &crit
		d := gen.DefaultPreferences{Channels: &gen.ChannelSwitchesInput{InApp: &p.Channels.InApp, Email: &p.Channels.Email,
			Push: &p.Channels.Push, Sms: &p.Channels.SMS}, Timezone: nonEmpty(p.Timezone), Locale: nonEmpty(p.Locale)}
		cats := make([]gen.CategoryPreferenceInput, 0, len(p.Categories))
		for _, c := range p.Categories {
			cats = append(cats, gen.CategoryPreferenceInput{Category: c.Category, Channels: gen.ChannelSwitchesInput{
				InApp: c.Channels.InApp, Email: c.Channels.Email, Push: c.Channels.Push, Sms: c.Channels.SMS}})
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
	return out
}

// switchChanges converts partial channel switches.
func switchChanges(in *gen.ChannelSwitchesInput) inbox.SwitchChanges {
	if in == nil {
		return inbox.SwitchChanges{}
	}
	return inbox.SwitchChanges{InApp: in.InApp, Email: in.Email, Push: in.Push, SMS: in.Sms}
}

// deref returns *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// nonEmpty returns &s, or nil for "" (a member the answer leaves out).
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nonZero returns &t, or nil for the zero time.
func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// NewRESTBackend is the backend over st with a send pipeline of its own (default lanes
// and idempotency window), for tests that build the service API around a store.
func NewRESTBackend(st *store.Store) *RESTBackend {
	return newRESTBackend(st, newPipeline(Config{}, slog.Default(), st))
}
