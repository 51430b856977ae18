package relay

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// image converts a stream image to the DynamoDB attribute values the store decodes (the
// two SDK packages have identical but distinct types) with the SDK's own converter; an
// absent image (an INSERT's old one, a REMOVE's new one) stays nil. A value of a type the
// SDK does not know is an error: the record is logged as undecodable and skipped.
func image(m map[string]types.AttributeValue) (map[string]ddbtypes.AttributeValue, error) {
	if m == nil {
		return nil, nil
	}
	img, err := attributevalue.FromDynamoDBStreamsMap(m)
	if err != nil {
		return nil, fmt.Errorf("stream image: %w", err)
	}
	return img, nil
}

// Attributes of the store's items that the relay reads to name what a write did. They are
// the store's (package store, its item structs); the relay tests write through the store
// and through plain SDK calls and fail when a name drifts.
const (
	attrArchivedAt   = "archivedAt"   // notification: set while archived
	attrSnoozedUntil = "snoozedUntil" // notification: set while snoozed
	attrSeenAt       = "seenAt"       // notification: set once seen
	attrMark         = "mark"         // notification: the last explicit mark, "R" or "U"
	attrMarkedAt     = "markedAt"     // notification: when that mark was made (a ULID)
	attrUnseenCount  = "unseenCount"  // META: unseen active notifications
	prefixCatUnread  = "cu#"          // META: cu#<category>, unread active notifications of a category
	prefixCatUnseen  = "cs#"          // META: cs#<category>, unseen active notifications of a category
)

// ttlPrincipal and ttlIdentityType name DynamoDB's TTL process as a record's userIdentity.
const (
	ttlPrincipal    = "dynamodb.amazonaws.com"
	ttlIdentityType = "Service"
)

// recordChange decodes one stream record into the inbox.Change it stands for, with its
// kind; ok is false for records that concern no inbox (the relay's own items, profiles,
// guards) or change nothing a subscriber sees.
//
//   - INSERT of a notification: ADDED, with the notification (Version 0: META's record of
//     the same write brings the badge).
//   - REMOVE of a notification: DELETED, or EXPIRED when DynamoDB's TTL removed it.
//   - MODIFY of a notification: the kind of what changed (snoozedUntil: SNOOZED / WOKE;
//     archivedAt: ARCHIVED / UNARCHIVED; mark: READ / UNREAD; seenAt: SEEN, in that order
//     of precedence: a wake that also marks unread is WOKE); nothing when none did.
//   - META written with a raised version: a badge refresh (EventNone) with the whole badge
//     (unread, unseen and the cu#/cs# category counters) at that version; written without
//     raising it (a writer outside the gateway): a re-read hint (Version 0).
//
// Events derived from notification records carry Version 0: subscriptions match them
// against the writer's own versioned events (live's de-duplication), so a write made
// through a gateway is delivered once.
func recordChange(rec *types.Record) (inbox.Change, bool, error) {
	if rec.Dynamodb == nil {
		return inbox.Change{}, false, nil
	}
	oldImg, err := image(rec.Dynamodb.OldImage)
	if err != nil {
		return inbox.Change{}, false, err
	}
	newImg, err := image(rec.Dynamodb.NewImage)
	if err != nil {
		return inbox.Change{}, false, err
	}
	switch rec.EventName {
	case types.OperationTypeRemove:
		// The store decodes the removed item as the item it was.
		c, ok, err := store.StreamChange(string(types.OperationTypeInsert), nil, oldImg)
		if err != nil || !ok || c.Notification == nil {
			return inbox.Change{}, false, err
		}
		kind := inbox.EventDeleted
		if id := rec.UserIdentity; id != nil && aws.ToString(id.Type) == ttlIdentityType && aws.ToString(id.PrincipalId) == ttlPrincipal {
			kind = inbox.EventExpired
		}
		return inbox.Change{Viewer: c.Viewer, Kind: kind, IDs: []string{c.Notification.ID}}, true, nil
	case types.OperationTypeModify:
		c, ok, err := store.StreamChange(string(types.OperationTypeInsert), nil, newImg)
		if err != nil || !ok {
			return inbox.Change{}, false, err
		}
		if n := c.Notification; n != nil {
			kind := modifyKind(oldImg, newImg)
			if kind == inbox.EventNone {
				return inbox.Change{}, false, nil
			}
			return inbox.Change{Viewer: c.Viewer, Kind: kind, IDs: []string{n.ID}}, true, nil
		}
	}
	c, ok, err := store.StreamChange(string(rec.EventName), oldImg, newImg)
	if err != nil || !ok {
		return inbox.Change{}, false, err
	}
	if n := c.Notification; n != nil {
		c.Kind, c.IDs = inbox.EventAdded, []string{n.ID}
		return c, true, nil
	}
	if c.Version > 0 && c.Kind != inbox.EventAnnouncements {
		marks := c.Badge.Marks
		c.Badge = metaBadge(newImg, c.UnreadCount, c.Version)
		c.Badge.Marks = marks // the user's announcement marks, for the badge streams' composition
	}
	return c, true, nil
}

