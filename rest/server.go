package rest

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest/gen"
)

// server implements the generated strict interface over a Backend: it checks what the
// generated code does not (ids, counts, times), converts, and calls the Backend. Every
// error it returns is answered as a problem by NewHandler's ResponseErrorHandlerFunc.
type server struct {
	b   Backend
	now func() time.Time
	doc map[string]any
}

var _ gen.StrictServerInterface = (*server)(nil)

// tenant returns the tenant of the verified token (the route's guard put it there).
func tenant(ctx context.Context) (string, error) {
	c, ok := auth.FromContext(ctx)
	if !ok {
		return "", inbox.Errorf(inbox.CodeUnauthenticated, "a bearer token is required")
	}
	return c.TenantID, nil
}

// replayedHeader is the Idempotent-Replayed value of a replay (nil otherwise).
func replayedHeader(replayed bool) *string {
	if !replayed {
		return nil
	}
	t := "true"
	return &t
}

// errNoBody answers an operation whose body is missing.
var errNoBody = inbox.Errorf(inbox.CodeBadUserInput, "a JSON request body is required")

func (s *server) GetOpenAPI(context.Context, gen.GetOpenAPIRequestObject) (gen.GetOpenAPIResponseObject, error) {
	return gen.GetOpenAPI200JSONResponse(s.doc), nil
}

func (s *server) SendNotification(ctx context.Context, req gen.SendNotificationRequestObject) (gen.SendNotificationResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := checkIdempotencyKey(req.Params.IdempotencyKey); err != nil {
		return nil, err
	}
	if err := checkSend(*req.Body, s.now()); err != nil {
		return nil, err
	}
	res, replayed, err := s.b.Accept(ctx, t, req.Params.IdempotencyKey, *req.Body)
	if err != nil {
		return nil, err
	}
	if res.NotificationIds == nil {
		res.NotificationIds = []string{}
	}
	return gen.SendNotification202JSONResponse{Body: res,
		Headers: gen.SendNotification202ResponseHeaders{IdempotentReplayed: replayedHeader(replayed)}}, nil
}

func (s *server) ListNotifications(ctx context.Context, req gen.ListNotificationsRequestObject) (gen.ListNotificationsResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	p := req.Params
	if err := inbox.CheckID("userId", p.UserId); err != nil {
		return nil, err
	}
	limit := inbox.DefaultPageSize
	if p.Limit != nil {
		limit = *p.Limit
	}
	if limit < 1 || limit > inbox.MaxPageSize {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "limit must be 1 to %d", inbox.MaxPageSize)
	}
	q := inbox.PageQuery{First: &limit}
	if p.Cursor != nil {
		q.After = *p.Cursor
	}
	if p.UnreadOnly != nil {
		q.UnreadOnly = *p.UnreadOnly
	}
	page, err := s.b.Feed(ctx, inbox.Viewer{TenantID: t, UserID: p.UserId}, q)
	if err != nil {
		return nil, err
	}
	return gen.ListNotifications200JSONResponse(feed(page)), nil
}

// notificationKey returns the notification id that id names: id itself, or the key of a
// GraphQL Notification global id (what sendNotification answers), so a GraphQL sender
// can read the status of what it sent without decoding its ids.
func notificationKey(id string) string {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return id
	}
	if key, ok := strings.CutPrefix(string(b), inbox.TypeNotification+":"); ok && key != "" && !strings.ContainsRune(key, 0) {
		return key
	}
	return id
}

func (s *server) GetNotificationStatus(ctx context.Context, req gen.GetNotificationStatusRequestObject) (gen.GetNotificationStatusResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	id := notificationKey(req.Id)
	if err := inbox.CheckID("id", id); err != nil {
		return nil, err
	}
	st, err := s.b.Status(ctx, t, id)
	if err != nil {
		return nil, err
	}
	if st.Channels == nil {
		st.Channels = []gen.DeliveryRecord{}
	}
	return gen.GetNotificationStatus200JSONResponse(st), nil
}

