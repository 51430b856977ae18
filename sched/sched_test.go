package sched_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// The tests' scheduler settings, on the fake clock: a safety-net pass a second,
// heartbeats and rebalancing every ten seconds. Time moves only when a test advances the clock, so these are not bounds
// on a loaded machine's speed: any values that order the events as the test means would
// do.
const (
	poll      = time.Second
	leaseTime = 30 * time.Second
	rebalance = leaseTime / 3
)

type env struct {
	db    *dynamodb.Client
	st    *store.Store
	clk   *clockwork.FakeClock
	rec   *ddbtrace.Recorder
	log   *slog.Logger
	table string
	// step is how far advance moves the clock at a time (default poll): the Poll of the
	// test's schedulers, so that each step is one pass of every shard.
	step time.Duration
}

// setup makes a store over a fresh table with shards shards, on a fake clock; at the end
// it fails if any call was a Scan.
func setup(t *testing.T, shards int) *env {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	db := dynlocaltest.Client(t, rec.Option())
	clk := clocktest.New()
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0), store.WithSchedShards(shards), store.WithClock(clk.Now))
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if slices.Contains(rec.Ops(), "Scan") {
			t.Errorf("a Scan was sent: %v", rec.Ops())
		}
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return &env{db: db, st: st, clk: clk, rec: rec, log: log, table: table, step: poll}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// recorder is a handler that records every run.
type recorder struct {
	mu      sync.Mutex
	runs    map[string][]run
	changed chan struct{}            // closed (and replaced) at each run
	fail    func(t inbox.Task) error // nil: succeed
}

type run struct {
	task inbox.Task
	at   time.Time
	by   string
}

func newRecorder() *recorder {
	return &recorder{runs: make(map[string][]run), changed: make(chan struct{})}
}

// handler returns the handler of one instance (by names it in the record).
func (r *recorder) handler(e *env, by string) sched.Handler {
	return sched.HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		r.mu.Lock()
		r.runs[t.ID] = append(r.runs[t.ID], run{task: t, at: e.clk.Now(), by: by})
		close(r.changed)
		r.changed = make(chan struct{})
		fail := r.fail
		r.mu.Unlock()
		if fail != nil {
			return fail(t)
		}
		return nil
	})
}

// snapshot returns a copy of the runs so far, by task id.
func (r *recorder) snapshot() map[string][]run {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]run, len(r.runs))
	for k, v := range r.runs {
		out[k] = slices.Clone(v)
	}
	return out
}

// waitFor waits until cond holds of the runs, woken by each run (for a handler that the
// scheduler started, without the clock's moving, after some I/O); it fails after
// clocktest.Within.
func (r *recorder) waitFor(t *testing.T, what string, cond func(map[string][]run) bool) {
	t.Helper()
	deadline := time.NewTimer(clocktest.Within)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond(r.snapshot()) {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("not reached within %v: %s", clocktest.Within, what)
		}
	}
}

