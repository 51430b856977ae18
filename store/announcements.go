package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

// Announcements (AP29, DESIGN.md "Announcements (v3)"): a tenant's announcements are one
// item collection, pk annPK(t):
//
//	sk "A#{ULID}"  one item per announcement (entity Announcement), its whole content
//	sk "SEQ"       the tenant's announcement sequence (entity AnnouncementSeq), seq ADD 1
//	               with every create and withdraw, in the same transaction
//
// Creating one is ONE TransactWriteItems of three writes whatever the tenant's size: the
// idempotency guard (guardPK(t, key) / "ANN"), the announcement, and the sequence, on
// condition that the sequence is still the one read (so MaxActiveAnnouncements holds
// under concurrent creates). Withdrawing is one transaction of two. The set of active
// ones is one Query of the collection (LoadAnnouncements), cached per instance by the
// service. What a user did to one is an attribute of their META, "an#{ULID}" (annMarkAttr),
// written by MarkAnnouncements: never a copy of the announcement, never a counter.

const (
	entityAnnouncement    = "Announcement"
	entityAnnouncementSeq = "AnnouncementSeq"
	skAnnouncementPrefix  = "A#"
	skAnnouncementSeq     = "SEQ"
	// skAnnouncementGuard is the sort key of an announcement's idempotency guard under
	// guardPK (recipients' guards are "R#{user}").
	skAnnouncementGuard = "ANN"
	// annMarkAttr + ULID is the META attribute holding a user's mark of an announcement.
	annMarkAttr = "an#"
	// annCommitWindow bounds how long after its id's time an announcement may commit
	// (CreateAnnouncement refuses later): a set read more than this after an id's time,
	// without it, proves it inactive, so its marks may be pruned (MarkAnnouncements).
	annCommitWindow = 15 * time.Minute
)

// annPK is the partition of a tenant's announcements (AP29).
func annPK(tenantID string) string { return "T#" + tenantID + "#ANN" }

// announcementItem is an announcement as stored. Times are Unix milliseconds.
type announcementItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	ID         string `dynamodbav:"id"`
	// Type is "annType", not "type": with pk and id, "type" would put the item in GSI2
	// (the type index of notifications), two more write units for nothing.
	Type        string       `dynamodbav:"annType"`
	Category    string       `dynamodbav:"category,omitempty"`
	Title       string       `dynamodbav:"title,omitempty"`
	Body        string       `dynamodbav:"body,omitempty"`
	Payload     string       `dynamodbav:"payload,omitempty"`
	Actor       *profileItem `dynamodbav:"actor,omitempty"`
	Target      *profileItem `dynamodbav:"target,omitempty"`
	Actions     []actionItem `dynamodbav:"actions,omitempty"`
	CreatedAt   int64        `dynamodbav:"createdAt"`
	ExpireAt    int64        `dynamodbav:"expireAt"`
	WithdrawnAt int64        `dynamodbav:"withdrawnAt,omitempty"`
	InputHash   string       `dynamodbav:"inputHash,omitempty"`
	// TTL (epoch seconds) removes the item a week after it expired, or a week after its
	// withdrawal (WithdrawAnnouncement).
	TTL int64 `dynamodbav:"expiresAt"`
}

func (it *announcementItem) announcement(tenant string) *inbox.Announcement {
	a := &inbox.Announcement{ID: it.ID, TenantID: tenant, Type: it.Type, Category: it.Category, Title: it.Title, Body: it.Body,
		CreatedAt: time.UnixMilli(it.CreatedAt).UTC(), ExpiresAt: time.UnixMilli(it.ExpireAt).UTC()}
	if it.Payload != "" {
		a.Payload = inbox.JSON(it.Payload)
	}
	if p := it.Actor; p != nil {
		a.Actor = &inbox.Actor{ActorID: p.ActorID, Name: p.Name, AvatarURL: p.AvatarURL, URL: p.URL}
	}
	if p := it.Target; p != nil {
		a.Target = &inbox.Target{TargetID: p.TargetID, Kind: p.Kind, Title: p.Title, URL: p.URL}
	}
	for _, x := range it.Actions {
		a.Actions = append(a.Actions, inbox.Action{Label: x.Label, URL: x.URL})
	}
	if it.WithdrawnAt != 0 {
		t := time.UnixMilli(it.WithdrawnAt).UTC()
		a.WithdrawnAt = &t
	}
	return a
}

