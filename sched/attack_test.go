package sched_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
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

// putRoster writes the roster item with the given maps (members, shards, cps), as an
// earlier build, another writer or a forger may have left it.
func (e *env) putRoster(t *testing.T, attrs map[string]types.AttributeValue) {
	t.Helper()
	item := maps.Clone(attrs)
	maps.Copy(item, e.st.SchedRosterKey())
	if _, err := e.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func msN(at time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(at.UnixMilli(), 10)}
}

func avM(m map[string]types.AttributeValue) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: m}
}

// TestFutureCheckpointIsIgnored: the roster gives shard 0 a checkpoint a year ahead (a
// clock far ahead, or forged); the shard's tasks due now still run: the checkpoint is
// not trusted to skip the minutes up to it (no pass read anything before).
func TestFutureCheckpointIsIgnored(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	now := e.clk.Now()
	e.putRoster(t, map[string]types.AttributeValue{
		"members": avM(map[string]types.AttributeValue{}),
		"shards":  avM(map[string]types.AttributeValue{}),
		"cps":     avM(map[string]types.AttributeValue{"0": msN(now.AddDate(1, 0, 0)), "1": msN(now.Add(2 * time.Minute))}),
	})
	r := newRecorder()
	tasks := e.schedule(t, "cp", 8, func(i int) time.Time { return now.Add(-time.Second + time.Duration(i)*100*time.Millisecond) })
	s, _ := e.start(t, "a", r, sched.Options{})
	e.settle(t, s)
	e.advance(t, 2*time.Second, s)
	checkOnce(t, tasks, r.snapshot())
}

// TestRosterAttributeNotAMapIsRepaired: the roster's maps replaced by values of another
// type (members a string, shards a list, cps a number; later members again, while the
// instance runs) are reset to empty maps, not a permanent failure of every heartbeat
// (no path into a string can be written): the instance holds its shards and runs tasks.
func TestRosterAttributeNotAMapIsRepaired(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	e.putRoster(t, map[string]types.AttributeValue{
		"members": &types.AttributeValueMemberS{Value: "oops"},
		"shards":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}},
		"cps":     &types.AttributeValueMemberN{Value: "5"},
	})
	r := newRecorder()
	s, _ := e.start(t, "a", r, sched.Options{})
	e.settle(t, s)
	e.until(t, rebalance/10, 40, func() bool { return len(s.Held()) == 2 }, s)
	item := e.rosterItem(t)
	for _, m := range []string{"members", "shards", "cps"} {
		if _, ok := item[m].(*types.AttributeValueMemberM); !ok {
			t.Errorf("the roster's %s is %T, want a map", m, item[m])
		}
	}
	// Broken again while a holds both shards: its heartbeat repairs it and a keeps going.
	if _, err := e.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(e.table),
		Key: e.st.SchedRosterKey(), UpdateExpression: aws.String("SET members = :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "again"}}}); err != nil {
		t.Fatal(err)
	}
	e.advance(t, 3*rebalance, s)
	if _, ok := e.rosterItem(t)["members"].(*types.AttributeValueMemberM); !ok {
		t.Errorf("members not repaired while running")
	}
	now := e.clk.Now()
	tasks := e.schedule(t, "fix", 6, func(i int) time.Time { return now.Add(time.Duration(i) * 100 * time.Millisecond) })
	e.until(t, poll, 40, ran(r, tasks, 1), s)
	if len(s.Held()) != 2 {
		t.Errorf("a holds %v, want both shards", s.Held())
	}
}

// TestOddRosterEntriesAreTaken: roster entries another writer left odd, each read one way
// and tested another by the take's condition (which then failed at every rebalance, the
// shard never held): shard 0's holder a number, shard 1's an empty string, shard 2's
// holder b whose membership is a boolean, shard 3 under the key "03" (not shard 3's key)
// for an expired member, and a membership written as a fraction. One instance takes
// all four shards and runs their tasks.
func TestOddRosterEntriesAreTaken(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	now := e.clk.Now()
	e.putRoster(t, map[string]types.AttributeValue{
		"members": avM(map[string]types.AttributeValue{
			"b": &types.AttributeValueMemberBOOL{Value: true},
			"z": msN(now.Add(-time.Hour)),
			"f": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10) + ".5"},
		}),
		"shards": avM(map[string]types.AttributeValue{
			"0":  &types.AttributeValueMemberN{Value: "5"},
			"1":  &types.AttributeValueMemberS{Value: ""},
			"2":  &types.AttributeValueMemberS{Value: "b"},
			"03": &types.AttributeValueMemberS{Value: "z"},
			"3":  &types.AttributeValueMemberS{Value: "f"},
		}),
		"cps": avM(map[string]types.AttributeValue{}),
	})
	r := newRecorder()
	s, _ := e.start(t, "a", r, sched.Options{})
	e.settle(t, s)
	e.until(t, rebalance/10, 40, func() bool { return len(s.Held()) == 4 }, s)
	tasks := e.schedule(t, "odd", 12, func(i int) time.Time { return now.Add(time.Duration(i) * 10 * time.Millisecond) })
	e.until(t, poll, 10, ran(r, tasks, 1), s)
	checkOnce(t, tasks, r.snapshot())
}

