package sched

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The roster is one item (Store.SchedRosterKey) holding the whole assignment: every
// instance's membership (members: owner → lease expiry, Unix ms), every shard's holder
// (shards: shard → owner) and checkpoint (cps: shard → Unix ms). An instance renews its
// membership, saves its shards' checkpoints and reads everyone's state in one UpdateItem
// (ReturnValues ALL_NEW) every Lease/3: the leases are held in bulk, so an idle
// instance's lease traffic is one call per period whatever its shard count.
//
// A shard is held by its roster owner while that owner's membership is unexpired. Every
// write is conditional: a heartbeat that saves checkpoints requires the membership
// unexpired and each of those shards still the writer's (fencing); taking a shard
// requires it free, the taker's own, or its owner's membership expired (or gone) at the
// taker's now, so no two instances hold a shard at once as long as their clocks agree to
// within the lease's margin (as package lease assumes). An owner stops its shard workers
// when it cannot renew before its membership's expiry minus Lease/6.

// Attribute names of the roster item.
const (
	attrMembers = "members"
	attrShards  = "shards"
	attrCps     = "cps"
)

// entityRoster is the roster item's entityType.
const entityRoster = "SchedRoster"

// roster is the roster item as read.
type roster struct {
	members map[string]time.Time // owner → membership expiry
	shards  map[int]string       // shard → owner
	cps     map[int]time.Time    // shard → checkpoint
}

// live reports whether owner's membership is unexpired at now.
func (r roster) live(owner string, now time.Time) bool {
	u, ok := r.members[owner]
	return ok && !u.Before(now)
}

// decodeRoster reads a roster item (missing maps are empty).
func decodeRoster(item map[string]types.AttributeValue) roster {
	r := roster{members: map[string]time.Time{}, shards: map[int]string{}, cps: map[int]time.Time{}}
	num := func(v types.AttributeValue) (time.Time, bool) {
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			return time.Time{}, false
		}
		ms, err := strconv.ParseInt(n.Value, 10, 64)
		return time.UnixMilli(ms).UTC(), err == nil
	}
	if m, ok := item[attrMembers].(*types.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			if t, ok := num(v); ok {
				r.members[k] = t
			}
		}
	}
	if m, ok := item[attrShards].(*types.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			n, err := strconv.Atoi(k)
			if s, ok := v.(*types.AttributeValueMemberS); ok && err == nil {
				r.shards[n] = s.Value
			}
		}
	}
	if m, ok := item[attrCps].(*types.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			n, err := strconv.Atoi(k)
			if t, ok := num(v); ok && err == nil && t.UnixMilli() > 0 {
				r.cps[n] = t
			}
		}
	}
	return r
}

// rosterUpdate builds one UpdateItem of the roster: placeholders for names and values,
// SET and REMOVE clauses and a condition of ANDed terms.
type rosterUpdate struct {
	names  map[string]string
	values map[string]types.AttributeValue
	sets   []string
	rems   []string
	conds  []string
}

func newRosterUpdate() *rosterUpdate {
	return &rosterUpdate{names: map[string]string{"#m": attrMembers, "#s": attrShards, "#c": attrCps},
		values: map[string]types.AttributeValue{}}
}

// name returns the placeholder of a map key.
func (u *rosterUpdate) name(k string) string {
	p := "#k" + strconv.Itoa(len(u.names))
	u.names[p] = k
	return p
}

// value returns the placeholder of v.
func (u *rosterUpdate) value(v types.AttributeValue) string {
	p := ":v" + strconv.Itoa(len(u.values))
	u.values[p] = v
	return p
}

func (u *rosterUpdate) ms(t time.Time) string {
	return u.value(&types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)})
}

func (u *rosterUpdate) str(s string) string { return u.value(&types.AttributeValueMemberS{Value: s}) }

// input is the UpdateItem of u on the roster of table at key, returning the new item.
func (u *rosterUpdate) input(table string, key map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	expr := ""
	if len(u.sets) > 0 {
		expr = "SET " + strings.Join(u.sets, ", ")
	}
	if len(u.rems) > 0 {
		expr += " REMOVE " + strings.Join(u.rems, ", ")
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(table),
		Key:                                 key,
		UpdateExpression:                    aws.String(strings.TrimSpace(expr)),
		ExpressionAttributeNames:            u.names,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(u.conds) > 0 {
		in.ConditionExpression = aws.String("(" + strings.Join(u.conds, ") AND (") + ")")
	}
	// Only the placeholders used: DynamoDB refuses the others.
	used := *in.UpdateExpression + aws.ToString(in.ConditionExpression)
	for p := range u.names {
		if !containsPlaceholder(used, p) {
			delete(u.names, p)
		}
	}
	for p := range u.values {
		if !containsPlaceholder(used, p) {
			delete(u.values, p)
		}
	}
	if len(u.values) > 0 {
		in.ExpressionAttributeValues = u.values
	}
	return in
}

// containsPlaceholder reports whether expr uses placeholder p (not merely a longer one
// starting with it).
func containsPlaceholder(expr, p string) bool {
	for i := 0; ; {
		j := strings.Index(expr[i:], p)
		if j < 0 {
			return false
		}
		end := i + j + len(p)
		if end == len(expr) || !isPlaceholderChar(expr[end]) {
			return true
		}
		i = end
	}
}

func isPlaceholderChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// updateRoster sends u; a failed condition is errCondition (with the item as it was).
func (s *Scheduler) updateRoster(ctx context.Context, u *rosterUpdate) (roster, error) {
	out, err := s.o.DB.UpdateItem(ctx, u.input(s.st.Table(), s.st.SchedRosterKey()))
	if err == nil {
		return decodeRoster(out.Attributes), nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return decodeRoster(ccf.Item), errCondition
	}
	return roster{}, fmt.Errorf("sched: roster: %w", err)
}

// errCondition is a roster write refused by its condition.
var errCondition = errors.New("sched: roster changed")

// ensureRoster creates the roster's empty maps where missing (the first instance on a
// table; the maps must exist before their keys can be set).
func (s *Scheduler) ensureRoster(ctx context.Context) error {
	u := newRosterUpdate()
	empty := u.value(&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}})
	u.names["#e"] = "entityType"
	u.sets = append(u.sets, "#m = if_not_exists(#m, "+empty+")", "#s = if_not_exists(#s, "+empty+")",
		"#c = if_not_exists(#c, "+empty+")", "#e = "+u.str(entityRoster))
	_, err := s.updateRoster(ctx, u)
	return err
}

