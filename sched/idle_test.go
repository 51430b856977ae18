package sched_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// defaults are the gateway's scheduler settings (INBOX_SCHED_POLL, INBOX_SCHED_LEASE and
// the default grace), which the idle budget is about.
func defaults() sched.Options {
	return sched.Options{Poll: sched.DefaultPoll, Lease: sched.DefaultLease, Grace: 30 * time.Second}
}

// TestIdleCallsPerMinute: with the default settings and 16 shards, an idle deployment
// of one instance, and of three, makes at most 60 DynamoDB calls a simulated minute,
// counted over a simulated hour after the start (the previous scheduler made about
// 5,900 a minute: four passes a second per shard and a lease renewal per shard every
// 3.3 s).
func TestIdleCallsPerMinute(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) {
			t.Parallel()
			e := setup(t, 16)
			e.step = 5 * time.Second
			r := newRecorder()
			var ss []*sched.Scheduler
			for i := range instances {
				s, _ := e.start(t, fmt.Sprintf("idle-%d", i), r, defaults())
				ss = append(ss, s)
			}
			e.settle(t, ss...)
			// The start (the first passes read from now - Lookback, the instances split
			// the shards) is not idle: count from the third minute.
			e.advance(t, 2*time.Minute, ss...)
			held := 0
			for _, s := range ss {
				held += len(s.Held())
			}
			if held != 16 {
				t.Fatalf("the instances hold %d shards, want 16", held)
			}
			e.rec.Reset()
			const minutes = 60
			e.advance(t, minutes*time.Minute, ss...)
			ops := e.rec.Ops()
			by := map[string]int{}
			for _, op := range ops {
				by[op]++
			}
			perMinute := float64(len(ops)) / minutes
			t.Logf("%d instance(s), idle: %.1f DynamoDB calls a minute (%v over %d minutes)", instances, perMinute, by, minutes)
			if perMinute > 60 {
				t.Errorf("%.1f calls a minute idle, want at most 60", perMinute)
			}
			if len(r.snapshot()) != 0 {
				t.Errorf("tasks ran with none scheduled: %v", r.snapshot())
			}
		})
	}
}

// startOn is env.start over another store of the same table (an instance with its own
// store, whose NotifyDue it hears).
func (e *env) startOn(t *testing.T, st *store.Store, owner string, r *recorder, o sched.Options) *sched.Scheduler {
	t.Helper()
	saved := e.st
	e.st = st
	s, _ := e.start(t, owner, r, o)
	e.st = saved
	st.NotifyDue(s.Notify)
	return s
}

// newStore returns another store over e's table, as another instance has.
func (e *env) newStore(t *testing.T) *store.Store {
	st := store.New(e.db, e.table, store.WithSweepWorkers(0), store.WithSchedShards(e.st.SchedShards()), store.WithClock(e.clk.Now))
	t.Cleanup(st.Close)
	return st
}

