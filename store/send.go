package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Guards returns the guards of idempotency key of tenantID by recipient: what the sends
// of the key wrote so far (one strongly consistent Query of the key's partition).
func (s *Store) Guards(ctx context.Context, tenantID, key string) (map[string]routing.Guard, error) {
	gs, err := s.guards(ctx, tenantID, key)
	if err != nil {
		return nil, err
	}
	out := make(map[string]routing.Guard, len(gs))
	for u, g := range gs {
		out[u] = routing.Guard{InputHash: g.InputHash, NotificationID: g.NotificationID, StatusID: g.StatusID}
	}
	return out, nil
}

// guards reads every recipient guard of an idempotency key (Query on its partition,
// strongly consistent, following LastEvaluatedKey).
func (s *Store) guards(ctx context.Context, tenantID, key string) (map[string]guardItem, error) {
	out := map[string]guardItem{}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: guardPK(tenantID, key)}},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("query guards: %w", err)
		}
		for _, raw := range res.Items {
			var g guardItem
			if err := attributevalue.UnmarshalMap(raw, &g); err != nil {
				return nil, fmt.Errorf("decode guard: %w", err)
			}
			out[g.UserID] = g
		}
		if res.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// WriteRecipient writes one recipient's plan in one TransactWriteItems (AP7, AP8, AP22):
