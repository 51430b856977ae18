package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// dueAll reads every task of shard's bucket due by upTo, page by page (limit per page).
func dueAll(t *testing.T, s *store.Store, shard int, bucket, upTo time.Time, limit int) []inbox.Task {
	t.Helper()
	var out []inbox.Task
	var after *inbox.Task
	for {
		p, err := s.DueTasks(context.Background(), shard, bucket, upTo, after, limit)
		if err != nil {
			t.Fatalf("due tasks: %v", err)
		}
		out = append(out, p.Tasks...)
		if !p.More {
			return out
		}
		after = p.Last
	}
}

func TestSchedKeys(t *testing.T) {
	t.Parallel()
	if got := store.SchedBucket(time.Date(2026, 12, 1, 8, 44, 59, 999, time.FixedZone("X", 3600))); !got.Equal(time.Date(2026, 12, 1, 7, 44, 0, 0, time.UTC)) {
		t.Errorf("bucket = %v", got)
	}
	counts := make([]int, 16)
	for i := range 1600 {
		n := store.SchedShard(fmt.Sprintf("task-%d", i), 16)
		if n < 0 || n >= 16 {
			t.Fatalf("shard %d out of range", n)
		}
		counts[n]++
	}
	for n, c := range counts {
		if c < 50 || c > 150 {
			t.Errorf("shard %d got %d of 1600 tasks: the hash does not spread", n, c)
		}
	}
	// The shard of an id is fixed (FNV-1a): tasks written by one version are found by the next.
	if got := store.SchedShard("task-0", 16); got != 9 {
		t.Errorf("SchedShard(task-0, 16) = %d, want 9", got)
	}
	for _, tc := range []struct {
		sk     string
		shard  int
		member bool
		ok     bool
	}{
		{"SHARD#7", 7, false, true}, {"MEMBER#host-1", -1, true, true}, {"SHARD#x", -1, false, false}, {"OTHER", -1, false, false},
	} {
		shard, member, ok := store.SchedLeaseKind(tc.sk)
		if shard != tc.shard || member != tc.member || ok != tc.ok {
			t.Errorf("SchedLeaseKind(%q) = %d %v %v", tc.sk, shard, member, ok)
		}
	}
}