func (s *server) StartBroadcast(ctx context.Context, req gen.StartBroadcastRequestObject) (gen.StartBroadcastResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := checkIdempotencyKey(req.Params.IdempotencyKey); err != nil {
		return nil, err
	}
	if err := checkBroadcast(*req.Body, s.now()); err != nil {
		return nil, err
	}
	res, replayed, err := s.b.StartBroadcast(ctx, t, req.Params.IdempotencyKey, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.StartBroadcast202JSONResponse{Body: res,
		Headers: gen.StartBroadcast202ResponseHeaders{IdempotentReplayed: replayedHeader(replayed)}}, nil
}

func (s *server) GetBroadcast(ctx context.Context, req gen.GetBroadcastRequestObject) (gen.GetBroadcastResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("id", req.Id); err != nil {
		return nil, err
	}
	b, err := s.b.GetBroadcast(ctx, t, req.Id)
	if err != nil {
		return nil, err
	}
	return gen.GetBroadcast200JSONResponse(b), nil
}

func (s *server) CancelBroadcast(ctx context.Context, req gen.CancelBroadcastRequestObject) (gen.CancelBroadcastResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("id", req.Id); err != nil {
		return nil, err
	}
	b, err := s.b.CancelBroadcast(ctx, t, req.Id)
	if err != nil {
		return nil, err
	}
	return gen.CancelBroadcast200JSONResponse(b), nil
}

func (s *server) CreateAnnouncement(ctx context.Context, req gen.CreateAnnouncementRequestObject) (gen.CreateAnnouncementResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := checkIdempotencyKey(req.Params.IdempotencyKey); err != nil {
		return nil, err
	}
	if err := checkAnnouncement(*req.Body, s.now()); err != nil {
		return nil, err
	}
	res, replayed, err := s.b.CreateAnnouncement(ctx, t, req.Params.IdempotencyKey, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.CreateAnnouncement202JSONResponse{Body: res,
		Headers: gen.CreateAnnouncement202ResponseHeaders{IdempotentReplayed: replayedHeader(replayed)}}, nil
}

func (s *server) GetAnnouncement(ctx context.Context, req gen.GetAnnouncementRequestObject) (gen.GetAnnouncementResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("id", req.Id); err != nil {
		return nil, err
	}
	a, err := s.b.GetAnnouncement(ctx, t, req.Id)
	if err != nil {
		return nil, err
	}
	return gen.GetAnnouncement200JSONResponse(a), nil
}

func (s *server) WithdrawAnnouncement(ctx context.Context, req gen.WithdrawAnnouncementRequestObject) (gen.WithdrawAnnouncementResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("id", req.Id); err != nil {
		return nil, err
	}
	a, err := s.b.WithdrawAnnouncement(ctx, t, req.Id)
	if err != nil {
		return nil, err
	}
	return gen.WithdrawAnnouncement200JSONResponse(a), nil
}

func (s *server) UpdateSegmentMembers(ctx context.Context, req gen.UpdateSegmentMembersRequestObject) (gen.UpdateSegmentMembersResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := inbox.CheckID("segment id", req.Id); err != nil {
		return nil, err
	}
	add, remove := deref(req.Body.Add), deref(req.Body.Remove)
	if err := checkSegmentChange(add, remove); err != nil {
		return nil, err
	}
	res, err := s.b.UpdateSegment(ctx, t, req.Id, add, remove)
	if err != nil {
		return nil, err
	}
	return gen.UpdateSegmentMembers200JSONResponse(res), nil
}

func (s *server) GetSegment(ctx context.Context, req gen.GetSegmentRequestObject) (gen.GetSegmentResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("segment id", req.Id); err != nil {
		return nil, err
	}
	limit := DefaultSegmentPage
	if req.Params.Limit != nil {
		limit = *req.Params.Limit
	}
	if limit < 1 || limit > MaxSegmentChange {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "limit must be 1 to %d", MaxSegmentChange)
	}
	seg, err := s.b.GetSegment(ctx, t, req.Id, limit, deref(req.Params.Cursor))
	if err != nil {
		return nil, err
	}
	if seg.Members == nil {
		seg.Members = []string{}
	}
	return gen.GetSegment200JSONResponse(seg), nil
}

func (s *server) PutTemplate(ctx context.Context, req gen.PutTemplateRequestObject) (gen.PutTemplateResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := inbox.CheckID("template id", req.Id); err != nil {
		return nil, err
	}
	if err := inbox.CheckLocale(req.Body.Locale); err != nil {
		return nil, err
	}
	v, err := s.b.PutTemplate(ctx, t, req.Id, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.PutTemplate200JSONResponse(v), nil
}

func (s *server) GetTemplate(ctx context.Context, req gen.GetTemplateRequestObject) (gen.GetTemplateResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("template id", req.Id); err != nil {
		return nil, err
	}
	locale := deref(req.Params.Locale)
	if locale != "" {
		if err := inbox.CheckLocale(locale); err != nil {
			return nil, err
		}
	}
	var version int64
	if req.Params.Version != nil {
		if version = *req.Params.Version; version < 1 {
			return nil, inbox.Errorf(inbox.CodeBadUserInput, "version must be at least 1")
		}
	}
	tpl, err := s.b.GetTemplate(ctx, t, req.Id, locale, version)
	if err != nil {
		return nil, err
	}
	return gen.GetTemplate200JSONResponse(tpl), nil
}

func (s *server) PutUser(ctx context.Context, req gen.PutUserRequestObject) (gen.PutUserResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := inbox.CheckID("user id", req.Id); err != nil {
		return nil, err
	}
	if err := checkProfile(*req.Body); err != nil {
		return nil, err
	}
	u, err := s.b.PutUser(ctx, t, req.Id, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.PutUser200JSONResponse(u), nil
}

func (s *server) GetPreferences(ctx context.Context, req gen.GetPreferencesRequestObject) (gen.GetPreferencesResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("user id", req.Id); err != nil {
		return nil, err
	}
	p, err := s.b.GetPreferences(ctx, inbox.Viewer{TenantID: t, UserID: req.Id})
	if err != nil {
		return nil, err
	}
	out, err := preferences(p)
	if err != nil {
		return nil, err
	}
	return gen.GetPreferences200JSONResponse(out), nil
}

func (s *server) UpdatePreferences(ctx context.Context, req gen.UpdatePreferencesRequestObject) (gen.UpdatePreferencesResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := inbox.CheckID("user id", req.Id); err != nil {
		return nil, err
	}
	upd, err := preferencesUpdate(*req.Body)
	if err != nil {
		return nil, err
	}
	if err := upd.Validate(); err != nil {
		return nil, err
	}
	p, err := s.b.UpdatePreferences(ctx, inbox.Viewer{TenantID: t, UserID: req.Id}, upd)
	if err != nil {
		return nil, err
	}
	out, err := preferences(p)
	if err != nil {
		return nil, err
	}
	return gen.UpdatePreferences200JSONResponse(out), nil
}

func (s *server) PutTenantSettings(ctx context.Context, req gen.PutTenantSettingsRequestObject) (gen.PutTenantSettingsResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := checkSettings(*req.Body); err != nil {
		return nil, err
	}
	set, err := s.b.PutTenantSettings(ctx, t, *req.Body)
	if err != nil {
		return nil, err
	}
	return gen.PutTenantSettings200JSONResponse(set), nil
}

func (s *server) RegisterDevice(ctx context.Context, req gen.RegisterDeviceRequestObject) (gen.RegisterDeviceResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, errNoBody
	}
	if err := inbox.CheckID("user id", req.Id); err != nil {
		return nil, err
	}
	if err := inbox.CheckDevice(req.Body.Token, string(req.Body.Platform)); err != nil {
		return nil, err
	}
	d, err := s.b.RegisterDevice(ctx, inbox.Viewer{TenantID: t, UserID: req.Id}, req.Body.Token, string(req.Body.Platform))
	if err != nil {
		return nil, err
	}
	return gen.RegisterDevice201JSONResponse(device(d)), nil
}

func (s *server) UnregisterDevice(ctx context.Context, req gen.UnregisterDeviceRequestObject) (gen.UnregisterDeviceResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("user id", req.Id); err != nil {
		return nil, err
	}
	if !inbox.IsDeviceID(req.Token) {
		// A token: the same rules as at registration (either platform's).
		if err := inbox.CheckDevice(req.Token, inbox.PlatformFCM); err != nil {
			return nil, err
		}
	}
	removed, err := s.b.UnregisterDevice(ctx, inbox.Viewer{TenantID: t, UserID: req.Id}, req.Token)
	if err != nil {
		return nil, err
	}
	if !removed {
		return nil, inbox.Errorf(inbox.CodeNotFound, "user %q has no such device", req.Id)
	}
	return gen.UnregisterDevice204Response{}, nil
}

func (s *server) ReceiveProviderCallback(ctx context.Context, _ gen.ReceiveProviderCallbackRequestObject) (gen.ReceiveProviderCallbackResponseObject, error) {
	events, ok := callbackEvents(ctx)
	if !ok { // the route's guard always verifies first; never apply what it did not
		return nil, inbox.Errorf(inbox.CodeUnauthenticated, "the callback is not authenticated")
	}
	applied, err := s.b.ApplyProviderEvents(ctx, events)
	if err != nil {
		return nil, err
	}
	return gen.ReceiveProviderCallback200JSONResponse{Events: len(events), Applied: applied}, nil
}

// DefaultSuppressionPage is GET /v1/suppressions' page size without limit.
const DefaultSuppressionPage = 50

func (s *server) ListSuppressions(ctx context.Context, req gen.ListSuppressionsRequestObject) (gen.ListSuppressionsResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	limit := DefaultSuppressionPage
	if req.Params.Limit != nil {
		limit = *req.Params.Limit
	}
	channel := ""
	if req.Params.Channel != nil {
		channel = strings.ToUpper(string(*req.Params.Channel))
	}
	page, err := s.b.ListSuppressions(ctx, t, channel, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	return gen.ListSuppressions200JSONResponse(page), nil
}

func (s *server) DeleteSuppression(ctx context.Context, req gen.DeleteSuppressionRequestObject) (gen.DeleteSuppressionResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	removed, err := s.b.DeleteSuppression(ctx, t, strings.ToUpper(string(req.Channel)), req.Address)
	if err != nil {
		return nil, err
	}
	if !removed {
		return nil, inbox.Errorf(inbox.CodeNotFound, "%s is not on the suppression list", req.Address)
	}
	return gen.DeleteSuppression204Response{}, nil
}

func (s *server) GetUser(ctx context.Context, req gen.GetUserRequestObject) (gen.GetUserResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckID("user id", req.Id); err != nil {
		return nil, err
	}
	u, err := s.b.GetUser(ctx, t, req.Id)
	if err != nil {
		return nil, err
	}
	return gen.GetUser200JSONResponse(u), nil
}

func (s *server) GetTenantSettings(ctx context.Context, _ gen.GetTenantSettingsRequestObject) (gen.GetTenantSettingsResponseObject, error) {
	t, err := tenant(ctx)
	if err != nil {
		return nil, err
	}
	set, err := s.b.GetTenantSettings(ctx, t)
	if err != nil {
		return nil, err
	}
	return gen.GetTenantSettings200JSONResponse(set), nil
}
