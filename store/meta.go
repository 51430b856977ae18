package store

import (
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// The one writer of META's counters (see the package doc for why they stay exact).
//
// Every write that changes a badge (send, the state changes, delete, wake, expire and the
// mark-alls) builds its META update with a metaUpdate: ADD of the counter deltas (global
// and per category) and of version 1; SET of the new clock, on condition that the clock
// is below it; conditions that every watermark the write's computation used is still the
// one read; `count >= need` for every negative delta; and, for the mark-alls, SETs of
// watermarks and counters under a condition on the version or on the counters read.
// Expressions name every attribute through placeholders (category names are user data).

// metaUpdate builds one Update of v's META item.
type metaUpdate struct {
	v inbox.Viewer
	// clock, when set, becomes META's clock, on condition that the clock is below it.
	clock string
	// deltas by counter attribute (attrUnread, attrUnseen, catUnread+c, catUnseen+c).
	deltas map[string]int
	// sets are SET attribute = value beyond the clock and META's fixed attributes.
	sets map[string]types.AttributeValue
	// conds are attribute = value conditions (nil value: attribute_not_exists).
	conds map[string]types.AttributeValue
	order []string // of deltas, sets and conds: deterministic expressions

	names  map[string]string
	values map[string]types.AttributeValue
}

func newMetaUpdate(v inbox.Viewer) *metaUpdate {
	return &metaUpdate{v: v, deltas: map[string]int{}, sets: map[string]types.AttributeValue{},
		conds: map[string]types.AttributeValue{}}
}

func (b *metaUpdate) note(attr string) {
	for _, a := range b.order {
		if a == attr {
			return
		}
	}
	b.order = append(b.order, attr)
}

// add adds d to the counter attr.
func (b *metaUpdate) add(attr string, d int) *metaUpdate {
	b.note(attr)
	b.deltas[attr] += d
	return b
}

// addState adds the change of one notification's contribution (category cat) from before
// to after: global and per-category unread and unseen.
func (b *metaUpdate) addState(cat string, before, after state) *metaUpdate {
	du, ds := after.unread()-before.unread(), after.unseen()-before.unseen()
	if du != 0 {
		b.add(attrUnread, du)
		if cat != "" {
			b.add(catUnread+cat, du)
		}
	}
	if ds != 0 {
		b.add(attrUnseen, ds)
		if cat != "" {
			b.add(catUnseen+cat, ds)
		}
	}
	return b
}

// set sets attr to a value (a string or an int).
func (b *metaUpdate) set(attr string, val any) *metaUpdate {
	b.note(attr)
	b.sets[attr] = av(val)
	return b
}

// require adds the condition attr = val, or attribute_not_exists(attr) when exists is
// false (a string watermark "" or a counter never written).
func (b *metaUpdate) require(attr string, val any, exists bool) *metaUpdate {
	b.note(attr)
	if !exists {
		b.conds[attr] = nil
	} else {
		b.conds[attr] = av(val)
	}
	return b
}

// usesWatermarks adds the conditions that the read and seen watermarks of category cat
// (the global ones, and cat's when cat is not "") are still those of m.
func (b *metaUpdate) usesWatermarks(m *metaItem, cat string) *metaUpdate {
	b.require(attrReadWM, m.ReadAllBefore, m.ReadAllBefore != "")
	b.require(attrSeenWM, m.SeenAllBefore, m.SeenAllBefore != "")
	if cat != "" {
		st := m.cat(cat)
		b.require(catReadWM+cat, st.ReadWM, st.ReadWM != "")
		b.require(catSeenWM+cat, st.SeenWM, st.SeenWM != "")
	}
	return b
}

func av(val any) types.AttributeValue {
	switch x := val.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: x}
	case int:
		return &types.AttributeValueMemberN{Value: strconv.Itoa(x)}
	case int64:
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(x, 10)}
	}
	panic("store: metaUpdate value of an unexpected type")
}

func (b *metaUpdate) name(attr string) string {
	for k, a := range b.names {
		if a == attr {
			return k
		}
	}
	k := "#m" + strconv.Itoa(len(b.names))
	b.names[k] = attr
	return k
}

func (b *metaUpdate) value(v types.AttributeValue) string {
	k := ":m" + strconv.Itoa(len(b.values))
	b.values[k] = v
	return k
}

