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
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
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
// requires it free, the taker's own, or its owner's membership expired (or gone, or not a
// number, or beyond the horizon: see Scheduler.horizon) at the taker's now, so no two instances hold a shard at once as long as their clocks agree to
// within the lease's margin (as package lease assumes). An owner stops its shard workers
// when it cannot renew before its membership's expiry minus Lease/6.

// Attribute names of the roster item.
const (
	attrMembers = "members"
	attrShards  = "shards"
	attrCps     = "cps"
	// attrEntityType is the item's entity type (entityRoster), as on every item.
	attrEntityType = "entityType"
)

// entityRoster is the roster item's entityType.
const entityRoster = "SchedRoster"

// roster is the roster item as read.
type roster struct {
	members map[string]time.Time // owner → membership expiry (zero: not a number)
	shards  map[int]string       // shard → owner
	cps     map[int]time.Time    // shard → checkpoint
	// odd are the shards whose entry is not an owner's name (not a string, or empty):
	// another writer's, never a holder; a take replaces the value as read.
	odd map[int]types.AttributeValue
}

// live reports whether owner's membership is unexpired at now and not after horizon: a
// membership beyond it (a clock far ahead, or forged) is none, for the fair share and
// for the shards it holds alike (see Scheduler.horizon).
func (r roster) live(owner string, now, horizon time.Time) bool {
	u, ok := r.members[owner]
	return ok && !u.Before(now) && !u.After(horizon)
}

// horizon is the latest membership expiry believed at now: Lease ahead is what a
// heartbeat writes; an hour (or twice Lease, when longer) leaves room for clocks that
// disagree and for instances configured with another Lease. A later one counts as no
// membership: it would hold shards no instance runs, and shrink every other instance's
// fair share, until its date.
func (s *Scheduler) horizon(now time.Time) time.Time {
	return now.Add(max(time.Hour, 2*s.o.Lease))
}

// decodeRoster reads a roster item (missing maps are empty). What it reads agrees with
// what the writes' conditions test (see take): a shard's key is its number as written
// (shardKey: "7", never "07"), any other key is no shard; a membership is live by its
// number compared as DynamoDB compares numbers (not only an integer of Unix ms); a value
// of another type is an expired membership, or an odd shard entry.
func decodeRoster(item map[string]types.AttributeValue) roster {
	r := roster{members: map[string]time.Time{}, shards: map[int]string{}, cps: map[int]time.Time{}, odd: map[int]types.AttributeValue{}}
	if m, ok := item[attrMembers].(*types.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			t, _ := numTime(v)
			r.members[k] = t
		}
	}
	if m, ok := item[attrShards].(*types.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			n, ok := parseShardKey(k)
			if !ok {
				continue
			}
			if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value != "" {
				r.shards[n] = s.Value
			} else {
				r.odd[n] = v
			}
		}
	}
	if m, ok := item[attrCps].(*types.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			n, ok := parseShardKey(k)
			if t, isNum := numTime(v); ok && isNum && t.UnixMilli() > 0 {
				r.cps[n] = t
			}
		}
	}
	return r
}

// parseShardKey reads a key of the shards and cps maps: a shard's number exactly as
// shardKey writes it.
func parseShardKey(k string) (int, bool) {
	n, err := strconv.Atoi(k)
	if err != nil || n < 0 || shardKey(n) != k {
		return 0, false
	}
	return n, true
}

// numTime reads a roster time (Unix ms): any number DynamoDB holds (a fraction, an
// exponent, beyond int64: clamped), so that a reader's "expired" agrees with a
// condition's numeric comparison; false (zero time) for a value that is not a number.
func numTime(v types.AttributeValue) (time.Time, bool) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, false
	}
	if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), true
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		return time.Time{}, false
	}
	// Far beyond any date the roster compares with, either way.
	const bound = 1 << 53
	return time.UnixMilli(int64(max(min(f, bound), -bound))).UTC(), true
}

// rosterPath is the path of key k in the roster's map attribute m: m.k, with k one map
// key whatever it holds ('.' and '#' included: expression.NameNoDotSplit). A key with
// '[' or ']' cannot be one (see addressable).
func rosterPath(m, k string) expression.NameBuilder {
	return expression.Name(m).AppendName(expression.NameNoDotSplit(k))
}

// shardKey is shard n's key in the roster's shards and cps maps.
func shardKey(n int) string { return strconv.Itoa(n) }

// addressable reports whether a roster key can be written or tested through the
// expression builder: it reads "x[1]" as element 1 of the list x, a path into another
// attribute, and refuses an unbalanced bracket, so a name with '[' or ']' never names a
// map key. Owners are refused such names (checkOwner); a roster written by an earlier
// build may still hold one: such a member is never removed, and its shards are taken on
// a weaker condition (see take).
func addressable(k string) bool { return k != "" && !strings.ContainsAny(k, "[]") }

