package sched_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/sched"
)

// rosterItem reads the roster item (consistent); nil when there is none.
func (e *env) rosterItem(t *testing.T) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table),
		Key: e.st.SchedRosterKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// keyOf is an item key's string values, by attribute name.
func keyOf(k map[string]types.AttributeValue) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(k)) {
		v, _ := k[name].(*types.AttributeValueMemberS)
		if v != nil {
			b.WriteString(name + "=" + v.Value + " ")
		}
	}
	return b.String()
}

// rosterMap returns the roster item's map attribute name (nil when absent).
func rosterMap(item map[string]types.AttributeValue, name string) map[string]types.AttributeValue {
	if m, ok := item[name].(*types.AttributeValueMemberM); ok {
		return m.Value
	}
	return nil
}

// TestOwnerWithDotsAndHashIsOneKey: an owner named like a host (dots) with a '#' is one
// key of the roster's maps: its membership is members["ip-10-0-0-7.ec2.internal#2"], not
// a path through members.ip-10-0-0-7, and it holds, saves and gives back its shards.
func TestOwnerWithDotsAndHashIsOneKey(t *testing.T) {
	t.Parallel()
	const owner = "ip-10-0-0-7.ec2.internal#2"
	e := setup(t, 4)
	r := newRecorder()
	s, stop := e.start(t, owner, r, sched.Options{})
	e.settle(t, s)
	e.advance(t, rebalance, s)
	if len(s.Held()) != 4 {
		t.Fatalf("%s holds %v, want the 4 shards", owner, s.Held())
	}
	item := e.rosterItem(t)
	members := rosterMap(item, "members")
	if _, ok := members[owner]; !ok || len(members) != 1 {
		t.Errorf("the roster's members are %v, want the one key %q", members, owner)
	}
	for k, v := range rosterMap(item, "shards") {
		if s, ok := v.(*types.AttributeValueMemberS); !ok || s.Value != owner {
			t.Errorf("shard %s is held by %v, want %q", k, v, owner)
		}
	}
	if _, nested := item["ip-10-0-0-7"]; nested {
		t.Errorf("the owner's name was split into a path: %v", item)
	}
	stop()
	if err := s.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	item = e.rosterItem(t)
	if m, sh := rosterMap(item, "members"), rosterMap(item, "shards"); len(m) != 0 || len(sh) != 0 {
		t.Errorf("after Release the roster holds members %v and shards %v, want none", m, sh)
	}
	if cps := rosterMap(item, "cps"); len(cps) != 4 {
		t.Errorf("after Release the roster holds checkpoints %v, want the 4 shards'", cps)
	}
}

// TestOwnerWithBracketIsRefused: Run refuses an owner with '[' or ']' (the expressions
// would read it as a list index) before any call.
func TestOwnerWithBracketIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	e.rec.Reset()
	for _, owner := range []string{"a[1]", "b]", "c["} {
		s := sched.New(e.st, sched.Options{DB: e.db, Owner: owner, Clock: e.clk, Logger: e.log})
		if err := s.Run(context.Background()); err == nil {
			t.Errorf("Run with owner %q returned nil, want a configuration error", owner)
		}
	}
	if ops := e.rec.Ops(); len(ops) != 0 {
		t.Errorf("a refused owner sent %v", ops)
	}
}

