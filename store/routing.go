package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Routing: what each recipient of a send needs read for the decisions (ReadRecipients),
// the status records that keep each decision (AP22: written in the recipient's send
// transaction, WriteRecipient), the scheduler tasks that deliver the queued channels
// (TaskDeliver), and the status read.
//
// The rules (which channels, which skip reason, which deferral) are package routing's
// and nothing here repeats them: the store reads what they need in one BatchGetItem,
// the send loop (service.Writer) calls routing.Decide per recipient, and the store
// writes each decision as a status record.

// DefaultStatusTTL is how long a notification's status records are kept (after their
// deferral, if any) unless WithStatusTTL says otherwise.
const DefaultStatusTTL = 30 * 24 * time.Hour

// WithStatusTTL sets how long status records stay readable (TTL attribute expiresAt;
// default DefaultStatusTTL).
func WithStatusTTL(d time.Duration) Option { return func(s *Store) { s.statusTTL = d } }

// Attribute names of status items (statusItem) that updates name.
const (
	statusAttrStatus    = "status"
	statusAttrReason    = "reason"
	statusAttrUpdatedAt = "updatedAt"
	statusAttrDeferred  = "deferredUntil"
)

// statusItem is a notification's status summary (sk "S": Status is written or skipped,
// Reason in-app's skip reason) or one delivery record (sk "D#{key}", key an
// inbox.DeliveryKey). A QUEUED record carries what its delivery sends (To, Platform and
// the channel's content: Subject/Text/HTML for email, Title/Body for push, Text for SMS,
// Payload for a webhook); the record drops it once SENT, FAILED or SKIPPED. ClaimUntil is
// set while a worker holds the record (ClaimDelivery), Attempts counts the claims. Times
// are Unix milliseconds (0: not yet); TTL is DynamoDB's (epoch seconds).
type statusItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	UserID     string `dynamodbav:"userId"`
	Status     string `dynamodbav:"status"`
	Reason     string `dynamodbav:"reason,omitempty"`
	CreatedAt  int64  `dynamodbav:"createdAt"`
	Channel    string `dynamodbav:"channel,omitempty"`
	Provider   string `dynamodbav:"provider,omitempty"`
	Attempts   int    `dynamodbav:"attempts"`
	SentAt     int64  `dynamodbav:"sentAt,omitempty"`
	// DeliveredAt and OpenedAt are the times providers report (ApplyProviderEvent):
	// lenientMillis, so that no stored value of theirs can fail a status read.
	DeliveredAt   lenientMillis `dynamodbav:"deliveredAt,omitempty"`
	DeferredUntil int64         `dynamodbav:"deferredUntil,omitempty"`
	Error         string        `dynamodbav:"error,omitempty"`
	UpdatedAt     int64         `dynamodbav:"updatedAt"`
	TTL           int64         `dynamodbav:"expiresAt"`

	DeviceID          string        `dynamodbav:"deviceId,omitempty"`
	ProviderMessageID string        `dynamodbav:"providerMessageId,omitempty"`
	OpenedAt          lenientMillis `dynamodbav:"openedAt,omitempty"`
	ClaimUntil        int64         `dynamodbav:"claimUntil,omitempty"`
	ClaimID           string        `dynamodbav:"claimId,omitempty"`
	NextAttemptAt     int64         `dynamodbav:"nextAttemptAt,omitempty"`
	To                string        `dynamodbav:"to,omitempty"`
	Platform          string        `dynamodbav:"platform,omitempty"`
	Subject           string        `dynamodbav:"subject,omitempty"`
	Text              string        `dynamodbav:"text,omitempty"`
	HTML              string        `dynamodbav:"html,omitempty"`
	Title             string        `dynamodbav:"title,omitempty"`
	Body              string        `dynamodbav:"body,omitempty"`
	Payload           []byte        `dynamodbav:"payload,omitempty"`
	// Category and TargetKind/TargetID are the notification's, kept on a QUEUED record
	// for RecheckDelivery.
	Category   string `dynamodbav:"category,omitempty"`
	TargetKind string `dynamodbav:"targetKind,omitempty"`
	TargetID   string `dynamodbav:"targetId,omitempty"`
	// NotifStatus and NotifReason are the summary's Status and Reason, carried by every
	// delivery record of a send that wrote records and no summary (addStatus): with
	// UserID and CreatedAt, the summary itself, read from the records in the Query that
	// reads them (statusOf). Empty on a record whose notification has a summary item.
	NotifStatus string `dynamodbav:"notifStatus,omitempty"`
	NotifReason string `dynamodbav:"notifReason,omitempty"`
}