// checkOwner refuses an Owner the roster cannot hold as a map key (see addressable).
func checkOwner(owner string) error {
	if !addressable(owner) {
		return fmt.Errorf("sched: Options.Owner %q has '[' or ']': the roster's expressions would read it as a list index", owner)
	}
	return nil
}

// msAV is t as the roster's times are stored: Unix milliseconds.
func msAV(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

// strAV is s as a string attribute value.
func strAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// allOf is the conjunction of conds; false when there are none.
func allOf(conds []expression.ConditionBuilder) (expression.ConditionBuilder, bool) {
	switch len(conds) {
	case 0:
		return expression.ConditionBuilder{}, false
	case 1:
		return conds[0], true
	}
	return expression.And(conds[0], conds[1], conds[2:]...), true
}

// updateRoster sends the UpdateItem of the roster made of up and, when any, the
// conjunction of conds, returning the roster as written (ReturnValues ALL_NEW); a failed
// condition is errCondition, with the roster as it was (ALL_OLD).
func (s *Scheduler) updateRoster(ctx context.Context, up expression.UpdateBuilder, conds ...expression.ConditionBuilder) (roster, error) {
	item, err := s.updateRosterItem(ctx, up, conds...)
	if err != nil && !errors.Is(err, errCondition) {
		return roster{}, err
	}
	return decodeRoster(item), err
}

// updateRosterItem is updateRoster returning the item undecoded.
func (s *Scheduler) updateRosterItem(ctx context.Context, up expression.UpdateBuilder, conds ...expression.ConditionBuilder) (map[string]types.AttributeValue, error) {
	b := expression.NewBuilder().WithUpdate(up)
	if c, ok := allOf(conds); ok {
		b = b.WithCondition(c)
	}
	x, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("sched: roster: %w", err)
	}
	out, err := s.o.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.st.Table()),
		Key:                                 s.st.SchedRosterKey(),
		UpdateExpression:                    x.Update(),
		ConditionExpression:                 x.Condition(),
		ExpressionAttributeNames:            x.Names(),
		ExpressionAttributeValues:           x.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return out.Attributes, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, errCondition
	}
	return nil, fmt.Errorf("sched: roster: %w", err)
}

// errCondition is a roster write refused by its condition.
var errCondition = errors.New("sched: roster changed")

// ensureRoster creates the roster's empty maps where missing (the first instance on a
// table; the maps must exist before their keys can be set), and resets to an empty map
// any of them that is not a map (another writer's): no path into it could be written,
// so every heartbeat would fail. A reset forgets what it held (members rejoin at their
// next heartbeat, shards are taken again, their checkpoints start from Lookback).
func (s *Scheduler) ensureRoster(ctx context.Context) error {
	empty := expression.Value(&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}})
	var up expression.UpdateBuilder
	for _, m := range rosterMaps {
		up = up.Set(expression.Name(m), expression.IfNotExists(expression.Name(m), empty))
	}
	item, err := s.updateRosterItem(ctx, up.Set(expression.Name(attrEntityType), expression.Value(strAV(entityRoster))))
	if err != nil {
		return err
	}
	var fix expression.UpdateBuilder
	var conds []expression.ConditionBuilder
	var broken []string
	for _, m := range rosterMaps {
		if _, ok := item[m].(*types.AttributeValueMemberM); !ok {
			broken = append(broken, m)
			fix = fix.Set(expression.Name(m), empty)
			conds = append(conds, expression.Not(expression.Name(m).AttributeType(expression.Map)))
		}
	}
	if len(broken) == 0 {
		return nil
	}
	s.log.Warn("sched: roster attributes that are not maps reset to empty maps", "attributes", broken)
	if _, err := s.updateRosterItem(ctx, fix, conds...); err != nil && !errors.Is(err, errCondition) {
		return err // refused: another instance reset them first
	}
	return nil
}

// rosterMaps are the roster's map attributes.
var rosterMaps = []string{attrMembers, attrShards, attrCps}

// repairIfInvalid runs ensureRoster when err is DynamoDB's refusal of a roster write's
// expression (ValidationException: a map of the roster another writer replaced by
// something else), so that the next write can succeed.
func (s *Scheduler) repairIfInvalid(ctx context.Context, err error) {
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || ctx.Err() != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	if err := s.ensureRoster(cctx); err != nil {
		s.errs.Add(1)
		s.log.Warn("sched: repair the roster", "err", err)
	}
}