// start runs a scheduler on the fake clock until the returned stop, which cancels it
// without releasing its leases (a crash, as far as the others can tell).
func (e *env) start(t *testing.T, owner string, r *recorder, o sched.Options) (*sched.Scheduler, func()) {
	t.Helper()
	o.Owner, o.Logger, o.Clock = owner, e.log, e.clk
	if o.DB == nil {
		o.DB = e.db
	}
	if o.Poll == 0 {
		o.Poll = poll
	}
	if o.Lease == 0 {
		o.Lease = leaseTime
	}
	if o.Lookback == 0 {
		// A fresh table: each shard's first pass Queries every minute from now -
		// Lookback (61 Queries a shard with the 1 h default); the tests' tasks are recent.
		o.Lookback = 2 * time.Minute
	}
	if o.Grace == 0 {
		o.Grace = time.Second
	}
	if o.RetryBase == 0 {
		o.RetryBase, o.RetryMax = 100*time.Millisecond, time.Second
	}
	if o.CallTimeout == 0 {
		// A deadline in real time on each DynamoDB call: the shared engine of a loaded
		// machine has taken more than the default 5 s to delete a task, which then ran
		// again. The fake clock does not move meanwhile, so a long bound costs nothing.
		o.CallTimeout = time.Minute
	}
	s := sched.New(e.st, o)
	s.Register("test", r.handler(e, owner))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("scheduler %s: %v", owner, err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s, stop
}

// settle waits until the schedulers ss finished what the clock's last move started: each
// one's heartbeat loop and, for every shard it holds, the shard's worker are back on
// their timers, and no task is under way.
func (e *env) settle(t *testing.T, ss ...*sched.Scheduler) {
	t.Helper()
	e.settleRunning(t, 0, ss...)
}

// settleRunning is settle with running tasks left under way (handlers the test holds).
func (e *env) settleRunning(t *testing.T, running int64, ss ...*sched.Scheduler) {
	t.Helper()
	clocktest.Settle(t, e.clk, func() int {
		n := 0
		for _, s := range ss {
			n += 1 + len(s.Held())
		}
		return n
	}, func() bool {
		var n int64
		for _, s := range ss {
			n += s.Stats().Running
		}
		return n == running
	})
}

// advance moves the clock d forward a step (a pass) at a time, settling ss after each.
func (e *env) advance(t *testing.T, d time.Duration, ss ...*sched.Scheduler) {
	t.Helper()
	for end := e.clk.Now().Add(d); e.clk.Now().Before(end); {
		e.clk.Advance(min(e.step, end.Sub(e.clk.Now())))
		e.settle(t, ss...)
	}
}

// until advances the clock by step, settling ss after each, until cond holds (at most
// steps times).
func (e *env) until(t *testing.T, step time.Duration, steps int, cond func() bool, ss ...*sched.Scheduler) {
	t.Helper()
	clocktest.Until(t, e.clk, step, steps, func() { e.settle(t, ss...) }, cond)
}

// schedule writes n tasks test-{prefix}-{i}, due at due(i).
func (e *env) schedule(t *testing.T, prefix string, n int, due func(i int) time.Time) []inbox.Task {
	t.Helper()
	var out []inbox.Task
	for i := range n {
		tk := inbox.Task{ID: fmt.Sprintf("%s-%04d", prefix, i), Kind: "test", Due: due(i),
			Viewer: inbox.Viewer{TenantID: "acme", UserID: "ann"}, Ref: fmt.Sprintf("ref-%d", i), Token: fmt.Sprintf("tok-%s-%d", prefix, i)}
		if err := e.st.Schedule(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		out = append(out, tk)
	}
	return out
}

// ran reports whether every task of tasks ran at least n times.
func ran(r *recorder, tasks []inbox.Task, n int) func() bool {
	return func() bool {
		runs := r.snapshot()
		for _, tk := range tasks {
			if len(runs[tk.ID]) < n {
				return false
			}
		}
		return true
	}
}

// checkOnce fails unless every task ran exactly once, with its token, not before due.
func checkOnce(t *testing.T, tasks []inbox.Task, runs map[string][]run) {
	t.Helper()
	for _, tk := range tasks {
		rs := runs[tk.ID]
		if len(rs) != 1 {
			t.Errorf("task %s ran %d times", tk.ID, len(rs))
			continue
		}
		got := rs[0].task
		if got.Token != tk.Token || got.Ref != tk.Ref || got.Viewer != tk.Viewer || got.Kind != "test" || !got.Due.Equal(tk.Due.Truncate(time.Millisecond)) {
			t.Errorf("task %s ran as %+v, scheduled as %+v", tk.ID, got, tk)
		}
		if rs[0].at.Before(got.Due) {
			t.Errorf("task %s ran at %v, before it was due (%v)", tk.ID, rs[0].at, got.Due)
		}
	}
}

// remaining counts the tasks left in the table for the given tasks' minutes.
func (e *env) remaining(t *testing.T, tasks []inbox.Task) int {
	t.Helper()
	type key struct {
		shard  int
		bucket time.Time
	}
	seen := make(map[key]bool)
	n := 0
	now := e.clk.Now()
	for _, tk := range tasks {
		for _, b := range []time.Time{store.SchedBucket(tk.Due), store.SchedBucket(now)} {
			k := key{store.SchedShard(tk.ID, e.st.SchedShards()), b}
			if seen[k] {
				continue
			}
			seen[k] = true
			p, err := e.st.DueTasks(context.Background(), k.shard, k.bucket, now.Add(24*time.Hour), nil, 1000)
			if err != nil {
				t.Fatal(err)
			}
			n += len(p.Tasks)
		}
	}
	return n
}

func TestDueTasksRunOnceWithToken(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	now := e.clk.Now()
	past := e.schedule(t, "past", 5, func(i int) time.Time { return now.Add(-time.Duration(i+1) * time.Second) })
	soon := e.schedule(t, "soon", 5, func(i int) time.Time { return now.Add(time.Second + time.Duration(i)*200*time.Millisecond) })
	s, _ := e.start(t, "a", r, sched.Options{})
	e.settle(t, s)
	// The first passes ran what was due, and nothing that was not.
	checkOnce(t, past, r.snapshot())
	for _, tk := range soon {
		if n := len(r.snapshot()[tk.ID]); n != 0 {
			t.Errorf("task %s, due in %v, ran %d times already", tk.ID, tk.Due.Sub(now), n)
		}
	}
	e.advance(t, 2*time.Second, s)
	all := append(past, soon...)
	checkOnce(t, all, r.snapshot())
	e.advance(t, 3*poll, s) // three more passes: a task run again would show up
	checkOnce(t, all, r.snapshot())
	if st := s.Stats(); st.Done != int64(len(all)) || st.Retried != 0 || st.Dropped != 0 || st.Running != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := e.remaining(t, all); n != 0 {
		t.Errorf("%d done tasks left in the table", n)
	}
	if held := s.Held(); len(held) != 4 {
		t.Errorf("one instance holds shards %v, want all 4", held)
	}
}

// TestManyTasksInOneMinute: 240 tasks due within half a second of one minute, on 8 shards
// (about 48 due between two passes, 6 a shard): each
// runs once, at the first pass after it is due.
func TestManyTasksInOneMinute(t *testing.T) {
	t.Parallel()
	e := setup(t, 8)
	r := newRecorder()
	base := e.clk.Now().Add(time.Second)
	tasks := e.schedule(t, "many", 240, func(i int) time.Time { return base.Add(time.Duration(i%50) * 10 * time.Millisecond) })
	// Passes every 100 ms: about 48 tasks fall due between two of them.
	e.step = 100 * time.Millisecond
	a, _ := e.start(t, "a", r, sched.Options{Poll: e.step})
	e.settle(t, a)
	e.clk.Advance(base.Sub(e.clk.Now())) // nothing falls due before base: one pass
	e.settle(t, a)
	e.advance(t, 600*time.Millisecond, a)
	runs := r.snapshot()
	checkOnce(t, tasks, runs)
	var worst time.Duration
	for _, rs := range runs {
		worst = max(worst, rs[0].at.Sub(rs[0].task.Due))
	}
	// Each ran at the first pass after it was due.
	if worst > e.step {
		t.Errorf("a task ran %v after it was due; passes are %v apart", worst, e.step)
	}
	if st := a.Stats(); st.Done != int64(len(tasks)) {
		t.Errorf("stats %+v", st)
	}
}

func TestTwoInstancesShareShards(t *testing.T) {
	t.Parallel()
	e := setup(t, 8)
	r := newRecorder()
	// Passes every 100 ms: about 20 of the tasks below fall due between two of them.
	e.step = poll / 10
	o := sched.Options{Poll: e.step}
	a, _ := e.start(t, "a", r, o)
	e.settle(t, a)
	if n := len(a.Held()); n != 8 {
		t.Fatalf("a alone holds %d shards, want 8", n)
	}
	b, _ := e.start(t, "b", r, o)
	e.settle(t, a, b)
	// Rebalancing by rebalancing, they split the shards: four each.
	e.until(t, rebalance, 12, func() bool { return len(a.Held()) == 4 && len(b.Held()) == 4 }, a, b)
	ha, hb := a.Held(), b.Held()
	for _, n := range ha {
		if slices.Contains(hb, n) {
			t.Fatalf("shard %d held by both: %v %v", n, ha, hb)
		}
	}
	base := e.clk.Now().Add(500 * time.Millisecond)
	tasks := e.schedule(t, "two", 200, func(i int) time.Time { return base.Add(time.Duration(i) * 5 * time.Millisecond) })
	e.clk.Advance(base.Sub(e.clk.Now())) // nothing falls due before base: one pass
	e.settle(t, a, b)
	e.advance(t, 1100*time.Millisecond, a, b)
	runs := r.snapshot()
	checkOnce(t, tasks, runs)
	by := map[string]int{}
	for _, rs := range runs {
		by[rs[0].by]++
	}
	if by["a"] == 0 || by["b"] == 0 {
		t.Errorf("one instance did all the work: %v", by)
	}
	if sa, sb := a.Stats(), b.Stats(); sa.Done+sb.Done != int64(len(tasks)) {
		t.Errorf("done %d + %d, want %d", sa.Done, sb.Done, len(tasks))
	}
}

// TestKilledInstanceIsTakenOver: an instance crashes (no release) while tasks fall due;
// another takes its shards once their leases expired, not before, and runs them.
func TestKilledInstanceIsTakenOver(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	a, killA := e.start(t, "a", r, sched.Options{})
	e.settle(t, a)
	if len(a.Held()) != 4 {
		t.Fatalf("a holds %v", a.Held())
	}
	// a crashes; its leases were written now and last until now + leaseTime.
	killA()
	killed := e.clk.Now()
	tasks := e.schedule(t, "kill", 100, func(i int) time.Time { return killed.Add(time.Duration(i) * 5 * time.Millisecond) })
	b, _ := e.start(t, "b", r, sched.Options{})
	e.settle(t, b)
	e.until(t, poll, int((leaseTime+rebalance)/poll)+2, ran(r, tasks, 1), b)
	runs := r.snapshot()
	checkOnce(t, tasks, runs)
	for id, rs := range runs {
		if rs[0].by != "b" {
			t.Errorf("task %s ran on %s", id, rs[0].by)
		}
		if rs[0].at.Before(killed.Add(leaseTime)) {
			t.Errorf("task %s ran %v after the crash, before a's leases (%v) expired", id, rs[0].at.Sub(killed), leaseTime)
		}
	}
	t.Logf("b ran a's tasks %v after the crash (lease %v)", e.clk.Now().Sub(killed), leaseTime)
	if len(b.Held()) != 4 {
		t.Errorf("b holds %v after a died", b.Held())
	}
	if n := e.remaining(t, tasks); n != 0 {
		t.Errorf("%d tasks left", n)
	}
}

// TestRestartCatchesUpPastMinutes: every instance is down while tasks fall due over
// several minutes; a new instance, twenty minutes later, runs them all in its first pass,
// from the shards' checkpoints (its Lookback alone would not reach them).
func TestRestartCatchesUpPastMinutes(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	r := newRecorder()
	o := sched.Options{Lookback: time.Minute}
	a, stopA := e.start(t, "a", r, o)
	e.settle(t, a) // a's first passes checkpoint its shards
	if len(a.Held()) != 2 {
		t.Fatalf("a holds %v", a.Held())
	}
	stopA()
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := e.clk.Now()
	tasks := e.schedule(t, "down", 40, func(i int) time.Time { return start.Add(30*time.Second + time.Duration(i)*6*time.Second) })
	e.clk.Advance(20 * time.Minute)
	b, _ := e.start(t, "b", r, o)
	e.settle(t, b)
	checkOnce(t, tasks, r.snapshot())
	if st := b.Stats(); st.Done != int64(len(tasks)) {
		t.Errorf("b stats %+v", st)
	}
	// A third instance with a fresh table would start at now - Lookback and miss them:
	// the catch-up above came from the checkpoints.
	if got := e.remaining(t, tasks); got != 0 {
		t.Errorf("%d tasks left", got)
	}
}

func TestFailingHandlerIsRetriedThenDropped(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	r := newRecorder()
	var seen sync.Map // task id -> attempts seen
	r.fail = func(t inbox.Task) error {
		v, _ := seen.LoadOrStore(t.ID, &atomic.Int32{})
		n := v.(*atomic.Int32).Add(1)
		if t.ID == "flaky-0000" || t.ID == "flaky-0001" {
			if n <= 2 {
				return errors.New("not yet")
			}
			return nil
		}
		return errors.New("never") // flaky-0002
	}
	var observed sync.Map
	// Passes every 20 ms (of the fake clock), so that a retry runs within 20 ms of its due
	// time and the runs' spacing shows the backoff: 100 ms ±50%, then 200 ms ±50%.
	const step = 20 * time.Millisecond
	o := sched.Options{Poll: step, RetryBase: 100 * time.Millisecond, RetryMax: 300 * time.Millisecond, MaxAttempts: 3,
		Observe: func(kind string, out sched.Outcome, lag time.Duration) {
			v, _ := observed.LoadOrStore(out, &atomic.Int32{})
			v.(*atomic.Int32).Add(1)
		}}
	now := e.clk.Now()
	tasks := e.schedule(t, "flaky", 3, func(int) time.Time { return now })
	s, _ := e.start(t, "a", r, o)
	e.settle(t, s)
	e.until(t, step, 50, ran(r, tasks, 3), s)
	e.advance(t, 3*poll, s) // a fourth run would show up
	runs := r.snapshot()
	for _, tk := range tasks {
		rs := runs[tk.ID]
		if len(rs) != 3 {
			t.Errorf("%s ran %d times, want 3", tk.ID, len(rs))
			continue
		}
		for i, x := range rs {
			if x.task.Attempts != i || x.task.Token != tk.Token {
				t.Errorf("%s run %d: attempts %d token %q", tk.ID, i, x.task.Attempts, x.task.Token)
			}
			if x.at.Before(x.task.Due) {
				t.Errorf("%s run %d at %v, before its due time %v", tk.ID, i, x.at, x.task.Due)
			}
			if i == 0 {
				continue
			}
			// Retry i comes at least half its base delay after the failure.
			if least := (50 * time.Millisecond) << (i - 1); x.at.Sub(rs[i-1].at) < least {
				t.Errorf("%s run %d came %v after the previous one, want >= %v: no backoff", tk.ID, i, x.at.Sub(rs[i-1].at), least)
			}
		}
	}
	if st := s.Stats(); st.Done != 2 || st.Dropped != 1 || st.Retried != 6 {
		t.Errorf("stats %+v, want 2 done, 1 dropped, 6 retried", st)
	}
	count := func(o sched.Outcome) int32 {
		if v, ok := observed.Load(o); ok {
			return v.(*atomic.Int32).Load()
		}
		return 0
	}
	if count(sched.Done) != 2 || count(sched.Dropped) != 1 || count(sched.Retried) != 6 {
		t.Errorf("observed done %d dropped %d retried %d", count(sched.Done), count(sched.Dropped), count(sched.Retried))
	}
	if n := e.remaining(t, tasks); n != 0 {
		t.Errorf("%d tasks left", n)
	}
}

// A task whose kind has no handler here is rescheduled (after RetryBase, an hour), not
// dropped or run in a loop.
func TestTaskWithoutHandlerWaits(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	r := newRecorder()
	tk := inbox.Task{ID: "orphan", Kind: "unknown", Due: e.clk.Now()}
	if err := e.st.Schedule(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	s, _ := e.start(t, "a", r, sched.Options{RetryBase: time.Hour, RetryMax: 2 * time.Hour})
	e.settle(t, s)
	e.advance(t, 5*poll, s)
	if st := s.Stats(); st.Retried != 1 || st.Done != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v, want the task of an unknown kind rescheduled once", st)
	}
}

// TestHandoverWhileRunningRunsOnce: a second instance joins while the first is running
// tasks (held in their handlers); the first gives up half of its shards, letting the
// running handlers finish, and the second runs the rest of those shards' tasks: no task
// runs twice.
func TestHandoverWhileRunningRunsOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	gate := make(chan struct{})
	r.fail = func(inbox.Task) error { <-gate; return nil }
	o := sched.Options{Concurrency: 2}
	a, _ := e.start(t, "a", r, o)
	e.settle(t, a)
	if len(a.Held()) != 4 {
		t.Fatalf("a holds %v", a.Held())
	}
	// 60 tasks due now, 15 a shard: at a's next poll each shard starts two (its
	// Concurrency), which wait at the gate, and waits for a slot for the third.
	now := e.clk.Now()
	tasks := e.schedule(t, "hand", 60, func(int) time.Time { return now })
	e.clk.Advance(poll)
	r.waitFor(t, "8 tasks started", func(runs map[string][]run) bool { return len(runs) == 8 })
	// b joins. On the clock wait a's heartbeat loop and b's (a's shard workers are in
	// their passes, waiting for slots; b finds no shard free).
	b, _ := e.start(t, "b", r, o)
	parked := func() { clocktest.Settle(t, e.clk, func() int { return 2 }, nil) }
	parked()
	e.clk.Advance(rebalance)
	parked()
	// a gave two shards up, but their handlers still run: a still holds four (Held counts
	// a shard until its worker finished), b none yet.
	if na, nb := len(a.Held()), len(b.Held()); na != 4 || nb != 0 {
		t.Fatalf("a holds %v and b %v after b joined, want 4 (two of them draining) and none", a.Held(), b.Held())
	}
	// The handlers finish; a releases the two shards it gave up once their running tasks
	// are done, and b takes them at its next rebalancing.
	close(gate)
	e.until(t, rebalance, 6, func() bool { return len(a.Held()) == 2 && len(b.Held()) == 2 && ran(r, tasks, 1)() }, a, b)
	e.advance(t, 3*poll, a, b)
	runs := r.snapshot()
	checkOnce(t, tasks, runs)
	by := map[string]int{}
	for _, rs := range runs {
		by[rs[0].by]++
	}
	t.Logf("runs by instance: %v; a holds %v, b %v", by, a.Held(), b.Held())
	if by["b"] == 0 {
		t.Errorf("b ran none of the tasks: %v", by)
	}
}

// TestReleaseHandsOverAtOnce: after Run and Release, another instance takes every shard
// at its first rebalancing, without waiting for the leases to expire (no time passes).
func TestReleaseHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	a, stopA := e.start(t, "a", r, sched.Options{})
	e.settle(t, a)
	if len(a.Held()) != 4 {
		t.Fatalf("a holds %v", a.Held())
	}
	stopA()
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := e.start(t, "b", r, sched.Options{})
	e.settle(t, b)
	if len(b.Held()) != 4 {
		t.Fatalf("b holds %v right after a released", b.Held())
	}
}