// TestFarFutureMemberIsNoMember: a membership that expires in a thousand years (forged,
// or a clock far ahead) holding shard 3 is left out of the fair share and holds nothing:
// one instance takes all four shards (it took two, its share beside a member that never
// renews, and shard 3's tasks never ran) and runs their tasks.
func TestFarFutureMemberIsNoMember(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	now := e.clk.Now()
	e.putRoster(t, map[string]types.AttributeValue{
		"members": avM(map[string]types.AttributeValue{"ghost": msN(now.AddDate(1000, 0, 0))}),
		"shards":  avM(map[string]types.AttributeValue{"3": &types.AttributeValueMemberS{Value: "ghost"}}),
		"cps":     avM(map[string]types.AttributeValue{}),
	})
	r := newRecorder()
	s, _ := e.start(t, "a", r, sched.Options{})
	e.settle(t, s)
	e.until(t, rebalance/10, 40, func() bool { return len(s.Held()) == 4 }, s)
	tasks := e.schedule(t, "far", 12, func(i int) time.Time { return now.Add(time.Duration(i) * 10 * time.Millisecond) })
	e.until(t, poll, 10, ran(r, tasks, 1), s)
	checkOnce(t, tasks, r.snapshot())
}

// TestLargeRosterStaysUnderTheExpressionLimit: with 120 shards one instance takes them
// at most 16 a take and saves at most 32 checkpoints a heartbeat, so that no roster
// write builds an expression near DynamoDB's 4 KB limit (one take of every shard built
// one over it, refused at every rebalance); it still holds all 120 and every
// checkpoint is saved in time; Release frees them all.
func TestLargeRosterStaysUnderTheExpressionLimit(t *testing.T) {
	t.Parallel()
	const shards = 120
	e := setup(t, shards)
	e.rec.KeepInputs()
	e.step = rebalance // a pass of every shard each step (its safety net): few Queries
	s, stop := e.start(t, "a", newRecorder(), sched.Options{Lookback: time.Minute, Poll: rebalance})
	e.settle(t, s)
	e.until(t, rebalance, 20, func() bool { return len(s.Held()) == shards }, s)
	e.advance(t, 2*time.Minute, s) // the checkpoints move: every shard's is saved
	if st := s.Stats(); st.Errors != 0 {
		t.Errorf("%d calls failed", st.Errors)
	}
	rosterKey := keyOf(e.st.SchedRosterKey())
	calls := 0
	for _, rq := range e.rec.Requests() {
		in, ok := rq.Input.(*dynamodb.UpdateItemInput)
		if !ok || keyOf(in.Key) != rosterKey {
			continue
		}
		calls++
		touched, cps := 0, false
		for _, name := range in.ExpressionAttributeNames {
			if _, err := strconv.Atoi(name); err == nil {
				touched++
			}
			cps = cps || name == "cps"
		}
		limit := 16
		if cps {
			limit = 32
		}
		if touched > limit {
			t.Errorf("a roster write touches %d shards, want at most %d: %.80s", touched, limit, aws.ToString(in.UpdateExpression))
		}
		if n := len(aws.ToString(in.UpdateExpression)) + len(aws.ToString(in.ConditionExpression)); n > 2048 {
			t.Errorf("a roster write's expressions are %d bytes long", n)
		}
	}
	cps := rosterMap(e.rosterItem(t), "cps")
	if len(cps) != shards {
		t.Errorf("%d checkpoints saved, want %d", len(cps), shards)
	}
	t.Logf("%d roster writes", calls)
	// Leaving frees all 120 (32 a write), the membership with the last.
	stop()
	if err := s.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	item := e.rosterItem(t)
	if m, sh := rosterMap(item, "members"), rosterMap(item, "shards"); len(m) != 0 || len(sh) != 0 {
		t.Errorf("after Release the roster holds %d members and %d shards, want none", len(m), len(sh))
	}
}