// Put its idempotency guard (attribute_not_exists), Put the notification
// (attribute_not_exists) and Update its META (ADD unreadCount 1, condition: the
// notification's id is above the markAllRead watermark), the notification as a member of
// its group (condition: the group's rev as read; groups.go), its expiry task, and the
// status records and deliver tasks of the plan's decisions (addStatus). A recipient whose
// in-app is skipped gets the guard and status records only. It renders, decides and
// publishes nothing; the caller publishes what it answers once it has answered.
//
// Conflicts are the transaction's own and retried here: when the inbox's clock passed the
// notification's id (a later notification or mark), a fresh id above it is taken, or a
// pre-assigned id (p.NotificationID) is kept while every read and seen watermark it falls
// under is below it (it is then unread and unseen, counted as such, and its group keeps
// its newest member first); a group changed since it was read is read again. When another
// call holds the guard already, its result is answered with Duplicate set (its
// notification with New false).
func (s *Store) WriteRecipient(ctx context.Context, p routing.Plan) (routing.Written, error) {
	if err := inbox.CheckID("tenant", p.TenantID); err != nil {
		return routing.Written{}, err
	}
	if err := inbox.CheckID("recipient", p.UserID); err != nil {
		return routing.Written{}, err
	}
	tenantID, user, in, hash := p.TenantID, p.UserID, p.Send, p.InputHash
	var wrote, dup bool
	v := inbox.Viewer{TenantID: tenantID, UserID: user}
	rt := &route{decisions: p.Decisions, content: p.Content}
	if p.Group != nil {
		rt.grp = groupOf(v, *p.Group)
	}
	muted := !rt.inApp().Queued()
	grp := rt.grp
	floor := ""
	statusID := ""          // the id of a recipient without a notification: its status only
	pre := p.NotificationID // "" once it cannot be used
	var below *metaItem     // META as read when pre is below its clock
	d, err := retryConflicts(ctx, func() (inbox.Delivery, error) {
		wrote, dup = false, false
		if grp == nil && !muted {
			gs, err := s.readGroups(ctx, v, []string{routing.GroupKey(in)})
			if err != nil {
				return inbox.Delivery{}, err
			}
			grp = gs[routing.GroupKey(in)]
		}
		now := s.now()
		guard := guardItem{PK: guardPK(tenantID, in.IdempotencyKey), SK: guardSK(user), EntityType: entityGuard,
			UserID: user, InputHash: hash, ExpiresAt: now.Add(s.idemTTL).Unix()}
		var it *notificationItem
		id := statusID
		if muted {
			if id == "" {
				// The id the accept answered for this recipient names its status.
				id = pre
				if id == "" {
					id = s.newID("")
				}
				statusID = id
			}
			guard.StatusID = id
		} else {
			id = pre
			if id == "" {
				id = s.newID(floor)
			}
			guard.NotificationID = id
			it = &notificationItem{PK: userPK(v), SK: notifSK(id), EntityType: entityNotification, ID: id,
				Type: in.Type, Category: in.Category, Title: in.Title, Body: in.Body, Payload: string(in.Payload),
				CreatedAt: now.UnixMilli(), GSI1PK: unreadPK(v), GSI1SK: notifSK(id), GroupKey: routing.GroupKey(in),
				Counted: countersV2}
			if in.Actor != nil {
				it.ActorID = in.Actor.ActorID
			}
			if in.Target != nil {
				it.TargetKind, it.TargetID = in.Target.Kind, in.Target.TargetID
			}
			for _, a := range in.Actions {
				it.Actions = append(it.Actions, actionItem{Label: a.Label, URL: a.URL})
			}
			if c := in.BatchClose; c != nil {
				it.ActivityCount = c.Count
				for _, a := range c.Activities {
					it.Activities = append(it.Activities, toActivityItem(a))
				}
			}
			if below != nil && in.BatchClose != nil {
				if wm := below.readWM(it.countedCategory()); wm >= id {
					it.Mark, it.MarkedAt = markUnread, s.newID(wm)
				}
			}
			if exp := routing.Expiry(in, now, p.Retention); !exp.IsZero() {
				it.ExpireAt = exp.UnixMilli()
				it.TTL = exp.Add(ttlGrace).Unix()
			}
		}
		t, err := s.sendTxn(v, &guard, it, grp, below)
		if err != nil {
			return inbox.Delivery{}, err
		}
		if err := s.addStatus(t, v, id, in, rt, now); err != nil {
			return inbox.Delivery{}, err
		}
		if in.BatchClose != nil {
			// The batch closes with its notification (or its status alone), once.
			k, a, err := s.batchCloseAction(v, in.BatchClose)
			if err != nil {
				return inbox.Delivery{}, err
			}
			t.add(k, a)
		}
		var thrKey itemKey
		if p.Throttle != nil {
			k, a, err := s.throttleCount(v, *p.Throttle)
			if err != nil {
				return inbox.Delivery{}, err
			}
			thrKey = k
			t.add(k, a)
		}
		_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
		wrote = err == nil
		if err != nil && grp != nil && t.conditionFailed(err, grp.key()) {
			grp = nil // changed since it was read: read again
		}
		switch {
		case t.conditionFailed(err, itemKey{guard.PK, guard.SK}):
			// A concurrent call with the same key got here first: its result stands.
			g, gerr := s.guard(ctx, tenantID, in.IdempotencyKey, user)
			if gerr != nil {
				return inbox.Delivery{}, gerr
			}
			dup = true
			if g.NotificationID == "" {
				statusID = g.StatusID
				return inbox.Delivery{UserID: user}, nil
			}
			return inbox.Delivery{UserID: user, Notification: &inbox.Notification{ID: g.NotificationID}}, nil
		case p.Throttle != nil && t.conditionFailed(err, thrKey):
			// The window is full: nothing was written; the caller writes the recipient
			// again, throttled (not retried here: a permanent answer).
			return inbox.Delivery{}, routing.ErrThrottled
		case t.conditionFailed(err, itemKey{userPK(v), skMeta}):
			// The inbox's clock passed this id between generating it and committing: take
			// a new id above it. The notification commits after that markAllRead, so its
			// user has not seen it: it stays unread. A pre-assigned id is kept while no
			// watermark reaches it (written below the clock, see sendTxn).
			floor = max(floor, metaFloor(err))
			if pre != "" && it != nil {
				m, ok := metaImage(err)
				switch {
				case ok && belowWatermarks(m, it.countedCategory(), pre) && m.Clock >= pre:
					below = m
				case ok && belowWatermarks(m, it.countedCategory(), pre):
					below = nil // the clock is below it: the plain send
				case ok && in.BatchClose != nil:
					// A batch's close keeps the id its joined sends were answered with
					// even when a watermark reached it (a markAll between the window's
					// end and the close): written below it, marked unread after it.
					below = m
				default:
					pre, below = "", nil
				}
				grp = nil // read again: the retry may Put it
			}
		}
		if err != nil {
			return inbox.Delivery{}, err
		}
		if it == nil {
			return inbox.Delivery{UserID: user}, nil
		}
		return inbox.Delivery{UserID: user, Notification: toNotification(it, nil), New: true}, nil
	})
	if err != nil {
		return routing.Written{}, err
	}
	out := routing.Written{Delivery: d, Wrote: wrote, Duplicate: dup, StatusID: statusID}
	if d.Notification != nil {
		out.StatusID = d.Notification.ID
	}
	return out, nil
}

