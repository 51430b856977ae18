package sched_test

import (
	"context"
	"testing"

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