// CreateAnnouncement stores in as a new announcement of tenantID with id (a ULID of now):
// one TransactWriteItems of three writes (guard, announcement, sequence), on condition that
// the sequence is still seq (what LoadAnnouncements read; 0 for none). hash identifies
// the content for the idempotency key. A replay of the key with the same hash answers the
// announcement written first (created false); with another hash, CONFLICT.
//
// Errors: BAD_USER_INPUT for a category or actions a notification could not have;
// CONFLICT for a reused key; errSeqMoved (retry after reading the set again) when
// another create or withdraw committed since the read; THROTTLED/UNAVAILABLE as any write.
func (s *Store) CreateAnnouncement(ctx context.Context, tenantID string, in inbox.AnnouncementInput, id, hash string, seq int64) (a *inbox.Announcement, created bool, err error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return nil, false, err
	}
	// A notification's rules for its category and actions (inbox.AnnouncementInput.Validate
	// checks the rest): a label of 1..100 characters and an absolute http(s) URL, never a
	// javascript: link rendered in every inbox of the tenant.
	if err := s.checkSendV2(inbox.SendInput{Category: in.Category, Actions: in.Actions}); err != nil {
		return nil, false, err
	}
	now := s.now()
	if now.Sub(ulidTime(id)) > annCommitWindow/2 {
		// A set read after annCommitWindow would take it for an inactive one.
		return nil, false, inbox.Errorf(inbox.CodeUnavailable, "the announcement's create took too long; retry")
	}
	exp := in.ExpiresAt
	if exp.IsZero() {
		exp = now.Add(inbox.DefaultAnnouncementTTL)
	}
	it := announcementItem{PK: annPK(tenantID), SK: skAnnouncementPrefix + id, EntityType: entityAnnouncement, ID: id,
		Type: in.Type, Category: in.Category, Title: in.Title, Body: in.Body, Payload: string(in.Payload),
		CreatedAt: ulidTime(id).UnixMilli(), ExpireAt: exp.UnixMilli(), InputHash: hash,
		TTL: exp.Add(ttlGrace).Unix()}
	if in.Actor != nil {
		it.Actor = &profileItem{ActorID: in.Actor.ActorID, Name: in.Actor.Name, AvatarURL: in.Actor.AvatarURL, URL: in.Actor.URL}
	}
	if in.Target != nil {
		it.Target = &profileItem{TargetID: in.Target.TargetID, Kind: in.Target.Kind, Title: in.Target.Title, URL: in.Target.URL}
	}
	for _, x := range in.Actions {
		it.Actions = append(it.Actions, actionItem{Label: x.Label, URL: x.URL})
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, false, fmt.Errorf("marshal announcement: %w", err)
	}
	guard, err := attributevalue.MarshalMap(guardItem{PK: guardPK(tenantID, in.IdempotencyKey), SK: skAnnouncementGuard,
		EntityType: entityGuard, NotificationID: id, InputHash: hash, ExpiresAt: now.Add(s.idemTTL).Unix()})
	if err != nil {
		return nil, false, fmt.Errorf("marshal guard: %w", err)
	}
	var t txn
	notExists := aws.String("attribute_not_exists(pk)")
	gk := itemKey{guardPK(tenantID, in.IdempotencyKey), skAnnouncementGuard}
	t.add(gk, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: guard, ConditionExpression: notExists}})
	t.add(itemKey{it.PK, it.SK}, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: item, ConditionExpression: notExists}})
	t.add(itemKey{it.PK, skAnnouncementSeq}, s.seqBump(tenantID, seq))
	_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
	if err == nil {
		return it.announcement(tenantID), true, nil
	}
	if t.conditionFailed(err, gk) {
		a, found, err := s.ReplayAnnouncement(ctx, tenantID, in.IdempotencyKey, hash)
		if err == nil && !found {
			err = inbox.Errorf(inbox.CodeUnavailable, "the announcement's idempotency guard is gone; retry")
		}
		return a, false, err
	}
	if t.conditionFailed(err, itemKey{it.PK, skAnnouncementSeq}) {
		return nil, false, errSeqMoved
	}
	return nil, false, fmt.Errorf("create announcement: %w", err)
}

