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

	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// clock is a settable clock: real time plus an offset.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

type env struct {
	db    *dynamodb.Client
	st    *store.Store
	clk   *clock
	rec   *ddbtrace.Recorder
	log   *slog.Logger
	table string
}

// setup makes a store over a fresh table with shards shards; at the end it fails if any
// call was a Scan.
func setup(t *testing.T, shards int) *env {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	db := dynlocaltest.Client(t, rec.Option())
	clk := &clock{}
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0), store.WithSchedShards(shards), store.WithClock(clk.now))
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
	return &env{db: db, st: st, clk: clk, rec: rec, log: log, table: table}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// recorder is a handler that records every run.
type recorder struct {
	mu   sync.Mutex
	runs map[string][]run
	fail func(t inbox.Task) error // nil: succeed
}

type run struct {
	task inbox.Task
	at   time.Time
	by   string
}

func newRecorder() *recorder { return &recorder{runs: make(map[string][]run)} }

// handler returns the handler of one instance (by names it in the record).
func (r *recorder) handler(e *env, by string) sched.Handler {
	return sched.HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		r.mu.Lock()
		r.runs[t.ID] = append(r.runs[t.ID], run{task: t, at: e.clk.now(), by: by})
		fail := r.fail
		r.mu.Unlock()
		if fail != nil {
			return fail(t)
		}
		return nil
	})
}

// succeeded counts the tasks whose last run succeeded, with runs and runs by instance.
func (r *recorder) snapshot() map[string][]run {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]run, len(r.runs))
	for k, v := range r.runs {
		out[k] = slices.Clone(v)
	}
	return out
}