// key returns the record's key (inbox.DeliveryKey) from its sort key.
func (it *statusItem) key() string { return strings.TrimPrefix(it.SK, skDeliveryPrefix) }

// userProfileItem is a user's channel profile (AP24) and push devices: Devices maps a
// device id to the device (at most inbox.MaxDevices); DevicesRev counts the changes of
// Devices (an eviction rewrites the map on condition that it is the one read). The
// recipient's addresses are attributes of their own, each named by its channel's
// inbox.ChannelSpec.AddressKey ("email", "phone", ...: profileAddresses reads them,
// PutUserProfile writes them), beside the struct's.
type userProfileItem struct {
	PK         string                `dynamodbav:"pk"`
	SK         string                `dynamodbav:"sk"`
	EntityType string                `dynamodbav:"entityType"`
	Locale     string                `dynamodbav:"locale,omitempty"`
	Timezone   string                `dynamodbav:"timezone,omitempty"`
	UpdatedAt  int64                 `dynamodbav:"updatedAt"`
	Devices    map[string]deviceAttr `dynamodbav:"devices,omitempty"`
	DevicesRev int64                 `dynamodbav:"devicesRev,omitempty"`
}

// route is what a send does for one recipient (of its routing.Plan): the decisions of
// the channels it considered (routing.Decide's: in inbox.Channels order, a push decision
// per device; in-app always among them), when in-app is queued the recipient's group as
// read, and the content rendered for the recipient (nil: the send's title and body).
type route struct {
	decisions []routing.Decision
	grp       *groupItem
	content   *inbox.Rendered
}

// inApp returns the in-app decision of r (routing.InApp).
func (r *route) inApp() routing.Decision { return routing.InApp(r.decisions) }