// TestSlowHandlerHoldsOneSlot: a handler that takes long holds one of the shard's slots,
// not the shard: tasks due after it run at the first pass after their due time, and it
// runs once.
func TestSlowHandlerHoldsOneSlot(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	r := newRecorder()
	release := make(chan struct{})
	r.fail = func(t inbox.Task) error {
		if t.ID == "slow-0000" {
			<-release
		}
		return nil
	}
	a, _ := e.start(t, "a", r, sched.Options{Concurrency: 2})
	e.settle(t, a)
	now := e.clk.Now()
	slow := e.schedule(t, "slow", 1, func(int) time.Time { return now })
	e.clk.Advance(poll)
	r.waitFor(t, "the slow task started", func(runs map[string][]run) bool { return len(runs[slow[0].ID]) == 1 })
	e.settleRunning(t, 1, a)
	start := e.clk.Now()
	quick := e.schedule(t, "quick", 20, func(i int) time.Time { return start.Add(time.Duration(i) * 20 * time.Millisecond) })
	clocktest.Until(t, e.clk, poll, 5, func() { e.settleRunning(t, 1, a) }, ran(r, quick, 1))
	runs := r.snapshot()
	var worst time.Duration
	for _, tk := range quick {
		worst = max(worst, runs[tk.ID][0].at.Sub(runs[tk.ID][0].task.Due))
	}
	// Had the slow one blocked the shard, the quick ones would not have run at all.
	if worst > poll {
		t.Errorf("quick tasks waited %v behind a slow one; passes are %v apart", worst, poll)
	}
	close(release)
	e.settle(t, a)
	e.advance(t, 3*poll, a)
	checkOnce(t, append(slow, quick...), r.snapshot())
	if st := a.Stats(); st.Done != 21 {
		t.Errorf("stats %+v", st)
	}
}