// TestWakeThroughTheBusRunsOnTime: three instances share six shards and an in-process
// broker; tasks written through one instance's store for shards the two others hold run
// at their due time, to within one step of the fake clock: due now, in a few seconds,
// in the next minute and three minutes ahead. The safety net (a 10-minute poll here)
// plays no part: the writer's wake-up, published on the broker, armed the holder's
// timer.
func TestWakeThroughTheBusRunsOnTime(t *testing.T) {
	t.Parallel()
	e := setup(t, 6)
	e.step = 250 * time.Millisecond
	bus := live.NewLocal()
	r := newRecorder()
	o := sched.Options{Poll: 10 * time.Minute, Bus: bus}
	stores := []*store.Store{e.newStore(t), e.newStore(t), e.newStore(t)}
	var ss []*sched.Scheduler
	for i, st := range stores {
		ss = append(ss, e.startOn(t, st, fmt.Sprintf("bus-%d", i), r, o))
	}
	e.settle(t, ss...)
	e.until(t, rebalance, 12, func() bool {
		return len(ss[0].Held()) == 2 && len(ss[1].Held()) == 2 && len(ss[2].Held()) == 2
	}, ss...)
	// Tasks on the shards of instances 1 and 2, written by instance 0.
	elsewhere := map[int]bool{}
	for _, s := range ss[1:] {
		for _, n := range s.Held() {
			elsewhere[n] = true
		}
	}
	now := e.clk.Now()
	offsets := []time.Duration{0, 3 * time.Second, 70 * time.Second, 3 * time.Minute}
	var tasks []inbox.Task
	for i := 0; len(tasks) < 2*len(offsets); i++ {
		id := fmt.Sprintf("bus-%04d", i)
		if !elsewhere[store.SchedShard(id, 6)] {
			continue
		}
		tk := inbox.Task{ID: id, Kind: "test", Due: now.Add(offsets[len(tasks)%len(offsets)]), Token: id}
		if err := stores[0].Schedule(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, tk)
	}
	e.until(t, e.step, int(4*time.Minute/e.step), ran(r, tasks, 1), ss...)
	runs := r.snapshot()
	checkOnce(t, tasks, runs)
	for _, tk := range tasks {
		rs := runs[tk.ID]
		if len(rs) == 0 {
			continue
		}
		if lag := rs[0].at.Sub(tk.Due); lag > e.step {
			t.Errorf("task %s due %v after the write ran %v late (on %s), want within one step (%v)", tk.ID, tk.Due.Sub(now), lag, rs[0].by, e.step)
		}
		if rs[0].by == "bus-0" {
			t.Errorf("task %s ran on the writer, which does not hold its shard", tk.ID)
		}
	}
}

// TestLostWakeRunsAtTheSafetyNet: tasks whose wake-up never came (written through a
// store nobody listens to, as when the broker lost the message) run at the holder's
// next safety-net pass, within Poll of their due time; the same tasks heard of run at
// their due time.
func TestLostWakeRunsAtTheSafetyNet(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	e.step = 500 * time.Millisecond
	r := newRecorder()
	heard := e.newStore(t)
	s := e.startOn(t, heard, "a", r, defaults())
	e.settle(t, s)
	lags := func(st *store.Store, prefix string) []time.Duration {
		now := e.clk.Now()
		var tasks []inbox.Task
		for i := range 4 {
			tk := inbox.Task{ID: fmt.Sprintf("%s-%d", prefix, i), Kind: "test", Due: now.Add(time.Duration(2+i*25) * time.Second), Token: "t"}
			if err := st.Schedule(context.Background(), tk); err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, tk)
		}
		e.until(t, e.step, int(3*time.Minute/e.step), ran(r, tasks, 1), s)
		runs := r.snapshot()
		checkOnce(t, tasks, runs)
		var out []time.Duration
		for _, tk := range tasks {
			out = append(out, runs[tk.ID][0].at.Sub(tk.Due))
		}
		return out
	}
	// e.st has no NotifyDue: every wake-up of these is lost.
	lost := lags(e.st, "lost")
	worst := slices.Max(lost)
	t.Logf("lost wake-ups: lags %v", lost)
	if bound := sched.DefaultPoll + defaults().Grace + e.step; worst > bound {
		t.Errorf("lost wake-ups: a task ran %v late, want within the safety net's %v", worst, bound)
	}
	if worst <= time.Second {
		t.Errorf("lost wake-ups: every task ran on time (worst %v): the test no longer tells the safety net from the wake-ups", worst)
	}
	woken := lags(heard, "heard")
	t.Logf("heard: lags %v", woken)
	if w := slices.Max(woken); w > e.step {
		t.Errorf("a task heard of ran %v late, want within one step (%v)", w, e.step)
	}
}

// failingDB fails every call while fail is set.
type failingDB struct {
	*dynamodb.Client
	fail atomic.Bool
}

func (f *failingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if f.fail.Load() {
		return nil, errors.New("injected: DynamoDB unreachable")
	}
	return f.Client.UpdateItem(ctx, in, optFns...)
}