// ReadRecipients reads what a send's decisions and writes need of users of tenantID, in
// ONE strongly consistent BatchGetItem (AP13; one call per 100 keys): each user's PREFS
// (unless need.Prefs says the cached configuration does without), their PROFILE (AP24,
// with their push devices) when need.Profile, their group need.GroupKey (AP15; the send's
// transactions are conditioned on it) when set, and the tenant's settings (AP23) when this
// instance has not cached them. It decides nothing: the values are returned as stored
// (zero where an item is missing), with the tenant's configuration and the store's time.
func (s *Store) ReadRecipients(ctx context.Context, tenantID string, users []string, need routing.Need) (routing.Read, error) {
	set, cached := s.settings.get(tenantID)
	cfg := s.config(tenantID, set)
	prefs := !cached || need.Prefs == nil || need.Prefs(cfg)
	gk := need.GroupKey
	setKey := itemKey{settingsPK(tenantID), skSettings}
	keys := make([]itemKey, 0, 3*len(users)+1)
	if !cached {
		keys = append(keys, setKey)
	}
	for _, u := range users {
		pk := userPK(inbox.Viewer{TenantID: tenantID, UserID: u})
		if prefs {
			keys = append(keys, itemKey{pk, skPrefs})
		}
		if need.Profile {
			keys = append(keys, itemKey{pk, skUserProfile})
		}
		if gk != "" {
			keys = append(keys, itemKey{pk, groupSK(gk)})
		}
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{consistent: true})
	if err != nil {
		return routing.Read{}, err
	}
	if !cached {
		if set, err = decodeSettings(got[setKey]); err != nil {
			return routing.Read{}, err
		}
		s.settings.put(tenantID, set)
		cfg = s.config(tenantID, set)
		prefs = need.Prefs == nil || need.Prefs(cfg)
	}
	out := routing.Read{Tenant: cfg, Recipients: make(map[string]routing.Recipient, len(users)),
		Groups: map[string]routing.Group{}, At: s.now()}
	// The recipients' addresses on the tenant's suppression list (AP27): a second
	// BatchGetItem, only when some recipient has an email address or a phone number.
	type suppressed struct {
		user, channel string
		key           itemKey
	}
	var supp []suppressed
	for _, u := range users {
		pk := userPK(inbox.Viewer{TenantID: tenantID, UserID: u})
		r := routing.Recipient{ID: u}
		if prefs {
			if r.Own, err = decodePrefs(got[itemKey{pk, skPrefs}]); err != nil {
				return routing.Read{}, err
			}
		}
		if r.Profile, r.Devices, err = decodeUserDevices(got[itemKey{pk, skUserProfile}]); err != nil {
			return routing.Read{}, err
		}
		out.Recipients[u] = r
		if need.Profile {
			for _, ch := range []string{inbox.ChannelEmail, inbox.ChannelSMS} {
				spec, _ := inbox.Spec(ch)
				if a, err := inbox.NormalizeAddress(ch, spec.Address(r.Profile)); err == nil {
					supp = append(supp, suppressed{u, ch, itemKey{suppressionPK(tenantID, ch, a), skSuppression}})
				}
			}
		}
		if gk == "" {
			continue
		}
		raw, ok := got[itemKey{pk, groupSK(gk)}]
		if !ok {
			out.Groups[u] = routing.Group{Key: gk, Members: map[string]string{}}
			continue
		}
		g, err := decodeGroup(raw)
		if err != nil {
			return routing.Read{}, fmt.Errorf("decode group: %w", err)
		}
		out.Groups[u] = g.plain()
	}
	if len(supp) > 0 {
		// Recipients may share an address: each key once (BatchGetItem refuses repeats).
		keys := make([]itemKey, 0, len(supp))
		seen := make(map[itemKey]bool, len(supp))
		for _, x := range supp {
			if !seen[x.key] {
				seen[x.key] = true
				keys = append(keys, x.key)
			}
		}
		found, err := s.batchGet(ctx, keys, batchGetOptions{})
		if err != nil {
			return routing.Read{}, err
		}
		for _, x := range supp {
			if _, ok := found[x.key]; !ok {
				continue
			}
			r := out.Recipients[x.user]
			if r.Suppressed == nil {
				r.Suppressed = map[string]bool{}
			}
			r.Suppressed[x.channel] = true
			out.Recipients[x.user] = r
		}
	}
	return out, nil
}

// plain is g as a routing.Group.
func (g *groupItem) plain() routing.Group {
	return routing.Group{Key: g.GroupKey, Type: g.Type, TargetKind: g.TargetKind, TargetID: g.TargetID,
		Category: g.Category, Rev: g.Rev, Members: g.Members, Stored: g.exists}
}

// groupOf is the stored form of v's group g as read.
func groupOf(v inbox.Viewer, g routing.Group) *groupItem {
	members := g.Members
	if members == nil {
		members = map[string]string{}
	}
	return &groupItem{UserPK: userPK(v), GroupKey: g.Key, Type: g.Type, TargetKind: g.TargetKind, TargetID: g.TargetID,
		Category: g.Category, Rev: g.Rev, Members: members, exists: g.Stored}
}

// maxTxnActions is TransactWriteItems' limit of actions. One recipient's send holds at
// most 35: the guard, the notification, META, the group, the expiry task, the throttle
// counter, the status summary, a record per channel but in-app and push (4) and per push
// device (inbox.MaxDevices), and a deliver task per record (4 + inbox.MaxDevices).
const maxTxnActions = 100