func TestScheduleAndDueTasks(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	f := newFixture(t, store.WithSchedShards(1), store.WithClock(func() time.Time { return base }))
	ctx := context.Background()
	v := f.viewer("ann")
	// 25 tasks in the minute of base+1m, one in the next minute, one due later in the same minute.
	var want []string
	for i := range 25 {
		id := fmt.Sprintf("t%02d", i)
		want = append(want, id)
		if err := f.s.Schedule(ctx, inbox.Task{ID: id, Kind: "wake", Due: base.Add(time.Minute + time.Duration(i)*time.Second), Viewer: v, Ref: "n" + id, Token: "tok" + id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.s.Schedule(ctx, inbox.Task{ID: "late", Kind: "wake", Due: base.Add(time.Minute + 50*time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Schedule(ctx, inbox.Task{ID: "next", Kind: "wake", Due: base.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Idempotent by id and due.
	if err := f.s.Schedule(ctx, inbox.Task{ID: "t00", Kind: "wake", Due: base.Add(time.Minute), Viewer: v, Ref: "nt00", Token: "tokt00"}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Schedule(ctx, inbox.Task{ID: "", Kind: "wake", Due: base}); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("a task without an id: %v", err)
	}

	bucket := base.Add(time.Minute)
	got := dueAll(t, f.s, 0, bucket, base.Add(time.Minute+30*time.Second), 7)
	var ids []string
	for _, tk := range got {
		ids = append(ids, tk.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("due by +1m30s: %v, want %v", ids, want)
	}
	first := got[0]
	if first.Kind != "wake" || first.Viewer != v || first.Ref != "nt00" || first.Token != "tokt00" || first.Attempts != 0 || !first.Due.Equal(base.Add(time.Minute)) {
		t.Errorf("task read back as %+v", first)
	}
	if n := len(dueAll(t, f.s, 0, bucket, base.Add(2*time.Minute), 100)); n != 26 {
		t.Errorf("the whole minute holds %d tasks, want 26", n)
	}
	if got := dueAll(t, f.s, 0, base.Add(2*time.Minute), base.Add(2*time.Minute), 100); len(got) != 1 || got[0].ID != "next" {
		t.Errorf("next minute: %+v", got)
	}
	// Due exactly at upTo counts; a millisecond before does not.
	if n := len(dueAll(t, f.s, 0, bucket, base.Add(time.Minute-time.Millisecond), 100)); n != 0 {
		t.Errorf("%d tasks due before the first one", n)
	}
	if n := len(dueAll(t, f.s, 0, bucket, base.Add(time.Minute), 100)); n != 1 {
		t.Errorf("%d tasks due at +1m, want 1", n)
	}
	// Read ahead: a page that reached a task due after upTo says when it is due, and
	// ends there; one that stopped at its limit among due tasks says nothing yet.
	for _, tc := range []struct {
		upTo  time.Duration
		limit int
		tasks int
		more  bool
		next  time.Duration // 0: none read
	}{
		{upTo: time.Minute - time.Millisecond, limit: 1, tasks: 0, next: time.Minute},
		{upTo: time.Minute + 2*time.Second, limit: 10, tasks: 3, next: time.Minute + 3*time.Second},
		{upTo: time.Minute + 2*time.Second, limit: 3, tasks: 3, more: true},
		{upTo: time.Minute + 30*time.Second, limit: 100, tasks: 25, next: time.Minute + 50*time.Second},
		{upTo: time.Minute + 55*time.Second, limit: 100, tasks: 26},
	} {
		p, err := f.s.DueTasks(ctx, 0, bucket, base.Add(tc.upTo), nil, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var next time.Time
		if tc.next != 0 {
			next = base.Add(tc.next)
		}
		if len(p.Tasks) != tc.tasks || p.More != tc.more || !p.Next.Equal(next) {
			t.Errorf("up to +%v, limit %d: %d tasks, more %v, next %v; want %d, %v, %v", tc.upTo, tc.limit, len(p.Tasks), p.More, p.Next, tc.tasks, tc.more, next)
		}
	}
}

func TestTaskCompleteRescheduleCancel(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	f := newFixture(t, store.WithSchedShards(4), store.WithClock(func() time.Time { return base }))
	ctx := context.Background()
	task := inbox.Task{ID: "a", Kind: "k", Due: base.Add(10 * time.Second), Token: "x"}
	shard := store.SchedShard("a", 4)
	if err := f.s.Schedule(ctx, task); err != nil {
		t.Fatal(err)
	}
	got := dueAll(t, f.s, shard, base, base.Add(time.Minute), 100)
	if len(got) != 1 {
		t.Fatalf("due: %+v", got)
	}
	next, ok, err := f.s.RescheduleTask(ctx, shard, base, got[0], base.Add(90*time.Second))
	if err != nil || !ok || next.Attempts != 1 {
		t.Fatalf("reschedule: %+v %v %v", next, ok, err)
	}
	if _, ok, err := f.s.RescheduleTask(ctx, shard, base, got[0], base.Add(90*time.Second)); err != nil || ok {
		t.Errorf("rescheduling a task that moved already: ok %v err %v", ok, err)
	}
	if n := len(dueAll(t, f.s, shard, base, base.Add(time.Minute), 100)); n != 0 {
		t.Errorf("the old minute still holds %d tasks", n)
	}
	moved := dueAll(t, f.s, shard, base.Add(time.Minute), base.Add(2*time.Minute), 100)
	if len(moved) != 1 || moved[0].Attempts != 1 || moved[0].Token != "x" || !moved[0].Due.Equal(base.Add(90*time.Second)) {
		t.Fatalf("rescheduled task: %+v", moved)
	}
	if ok, err := f.s.CompleteTask(ctx, shard, base.Add(time.Minute), moved[0]); err != nil || !ok {
		t.Errorf("complete: %v %v", ok, err)
	}
	if ok, err := f.s.CompleteTask(ctx, shard, base.Add(time.Minute), moved[0]); err != nil || ok {
		t.Errorf("completing twice: %v %v", ok, err)
	}

	b := inbox.Task{ID: "b", Kind: "k", Due: base.Add(5 * time.Minute)}
	if err := f.s.Schedule(ctx, b); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.CancelTask(ctx, "b", b.Due); err != nil || !ok {
		t.Errorf("cancel: %v %v", ok, err)
	}
	if n := len(dueAll(t, f.s, store.SchedShard("b", 4), b.Due, b.Due, 100)); n != 0 {
		t.Errorf("a cancelled task is still there (%d)", n)
	}

	// A task written for a time already past lands in the current minute.
	past := inbox.Task{ID: "c", Kind: "k", Due: base.Add(-time.Hour)}
	if err := f.s.Schedule(ctx, past); err != nil {
		t.Fatal(err)
	}
	if got := dueAll(t, f.s, store.SchedShard("c", 4), base, base, 100); len(got) != 1 || !got[0].Due.Equal(past.Due) {
		t.Errorf("a past task in the current minute: %+v", got)
	}
}

// TestScheduleActionIsAtomic: a task scheduled inside a transaction exists exactly when
// the transaction commits.
func TestScheduleActionIsAtomic(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	f := newFixture(t, store.WithSchedShards(2), store.WithClock(func() time.Time { return base }))
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	guard := func(cond string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.table),
			Item:                     map[string]types.AttributeValue{"pk": s("T#acme#U#ann"), "sk": s("TEST"), "entityType": s("Test")},
			ConditionExpression:      aws.String(cond),
			ExpressionAttributeNames: map[string]string{"#pk": "pk"}}}
	}
	task := inbox.Task{ID: "wake-1", Kind: "wake", Due: base.Add(time.Minute), Token: "t1"}
	shard := store.SchedShard(task.ID, 2)

	// The guard item does not exist: "attribute_exists" fails, the transaction is cancelled.
	_, err := f.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		guard("attribute_exists(#pk)"), f.s.ScheduleAction(task)}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("the transaction was not cancelled: %v", err)
	}
	if n := len(dueAll(t, f.s, shard, task.Due, task.Due.Add(time.Minute), 100)); n != 0 {
		t.Fatalf("a cancelled transaction left %d tasks", n)
	}
	if _, err := f.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		guard("attribute_not_exists(#pk)"), f.s.ScheduleAction(task)}}); err != nil {
		t.Fatal(err)
	}
	got := dueAll(t, f.s, shard, task.Due, task.Due.Add(time.Minute), 100)
	if len(got) != 1 || got[0].Token != "t1" {
		t.Fatalf("after the commit: %+v", got)
	}
	// CancelAction in a transaction removes it.
	if _, err := f.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		f.s.CancelAction(task.ID, task.Due)}}); err != nil {
		t.Fatal(err)
	}
	if n := len(dueAll(t, f.s, shard, task.Due, task.Due.Add(time.Minute), 100)); n != 0 {
		t.Errorf("CancelAction left %d tasks", n)
	}
}

