package sched_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
)

// putBroken writes task id of kind "test" due at due with the attributes of bad
// replacing the task's (a writer that broke the item's format).
func (e *env) putBroken(t *testing.T, id string, due time.Time, bad map[string]types.AttributeValue) {
	t.Helper()
	item := e.st.ScheduleAction(inbox.Task{ID: id, Kind: "test", Due: due}).Put.Item
	maps.Copy(item, bad)
	if _, err := e.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenTaskItemDoesNotWedgeItsShard: five task items of one shard's minute that do
// not decode (due a string, attempts a list, kind a map...), more than a pass's first
// page, come before two good tasks: the good ones run at their time and the shard's
// passes do not fail (each failed read used to stop the pass, every pass, forever).
func TestBrokenTaskItemDoesNotWedgeItsShard(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	r := newRecorder()
	now := e.clk.Now()
	for i, bad := range []map[string]types.AttributeValue{
		{"due": &types.AttributeValueMemberS{Value: "soon"}},
		{"attempts": &types.AttributeValueMemberL{}},
		{"kind": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}},
		{"attempts": &types.AttributeValueMemberS{Value: "x"}},
		{"due": &types.AttributeValueMemberBOOL{Value: true}},
	} {
		e.putBroken(t, "bad-"+string(rune('a'+i)), now.Add(-10*time.Second+time.Duration(i)*time.Millisecond), bad)
	}
	tasks := e.schedule(t, "good", 2, func(i int) time.Time { return now.Add(-time.Second + time.Duration(i)*2*time.Second) })
	s, _ := e.start(t, "a", r, sched.Options{})
	e.settle(t, s)
	e.advance(t, 2*time.Second, s)
	checkOnce(t, tasks, r.snapshot())
	if st := s.Stats(); st.Errors != 0 || st.Done != 2 {
		t.Errorf("stats %+v: want the two good tasks done, no failed call", st)
	}
	for id := range r.snapshot() {
		if id[:3] == "bad" {
			t.Errorf("the broken item %s ran", id)
		}
	}
}