// TestRosterCycleCalls: RosterCycle makes the roster's calls once each, in a scheduler's
// order: create the maps (UpdateItem), read the earlier version's leases (Query), join,
// take, heartbeat with the checkpoints, give one back, and leave (two UpdateItems): one
// Query and seven UpdateItems, no task partition read. It takes a shard free or held by
// an expired member, and is refused one a live member holds.
func TestRosterCycleCalls(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	e.rec.KeepInputs()
	ctx := context.Background()
	now := e.clk.Now()
	ms := func(at time.Time) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(at.UnixMilli(), 10)}
	}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	// A live member b holds shard 1; c, whose membership expired, holds shard 3.
	item := map[string]types.AttributeValue{
		"members": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"b": ms(now.Add(time.Hour)), "c": ms(now.Add(-time.Minute))}},
		"shards":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"1": str("b"), "3": str("c")}},
		"cps":     &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
	}
	maps.Copy(item, e.st.SchedRosterKey())
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
		t.Fatal(err)
	}
	s := sched.New(e.st, sched.Options{DB: e.db, Owner: "model.a#1", Clock: e.clk, Logger: e.log})
	cp := now.Truncate(time.Minute)
	e.rec.Reset()
	if err := s.RosterCycle(ctx, []int{0, 2, 3}, cp); err != nil {
		t.Fatal(err)
	}
	want := []string{"UpdateItem", "Query", "UpdateItem", "UpdateItem", "UpdateItem", "UpdateItem", "UpdateItem", "UpdateItem"}
	if ops := e.rec.Ops(); !slices.Equal(ops, want) {
		t.Errorf("RosterCycle sent %v, want %v", ops, want)
	}
	// Every call is on the roster's partition; the writes after the join are conditional.
	for i, rq := range e.rec.Requests() {
		switch in := rq.Input.(type) {
		case *dynamodb.UpdateItemInput:
			if keyOf(in.Key) != keyOf(e.st.SchedRosterKey()) {
				t.Errorf("call %d updates %v, not the roster", i, in.Key)
			}
			if conditional := in.ConditionExpression != nil; conditional != (i >= 3 && i != 6) {
				t.Errorf("call %d (%s) conditional: %v", i, aws.ToString(in.UpdateExpression), conditional)
			}
		case *dynamodb.QueryInput:
			if v, ok := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS); !ok || v.Value != e.st.SchedLeasePK() {
				t.Errorf("call %d queries %v, not the roster's partition", i, in.ExpressionAttributeValues)
			}
		}
	}
	got := e.rosterItem(t)
	if m := rosterMap(got, "members"); len(m) != 2 || m["b"] == nil || m["c"] == nil {
		t.Errorf("after the cycle the members are %v, want b and c (model.a#1 left)", m)
	}
	if sh := rosterMap(got, "shards"); len(sh) != 1 || sh["1"].(*types.AttributeValueMemberS).Value != "b" {
		t.Errorf("after the cycle the shards are %v, want b's shard 1 alone", sh)
	}
	cps := rosterMap(got, "cps")
	for _, n := range []string{"0", "2", "3"} {
		if v, ok := cps[n].(*types.AttributeValueMemberN); !ok || v.Value != strconv.FormatInt(cp.UnixMilli(), 10) {
			t.Errorf("shard %s's checkpoint is %v, want %d", n, cps[n], cp.UnixMilli())
		}
	}
	if len(cps) != 3 {
		t.Errorf("checkpoints %v, want shards 0, 2 and 3's", cps)
	}
	if held := s.Held(); len(held) != 0 {
		t.Errorf("RosterCycle left shards held: %v", held)
	}

	// Shard 1 is b's, whose membership is live: the take is refused.
	if err := s.RosterCycle(ctx, []int{1}, cp); err == nil || !strings.Contains(err.Error(), "roster changed") {
		t.Errorf("RosterCycle of a live member's shard: %v, want the take refused", err)
	}
	if sh := rosterMap(e.rosterItem(t), "shards"); sh["1"].(*types.AttributeValueMemberS).Value != "b" {
		t.Errorf("shard 1 is now %v's, want b's", sh["1"])
	}
	for _, bad := range [][]int{nil, {4}, {-1}, make([]int, 17)} {
		if err := s.RosterCycle(ctx, bad, cp); err == nil {
			t.Errorf("RosterCycle of shards %v returned nil", bad)
		}
	}
}

// TestBracketedKeyOfAnEarlierBuild: a roster written by an earlier build may hold an
// owner with a bracket, which the expression builder cannot address ("old[1]" would be a
// list index, "old]" an error). Members expired for two days under such names, holding
// shards 0 and 1, fail neither the heartbeat (they are not removed) nor the take (their
// shards are taken on condition that they did not change hands).
func TestBracketedKeyOfAnEarlierBuild(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	ctx := context.Background()
	old := &types.AttributeValueMemberN{Value: strconv.FormatInt(e.clk.Now().Add(-48*time.Hour).UnixMilli(), 10)}
	item := map[string]types.AttributeValue{
		"members": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"old[1]": old, "old]": old}},
		"shards": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"0": &types.AttributeValueMemberS{Value: "old[1]"}, "1": &types.AttributeValueMemberS{Value: "old]"}}},
		"cps": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
	}
	maps.Copy(item, e.st.SchedRosterKey())
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
		t.Fatal(err)
	}
	s, _ := e.start(t, "a", newRecorder(), sched.Options{})
	e.settle(t, s)
	e.advance(t, 2*rebalance, s)
	held := s.Held()
	slices.Sort(held)
	if !slices.Equal(held, []int{0, 1, 2, 3}) {
		t.Errorf("a holds %v, want the 4 shards", held)
	}
	if st := s.Stats(); st.Errors != 0 {
		t.Errorf("%d DynamoDB calls failed", st.Errors)
	}
	members := rosterMap(e.rosterItem(t), "members")
	for _, name := range []string{"old[1]", "old]"} {
		if _, ok := members[name]; !ok {
			t.Errorf("the member %q was removed", name)
		}
	}
}