// NotifyDue hears every kind of task write, whichever code built it: a snooze's
// wake-ups (in the state change's transaction), Schedule (a sendAt's send task, a
// broadcast's continuation), a rescheduled retry; with the shard the task is in and its
// due time to the millisecond. A write that failed is not heard.
func TestNotifyDueHearsEveryTaskWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, store.WithSchedShards(4))
	ctx := context.Background()
	type wake struct {
		shard int
		due   int64
	}
	heard := make(chan wake, 100)
	f.s.NotifyDue(func(n int, due time.Time) { heard <- wake{n, due.UnixMilli()} })
	drain := func() []wake {
		var out []wake
		for {
			select {
			case w := <-heard:
				out = append(out, w)
			default:
				return out
			}
		}
	}
	ids := f.send(t, 2, "snz", "ann")
	drain() // the sends' own tasks (none without channels or expiry)
	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if _, err := f.s.ApplyState(ctx, f.viewer("ann"), inbox.StateChange{Op: inbox.OpSnooze, IDs: ids, Until: until}); err != nil {
		t.Fatal(err)
	}
	if got := drain(); len(got) != 2 || got[0].due != until.UnixMilli() || got[1].due != until.UnixMilli() {
		t.Errorf("a snooze of 2 notifications: heard %v, want 2 wake-ups due %d", got, until.UnixMilli())
	}
	tk := inbox.Task{ID: "send-at", Kind: "send", Due: time.Now().Add(90 * time.Second).Truncate(time.Millisecond)}
	if err := f.s.Schedule(ctx, tk); err != nil {
		t.Fatal(err)
	}
	want := wake{store.SchedShard(tk.ID, 4), tk.Due.UnixMilli()}
	if got := drain(); len(got) != 1 || got[0] != want {
		t.Errorf("Schedule: heard %v, want %v", got, want)
	}
	b := store.SchedBucket(tk.Due)
	retry := tk.Due.Add(5 * time.Second)
	if _, ok, err := f.s.RescheduleTask(ctx, want.shard, b, tk, retry); err != nil || !ok {
		t.Fatalf("reschedule: %v %v", ok, err)
	}
	if got := drain(); len(got) != 1 || got[0] != (wake{want.shard, retry.UnixMilli()}) {
		t.Errorf("RescheduleTask: heard %v, want the retry's due %d", got, retry.UnixMilli())
	}
	// The same reschedule again: the task is gone from where it was, nothing is written.
	if _, ok, err := f.s.RescheduleTask(ctx, want.shard, b, tk, retry); err != nil || ok {
		t.Fatalf("second reschedule: %v %v", ok, err)
	}
	if got := drain(); len(got) != 0 {
		t.Errorf("a refused reschedule was heard: %v", got)
	}
}