// sendTxn is one recipient's send transaction: Put the guard, Put the notification, the
// META update (metaUpdate: +1 unread and unseen, globally and in the category; clock =
// the id, on condition that the clock is below it) and the expiry task, if any. Every
// watermark is at or below META's clock (each is set as the clock), so an id above the
// clock is above all of them: the notification is unread and unseen.
//
// grp is the recipient's group as read: the notification joins it. While the group has
// room, with an Update on condition that it still has (groupItem.sendUpdate); a full
// group is Put with its oldest member replaced (groupItem.apply), on condition that its
// rev is the one read; its type, target and category become the notification's.
//
// below, when set, is META as read when the notification's (pre-assigned) id is below
// META's clock but above every watermark it falls under: META is updated without moving
// the clock, on condition that those watermarks are still the ones read (so no mark-all
// can have covered the id in between), and the group is Put (on its rev) so that its
// index position stays its newest member.
func (s *Store) sendTxn(v inbox.Viewer, guard *guardItem, it *notificationItem, grp *groupItem, below *metaItem) (*txn, error) {
	g, err := attributevalue.MarshalMap(guard)
	if err != nil {
		return nil, fmt.Errorf("encode guard: %w", err)
	}
	gp, err := condPut(s.table, g, itemAbsent())
	if err != nil {
		return nil, err
	}
	t := &txn{}
	t.add(itemKey{guard.PK, guard.SK}, types.TransactWriteItem{Put: gp})
	if it == nil {
		return t, nil
	}
	n, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode notification: %w", err)
	}
	np, err := condPut(s.table, n, itemAbsent())
	if err != nil {
		return nil, err
	}
	t.add(itemKey{it.PK, it.SK}, types.TransactWriteItem{Put: np})
	st := state{active: true}
	if below != nil {
		// Below the clock: the watermarks as read decide (a batch's close may be below
		// one, see WriteRecipient), on condition that they are still those.
		st = stateOf(it, below)
	}
	b := newMetaUpdate(v).addState(it.countedCategory(), state{}, st)
	if below != nil {
		b.usesWatermarks(below, it.countedCategory())
	} else {
		b.clock = it.ID
	}
	ma, err := b.action(s.table)
	if err != nil {
		return nil, err
	}
	t.add(itemKey{userPK(v), skMeta}, ma)
	if grp != nil && inGroup(it) {
		var ga types.TransactWriteItem
		switch {
		case len(grp.Members) < inbox.MaxGroupMembers && below == nil:
			ga, err = grp.sendUpdate(s.table, v, it)
		case len(grp.Members) < inbox.MaxGroupMembers:
			ga, err = belowGroupUpdate(s.table, v, grp, it)
		default:
			// Full: the oldest member leaves, which needs the members as read.
			ng := grp.clone()
			ng.Type, ng.TargetKind, ng.TargetID, ng.Category = it.Type, it.TargetKind, it.TargetID, it.Category
			ng.apply(it.ID, it)
			ng.Rev = grp.Rev + 1
			ga, err = ng.put(s.table, v, grp)
		}
		if err != nil {
			return nil, err
		}
		t.add(grp.key(), ga)
	}
	if it.ExpireAt != 0 {
		k, a := s.taskAction(inbox.TaskExpire, v, it.ID, time.UnixMilli(it.ExpireAt), strconv.FormatInt(it.ExpireAt, 10))
		t.add(k, a)
	}
	return t, nil
}

// Limits of a notification's actions.
const (
	maxActionLabel = 100
	maxActionURL   = 2048
)

// CheckSend checks in as a send must be before anything of it is written: inbox.SendInput.Validate,
// the store's own rules (checkSendV2), a payload that is JSON, and pre-assigned ids that
// are ULIDs. Errors: BAD_USER_INPUT.
func (s *Store) CheckSend(in inbox.SendInput) error {
	if err := in.Validate(); err != nil {
		return err
	}
	if err := s.checkSendV2(in); err != nil {
		return err
	}
	if in.Throttle != nil {
		if err := routing.CheckThrottle(*in.Throttle); err != nil {
			return err
		}
	}
	if len(in.Payload) > 0 && !json.Valid(in.Payload) {
		return inbox.Errorf(inbox.CodeBadUserInput, "payload must be valid JSON")
	}
	for _, id := range in.NotificationIDs {
		if _, err := ulid.ParseStrict(id); err != nil {
			return inbox.Errorf(inbox.CodeBadUserInput, "a pre-assigned notification id must be a ULID")
		}
	}
	return nil
}

// NewID returns a fresh notification id (a ULID of now from the store's monotonic
// source: above every id this store handed out before), for callers that pre-assign ids
// (inbox.SendInput.NotificationIDs).
func (s *Store) NewID() string { return s.newID("") }

// belowGroupUpdate is sendUpdate for a notification below META's clock (a pre-assigned
// id, see sendTxn), so that concurrent sends into one group still commute: when the
// group as read has a newer member, only the member is added (the group keeps its
// position, type, target and category: its newest member's); else the group moves to
// the notification (sendUpdate), on condition that no newer member committed since
// (its GSI1 position is still below the notification's).
func belowGroupUpdate(table string, v inbox.Viewer, grp *groupItem, it *notificationItem) (types.TransactWriteItem, error) {
	if grp.newest() > it.ID {
		return grp.memberUpdate(table, v, it, false, nil)
	}
	gsk := expression.Name(attrGSI1SK)
	below := gsk.AttributeNotExists().Or(gsk.LessThan(expression.Value(notifSK(it.ID))))
	return grp.memberUpdate(table, v, it, true, &below)
}