// TestUnderFaults: with DynamoDB throttling, failing and losing answers after commits
// (ddbfault), two instances still run every task at least once and leave none behind.
func TestUnderFaults(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	proxy := ddbfault.New(dynlocaltest.Endpoint(t), ddbfault.Config{Seed: 9, Throttle: 0.05, Outage: 0.05, LostAnswer: 0.05})
	ps := httptest.NewServer(proxy)
	t.Cleanup(func() { ps.Close(); proxy.Close() })
	faulty := dynlocaltest.Client(t, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(ps.URL)
		o.Retryer = store.NewSDKRetryer()
	})
	fst := store.New(faulty, e.table, store.WithSweepWorkers(0), store.WithSchedShards(4), store.WithClock(e.clk.Now))
	t.Cleanup(fst.Close)
	r := newRecorder()
	start := func(owner string) *sched.Scheduler {
		s := sched.New(fst, sched.Options{DB: faulty, Owner: owner, Logger: e.log, Clock: e.clk, Poll: poll,
			Lease: leaseTime, Grace: time.Second, RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAttempts: 100,
			CallTimeout: time.Minute})
		s.Register("test", r.handler(e, owner))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return s
	}
	proxy.SetEnabled(true)
	a, b := start("a"), start("b")
	e.settle(t, a, b)
	now := e.clk.Now()
	tasks := e.schedule(t, "fault", 200, func(i int) time.Time { return now.Add(time.Duration(i) * 10 * time.Millisecond) })
	done := func() bool {
		st := a.Stats().Done + a.Stats().Dropped + b.Stats().Done + b.Stats().Dropped
		return ran(r, tasks, 1)() && st >= int64(len(tasks))
	}
	e.until(t, poll, 200, done, a, b)
	proxy.SetEnabled(false)
	e.until(t, poll, 60, func() bool { return e.remaining(t, tasks) == 0 }, a, b)
	extra := 0
	for _, rs := range r.snapshot() {
		extra += len(rs) - 1
	}
	st := proxy.Stats()
	t.Logf("faults: %+v; runs beyond the first: %d; stats a %+v b %+v", st, extra, a.Stats(), b.Stats())
	if st.Throttled+st.Outages+st.LostAnswers == 0 {
		t.Error("no fault was injected")
	}
}