// modifyKind names what a MODIFY of a notification changed (EventNone: nothing a
// subscriber sees, e.g. the sweep removing GSI attributes).
func modifyKind(oldImg, newImg map[string]ddbtypes.AttributeValue) inbox.EventKind {
	changed := func(name string) (was, is bool, differ bool) {
		o, wasSet := oldImg[name]
		n, isSet := newImg[name]
		return wasSet, isSet, wasSet != isSet || (isSet && !sameValue(o, n))
	}
	if was, is, d := changed(attrSnoozedUntil); d {
		if is {
			return inbox.EventSnoozed
		}
		if was {
			return inbox.EventWoke
		}
	}
	if _, is, d := changed(attrArchivedAt); d {
		if is {
			return inbox.EventArchived
		}
		return inbox.EventUnarchived
	}
	_, _, markDiffers := changed(attrMark)
	_, _, atDiffers := changed(attrMarkedAt)
	if markDiffers || atDiffers {
		if m, ok := newImg[attrMark].(*ddbtypes.AttributeValueMemberS); ok {
			switch m.Value {
			case "R":
				return inbox.EventRead
			case "U":
				return inbox.EventUnread
			}
		}
	}
	if _, is, d := changed(attrSeenAt); d && is {
		return inbox.EventSeen
	}
	return inbox.EventNone
}

// sameValue reports whether two scalar attribute values are equal (other types: false).
func sameValue(a, b ddbtypes.AttributeValue) bool {
	switch a := a.(type) {
	case *ddbtypes.AttributeValueMemberS:
		b, ok := b.(*ddbtypes.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *ddbtypes.AttributeValueMemberN:
		b, ok := b.(*ddbtypes.AttributeValueMemberN)
		return ok && a.Value == b.Value
	case *ddbtypes.AttributeValueMemberBOOL:
		b, ok := b.(*ddbtypes.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *ddbtypes.AttributeValueMemberNULL:
		_, ok := b.(*ddbtypes.AttributeValueMemberNULL)
		return ok
	}
	return false
}

// metaBadge decodes the whole badge of a META image at version: unread (as the store
// decoded it), unseenCount, and the per-category counters by their prefixes (categories
// with a non-zero count, sorted by name).
func metaBadge(img map[string]ddbtypes.AttributeValue, unread int, version int64) inbox.Badge {
	b := inbox.Badge{Unread: unread, Unseen: numberAttr(img[attrUnseenCount]), Version: version}
	cats := map[string]*inbox.CategoryCount{}
	get := func(name string) *inbox.CategoryCount {
		cc := cats[name]
		if cc == nil {
			cc = &inbox.CategoryCount{Category: name}
			cats[name] = cc
		}
		return cc
	}
	for k, v := range img {
		if cat, ok := strings.CutPrefix(k, prefixCatUnread); ok && cat != "" {
			get(cat).Unread = numberAttr(v)
		} else if cat, ok := strings.CutPrefix(k, prefixCatUnseen); ok && cat != "" {
			get(cat).Unseen = numberAttr(v)
		}
	}
	for _, cc := range cats {
		if cc.Unread != 0 || cc.Unseen != 0 {
			b.Categories = append(b.Categories, *cc)
		}
	}
	slices.SortFunc(b.Categories, func(x, y inbox.CategoryCount) int { return strings.Compare(x.Category, y.Category) })
	return b
}

// numberAttr returns a number attribute as an int (0 when absent or not a number).
func numberAttr(v ddbtypes.AttributeValue) int {
	n, ok := v.(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0
	}
	return i
}