// expressions returns the update and condition expressions with their names and values.
func (b *metaUpdate) expressions() (update, cond string) {
	b.names, b.values = map[string]string{}, map[string]types.AttributeValue{}
	sets := []string{
		b.name(attrGSI1PK) + " = " + b.value(av(unreadPK(b.v))),
		b.name(attrGSI1SK) + " = " + b.value(av(skMeta)),
		b.name(attrEntityType) + " = " + b.value(av(entityMeta)),
	}
	adds := []string{b.name(attrVersion) + " " + b.value(av(1))}
	var conds []string
	if b.clock != "" {
		c := b.value(av(b.clock))
		sets = append(sets, b.name(attrClock)+" = "+c)
		conds = append(conds, "(attribute_not_exists("+b.name(attrClock)+") OR "+b.name(attrClock)+" < "+c+")")
	}
	for _, attr := range b.order {
		if d, ok := b.deltas[attr]; ok && d != 0 {
			adds = append(adds, b.name(attr)+" "+b.value(av(d)))
			if d < 0 {
				conds = append(conds, b.name(attr)+" >= "+b.value(av(-d)))
			}
		}
		if v, ok := b.sets[attr]; ok {
			sets = append(sets, b.name(attr)+" = "+b.value(v))
		}
		if v, ok := b.conds[attr]; ok {
			if v == nil {
				conds = append(conds, "attribute_not_exists("+b.name(attr)+")")
			} else {
				conds = append(conds, b.name(attr)+" = "+b.value(v))
			}
		}
	}
	update = "SET " + strings.Join(sets, ", ") + " ADD " + strings.Join(adds, ", ")
	return update, strings.Join(conds, " AND ")
}

// action returns the META update as a transaction action; a failed condition returns
// META's old image (for metaFloor and retries).
func (b *metaUpdate) action(table string) types.TransactWriteItem {
	update, cond := b.expressions()
	u := &types.Update{
		TableName:                           aws.String(table),
		Key:                                 itemKey{userPK(b.v), skMeta}.av(),
		UpdateExpression:                    aws.String(update),
		ExpressionAttributeNames:            b.names,
		ExpressionAttributeValues:           b.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if cond != "" {
		u.ConditionExpression = aws.String(cond)
	}
	return types.TransactWriteItem{Update: u}
}

// updateItem returns the META update as an UpdateItem returning the new META (ALL_NEW),
// or the old one when its condition fails.
func (b *metaUpdate) updateItem(table string) *dynamodb.UpdateItemInput {
	a := b.action(table).Update
	return &dynamodb.UpdateItemInput{
		TableName:                           a.TableName,
		Key:                                 a.Key,
		UpdateExpression:                    a.UpdateExpression,
		ConditionExpression:                 a.ConditionExpression,
		ExpressionAttributeNames:            a.ExpressionAttributeNames,
		ExpressionAttributeValues:           a.ExpressionAttributeValues,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// txn is a TransactWriteItems under construction that remembers each action's key, so a
// cancellation's reasons are read by key, never by position.
type txn struct {
	acts []types.TransactWriteItem
	keys []itemKey
	// dueShards are the scheduler shards of the tasks due at once that the transaction
	// writes (Store.NotifyDue is told after it commits).
	dueShards []int
}

// add appends action a on the item k.
func (t *txn) add(k itemKey, a types.TransactWriteItem) {
	t.acts = append(t.acts, a)
	t.keys = append(t.keys, k)
}

func (t *txn) input() *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{TransactItems: t.acts}
}

// reasons returns the cancellation reasons of err (a TransactionCanceledException of
// this transaction) by the key of the action each belongs to, only those that are not
// "None"; nil when err is not a cancellation.
func (t *txn) reasons(err error) map[itemKey]types.CancellationReason {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	out := make(map[itemKey]types.CancellationReason)
	for i, r := range tce.CancellationReasons {
		if i < len(t.keys) && aws.ToString(r.Code) != "None" && aws.ToString(r.Code) != "" {
			out[t.keys[i]] = r
		}
	}
	return out
}

// conditionFailed reports whether err cancelled the transaction because the condition of
// the action on k failed.
func (t *txn) conditionFailed(err error, k itemKey) bool {
	r, ok := t.reasons(err)[k]
	return ok && aws.ToString(r.Code) == "ConditionalCheckFailed"
}

// metaFloor returns the larger of clock and watermarks of the META item a cancelled
// transaction or a failed UpdateItem reports (ReturnValuesOnConditionCheckFailure), or ""
// when it reports none: a new ULID above it will pass the clock condition.
func metaFloor(err error) string {
	var raws []map[string]types.AttributeValue
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			raws = append(raws, r.Item)
		}
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		raws = append(raws, ccf.Item)
	}
	floor := ""
	for _, raw := range raws {
		var m metaItem
		if raw == nil || decodeMeta(raw, &m) != nil || m.EntityType != entityMeta {
			continue
		}
		floor = max(floor, m.Clock, m.ReadAllBefore, m.SeenAllBefore)
	}
	return floor
}

// decodeMetaAV decodes a META image (nil: an empty inbox).
func decodeMetaAV(raw map[string]types.AttributeValue) (metaItem, error) {
	var m metaItem
	if raw == nil {
		return m, nil
	}
	err := decodeMeta(raw, &m)
	return m, err
}