// errSeqMoved says the tenant's announcement sequence moved since it was read.
var errSeqMoved = inbox.ErrAnnouncementSeqMoved

// seqBump is the sequence's update: ADD seq 1, on condition that it is seq (absent for 0).
func (s *Store) seqBump(tenantID string, seq int64) types.TransactWriteItem {
	u := &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{annPK(tenantID), skAnnouncementSeq}.av(),
		UpdateExpression:          aws.String("SET entityType = :e ADD seq :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": &types.AttributeValueMemberS{Value: entityAnnouncementSeq}, ":one": &types.AttributeValueMemberN{Value: "1"}},
	}
	if seq == 0 {
		u.ConditionExpression = aws.String("attribute_not_exists(seq)")
	} else {
		u.ConditionExpression = aws.String("seq = :seq")
		u.ExpressionAttributeValues[":seq"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)}
	}
	return types.TransactWriteItem{Update: u}
}

// ReplayAnnouncement answers an idempotency key of tenantID's announcements: the
// announcement its guard names (found true), found false when the key was never used
// (one consistent GetItem, and one more for the announcement). CONFLICT when the key was
// used for other content (another hash).
func (s *Store) ReplayAnnouncement(ctx context.Context, tenantID, key, hash string) (a *inbox.Announcement, found bool, err error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: itemKey{guardPK(tenantID, key), skAnnouncementGuard}.av()})
	if err != nil {
		return nil, false, fmt.Errorf("read announcement guard: %w", err)
	}
	if len(out.Item) == 0 {
		return nil, false, nil
	}
	var g guardItem
	if err := attributevalue.UnmarshalMap(out.Item, &g); err != nil || g.NotificationID == "" {
		return nil, false, fmt.Errorf("read announcement guard: malformed guard (%v)", err)
	}
	if g.InputHash != hash {
		return nil, false, inbox.Errorf(inbox.CodeConflict, "idempotency key already used for another announcement")
	}
	a, err = s.Announcement(ctx, tenantID, g.NotificationID)
	if err != nil {
		return nil, false, err
	}
	return a, true, nil
}

// Announcement reads one announcement of tenantID (GetItem): NOT_FOUND when there is none
// (never created, or removed by TTL a week after it expired). A withdrawn one is returned
// with WithdrawnAt.
func (s *Store) Announcement(ctx context.Context, tenantID, id string) (*inbox.Announcement, error) {
	if inbox.CheckID("tenant", tenantID) != nil || !ValidNotificationID(id) {
		return nil, inbox.Errorf(inbox.CodeNotFound, "announcement not found")
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: itemKey{annPK(tenantID), skAnnouncementPrefix + id}.av()})
	if err != nil {
		return nil, fmt.Errorf("read announcement: %w", err)
	}
	if out.Item == nil {
		return nil, inbox.Errorf(inbox.CodeNotFound, "announcement not found")
	}
	var it announcementItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("decode announcement: %w", err)
	}
	return it.announcement(tenantID), nil
}

