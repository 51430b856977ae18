package store

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Hand-written decoding of the items every inbox page reads (notifications, META and
// profiles): attributevalue.UnmarshalMap is reflective and costs about as much CPU and as
// many allocations as the rest of the store's work on a page. The dynamodbav tags of the
// item structs remain the definition of the format (writes still use MarshalMap).
//
// The fast path handles exactly the cases where its result is certainly what
// attributevalue would produce: attribute names that are a field's exact tag name, S for
// string fields, N (a base-10 integer) for integer fields and NULL for either. Anything
// else (another type, an unknown or differently cased name, a number that does not
// parse) falls back to attributevalue.UnmarshalMap on a zeroed struct, so results and
// errors stay those of attributevalue. decode_test.go checks that both agree.

func avStr(av types.AttributeValue, dst *string) bool {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		*dst = v.Value
		return true
	case *types.AttributeValueMemberNULL:
		*dst = ""
		return true
	}
	return false
}

func avInt64(av types.AttributeValue, dst *int64) bool {
	switch v := av.(type) {
	case *types.AttributeValueMemberN:
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return false
		}
		*dst = i
		return true
	case *types.AttributeValueMemberNULL:
		*dst = 0
		return true
	}
	return false
}

func avInt(av types.AttributeValue, dst *int) bool {
	var i int64
	if !avInt64(av, &i) || int64(int(i)) != i {
		return false
	}
	*dst = int(i)
	return true
}

// decodeNotification decodes a notification item into it.
func decodeNotification(raw map[string]types.AttributeValue, it *notificationItem) error {
	if fastNotification(raw, it) {
		return nil
	}
	*it = notificationItem{}
	return attributevalue.UnmarshalMap(raw, it)
}

func fastNotification(raw map[string]types.AttributeValue, it *notificationItem) bool {
	for k, av := range raw {
		var ok bool
		switch k {
		case "pk":
			ok = avStr(av, &it.PK)
		case "sk":
			ok = avStr(av, &it.SK)
		case "gsi1pk":
			ok = avStr(av, &it.GSI1PK)
		case "gsi1sk":
			ok = avStr(av, &it.GSI1SK)
		case "entityType":
			ok = avStr(av, &it.EntityType)
		case "id":
			ok = avStr(av, &it.ID)
		case "type":
			ok = avStr(av, &it.Type)
		case "category":
			ok = avStr(av, &it.Category)
		case "title":
			ok = avStr(av, &it.Title)
		case "body":
			ok = avStr(av, &it.Body)
		case "actorId":
			ok = avStr(av, &it.ActorID)
		case "targetKind":
			ok = avStr(av, &it.TargetKind)
		case "targetId":
			ok = avStr(av, &it.TargetID)
		case "payload":
			ok = avStr(av, &it.Payload)
		case "createdAt":
			ok = avInt64(av, &it.CreatedAt)
		case "mark":
			ok = avStr(av, &it.Mark)
		case "markedAt":
			ok = avStr(av, &it.MarkedAt)
		case "readAt":
			ok = avInt64(av, &it.ReadAt)
		case "seenAt":
			ok = avInt64(av, &it.SeenAt)
		case "archivedAt":
			ok = avInt64(av, &it.ArchivedAt)
		case "snoozedUntil":
			ok = avInt64(av, &it.SnoozedUntil)
		case "expireAt":
			ok = avInt64(av, &it.ExpireAt)
		case "expiresAt":
			ok = avInt64(av, &it.TTL)
		case "groupKey":
			ok = avStr(av, &it.GroupKey)
		case "actions":
			ok = avActions(av, &it.Actions)
		case "rev":
			ok = avInt64(av, &it.Rev)
		case "cv":
			ok = avInt64(av, &it.Counted)
		case "ac":
			var n int64
			ok = avInt64(av, &n)
			it.ActivityCount = int(n)
		case "acts":
			ok = avActivities(av, &it.Activities)
		}
		if !ok {
			return false
		}
	}
	return true
}

// avActivities decodes a batched notification's activities (a list of {a, an, d, t}
// maps); NULL is none. A map with other attributes or types is left to attributevalue.
func avActivities(av types.AttributeValue, dst *[]activityItem) bool {
	return avMapList(av, dst, func(k string, f types.AttributeValue, e *activityItem) bool {
		switch k {
		case "a":
			return avStr(f, &e.ActorID)
		case "an":
			return avStr(f, &e.ActorName)
		case "d":
			return avStr(f, &e.Data)
		case "t":
			return avInt64(f, &e.CreatedAt)
		}
		return false
	})
}

// avActions decodes a list of {label, url} maps; NULL is no actions. A map with other
// attributes or types is left to attributevalue.
func avActions(av types.AttributeValue, dst *[]actionItem) bool {
	return avMapList(av, dst, func(k string, f types.AttributeValue, e *actionItem) bool {
		switch k {
		case "label":
			return avStr(f, &e.Label)
		case "url":
			return avStr(f, &e.URL)
		}
		return false
	})
}