// start runs a scheduler until the returned stop, which cancels it without releasing
// its leases (a crash, as far as the others can tell).
func (e *env) start(t *testing.T, owner string, r *recorder, o sched.Options) (*sched.Scheduler, func()) {
	t.Helper()
	o.DB, o.Owner, o.Logger, o.Now = e.db, owner, e.log, e.clk.now
	if o.Poll == 0 {
		// Every held shard Queries its bucket once a poll: 16 shards at 50 ms were 320
		// Queries a second per scheduler on the DynamoDB Local that the whole suite
		// shares, and slowed every package.
		o.Poll = 100 * time.Millisecond
	}
	if o.Lease == 0 {
		// Every lease renewal in the suite goes to the one shared DynamoDB Local: 3 s
		// leases kept being lost under a full make test (145 of 600 tasks unrun after
		// 90 s); renewals now get the lease's remaining time less a sixth (lease.Hold).
		o.Lease = 6 * time.Second
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
		// A handler write that timed out on a loaded engine is retried within the
		// tests' waits (the default backoff reaches minutes after a few failures).
		o.RetryBase, o.RetryMax = 50*time.Millisecond, time.Second
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

// waitSlack stretches waitRuns' deadlines (see there).
const waitSlack = 3

// waitRuns waits until every task ran (a run that returned nil when ok says so) or
// the deadline passes; it returns the runs. The deadline is within times waitSlack: these
// are bounds on correctness (nothing lost), not on speed, and a loaded shared machine
// (make test runs several packages at once) slows DynamoDB Local several times over. On
// failure it names the first missing tasks with their due times and runs.
func waitRuns(t *testing.T, r *recorder, tasks []inbox.Task, within time.Duration, done func([]run) bool) map[string][]run {
	t.Helper()
	deadline := time.Now().Add(within * waitSlack)
	for {
		runs := r.snapshot()
		missing := 0
		for _, tk := range tasks {
			if !done(runs[tk.ID]) {
				missing++
			}
		}
		if missing == 0 {
			return runs
		}
		if time.Now().After(deadline) {
			var named []string
			for _, tk := range tasks {
				if !done(runs[tk.ID]) && len(named) < 10 {
					named = append(named, fmt.Sprintf("%s due %s (%d runs)", tk.ID, tk.Due.Format("15:04:05.000"), len(runs[tk.ID])))
				}
			}
			t.Fatalf("%d of %d tasks not done after %v: %v", missing, len(tasks), within*waitSlack, named)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ranOnce(rs []run) bool { return len(rs) >= 1 }

// waitDone waits until the schedulers' Done+Dropped counts reach n (the tasks are deleted
// once counted).
func waitDone(t *testing.T, n int64, ss ...*sched.Scheduler) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second * waitSlack)
	for {
		var got int64
		for _, s := range ss {
			st := s.Stats()
			got += st.Done + st.Dropped
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks done", got, n)
		}
		time.Sleep(20 * time.Millisecond)
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
	now := e.clk.now()
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
	now := e.clk.now()
	past := e.schedule(t, "past", 5, func(i int) time.Time { return now.Add(-time.Duration(i+1) * time.Second) })
	soon := e.schedule(t, "soon", 5, func(i int) time.Time { return now.Add(time.Second + time.Duration(i)*200*time.Millisecond) })
	s, _ := e.start(t, "a", r, sched.Options{})
	all := append(past, soon...)
	waitRuns(t, r, all, 10*time.Second, ranOnce)
	waitDone(t, int64(len(all)), s)
	time.Sleep(300 * time.Millisecond) // a second run would show up by now
	checkOnce(t, all, r.snapshot())
	if st := s.Stats(); st.Done != int64(len(all)) || st.Retried != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := e.remaining(t, all); n != 0 {
		t.Errorf("%d done tasks left in the table", n)
	}
	if held := s.Held(); len(held) != 4 {
		t.Errorf("one instance holds shards %v, want all 4", held)
	}
}

func TestManyTasksInOneMinute(t *testing.T) {
	t.Parallel()
	e := setup(t, 16)
	r := newRecorder()
	base := e.clk.now().Add(time.Second)
	tasks := e.schedule(t, "many", 600, func(i int) time.Time { return base.Add(time.Duration(i%50) * 10 * time.Millisecond) })
	a, _ := e.start(t, "a", r, sched.Options{})
	runs := waitRuns(t, r, tasks, 30*time.Second, ranOnce)
	waitDone(t, int64(len(tasks)), a)
	var worst time.Duration
	for _, rs := range runs {
		worst = max(worst, rs[0].at.Sub(rs[0].task.Due))
	}
	t.Logf("600 tasks within half a second: worst lag %v", worst)
	time.Sleep(300 * time.Millisecond)
	checkOnce(t, tasks, r.snapshot())
}

func TestTwoInstancesShareShards(t *testing.T) {
	t.Parallel()
	e := setup(t, 8)
	r := newRecorder()
	a, _ := e.start(t, "a", r, sched.Options{Lease: 3 * time.Second})
	b, _ := e.start(t, "b", r, sched.Options{Lease: 3 * time.Second})
	// Wait until they split the shards: four each.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ha, hb := a.Held(), b.Held()
		if len(ha) == 4 && len(hb) == 4 {
			for _, n := range ha {
				if slices.Contains(hb, n) {
					t.Fatalf("shard %d held by both: %v %v", n, ha, hb)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shards not shared: a %v, b %v", ha, hb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	base := e.clk.now().Add(500 * time.Millisecond)
	tasks := e.schedule(t, "two", 200, func(i int) time.Time { return base.Add(time.Duration(i) * 5 * time.Millisecond) })
	waitRuns(t, r, tasks, 20*time.Second, ranOnce)
	waitDone(t, int64(len(tasks)), a, b)
	time.Sleep(300 * time.Millisecond)
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

func TestKilledInstanceIsTakenOver(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	const lease = 2 * time.Second
	a, killA := e.start(t, "a", r, sched.Options{Lease: lease})
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Held()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("a holds %v", a.Held())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// a crashes (no release); tasks fall due while its leases have not expired yet.
	killA()
	killed := time.Now()
	base := e.clk.now()
	tasks := e.schedule(t, "kill", 100, func(i int) time.Time { return base.Add(time.Duration(i) * 5 * time.Millisecond) })
	b, _ := e.start(t, "b", r, sched.Options{Lease: lease})
	waitRuns(t, r, tasks, lease+15*time.Second, ranOnce)
	took := time.Since(killed)
	waitDone(t, int64(len(tasks)), b)
	t.Logf("b finished a's tasks %v after the crash (lease %v)", took, lease)
	if took < lease/2 {
		t.Errorf("b ran a's tasks after %v, before a's lease (%v) could expire", took, lease)
	}
	runs := r.snapshot()
	checkOnce(t, tasks, runs)
	for id, rs := range runs {
		if rs[0].by != "b" {
			t.Errorf("task %s ran on %s", id, rs[0].by)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(b.Held()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("b holds %v after a died", b.Held())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := e.remaining(t, tasks); n != 0 {
		t.Errorf("%d tasks left", n)
	}
}

// TestRestartCatchesUpPastMinutes: every instance is down while tasks fall due over
// several minutes; a new instance, long after, runs them all, from the shards'
// checkpoints (its Lookback alone would not reach them).
func TestRestartCatchesUpPastMinutes(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	r := newRecorder()
	o := sched.Options{Lookback: time.Minute, Lease: 2 * time.Second}
	a, stopA := e.start(t, "a", r, o)
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Held()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a holds %v", a.Held())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a checkpoints its shards
	stopA()
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := e.clk.now()
	tasks := e.schedule(t, "down", 40, func(i int) time.Time { return start.Add(30*time.Second + time.Duration(i)*6*time.Second) })
	e.clk.advance(20 * time.Minute)
	b, _ := e.start(t, "b", r, o)
	waitRuns(t, r, tasks, 20*time.Second, ranOnce)
	waitDone(t, int64(len(tasks)), b)
	time.Sleep(300 * time.Millisecond)
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
	o := sched.Options{RetryBase: 100 * time.Millisecond, RetryMax: 300 * time.Millisecond, MaxAttempts: 3,
		Observe: func(kind string, out sched.Outcome, lag time.Duration) {
			v, _ := observed.LoadOrStore(out, &atomic.Int32{})
			v.(*atomic.Int32).Add(1)
		}}
	now := e.clk.now()
	tasks := e.schedule(t, "flaky", 3, func(int) time.Time { return now })
	s, _ := e.start(t, "a", r, o)
	waitRuns(t, r, tasks, 20*time.Second, func(rs []run) bool { return len(rs) >= 3 })
	waitDone(t, 3, s)
	time.Sleep(500 * time.Millisecond)
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
			if i > 0 && x.at.Sub(rs[i-1].at) < 50*time.Millisecond {
				t.Errorf("%s run %d came %v after the previous one: no backoff", tk.ID, i, x.at.Sub(rs[i-1].at))
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

func TestTaskWithoutHandlerWaits(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	r := newRecorder()
	now := e.clk.now()
	tk := inbox.Task{ID: "orphan", Kind: "unknown", Due: now}
	if err := e.st.Schedule(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	s, _ := e.start(t, "a", r, sched.Options{RetryBase: time.Hour})
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Retried == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the task of an unknown kind was not rescheduled: %+v", s.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := s.Stats(); st.Done != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestHandoverWhileRunningRunsOnce: a second instance joins while the first is running
// slow tasks; the first gives up half of its shards, letting the running handlers finish,
// so no task runs twice.
func TestHandoverWhileRunningRunsOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	r.fail = func(inbox.Task) error { time.Sleep(400 * time.Millisecond); return nil }
	o := sched.Options{Lease: 3 * time.Second, Concurrency: 2}
	a, _ := e.start(t, "a", r, o)
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Held()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("a holds %v", a.Held())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// 60 tasks due now, 400 ms each, 8 at a time: 3 s of work for a alone. b joins at
	// once, and a hands two shards over within a rebalancing period (1 s).
	now := e.clk.now()
	tasks := e.schedule(t, "hand", 60, func(int) time.Time { return now })
	b, _ := e.start(t, "b", r, o)
	waitRuns(t, r, tasks, 30*time.Second, ranOnce)
	waitDone(t, int64(len(tasks)), a, b)
	time.Sleep(300 * time.Millisecond)
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
// without waiting for the leases to expire.
func TestReleaseHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	o := sched.Options{Lease: 30 * time.Second}
	a, stopA := e.start(t, "a", r, o)
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Held()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("a holds %v", a.Held())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopA()
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := e.start(t, "b", r, o)
	deadline = time.Now().Add(5 * time.Second) // far below the 30s lease
	for len(b.Held()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("b holds %v 5s after a released", b.Held())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSlowHandlerHoldsOneSlot: a handler that takes long holds one of the shard's slots,
// not the shard: tasks due after it run on time, and it runs once.
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
	now := e.clk.now()
	slow := e.schedule(t, "slow", 1, func(int) time.Time { return now })
	waitRuns(t, r, slow, 10*time.Second, ranOnce)
	quick := e.schedule(t, "quick", 20, func(i int) time.Time { return e.clk.now().Add(time.Duration(i) * 20 * time.Millisecond) })
	runs := waitRuns(t, r, quick, 10*time.Second, ranOnce)
	var worst time.Duration
	for _, tk := range quick {
		worst = max(worst, runs[tk.ID][0].at.Sub(runs[tk.ID][0].task.Due))
	}
	t.Logf("worst lag of the quick tasks beside a stuck one: %v", worst)
	// The slow one is stuck until release: had it blocked the shard, the quick ones
	// would not have run at all. The bound leaves room for a loaded machine.
	if worst > 8*time.Second {
		t.Errorf("quick tasks waited %v behind a slow one", worst)
	}
	close(release)
	waitDone(t, 21, a)
	time.Sleep(300 * time.Millisecond)
	checkOnce(t, append(slow, quick...), r.snapshot())
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
	fst := store.New(faulty, e.table, store.WithSweepWorkers(0), store.WithSchedShards(4), store.WithClock(e.clk.now))
	t.Cleanup(fst.Close)
	r := newRecorder()
	start := func(owner string) *sched.Scheduler {
		s := sched.New(fst, sched.Options{DB: faulty, Owner: owner, Logger: e.log, Now: e.clk.now, Poll: 50 * time.Millisecond,
			Lease: 3 * time.Second, Grace: time.Second, RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAttempts: 100})
		s.Register("test", r.handler(e, owner))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return s
	}
	proxy.SetEnabled(true)
	a, b := start("a"), start("b")
	now := e.clk.now()
	tasks := e.schedule(t, "fault", 200, func(i int) time.Time { return now.Add(time.Duration(i) * 10 * time.Millisecond) })
	waitRuns(t, r, tasks, 60*time.Second, ranOnce)
	waitDone(t, int64(len(tasks)), a, b)
	proxy.SetEnabled(false)
	deadline := time.Now().Add(10 * time.Second)
	for e.remaining(t, tasks) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks left after the faults stopped", e.remaining(t, tasks))
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	due := e.clk.now().Add(300 * time.Millisecond)
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
	waitRuns(t, r, []inbox.Task{kept}, 10*time.Second, ranOnce)
	waitDone(t, 1, a)
	time.Sleep(500 * time.Millisecond)
	runs := r.snapshot()
	if len(runs[kept.ID]) != 1 || runs[kept.ID][0].task.Token != "k" || len(runs[lost.ID]) != 0 {
		t.Errorf("runs: %+v", runs)
	}
}

// Kick starts a task due now at once, not at the next poll: with a 10 min poll, a task
// written after the shards' first passes runs within a minute only because it was kicked.
// A kick of a shard the scheduler does not hold, or many kicks at once, do nothing else.
func TestKickRunsADueTaskBeforeThePoll(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	r := newRecorder()
	s, _ := e.start(t, "a", r, sched.Options{Poll: 10 * time.Minute})
	// Wait for the first passes to end: both shards held and no Query for a second.
	deadline := time.Now().Add(60 * time.Second)
	for last := -1; ; {
		n := e.rec.Count("Query")
		if len(s.Held()) == 2 && n > 0 && n == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler holds %v, %d Queries, after 60 s", s.Held(), n)
		}
		last = n
		time.Sleep(time.Second)
	}
	tasks := e.schedule(t, "kicked", 1, func(int) time.Time { return e.clk.now() })
	s.Kick(99) // not a shard it holds: nothing
	for range 5 {
		s.Kick(store.SchedShard(tasks[0].ID, 2))
	}
	waitRuns(t, r, tasks, 15*time.Second, ranOnce)
	waitDone(t, 1, s)
	checkOnce(t, tasks, r.snapshot())
}