// addStatus adds to t the status records of user's notification id (written at now by a
// send of in that decided r) and the delivery task of every queued record but in-app's:
// one record per decision but in-app's (a skipped channel SKIPPED with its reason; any
// other QUEUED, with deferredUntil when deferred, and what its delivery sends: the
// address, the device, the channel's content, a webhook's payload) and its TaskDeliver
// (Token: the record's key), due now or at the deferral; and the summary (written, or
// skipped with in-app's reason) as an item of its own only when there is no other
// record, or when the send closes a batch (whose summary said batching until now): else
// every record carries the summary's status and reason (NotifStatus, NotifReason; each
// record has the user and createdAt already), and statusOf reads the summary from them
// in the same Query. In-app's record is not written: it says nothing the summary does
// not (delivered by the transaction itself at createdAt, or skipped with the summary's
// reason), and statusOf derives it from the summary. Every item carries a TTL of the
// store's status TTL after the latest deferral. The Puts are unconditional: the guard's
// condition makes the transaction commit once.
func (s *Store) addStatus(t *txn, v inbox.Viewer, id string, in inbox.SendInput, r *route, now time.Time) error {
	pk := notifStatusPK(v.TenantID, id)
	last := now
	for _, d := range r.decisions {
		if d.Deferred.After(last) {
			last = d.Deferred
		}
	}
	ttl := last.Add(s.statusTTL).Unix()
	ms := now.UnixMilli()
	sum := statusItem{PK: pk, SK: skStatusSummary, EntityType: entityStatusSummary, UserID: v.UserID,
		Status: inbox.NotificationWritten, CreatedAt: ms, UpdatedAt: ms, TTL: ttl}
	if reason := r.inApp().Reason; reason != "" {
		sum.Status, sum.Reason = inbox.NotificationSkipped, reason
	}
	rendered := inbox.Rendered{Title: in.Title, Body: in.Body}
	if r.content != nil {
		rendered = *r.content
	}
	var items []statusItem
	for _, d := range r.decisions {
		if d.Channel == inbox.ChannelInApp {
			continue // derived from the summary (statusOf)
		}
		it := statusItem{PK: pk, SK: deliverySK(d.Key), EntityType: entityDelivery, UserID: v.UserID,
			Channel: d.Channel, Status: inbox.DeliveryQueued, CreatedAt: ms, UpdatedAt: ms, TTL: ttl}
		switch {
		case d.Reason != "":
			it.Status, it.Reason = inbox.DeliverySkipped, d.Reason
		default:
			if !d.Deferred.IsZero() {
				it.DeferredUntil = d.Deferred.UnixMilli()
			}
			it.To = d.To
			it.Category = in.Category
			if in.Target != nil {
				it.TargetKind, it.TargetID = in.Target.Kind, in.Target.TargetID
			}
			c := rendered.Content(d.Channel)
			it.Subject, it.HTML, it.Text, it.Title, it.Body = c.Subject, c.HTML, c.Text, c.Title, c.Body
			switch d.Channel {
			case inbox.ChannelPush:
				it.DeviceID, it.Platform = d.Device.ID, d.Device.Platform
			case inbox.ChannelWebhook:
				p, err := webhookPayload(v, id, in, now)
				if err != nil {
					return err
				}
				it.Payload = p
			}
		}
		items = append(items, it)
	}
	if len(items) == 0 || in.BatchClose != nil {
		// The summary is the only item the notification's id names (an in-app-only
		// send), or it replaces the batch's "batching" summary: an item of its own.
		items = append([]statusItem{sum}, items...)
	} else {
		for i := range items {
			items[i].NotifStatus, items[i].NotifReason = sum.Status, sum.Reason
		}
	}
	for _, it := range items {
		av, err := attributevalue.MarshalMap(it)
		if err != nil {
			return fmt.Errorf("encode status: %w", err)
		}
		t.add(itemKey{it.PK, it.SK}, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: av}})
	}
	for _, d := range r.decisions {
		if d.Reason != "" || d.Channel == inbox.ChannelInApp {
			continue
		}
		due := now
		if !d.Deferred.IsZero() {
			due = d.Deferred
		}
		task := newTask(inbox.TaskDeliver, v, id, due, d.Key)
		pk, sk := s.taskPlacement(task)
		t.add(itemKey{pk, sk}, s.ScheduleAction(task))
	}
	if len(t.acts) > maxTxnActions {
		return fmt.Errorf("store: a recipient's send transaction has %d actions, over TransactWriteItems' %d", len(t.acts), maxTxnActions)
	}
	return nil
}