// WithdrawAnnouncement withdraws announcement id of tenantID: it leaves every inbox (and
// every badge) at once. One transaction: the item's withdrawnAt and the sequence's ADD 1.
// Withdrawing one already withdrawn changes nothing (changed false). NOT_FOUND when there is
// no such announcement. The item's TTL becomes a week after the withdrawal.
func (s *Store) WithdrawAnnouncement(ctx context.Context, tenantID, id string) (a *inbox.Announcement, changed bool, err error) {
	a, err = s.Announcement(ctx, tenantID, id)
	if err != nil || a.WithdrawnAt != nil {
		return a, false, err
	}
	now := s.now()
	k := itemKey{annPK(tenantID), skAnnouncementPrefix + id}
	var t txn
	// TTL a week after the withdrawal, not after the expiry (up to a year ahead): every
	// set load reads the tenant's withdrawn items until TTL removes them.
	ttl := min(a.ExpiresAt.Unix(), now.Unix()) + int64(ttlGrace/time.Second)
	t.add(k, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: k.av(),
		UpdateExpression:    aws.String("SET withdrawnAt = :w, expiresAt = :ttl"),
		ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(withdrawnAt)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
			":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(ttl, 10)}}}})
	bump := s.seqBump(tenantID, 0)
	bump.Update.ConditionExpression = nil
	t.add(itemKey{annPK(tenantID), skAnnouncementSeq}, bump)
	if _, err := s.db.TransactWriteItems(ctx, t.input(ctx)); err != nil {
		if t.conditionFailed(err, k) {
			// Withdrawn meanwhile (by a retry whose answer was lost, or another caller).
			a, err := s.Announcement(ctx, tenantID, id)
			return a, false, err
		}
		return nil, false, fmt.Errorf("withdraw announcement: %w", err)
	}
	at := now.UTC().Truncate(time.Millisecond)
	a.WithdrawnAt = &at
	return a, true, nil
}

// LoadAnnouncements reads tenantID's announcement set: ONE Query of the collection (pages
// of it only past 1 MB), strongly consistent, from the oldest announcement that may still
// be active (inbox.MaxAnnouncementTTL ago) to the sequence item. Only the announcements
// active at now are kept, newest first.
func (s *Store) LoadAnnouncements(ctx context.Context, tenantID string) (*inbox.AnnouncementSet, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return nil, err
	}
	now := s.now()
	lo := skAnnouncementPrefix + ulidAt(now.Add(-inbox.MaxAnnouncementTTL))
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: annPK(tenantID)},
			":lo": &types.AttributeValueMemberS{Value: lo},
			":hi": &types.AttributeValueMemberS{Value: skAnnouncementSeq},
		},
		ScanIndexForward: aws.Bool(false),
	}
	set := &inbox.AnnouncementSet{ReadAt: now}
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("load announcements: %w", err)
		}
		for _, raw := range out.Items {
			if keyOf(raw).sk == skAnnouncementSeq {
				if err := attributevalue.Unmarshal(raw["seq"], &set.Seq); err != nil {
					return nil, fmt.Errorf("decode announcement sequence: %w", err)
				}
				continue
			}
			var it announcementItem
			if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
				return nil, fmt.Errorf("decode announcement: %w", err)
			}
			if a := it.announcement(tenantID); a.Active(now) {
				set.Items = append(set.Items, a)
			}
		}
		if out.LastEvaluatedKey == nil {
			return set, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// ulidAt is the smallest ULID of time t (its random part zero).
func ulidAt(t time.Time) string {
	var u ulid.ULID
	if err := u.SetTime(ulid.Timestamp(t)); err != nil {
		return ""
	}
	return u.String()
}

// AnnouncementHash identifies an announcement's content for its idempotency key.
func AnnouncementHash(in inbox.AnnouncementInput) string {
	in.IdempotencyKey = ""
	b, _ := json.Marshal(in)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// encodeMark and decodeMark are an AnnouncementMark as META's attribute value: a string
// "mark;markedAt;readAt;seenAt;archivedAt;deleted" (times Unix ms, deleted 0 or 1).
func encodeMark(m inbox.AnnouncementMark) string {
	d := "0"
	if m.Deleted {
		d = "1"
	}
	return m.Mark + ";" + m.MarkedAt + ";" + strconv.FormatInt(m.ReadAt, 10) + ";" + strconv.FormatInt(m.SeenAt, 10) + ";" +
		strconv.FormatInt(m.ArchivedAt, 10) + ";" + d
}

func decodeMark(s string) (inbox.AnnouncementMark, bool) {
	p := strings.Split(s, ";")
	if len(p) != 6 {
		return inbox.AnnouncementMark{}, false
	}
	var m inbox.AnnouncementMark
	var err [3]error
	m.Mark, m.MarkedAt = p[0], p[1]
	m.ReadAt, err[0] = strconv.ParseInt(p[2], 10, 64)
	m.SeenAt, err[1] = strconv.ParseInt(p[3], 10, 64)
	m.ArchivedAt, err[2] = strconv.ParseInt(p[4], 10, 64)
	m.Deleted = p[5] == "1"
	return m, errors.Join(err[:]...) == nil
}

// marks returns META's announcement state: its watermarks and its marks.
func (m *metaItem) marks() *inbox.AnnouncementMarks {
	out := &inbox.AnnouncementMarks{ReadWM: m.ReadAllBefore, SeenWM: m.SeenAllBefore, ByID: m.AnnMarks}
	for c, st := range m.Cats {
		if st.ReadWM != "" {
			if out.CatReadWM == nil {
				out.CatReadWM = map[string]string{}
			}
			out.CatReadWM[c] = st.ReadWM
		}
		if st.SeenWM != "" {
			if out.CatSeenWM == nil {
				out.CatSeenWM = map[string]string{}
			}
			out.CatSeenWM[c] = st.SeenWM
		}
	}
	return out
}

// AnnouncementSource gives the store a tenant's announcement set (the service's cache
// per instance): it merges them into pages and badges. Set nil: none.
type AnnouncementSource interface {
	// Announcements returns tenantID's set; fresh asks for one read now rather than the
	// cached one (an id not found in the cache may be newer than it).
	Announcements(ctx context.Context, tenantID string, fresh bool) (*inbox.AnnouncementSet, error)
}

// UseAnnouncements makes the store merge src's announcements into inboxes and badges
// (app.Build sets the service's cache; the cache reads through LoadAnnouncements).
func (s *Store) UseAnnouncements(src AnnouncementSource) { s.ann = src }

// annSet is v's tenant's announcement set (nil when the store has no source).
func (s *Store) annSet(ctx context.Context, v inbox.Viewer, fresh bool) (*inbox.AnnouncementSet, error) {
	if s.ann == nil {
		return nil, nil
	}
	return s.ann.Announcements(ctx, v.TenantID, fresh)
}

// compose is m's badge with v's tenant's announcements added (inbox.ComposeBadge).
func (s *Store) compose(ctx context.Context, v inbox.Viewer, b inbox.Badge) (inbox.Badge, error) {
	set, err := s.annSet(ctx, v, false)
	if err != nil {
		return inbox.Badge{}, err
	}
	if set == nil {
		return b, nil
	}
	return inbox.ComposeBadge(b, set, s.now()), nil
}

// MarkAnnouncements applies op to v's marks of the announcements ids (ULIDs, without the
// "@"), as MarkAnnouncements' caller found them active in set: ONE consistent GetItem of
// META and ONE UpdateItem that sets each changed mark ("an#{id}") and removes the marks of
// announcements no longer active, with META's new clock, on condition that META's version
// is the one read (retried on conflict). del deletes them from v's inbox instead of op.
// Ids not active in set are returned in notFound. The badge after (v's own counters and
// marks, not composed) is published with the op's event and returned.
func (s *Store) MarkAnnouncements(ctx context.Context, v inbox.Viewer, set *inbox.AnnouncementSet, op inbox.StateOp, del bool,
	ids []string) (found []*inbox.Notification, changed int, notFound []string, b inbox.Badge, err error) {
	if !del && (op < inbox.OpRead || op > inbox.OpUnarchive) {
		return nil, 0, nil, inbox.Badge{}, inbox.Errorf(inbox.CodeBadUserInput, "announcements cannot be snoozed: archive them instead")
	}
	now := s.now()
	var act []*inbox.Announcement
	for _, id := range ids {
		if a := set.Find(id, now); a != nil {
			act = append(act, a)
		} else {
			notFound = append(notFound, inbox.AnnouncementRef+id)
		}
	}
	if len(act) == 0 {
		return nil, 0, notFound, inbox.Badge{}, nil
	}
	var fail error
	var gone []string // active, but deleted by v
	m, _, err := s.metaOnly(ctx, v, func(m *metaItem, clock string) *metaUpdate {
		marks := m.marks()
		up := newMetaUpdate(v)
		changed, found, gone, fail = 0, found[:0], gone[:0], nil
		for _, a := range act {
			cur := marks.ByID[a.ID]
			if del {
				// Deleted already (by an attempt whose answer was lost): deleted all the same.
				if !cur.Deleted {
					next := cur
					next.Deleted = true
					changed++
					up.set(annMarkAttr+a.ID, encodeMark(next))
				}
				found = append(found, inbox.AnnouncementNotification(a, marks))
				continue
			}
			if cur.Deleted {
				gone = append(gone, inbox.AnnouncementRef+a.ID)
				continue
			}
			next, ch, e := inbox.ApplyAnnouncementOp(op, a, marks, clock, now)
			if e != nil {
				fail = e // not reached: op was checked above
			}
			if ch {
				changed++
				up.set(annMarkAttr+a.ID, encodeMark(next))
			}
			one := *marks
			one.ByID = map[string]inbox.AnnouncementMark{a.ID: next}
			found = append(found, inbox.AnnouncementNotification(a, &one))
		}
		for id := range m.AnnMarks {
			// Only the marks of announcements set proves inactive: one created after set
			// was read (by a cache that has not heard of it yet) keeps its mark.
			if set.Find(id, now) == nil && !set.ReadAt.IsZero() && ulidTime(id).Before(set.ReadAt.Add(-annCommitWindow)) {
				up.remove(annMarkAttr + id)
			}
		}
		return up.require(attrVersion, m.Version, m.Version != 0)
	})
	notFound = append(notFound, gone...)
	if fail != nil {
		return nil, 0, nil, inbox.Badge{}, fail
	}
	if err != nil {
		return nil, 0, nil, inbox.Badge{}, fmt.Errorf("mark announcements: %w", err)
	}
	b = m.badge()
	kind := eventOf(op)
	if del {
		kind = inbox.EventDeleted
	}
	// The event names each announcement as the user's inbox does ("@<ULID>": its global
	// id's key), never as a bare ULID, which would name a notification of the user's own.
	refs := make([]string, len(act))
	for i, a := range act {
		refs[i] = inbox.AnnouncementRef + a.ID
	}
	s.publish(ctx, inbox.Change{Viewer: v, UnreadCount: b.Unread, Version: m.Version, Badge: b, Kind: kind, IDs: refs})
	return found, changed, notFound, b, nil
}

// mergeAnnouncements adds set's announcements visible to q (as v sees them under m) to a
// page's items in Query order (newest first, or oldest first when backward), inside the
// page's window (after the cursor start, or before it when backward), and returns the
// merged entries, at most want+1, in the same order.
func mergeAnnouncements(items []*notificationItem, set *inbox.AnnouncementSet, marks *inbox.AnnouncementMarks, q inbox.PageQuery,
	start string, backward bool, want int, now time.Time) []pageEntry {
	out := make([]pageEntry, 0, len(items)+4)
	for _, it := range items {
		out = append(out, pageEntry{id: it.ID, it: it})
	}
	if set != nil {
		for _, a := range set.Active(now) {
			if start != "" && ((!backward && a.ID >= start) || (backward && a.ID <= start)) {
				continue
			}
			if !inbox.AnnouncementVisible(a, inbox.StateOfAnnouncement(a, marks), q) {
				continue
			}
			out = append(out, pageEntry{id: a.ID, ann: a})
		}
	}
	slices.SortFunc(out, func(x, y pageEntry) int {
		if backward {
			return strings.Compare(x.id, y.id)
		}
		return strings.Compare(y.id, x.id)
	})
	// A personal page that ended (fewer than want+1 items) ends the list: announcements
	// older than its last item still belong, and are in out already; one that did not end
	// bounds it: nothing older than its (want+1)th item is known to be complete.
	if len(items) > want {
		last := items[len(items)-1].ID
		n := 0
		for _, e := range out {
			if (!backward && e.id >= last) || (backward && e.id <= last) {
				out[n] = e
				n++
			}
		}
		out = out[:n]
	}
	if len(out) > want+1 {
		out = out[:want+1]
	}
	return out
}

// pageEntry is one entry of a merged page: a notification item or an announcement.
type pageEntry struct {
	id  string
	it  *notificationItem
	ann *inbox.Announcement
}

// announcementsFor returns v's tenant's set for ids naming announcements: the cached one,
// or a fresh read when one of ids is not in it (created after the cache's read). Nil
// when the store has no source.
func (s *Store) announcementsFor(ctx context.Context, v inbox.Viewer, ids []string) (*inbox.AnnouncementSet, error) {
	set, err := s.annSet(ctx, v, false)
	if err != nil || set == nil {
		return set, err
	}
	now := s.now()
	for _, id := range ids {
		if set.Find(id, now) == nil && ValidNotificationID(id) {
			return s.annSet(ctx, v, true)
		}
	}
	return set, nil
}

// applyMixed is ApplyState of ids that name announcements (anns, without "@") and maybe
// notifications of v's own (own): the notifications as applyOwn does, then the
// announcements (MarkAnnouncements); the result lists both, the badge is the last read.
func (s *Store) applyMixed(ctx context.Context, v inbox.Viewer, ch inbox.StateChange, own, anns []string) (inbox.MarkResult, error) {
	if ch.Op == inbox.OpSnooze || ch.Op == inbox.OpUnsnooze {
		// Refused before anything is written, the ids of v's own included.
		return inbox.MarkResult{}, inbox.Errorf(inbox.CodeBadUserInput, "announcements cannot be snoozed: archive them instead")
	}
	res := inbox.MarkResult{NotFound: []string{}, Notifications: []*inbox.Notification{}}
	if len(own) > 0 {
		r, err := s.applyOwn(ctx, v, ch, own)
		if err != nil {
			return inbox.MarkResult{}, err
		}
		res = r
	}
	set, err := s.announcementsFor(ctx, v, anns)
	if err != nil {
		return inbox.MarkResult{}, err
	}
	found, changed, notFound, b, err := s.MarkAnnouncements(ctx, v, set, ch.Op, false, anns)
	if err != nil {
		return inbox.MarkResult{}, err
	}
	res.Notifications = append(res.Notifications, found...)
	res.Changed += changed
	res.NotFound = append(res.NotFound, notFound...)
	if len(found) > 0 {
		if res.Badge, err = s.compose(ctx, v, b); err != nil {
			return inbox.MarkResult{}, err
		}
		res.UnreadCount = res.Badge.Unread
	} else if len(own) == 0 {
		if res.Badge, err = s.Badge(ctx, v); err != nil {
			return inbox.MarkResult{}, err
		}
		res.UnreadCount = res.Badge.Unread
	}
	return res, nil
}

// deleteMixed is Delete of ids naming announcements (anns) and maybe v's own (own): an
// announcement is deleted from v's inbox by v's mark (deleted), never for anyone else.
func (s *Store) deleteMixed(ctx context.Context, v inbox.Viewer, own, anns []string) (inbox.DeleteResult, error) {
	res := inbox.DeleteResult{DeletedIDs: []string{}, NotFound: []string{}}
	if len(own) > 0 {
		r, err := s.deleteOwn(ctx, v, own)
		if err != nil {
			return inbox.DeleteResult{}, err
		}
		res = r
	}
	set, err := s.announcementsFor(ctx, v, anns)
	if err != nil {
		return inbox.DeleteResult{}, err
	}
	found, _, notFound, b, err := s.MarkAnnouncements(ctx, v, set, 0, true, anns)
	if err != nil {
		return inbox.DeleteResult{}, err
	}
	for _, n := range found {
		res.DeletedIDs = append(res.DeletedIDs, inbox.AnnouncementRef+n.ID)
	}
	res.NotFound = append(res.NotFound, notFound...)
	if len(found) > 0 {
		res.Badge, err = s.compose(ctx, v, b)
	} else if len(own) == 0 {
		res.Badge, err = s.Badge(ctx, v)
	}
	return res, err
}

// announcementNodes resolves the refs naming announcements ("@<ULID>", and the actors of
// those: an announcement's actor id is anchored on it) into out: the announcement as v sees
// it, nil when it is not active or v deleted it. One GetItem of META (v's marks) when any
// ref names one, the set from the cache (read again when an id is not in it).
func (s *Store) announcementNodes(ctx context.Context, v inbox.Viewer, refs []inbox.NodeRef, out []inbox.NodeResult) error {
	var ids []string
	for _, r := range refs {
		if id, ok := strings.CutPrefix(r.Notification, inbox.AnnouncementRef); ok && ValidNotificationID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	set, err := s.announcementsFor(ctx, v, ids)
	if err != nil || set == nil {
		return err
	}
	m, err := s.getMeta(ctx, v, false)
	if err != nil {
		return err
	}
	marks, now := m.marks(), s.now()
	for i, r := range refs {
		id, ok := strings.CutPrefix(r.Notification, inbox.AnnouncementRef)
		if !ok {
			continue
		}
		a := set.Find(id, now)
		if a == nil || marks.ByID[id].Deleted {
			continue
		}
		switch {
		case r.Profile.ID == "":
			out[i].Notification = inbox.AnnouncementNotification(a, marks)
		case r.Profile.TargetKind == "" && a.Actor != nil && a.Actor.ActorID == r.Profile.ID:
			c := *a.Actor
			c.Via = r.Notification
			out[i].Actor = &c
		}
	}
	return nil
}