// heartbeat renews this instance's membership until now + Lease, saves the checkpoints
// that moved (cps: shard → checkpoint; only while the membership is unexpired, fenced by
// each shard's holder) and removes members expired for a day; it returns the roster as
// written. A member that lapsed rejoins unconditionally, saving nothing.
func (s *Scheduler) heartbeat(ctx context.Context, now time.Time, member bool, cps map[int]time.Time, last roster) (roster, error) {
	me := rosterPath(attrMembers, s.o.Owner)
	up := expression.Set(me, expression.Value(msAV(now.Add(s.o.Lease))))
	var conds []expression.ConditionBuilder
	if member {
		conds = append(conds, me.GreaterThanEqual(expression.Value(msAV(now))))
		for _, n := range slices.Sorted(maps.Keys(cps)) {
			up = up.Set(rosterPath(attrCps, shardKey(n)), expression.Value(msAV(cps[n])))
			conds = append(conds, rosterPath(attrShards, shardKey(n)).Equal(expression.Value(strAV(s.o.Owner))))
		}
	}
	forget := 0
	for _, owner := range slices.Sorted(maps.Keys(last.members)) {
		// A name the builder cannot address (see addressable) stays: an expired member
		// is harmless, and a heartbeat that could not be written would be. At most
		// maxForget a heartbeat (the expression's size); the others go at the next ones.
		if forget < maxForget && owner != s.o.Owner && addressable(owner) && last.members[owner].Before(now.Add(-memberForget)) {
			up = up.Remove(rosterPath(attrMembers, owner))
			forget++
		}
	}
	return s.updateRoster(ctx, up, conds...)
}

// memberForget is how long after its expiry a member is removed from the roster (its
// shards stay assigned to it, which any instance reads as free).
const memberForget = 24 * time.Hour

// take assigns shards to this instance: each one was read free (owner ""; or an odd
// entry of read, the roster they were read from), ours, or held by a member whose
// membership had expired (owners[n]); the write is refused when any changed since, or
// when our membership expired.
func (s *Scheduler) take(ctx context.Context, now time.Time, owners map[int]string, read roster) (roster, error) {
	vnow := expression.Value(msAV(now))
	vfar := expression.Value(msAV(s.horizon(now)))
	vme := expression.Value(strAV(s.o.Owner))
	var up expression.UpdateBuilder
	conds := []expression.ConditionBuilder{rosterPath(attrMembers, s.o.Owner).GreaterThanEqual(vnow)}
	for _, n := range slices.Sorted(maps.Keys(owners)) {
		k := rosterPath(attrShards, shardKey(n))
		up = up.Set(k, vme)
		if v, odd := read.odd[n]; odd && owners[n] == "" {
			// Not an owner's name: taken on condition that it is still the value read.
			conds = append(conds, k.Equal(expression.Value(v)))
			continue
		}
		switch old := owners[n]; old {
		case "":
			conds = append(conds, k.AttributeNotExists())
		case s.o.Owner:
			conds = append(conds, k.Equal(vme))
		default:
			held := k.Equal(expression.Value(strAV(old)))
			if !addressable(old) {
				// An earlier build's name the builder cannot address: the shard is taken
				// on condition that it did not change hands; its holder's membership,
				// read expired, is not tested again.
				conds = append(conds, held)
				continue
			}
			// Not live as the reader decides (see decodeRoster and live): absent, not a
			// number, before now or beyond the horizon.
			o := rosterPath(attrMembers, old)
			conds = append(conds, held.And(expression.Or(o.AttributeNotExists(),
				expression.Not(o.AttributeType(expression.Number)), o.LessThan(vnow), o.GreaterThan(vfar))))
		}
	}
	return s.updateRoster(ctx, up, conds...)
}

// giveBack frees shard n, held by this instance, saving its checkpoint cp (when not zero).
func (s *Scheduler) giveBack(ctx context.Context, n int, cp time.Time) error {
	k := shardKey(n)
	up := expression.Remove(rosterPath(attrShards, k))
	if !cp.IsZero() {
		up = up.Set(rosterPath(attrCps, k), expression.Value(msAV(cp)))
	}
	_, err := s.updateRoster(ctx, up, rosterPath(attrShards, k).Equal(expression.Value(strAV(s.o.Owner))))
	if errors.Is(err, errCondition) {
		return nil // not ours any more: nothing to give back
	}
	return err
}

