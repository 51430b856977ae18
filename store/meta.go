package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/telemetry"
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
	// sets are SET attribute = value beyond the clock and META's fixed attributes (a
	// string or an int).
	sets map[string]any
	// conds are attribute = value conditions (nil value: attribute_not_exists).
	conds map[string]any
	// removes are REMOVE attribute (announcement marks no longer needed).
	removes map[string]bool
	order   []string // of deltas, sets and conds: deterministic expressions
}

func newMetaUpdate(v inbox.Viewer) *metaUpdate {
	return &metaUpdate{v: v, deltas: map[string]int{}, sets: map[string]any{}, conds: map[string]any{}, removes: map[string]bool{}}
}

// remove removes attr.
func (b *metaUpdate) remove(attr string) *metaUpdate {
	b.note(attr)
	b.removes[attr] = true
	return b
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
	b.sets[attr] = val
	return b
}

// require adds the condition attr = val, or attribute_not_exists(attr) when exists is
// false (a string watermark "" or a counter never written).
func (b *metaUpdate) require(attr string, val any, exists bool) *metaUpdate {
	b.note(attr)
	if !exists {
		b.conds[attr] = nil
	} else {
		b.conds[attr] = val
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

// build builds the update and its condition (none when the update has no condition). Every
// attribute is named whole (category names are user data: exprNames).
func (b *metaUpdate) build() (expression.Expression, error) {
	var names exprNames
	up := expression.Set(names.name(attrGSI1PK), expression.Value(unreadPK(b.v))).
		Set(names.name(attrGSI1SK), expression.Value(skMeta)).
		Set(names.name(attrEntityType), expression.Value(entityMeta)).
		Add(names.name(attrVersion), expression.Value(1))
	var conds []expression.ConditionBuilder
	if b.clock != "" {
		clock := names.name(attrClock)
		up = up.Set(clock, expression.Value(b.clock))
		conds = append(conds, clock.AttributeNotExists().Or(clock.LessThan(expression.Value(b.clock))))
	}
	for _, attr := range b.order {
		n := names.name(attr)
		if d, ok := b.deltas[attr]; ok && d != 0 {
			up = up.Add(n, expression.Value(d))
			if d < 0 {
				conds = append(conds, n.GreaterThanEqual(expression.Value(-d)))
			}
		}
		if v, ok := b.sets[attr]; ok {
			up = up.Set(n, expression.Value(v))
		}
		if b.removes[attr] {
			up = up.Remove(n)
		}
		if v, ok := b.conds[attr]; ok {
			if v == nil {
				conds = append(conds, n.AttributeNotExists())
			} else {
				conds = append(conds, n.Equal(expression.Value(v)))
			}
		}
	}
	x, err := buildUpdate(up, conds, &names)
	if err != nil {
		return x, fmt.Errorf("store: build META update: %w", err)
	}
	return x, nil
}

// action returns the META update as a transaction action; a failed condition returns
// META's old image (for metaFloor and retries).
func (b *metaUpdate) action(table string) (types.TransactWriteItem, error) {
	x, err := b.build()
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                           aws.String(table),
		Key:                                 itemKey{userPK(b.v), skMeta}.av(),
		UpdateExpression:                    x.Update(),
		ConditionExpression:                 x.Condition(),
		ExpressionAttributeNames:            x.Names(),
		ExpressionAttributeValues:           x.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}, nil
}

// updateItem returns the META update as an UpdateItem returning the new META (ALL_NEW),
// or the old one when its condition fails.
func (b *metaUpdate) updateItem(table string) (*dynamodb.UpdateItemInput, error) {
	a, err := b.action(table)
	if err != nil {
		return nil, err
	}
	u := a.Update
	return &dynamodb.UpdateItemInput{
		TableName:                           u.TableName,
		Key:                                 u.Key,
		UpdateExpression:                    u.UpdateExpression,
		ConditionExpression:                 u.ConditionExpression,
		ExpressionAttributeNames:            u.ExpressionAttributeNames,
		ExpressionAttributeValues:           u.ExpressionAttributeValues,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// txn is a TransactWriteItems under construction that remembers each action's key, so a
// cancellation's reasons are read by key, never by position.
type txn struct {
	acts []types.TransactWriteItem
	keys []itemKey
}

// add appends action a on the item k.
func (t *txn) add(k itemKey, a types.TransactWriteItem) {
	t.acts = append(t.acts, a)
	t.keys = append(t.keys, k)
}

// input is the transaction to send within ctx: t's actions, the scheduler tasks among
// them carrying ctx's traceparent (inbox.Task.Traceparent; a task that has one keeps
// it), so that every task a request writes, whichever write path wrote it, links its
// run to that request.
func (t *txn) input(ctx context.Context) *dynamodb.TransactWriteItemsInput {
	if tp := telemetry.Traceparent(ctx); tp != "" {
		for _, a := range t.acts {
			if a.Put != nil && isTask(a.Put.Item) {
				if _, has := a.Put.Item[attrTraceparent]; !has {
					a.Put.Item[attrTraceparent] = &types.AttributeValueMemberS{Value: tp}
				}
			}
		}
	}
	return &dynamodb.TransactWriteItemsInput{TransactItems: t.acts}
}

// attrTraceparent is a task item's traceparent attribute (taskItem.Traceparent).
const attrTraceparent = "traceparent"

// isTask reports whether item is a scheduler task.
func isTask(item map[string]types.AttributeValue) bool {
	e, ok := item[attrEntityType].(*types.AttributeValueMemberS)
	return ok && e.Value == entityTask
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