// TestLapsedMemberStopsBeforeTakeover: an instance that cannot renew its membership
// stops its shard workers before the membership expires, and the other takes the shards
// only after it expired: at no instant do both run a shard. Its tasks then run on the
// other.
func TestLapsedMemberStopsBeforeTakeover(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	r := newRecorder()
	fdb := &failingDB{Client: e.db}
	a, _ := e.start(t, "a", r, sched.Options{DB: fdb})
	e.settle(t, a)
	if len(a.Held()) != 4 {
		t.Fatalf("a holds %v", a.Held())
	}
	b, _ := e.start(t, "b", r, sched.Options{})
	e.settle(t, a, b)
	fdb.fail.Store(true)
	failed := e.clk.Now()
	var aStopped, bTook time.Time
	e.until(t, poll, int((2*leaseTime)/poll), func() bool {
		now := e.clk.Now()
		ha, hb := a.Held(), b.Held()
		if len(ha) > 0 && len(hb) > 0 {
			sort.Ints(ha)
			sort.Ints(hb)
			for _, n := range ha {
				for _, m := range hb {
					if n == m {
						t.Fatalf("shard %d held by both at %v", n, now.Sub(failed))
					}
				}
			}
		}
		if aStopped.IsZero() && len(ha) == 0 {
			aStopped = now
		}
		if bTook.IsZero() && len(hb) > 0 {
			bTook = now
		}
		return !bTook.IsZero() && len(hb) == 4
	}, a, b)
	t.Logf("a failing from %v: a stopped %v later, b took over %v later (lease %v)", failed.Format("15:04:05"), aStopped.Sub(failed), bTook.Sub(failed), leaseTime)
	if aStopped.IsZero() || !aStopped.Before(bTook) {
		t.Errorf("a stopped at %v, b took its shards at %v", aStopped, bTook)
	}
	tasks := e.schedule(t, "after", 8, func(int) time.Time { return e.clk.Now() })
	e.until(t, poll, 5, ran(r, tasks, 1), a, b)
	for _, rs := range r.snapshot() {
		if rs[0].by != "b" {
			t.Errorf("a task ran on %s, whose membership lapsed", rs[0].by)
		}
	}
}

// TestTasksWrittenBeforeAStartRunOnTime: tasks written while no instance listened (before
// a restart or a takeover: nobody here heard their wake-ups), due in the minutes after
// the start, run at their due time, not at a safety-net pass up to Grace later: each
// safety-net pass reads the next minute ahead. Several shards, each minute's first and
// later tasks, due early in a minute (where the safety net alone comes Grace late).
func TestTasksWrittenBeforeAStartRunOnTime(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	e.step = 250 * time.Millisecond
	r := newRecorder()
	now := e.clk.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	var tasks []inbox.Task
	for i, due := range []time.Time{
		next.Add(time.Second), next.Add(4 * time.Second), next.Add(time.Minute + 2*time.Second),
		next.Add(3*time.Minute + 500*time.Millisecond), next.Add(3*time.Minute + 20*time.Second),
		next.Add(7*time.Minute + 3*time.Second),
	} {
		for j := range 3 { // spread over the shards
			tk := inbox.Task{ID: fmt.Sprintf("early-%d-%d", i, j), Kind: "test", Due: due.Add(time.Duration(j) * 100 * time.Millisecond), Token: "t"}
			if err := e.st.Schedule(context.Background(), tk); err != nil { // e.st has no NotifyDue: unheard
				t.Fatal(err)
			}
			tasks = append(tasks, tk)
		}
	}
	s := e.startOn(t, e.newStore(t), "a", r, defaults())
	e.until(t, e.step, int(9*time.Minute/e.step), ran(r, tasks, 1), s)
	runs := r.snapshot()
	checkOnce(t, tasks, runs)
	for _, tk := range tasks {
		if rs := runs[tk.ID]; len(rs) > 0 {
			if lag := rs[0].at.Sub(tk.Due); lag > e.step {
				t.Errorf("task %s due %v after the start ran %v late, want within one step (%v)", tk.ID, tk.Due.Sub(now), lag, e.step)
			}
		}
	}
}