// TestGarbageTraceparentRunsUnlinked: tasks whose stored traceparent is garbage (not a
// traceparent, 10 KB long, zero ids, a version that is not one) run once each, traced as
// new roots without a link; the valid one is linked.
func TestGarbageTraceparentRunsUnlinked(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	now := e.clk.Now()
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	parents := map[string]string{
		"tp-garbage": "garbage",
		"tp-long":    strings.Repeat("f", 10<<10),
		"tp-zero":    "00-00000000000000000000000000000000-0000000000000000-01",
		"tp-version": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tp-newline": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nx",
		"tp-valid":   valid,
	}
	var tasks []inbox.Task
	for id, tpv := range parents {
		e.putBroken(t, id, now.Add(-time.Second), map[string]types.AttributeValue{"traceparent": &types.AttributeValueMemberS{Value: tpv}})
		tasks = append(tasks, inbox.Task{ID: id})
	}
	r := newRecorder()
	s, _ := e.start(t, "a", r, sched.Options{Tracer: tp.Tracer("test")})
	e.settle(t, s)
	e.until(t, poll, 5, ran(r, tasks, 1), s)
	if st := s.Stats(); st.Done != int64(len(tasks)) {
		t.Errorf("stats %+v, want %d done", st, len(tasks))
	}
	runs := r.snapshot()
	for id := range parents {
		if len(runs[id]) != 1 {
			t.Errorf("%s ran %d times", id, len(runs[id]))
		}
	}
	linked := 0
	for _, sp := range spans.Ended() {
		if sp.Parent().IsValid() {
			t.Errorf("span %s has a parent", sp.Name())
		}
		for _, l := range sp.Links() {
			linked++
			if l.SpanContext.TraceID().String() != valid[3:35] {
				t.Errorf("span %s links to %v", sp.Name(), l.SpanContext.TraceID())
			}
		}
	}
	if linked != 1 {
		t.Errorf("%d links, want the valid traceparent's alone", linked)
	}
}

// TestNegativeAttemptsStillDrop: a task item whose attempts is a large negative number
// (not one of ours: forged or broken) is dropped after MaxAttempts failures like any
// other, not retried a billion times first.
func TestNegativeAttemptsStillDrop(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	now := e.clk.Now()
	e.putBroken(t, "neg", now.Add(-time.Second), map[string]types.AttributeValue{"attempts": &types.AttributeValueMemberN{Value: "-1000000000"}})
	r := newRecorder()
	r.fail = func(inbox.Task) error { return errors.New("always") }
	s, _ := e.start(t, "a", r, sched.Options{MaxAttempts: 3})
	e.settle(t, s)
	e.until(t, poll, 30, func() bool { return s.Stats().Dropped == 1 }, s)
	if n := len(r.snapshot()["neg"]); n != 3 {
		t.Errorf("ran %d times, want 3", n)
	}
}

// TestWakeAtTheSafetyPassIsNotSkipped: a task written into the current minute after the
// minute was read ahead, due at the instant of the shard's safety-net pass, is heard of
// (Notify) and runs at its time. That pass skips the current minute, which was read
// ahead, trusting the wake-ups; it had also claimed this one's pending due time, so the
// task waited for the minute to close (a minute late).
func TestWakeAtTheSafetyPassIsNotSkipped(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	r := newRecorder()
	e.step = 100 * time.Millisecond
	s, _ := e.start(t, "a", r, sched.Options{Poll: time.Minute})
	e.settle(t, s)
	// The clock is 10 s into minute M-1; shard 0's safety-net passes come 1.1 s into each
	// minute (Grace 1 s, then 100 ms a shard). Past the next one, which reads M+1 ahead.
	next := e.clk.Now().Truncate(time.Minute).Add(time.Minute)
	e.clk.Advance(next.Add(2 * time.Second).Sub(e.clk.Now()))
	e.settle(t, s)
	m := next.Add(time.Minute)
	due := m.Add(1100 * time.Millisecond) // minute M's safety-net pass
	tasks := e.schedule(t, "at-safety", 1, func(int) time.Time { return due })
	s.Notify(store.SchedShard(tasks[0].ID, 1), due)
	e.settle(t, s)
	e.clk.Advance(due.Sub(e.clk.Now()))
	e.settle(t, s)
	e.advance(t, 500*time.Millisecond, s)
	runs := r.snapshot()[tasks[0].ID]
	if len(runs) != 1 {
		t.Fatalf("the task due at the safety-net pass ran %d times by %v after it", len(runs), e.clk.Now().Sub(due))
	}
	if lag := runs[0].at.Sub(due); lag > 200*time.Millisecond {
		t.Errorf("ran %v late", lag)
	}
}