// WebhookEventType is the type of the webhook payload a send writes ("type" of
// {"type","timestamp","data"}).
const WebhookEventType = "notification.created"

// webhookNotification is the "data" of a webhook payload: the notification as sent to
// user (id: its notification id, or its status id when in-app was skipped).
type webhookNotification struct {
	ID        string          `json:"id"`
	UserID    string          `json:"userId"`
	Type      string          `json:"type,omitempty"`
	Category  string          `json:"category,omitempty"`
	Title     string          `json:"title"`
	Body      string          `json:"body,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Actor     *webhookActor   `json:"actor,omitempty"`
	Target    *webhookTarget  `json:"target,omitempty"`
	Actions   []webhookAction `json:"actions,omitempty"`
	GroupKey  string          `json:"groupKey,omitempty"`
	CreatedAt string          `json:"createdAt"`
	ExpiresAt string          `json:"expiresAt,omitempty"`
}

type webhookActor struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	AvatarURL string `json:"avatarUrl,omitempty"`
	URL       string `json:"url,omitempty"`
}

type webhookTarget struct {
	ID    string `json:"id"`
	Kind  string `json:"kind,omitempty"`
	Title string `json:"title,omitempty"`
	URL   string `json:"url,omitempty"`
}

type webhookAction struct {
	Label string `json:"label"`
	URL   string `json:"url"`
}

// webhookPayload returns the JSON body of the WEBHOOK delivery of v's notification id,
// sent at now: {"type": WebhookEventType, "timestamp": RFC 3339, "data": the notification}.
func webhookPayload(v inbox.Viewer, id string, in inbox.SendInput, now time.Time) ([]byte, error) {
	n := webhookNotification{ID: id, UserID: v.UserID, Type: in.Type, Category: in.Category, Title: in.Title,
		Body: in.Body, GroupKey: in.GroupKey, CreatedAt: now.UTC().Format(time.RFC3339Nano)}
	if len(in.Payload) > 0 {
		n.Payload = json.RawMessage(in.Payload)
	}
	if a := in.Actor; a != nil {
		n.Actor = &webhookActor{ID: a.ActorID, Name: a.Name, AvatarURL: a.AvatarURL, URL: a.URL}
	}
	if tg := in.Target; tg != nil {
		n.Target = &webhookTarget{ID: tg.TargetID, Kind: tg.Kind, Title: tg.Title, URL: tg.URL}
	}
	for _, a := range in.Actions {
		n.Actions = append(n.Actions, webhookAction{Label: a.Label, URL: a.URL})
	}
	if !in.ExpiresAt.IsZero() {
		n.ExpiresAt = in.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(struct {
		Type      string              `json:"type"`
		Timestamp string              `json:"timestamp"`
		Data      webhookNotification `json:"data"`
	}{WebhookEventType, now.UTC().Format(time.RFC3339Nano), n})
	if err != nil {
		return nil, fmt.Errorf("encode webhook payload: %w", err)
	}
	return b, nil
}

// Status returns the status of notification id of tenantID: its summary and the record
// of every channel its send considered (push: one per device; in-app's derived from the
// summary, withInApp), in inbox.Channels order, then by key. ONE strongly consistent
// Query of the notification's status partition (AP22). Errors: BAD_USER_INPUT for ids that
// could break out of their key, NOT_FOUND when the notification has no status (never
// sent, or its records expired).
func (s *Store) Status(ctx context.Context, tenantID, notificationID string) (inbox.NotificationStatus, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.NotificationStatus{}, err
	}
	if err := inbox.CheckID("notification id", notificationID); err != nil {
		return inbox.NotificationStatus{}, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: notifStatusPK(tenantID, notificationID)}},
		ConsistentRead:            aws.Bool(true),
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return inbox.NotificationStatus{}, fmt.Errorf("query status: %w", err)
	}
	st, err := statusOf(notificationID, out.Items)
	if err != nil {
		return inbox.NotificationStatus{}, err
	}
	return withInApp(st), nil
}

// withInApp is st (statusOf's: the records as stored) with its in-app record derived
// from the summary where none is stored (derivedInApp), in its channel order.
func withInApp(st inbox.NotificationStatus) inbox.NotificationStatus {
	c, ok := derivedInApp(st)
	if !ok {
		return st
	}
	i := slices.IndexFunc(st.Channels, func(o inbox.ChannelStatus) bool {
		return slices.Index(inbox.Channels, o.Channel) > slices.Index(inbox.Channels, inbox.ChannelInApp)
	})
	if i < 0 {
		i = len(st.Channels)
	}
	st.Channels = slices.Insert(st.Channels, i, c)
	return st
}

// statusOf is the status of notification notificationID from the items of its status
// partition: the summary (its item, else as the records carry it: NotifStatus) and the
// delivery records, in channel then key order. Errors: NOT_FOUND without a summary
// either way; an item that does not decode (not one this store wrote).
// A time no status can show (see msTimeUTC, lenientMillis) is left out, not an error.
func statusOf(notificationID string, items []map[string]types.AttributeValue) (inbox.NotificationStatus, error) {
	st := inbox.NotificationStatus{ID: notificationID}
	found, carried := false, false
	for _, raw := range items {
		var it statusItem
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			return inbox.NotificationStatus{}, fmt.Errorf("decode status: %w", err)
		}
		if it.SK == skStatusSummary {
			found = true
			st.UserID, st.Status, st.Reason, st.CreatedAt = it.UserID, it.Status, it.Reason, msTimeUTC(it.CreatedAt)
			continue
		}
		if !found && !carried && it.NotifStatus != "" {
			// A send that wrote records and no summary item: each record carries it.
			carried = true
			st.UserID, st.Status, st.Reason, st.CreatedAt = it.UserID, it.NotifStatus, it.NotifReason, msTimeUTC(it.CreatedAt)
		}
		st.Channels = append(st.Channels, inbox.ChannelStatus{Channel: it.Channel, Key: it.key(), DeviceID: it.DeviceID,
			Provider: it.Provider, ProviderMessageID: it.ProviderMessageID, Status: it.Status,
			Attempts: it.Attempts, SentAt: msTimeUTC(it.SentAt), DeliveredAt: msTimeUTC(int64(it.DeliveredAt)),
			OpenedAt: msTimeUTC(int64(it.OpenedAt)), DeferredUntil: msTimeUTC(it.DeferredUntil), Error: it.Error,
			Reason: it.Reason, UpdatedAt: msTimeUTC(it.UpdatedAt)})
	}
	if !found && !carried {
		return inbox.NotificationStatus{}, inbox.Errorf(inbox.CodeNotFound,
			"notification %q has no status: unknown id, or not written yet (a send still in its lane or scheduled for a later sendAt has none until it is written)", notificationID)
	}
	slices.SortStableFunc(st.Channels, func(a, b inbox.ChannelStatus) int {
		if c := slices.Index(inbox.Channels, a.Channel) - slices.Index(inbox.Channels, b.Channel); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return st, nil
}

// derivedInApp is the in-app delivery record of st (its summary and the records as
// stored), derived from the summary when none is stored (addStatus writes none): a written
// notification was delivered by its send's transaction (provider inbox, one attempt,
// sent, delivered and updated at createdAt); a skipped one had in-app skipped with the
// summary's reason at createdAt. false when a record is stored (written before records
// were derived) or the summary says neither.
func derivedInApp(st inbox.NotificationStatus) (inbox.ChannelStatus, bool) {
	if slices.ContainsFunc(st.Channels, func(c inbox.ChannelStatus) bool { return c.Channel == inbox.ChannelInApp }) {
		return inbox.ChannelStatus{}, false
	}
	c := inbox.ChannelStatus{Channel: inbox.ChannelInApp, Key: inbox.ChannelInApp, UpdatedAt: st.CreatedAt}
	switch st.Status {
	case inbox.NotificationWritten:
		c.Status, c.Provider, c.Attempts, c.SentAt, c.DeliveredAt = inbox.DeliveryDelivered, inbox.ProviderInbox, 1, st.CreatedAt, st.CreatedAt
	case inbox.NotificationSkipped:
		c.Status, c.Reason = inbox.DeliverySkipped, st.Reason
	default:
		return inbox.ChannelStatus{}, false
	}
	return c, true
}

// maxShownMillis is the last millisecond of year 9999 (9999-12-31T23:59:59.999Z), the
// latest time RFC 3339 (REST's JSON, GraphQL's DateTime) can show.
const maxShownMillis = 253402300799999

// msTimeUTC is Unix milliseconds as a UTC time. 0 is the zero time (not yet), and so is
// a value no status could show or that this store never writes: before the Unix epoch,
// or after year 9999 (a far-future time stored before providers' times were checked, a
// foreign item). Left out, such a time cannot make a read fail.
func msTimeUTC(ms int64) time.Time {
	if ms <= 0 || ms > maxShownMillis {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// lenientMillis is a stored time in Unix milliseconds that decodes from whatever is
// stored: a number that is not an integer, or does not fit an int64, or an attribute
// that is not a number, decodes as 0 (not yet) where attributevalue would fail the whole
// item. It marshals as the int64 it is.
type lenientMillis int64

// UnmarshalDynamoDBAttributeValue implements attributevalue.Unmarshaler.
func (m *lenientMillis) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	*m = 0
	if n, ok := av.(*types.AttributeValueMemberN); ok {
		if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			*m = lenientMillis(v)
		}
	}
	return nil
}

// SkipDelivery marks the delivery record key (inbox.DeliveryKey: a channel, or
// "PUSH#{deviceId}") of notification id of tenantID SKIPPED with reason, on condition
// that it is still QUEUED (a claim, deferredUntil, nextAttemptAt and the content it
// carried are removed). It reports whether it changed the record: false, with no write,
// when the record is not QUEUED (a second run of the same task) or does not exist. One
// UpdateItem (AP22). Errors: BAD_USER_INPUT for malformed ids or key.
func (s *Store) SkipDelivery(ctx context.Context, tenantID, notificationID, key, reason string) (bool, error) {
	ref := inbox.DeliveryRef{TenantID: tenantID, NotificationID: notificationID, Key: key}
	if err := ref.Check(); err != nil {
		return false, err
	}
	u := newRecordUpdate(s.now()).set(statusAttrStatus, inbox.DeliverySkipped).set(statusAttrReason, reason).
		remove(attrClaimUntil, statusAttrDeferred, attrNextAttemptAt).removeContent()
	ok, err := s.updateRecord(ctx, ref, u, expression.AttributeExists(expression.Name(attrPK)).
		And(expression.Name(statusAttrStatus).Equal(expression.Value(inbox.DeliveryQueued))))
	if err != nil {
		return false, fmt.Errorf("skip delivery: %w", err)
	}
	return ok, nil
}

// decodeUserProfile reads a PROFILE item of a user (nil: none, the zero profile).
func decodeUserProfile(item map[string]types.AttributeValue) (inbox.UserProfile, error) {
	p, _, err := decodeUserDevices(item)
	return p, err
}

// decodeUserDevices reads a PROFILE item of a user (nil: none): the profile and the push
// devices, oldest first (by creation, then id).
func decodeUserDevices(item map[string]types.AttributeValue) (inbox.UserProfile, []inbox.Device, error) {
	if item == nil {
		return inbox.UserProfile{}, nil, nil
	}
	var it userProfileItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return inbox.UserProfile{}, nil, fmt.Errorf("decode user profile: %w", err)
	}
	addrs, err := profileAddresses(item)
	if err != nil {
		return inbox.UserProfile{}, nil, err
	}
	return inbox.UserProfile{Addresses: addrs, Locale: it.Locale, Timezone: it.Timezone}, it.devices(), nil
}

// profileAddresses reads the addresses of a PROFILE item: the attribute of each
// registered channel's AddressKey (nil when it has none).
func profileAddresses(item map[string]types.AttributeValue) (map[string]string, error) {
	var out map[string]string
	for _, k := range inbox.AddressKeys {
		av, ok := item[k]
		if !ok {
			continue
		}
		var v string
		if err := attributevalue.Unmarshal(av, &v); err != nil {
			return nil, fmt.Errorf("decode user profile: %s: %w", k, err)
		}
		if v == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}