// TestTaskFromATransactionRuns: a task written by ScheduleAction inside another write's
// transaction runs like any other; one whose transaction was cancelled never does.
func TestTaskFromATransactionRuns(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	r := newRecorder()
	ctx := context.Background()
	due := e.clk.Now().Add(300 * time.Millisecond)
	kept := inbox.Task{ID: "tx-kept", Kind: "test", Due: due, Token: "k"}
	lost := inbox.Task{ID: "tx-lost", Kind: "test", Due: due, Token: "l"}
	marker := func(cond string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(e.table),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "TEST#tx"}, "sk": &types.AttributeValueMemberS{Value: "M"}},
			ConditionExpression: aws.String(cond), ExpressionAttributeNames: map[string]string{"#pk": "pk"}}}
	}
	if _, err := e.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		marker("attribute_not_exists(#pk)"), e.st.ScheduleAction(kept)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		marker("attribute_not_exists(#pk)"), e.st.ScheduleAction(lost)}}); err == nil {
		t.Fatal("the second transaction committed")
	}
	a, _ := e.start(t, "a", r, sched.Options{})
	e.settle(t, a)
	e.advance(t, 4*poll, a)
	runs := r.snapshot()
	if len(runs[kept.ID]) != 1 || runs[kept.ID][0].task.Token != "k" || len(runs[lost.ID]) != 0 {
		t.Errorf("runs: %+v", runs)
	}
	if st := a.Stats(); st.Done != 1 {
		t.Errorf("stats %+v", st)
	}
}