// metaImage decodes the META item a cancelled transaction reports
// (ReturnValuesOnConditionCheckFailure); false when it reports none.
func metaImage(err error) (*metaItem, bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	for _, r := range tce.CancellationReasons {
		var m metaItem
		if r.Item == nil || decodeMeta(r.Item, &m) != nil || m.EntityType != entityMeta {
			continue
		}
		return &m, true
	}
	return nil, false
}

// belowWatermarks reports whether every read and seen watermark that a notification of
// category cat falls under is below id (it would be unread and unseen).
func belowWatermarks(m *metaItem, cat, id string) bool {
	c := m.cat(cat)
	return m.ReadAllBefore < id && m.SeenAllBefore < id && c.ReadWM < id && c.SeenWM < id
}

// checkSendV2 checks the fields of a send that the store adds to inbox.SendInput.Validate:
// the category (checkCategory), groupKey (like an id), the actions (at most
// inbox.MaxActions; label 1..100 characters; url absolute http or https, at most 2048
// bytes), expiresAt (in the future, at most inbox.MaxSnooze ahead) and the channels
// (routing.CheckChannels).
func (s *Store) checkSendV2(in inbox.SendInput) error {
	if err := routing.CheckChannels(in); err != nil {
		return err
	}
	if in.Category != "" {
		if err := checkCategory(in.Category); err != nil {
			return err
		}
	}
	if in.GroupKey != "" {
		if err := inbox.CheckID("groupKey", in.GroupKey); err != nil {
			return err
		}
	}
	if len(in.Actions) > inbox.MaxActions {
		return inbox.Errorf(inbox.CodeBadUserInput, "at most %d actions", inbox.MaxActions)
	}
	for _, a := range in.Actions {
		if n := utf8.RuneCountInString(a.Label); n == 0 || n > maxActionLabel || !utf8.ValidString(a.Label) {
			return inbox.Errorf(inbox.CodeBadUserInput, "an action's label must be 1..%d characters", maxActionLabel)
		}
		u, err := url.Parse(a.URL)
		if err != nil || len(a.URL) > maxActionURL || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return inbox.Errorf(inbox.CodeBadUserInput, "an action's url must be an absolute http or https URL of at most %d bytes", maxActionURL)
		}
	}
	if !in.ExpiresAt.IsZero() {
		now := s.now()
		if !in.ExpiresAt.After(now) || in.ExpiresAt.After(now.Add(inbox.MaxSnooze)) {
			return inbox.Errorf(inbox.CodeBadUserInput, "expiresAt must be in the future and at most %d days ahead", int(inbox.MaxSnooze.Hours()/24))
		}
	}
	return nil
}

// guard reads one recipient's guard (strongly consistent GetItem).
func (s *Store) guard(ctx context.Context, tenantID, key, user string) (guardItem, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            itemKey{guardPK(tenantID, key), guardSK(user)}.av(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return guardItem{}, fmt.Errorf("get guard: %w", err)
	}
	if out.Item == nil {
		return guardItem{}, errors.New("guard vanished after a conflict")
	}
	var g guardItem
	if err := attributevalue.UnmarshalMap(out.Item, &g); err != nil {
		return guardItem{}, fmt.Errorf("decode guard: %w", err)
	}
	return g, nil
}

// throttleCount is the transaction's update of the throttle counter of slot for v: one
// more (ADD n 1, TTL at the window's end plus a minute), on condition that fewer than
// slot.Limit were counted in the window (WriteRecipient answers routing.ErrThrottled when
// the condition fails).
func (s *Store) throttleCount(v inbox.Viewer, slot routing.Slot) (itemKey, types.TransactWriteItem, error) {
	k := itemKey{throttlePK(v), throttleSK(slot.Key, slot.Start)}
	n := expression.Name("n")
	up := expression.Add(n, expression.Value(1)).
		Set(expression.Name(attrTTL), expression.Value(slot.End.Add(time.Minute).Unix())).
		Set(expression.Name(attrEntityType), expression.Value(entityThrottle))
	x, err := buildUpdate(up, []expression.ConditionBuilder{n.AttributeNotExists().Or(n.LessThan(expression.Value(slot.Limit)))}, nil)
	if err != nil {
		return k, types.TransactWriteItem{}, fmt.Errorf("store: build throttle update: %w", err)
	}
	return k, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table),
		Key:              map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: k.pk}, attrSK: &types.AttributeValueMemberS{Value: k.sk}},
		UpdateExpression: x.Update(), ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names(),
		ExpressionAttributeValues: x.Values()}}, nil
}