// leave removes this instance's membership and frees the shards the roster gives it,
// saving their checkpoints (cps).
func (s *Scheduler) leave(ctx context.Context, cps map[int]time.Time) error {
	cur, err := s.readRoster(ctx)
	if err != nil && !errors.Is(err, errCondition) {
		return err
	}
	vme := expression.Value(strAV(s.o.Owner))
	var mine []int
	for _, n := range slices.Sorted(maps.Keys(cur.shards)) {
		if cur.shards[n] == s.o.Owner {
			mine = append(mine, n)
		}
	}
	// The shards maxSave a write (the expressions' size), the membership with the last.
	chunks := slices.Collect(slices.Chunk(mine, maxSave))
	if len(chunks) == 0 {
		chunks = [][]int{nil}
	}
	for i, chunk := range chunks {
		var up expression.UpdateBuilder
		if i == len(chunks)-1 {
			up = up.Remove(rosterPath(attrMembers, s.o.Owner))
		}
		var conds []expression.ConditionBuilder
		for _, n := range chunk {
			k := rosterPath(attrShards, shardKey(n))
			up = up.Remove(k)
			conds = append(conds, k.Equal(vme))
			if cp, ok := cps[n]; ok && !cp.IsZero() {
				up = up.Set(rosterPath(attrCps, shardKey(n)), expression.Value(msAV(cp)))
			}
		}
		if _, err := s.updateRoster(ctx, up, conds...); err != nil {
			return err
		}
	}
	return nil
}

// readRoster reads the roster through an update that changes nothing (SET of the entity
// type it already has), as strongly as every other roster call.
func (s *Scheduler) readRoster(ctx context.Context) (roster, error) {
	return s.updateRoster(ctx, expression.Set(expression.Name(attrEntityType), expression.Value(strAV(entityRoster))))
}

// RosterCycle runs once, in order, the roster calls an instance makes over its life, each
// through the code Run and Release run (for the design note's model, package datamodel,
// and tests), at Options.Clock's now:
//
//  1. the start (Run's first heartbeat): one UpdateItem creating the roster's maps where
//     missing, then one Query (strongly consistent, all pages) of the roster's partition
//     reading an earlier version's shard lease items (SHARD#n);
//  2. joining: a non-member's heartbeat, one UpdateItem (ReturnValues ALL_NEW) renewing
//     the membership until now + Lease;
//  3. taking shards: one UpdateItem, conditional on the membership and on each shard
//     being free, ours, or its holder's membership expired;
//  4. a heartbeat saving checkpoint cp (Unix ms in the roster's cps map) for every shard
//     taken: one UpdateItem, conditional on the membership and on each shard still ours;
//  5. giving shards[0] back with cp: one UpdateItem, conditional on the shard being ours;
//  6. leaving (Release): one UpdateItem reading the roster, then one removing the
//     membership and freeing the other shards with cp, conditional on each being ours.
//
// That is one Query and seven UpdateItems, all on the roster's partition. RosterCycle
// starts no shard worker and runs no task. Call it on a Scheduler that is not running
// (Run keeps the same membership). shards must be 1 to 16 shards of the store's (one
// take's); the error is a configuration error (no Options.DB, an Owner with '[' or ']',
// shards empty, too many or out of range), a write refused by its condition (a shard held by a live
// member: "sched: roster changed") or DynamoDB's.
func (s *Scheduler) RosterCycle(ctx context.Context, shards []int, cp time.Time) error {
	if s.o.DB == nil {
		return errors.New("sched: Options.DB is required")
	}
	if err := checkOwner(s.o.Owner); err != nil {
		return err
	}
	if len(shards) == 0 || len(shards) > maxTake {
		return fmt.Errorf("sched: roster cycle: %d shards to take, want 1 to %d (one take's)", len(shards), maxTake)
	}
	for _, n := range shards {
		if n < 0 || n >= s.shards {
			return fmt.Errorf("sched: roster cycle: shard %d is not one of the store's %d", n, s.shards)
		}
	}
	if err := s.ensureRoster(ctx); err != nil {
		return err
	}
	if _, _, err := s.readLegacy(ctx); err != nil {
		return err
	}
	r, err := s.heartbeat(ctx, s.o.Clock.Now(), false, nil, roster{})
	if err != nil {
		return fmt.Errorf("sched: roster cycle: join: %w", err)
	}
	owners := make(map[int]string, len(shards))
	cps := make(map[int]time.Time, len(shards))
	for _, n := range shards {
		owners[n] = r.shards[n]
		cps[n] = cp
	}
	if r, err = s.take(ctx, s.o.Clock.Now(), owners, r); err != nil {
		return fmt.Errorf("sched: roster cycle: take shards %v: %w", shards, err)
	}
	if _, err := s.heartbeat(ctx, s.o.Clock.Now(), true, cps, r); err != nil {
		return fmt.Errorf("sched: roster cycle: heartbeat: %w", err)
	}
	if err := s.giveBack(ctx, shards[0], cp); err != nil {
		return fmt.Errorf("sched: roster cycle: give shard %d back: %w", shards[0], err)
	}
	delete(cps, shards[0])
	if err := s.leave(ctx, cps); err != nil {
		return fmt.Errorf("sched: roster cycle: leave: %w", err)
	}
	return nil
}