// Kick starts a task due now at once, not at the next poll: with a 10 min poll, a task
// written after the shards' first passes runs after the kick's 100 ms gap, with no poll in
// between. A kick of a shard the scheduler does not hold, or many kicks at once, do
// nothing else.
func TestKickRunsADueTaskBeforeThePoll(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	r := newRecorder()
	s, _ := e.start(t, "a", r, sched.Options{Poll: 10 * time.Minute})
	e.settle(t, s)
	if len(s.Held()) != 2 {
		t.Fatalf("the scheduler holds %v", s.Held())
	}
	tasks := e.schedule(t, "kicked", 1, func(int) time.Time { return e.clk.Now() })
	s.Kick(99) // not a shard it holds: nothing
	for range 5 {
		s.Kick(store.SchedShard(tasks[0].ID, 2))
	}
	// The kicked pass waits out the gap since the shard's last pass began (no time has
	// passed on the clock), then runs.
	e.clk.Advance(100 * time.Millisecond)
	r.waitFor(t, "the kicked task ran", func(runs map[string][]run) bool { return len(runs[tasks[0].ID]) == 1 })
	e.settle(t, s)
	checkOnce(t, tasks, r.snapshot())
	if st := s.Stats(); st.Done != 1 {
		t.Errorf("stats %+v", st)
	}
}