// avMapList decodes a list of maps into *dst, each map's attributes by field (false: an
// attribute it does not know, or of another type); NULL is an empty list. False leaves
// the item to attributevalue.
func avMapList[T any](av types.AttributeValue, dst *[]T, field func(k string, f types.AttributeValue, e *T) bool) bool {
	switch v := av.(type) {
	case *types.AttributeValueMemberNULL:
		*dst = nil
		return true
	case *types.AttributeValueMemberL:
		out := make([]T, len(v.Value))
		for i, e := range v.Value {
			m, ok := e.(*types.AttributeValueMemberM)
			if !ok {
				return false
			}
			for k, f := range m.Value {
				if !field(k, f, &out[i]) {
					return false
				}
			}
		}
		*dst = out
		return true
	}
	return false
}

// decodeMeta decodes a META item into m, its per-category attributes included (those
// are read here in both paths: attributevalue has no field for them).
func decodeMeta(raw map[string]types.AttributeValue, m *metaItem) error {
	if !fastMeta(raw, m) {
		*m = metaItem{}
		if err := attributevalue.UnmarshalMap(raw, m); err != nil {
			return err
		}
	}
	return decodeCats(raw, m)
}

// decodeCats reads META's per-category attributes (catUnread+c, ...) into m.Cats.
func decodeCats(raw map[string]types.AttributeValue, m *metaItem) error {
	m.Cats = nil
	m.AnnMarks = nil
	for k, av := range raw {
		if id, ok := strings.CutPrefix(k, annMarkAttr); ok {
			var s string
			if !avStr(av, &s) {
				return fmt.Errorf("META attribute %q: unexpected type %T", k, av)
			}
			mk, ok := decodeMark(s)
			if !ok {
				return fmt.Errorf("META attribute %q: malformed mark", k)
			}
			if m.AnnMarks == nil {
				m.AnnMarks = make(map[string]inbox.AnnouncementMark)
			}
			m.AnnMarks[id] = mk
			continue
		}
		if len(k) < 4 || k[0] != 'c' || k[2] != '#' {
			continue
		}
		prefix, c := k[:3], k[3:]
		var st *catState
		get := func() *catState {
			if st == nil {
				if m.Cats == nil {
					m.Cats = make(map[string]*catState)
				}
				if st = m.Cats[c]; st == nil {
					st = new(catState)
					m.Cats[c] = st
				}
			}
			return st
		}
		var ok bool
		switch prefix {
		case catUnread:
			ok = avInt(av, &get().Unread)
			st.HasUnread = true
		case catUnseen:
			ok = avInt(av, &get().Unseen)
			st.HasUnseen = true
		case catReadWM:
			ok = avStr(av, &get().ReadWM)
		case catSeenWM:
			ok = avStr(av, &get().SeenWM)
		default:
			continue
		}
		if !ok {
			return fmt.Errorf("META attribute %q: unexpected type %T", k, av)
		}
	}
	return nil
}

func fastMeta(raw map[string]types.AttributeValue, m *metaItem) bool {
	for k, av := range raw {
		var ok bool
		switch k {
		case "pk":
			ok = avStr(av, &m.PK)
		case "sk":
			ok = avStr(av, &m.SK)
		case "gsi1pk":
			ok = avStr(av, &m.GSI1PK)
		case "gsi1sk":
			ok = avStr(av, &m.GSI1SK)
		case "entityType":
			ok = avStr(av, &m.EntityType)
		case "unreadCount":
			ok = avInt(av, &m.UnreadCount)
		case "unseenCount":
			ok = avInt(av, &m.UnseenCount)
		case "seenAllBefore":
			ok = avStr(av, &m.SeenAllBefore)
		case "readAllBefore":
			ok = avStr(av, &m.ReadAllBefore)
		case "clock":
			ok = avStr(av, &m.Clock)
		case "version":
			ok = avInt64(av, &m.Version)
		default:
			// Per-category attributes are read by decodeCats; anything else unknown
			// goes to attributevalue, as for the other items.
			ok = len(k) > 3 && (k[0] == 'c' || k[0] == 'a') && k[2] == '#'
		}
		if !ok {
			return false
		}
	}
	return true
}

// decodeProfile decodes an actor or target profile item into p.
func decodeProfile(raw map[string]types.AttributeValue, p *profileItem) error {
	if fastProfile(raw, p) {
		return nil
	}
	*p = profileItem{}
	return attributevalue.UnmarshalMap(raw, p)
}

func fastProfile(raw map[string]types.AttributeValue, p *profileItem) bool {
	for k, av := range raw {
		var ok bool
		switch k {
		case "pk":
			ok = avStr(av, &p.PK)
		case "sk":
			ok = avStr(av, &p.SK)
		case "entityType":
			ok = avStr(av, &p.EntityType)
		case "actorId":
			ok = avStr(av, &p.ActorID)
		case "targetId":
			ok = avStr(av, &p.TargetID)
		case "kind":
			ok = avStr(av, &p.Kind)
		case "name":
			ok = avStr(av, &p.Name)
		case "avatarUrl":
			ok = avStr(av, &p.AvatarURL)
		case "url":
			ok = avStr(av, &p.URL)
		case "title":
			ok = avStr(av, &p.Title)
		}
		if !ok {
			return false
		}
	}
	return true
}