// heartbeat renews this instance's membership until now + Lease, saves the checkpoints
// that moved (cps: shard → checkpoint; only while the membership is unexpired, fenced by
// each shard's holder) and removes members expired for a day; it returns the roster as
// written. A member that lapsed rejoins unconditionally, saving nothing.
func (s *Scheduler) heartbeat(ctx context.Context, now time.Time, member bool, cps map[int]time.Time, last roster) (roster, error) {
	u := newRosterUpdate()
	me := u.name(s.o.Owner)
	u.sets = append(u.sets, "#m."+me+" = "+u.ms(now.Add(s.o.Lease)))
	if member {
		u.conds = append(u.conds, "#m."+me+" >= "+u.ms(now))
		vme := u.str(s.o.Owner)
		for _, n := range slices.Sorted(maps.Keys(cps)) {
			k := u.name(strconv.Itoa(n))
			u.sets = append(u.sets, "#c."+k+" = "+u.ms(cps[n]))
			u.conds = append(u.conds, "#s."+k+" = "+vme)
		}
	}
	for _, owner := range slices.Sorted(maps.Keys(last.members)) {
		if owner != s.o.Owner && last.members[owner].Before(now.Add(-memberForget)) {
			u.rems = append(u.rems, "#m."+u.name(owner))
		}
	}
	return s.updateRoster(ctx, u)
}

// memberForget is how long after its expiry a member is removed from the roster (its
// shards stay assigned to it, which any instance reads as free).
const memberForget = 24 * time.Hour

// take assigns shards to this instance: each one was read free (owner ""), ours, or held
// by a member whose membership had expired (owners[n]); the write is refused when any
// changed since, or when our membership expired.
func (s *Scheduler) take(ctx context.Context, now time.Time, owners map[int]string) (roster, error) {
	u := newRosterUpdate()
	me := u.name(s.o.Owner)
	vnow := u.ms(now)
	vme := u.str(s.o.Owner)
	u.conds = append(u.conds, "#m."+me+" >= "+vnow)
	for _, n := range slices.Sorted(maps.Keys(owners)) {
		k := u.name(strconv.Itoa(n))
		u.sets = append(u.sets, "#s."+k+" = "+vme)
		switch old := owners[n]; old {
		case "":
			u.conds = append(u.conds, "attribute_not_exists(#s."+k+")")
		case s.o.Owner:
			u.conds = append(u.conds, "#s."+k+" = "+vme)
		default:
			o := u.name(old)
			u.conds = append(u.conds, "#s."+k+" = "+u.str(old)+" AND (attribute_not_exists(#m."+o+") OR #m."+o+" < "+vnow+")")
		}
	}
	return s.updateRoster(ctx, u)
}

// giveBack frees shard n, held by this instance, saving its checkpoint cp (when not zero).
func (s *Scheduler) giveBack(ctx context.Context, n int, cp time.Time) error {
	u := newRosterUpdate()
	k := u.name(strconv.Itoa(n))
	u.rems = append(u.rems, "#s."+k)
	if !cp.IsZero() {
		u.sets = append(u.sets, "#c."+k+" = "+u.ms(cp))
	}
	u.conds = append(u.conds, "#s."+k+" = "+u.str(s.o.Owner))
	_, err := s.updateRoster(ctx, u)
	if errors.Is(err, errCondition) {
		return nil // not ours any more: nothing to give back
	}
	return err
}

// leave removes this instance's membership and frees the shards the roster gives it,
// saving their checkpoints (cps).
func (s *Scheduler) leave(ctx context.Context, cps map[int]time.Time) error {
	cur, err := s.updateRoster(ctx, newRosterUpdateNoop())
	if err != nil && !errors.Is(err, errCondition) {
		return err
	}
	u := newRosterUpdate()
	me := u.name(s.o.Owner)
	u.rems = append(u.rems, "#m."+me)
	vme := u.str(s.o.Owner)
	for _, n := range slices.Sorted(maps.Keys(cur.shards)) {
		if cur.shards[n] != s.o.Owner {
			continue
		}
		k := u.name(strconv.Itoa(n))
		u.rems = append(u.rems, "#s."+k)
		u.conds = append(u.conds, "#s."+k+" = "+vme)
		if cp, ok := cps[n]; ok && !cp.IsZero() {
			u.sets = append(u.sets, "#c."+k+" = "+u.ms(cp))
		}
	}
	_, err = s.updateRoster(ctx, u)
	return err
}

// newRosterUpdateNoop is an update that changes nothing but reads the roster (SET of the
// entity type it already has).
func newRosterUpdateNoop() *rosterUpdate {
	u := newRosterUpdate()
	u.names["#e"] = "entityType"
	u.sets = append(u.sets, "#e = "+u.str(entityRoster))
	return u
}
