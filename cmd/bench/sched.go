package main

// Scenario 10, sched: the durable scheduler's lag (issue 9's goal for snooze wake-ups:
// p99 ≤ 2 s with 10,000 due in the same minute on DynamoDB Local).
//
// First the idle cost: for each count of -sched-idle-instances (1,3), that many
// schedulers with the gateway's defaults start on the table (no task anywhere), and once
// they hold every shard and a warm-up passed, the DynamoDB calls they make in
// -sched-idle (1m) are counted (a ddbtrace recorder on their own client): the goal is at
// most 60 a minute. Then they stop and release their shards.
//
// -sched-instances schedulers (sched.New + Run in this process, each with its own owner
// name, sharing the shards through the roster as separate instances would, and the
// wake-ups through an in-process broker) run on a store with -sched-shards shards and a
// safety-net poll of -sched-poll; the store's writes wake the first instance
// (store.NotifyDue), which hands a shard it does not hold to the others through the
// broker. Once their shards are shared, each run writes -sched-tasks tasks (store.Schedule, -seed-workers at once), all
// due within one minute that starts after the writes are expected to end, spread evenly
// over the run's -sched-spread of it: 1m (the default's first run: wake-ups through the
// minute) and 0s (its second: everyone snoozed "until 9:00", due at one instant). The
// handler does one small write (a PutItem of a marker item beside the task's user) and
// the lag of a task is from its due time to the return of that write, on this process's
// clock. Every task must run: a run waits until all did (or -sched-timeout passed) and
// counts runs beyond the first.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// schedConfig holds the sched scenario's flags.
type schedConfig struct {
	tasks     int
	shards    int
	instances int
	poll      time.Duration
	spreads   string // comma-separated durations, one run each
	timeout   time.Duration
	// idleInstances are the instance counts whose idle calls are counted (comma-
	// separated; "" skips), each over idle after a warm-up.
	idleInstances string
	idle          time.Duration
}

// SchedResult is scenario 10: one run per due-time spread.
type SchedResult struct {
	Engine      string     `json:"engine"`
	Tasks       int        `json:"tasks"`
	Shards      int        `json:"shards"`
	Instances   int        `json:"instances"`
	Poll        string     `json:"poll"`
	Concurrency int        `json:"concurrency_per_shard"`
	Handler     string     `json:"handler"`
	Measures    string     `json:"lag_measures"`
	GoalP99Ms   float64    `json:"goal_p99_ms"`
	Runs        []SchedRun `json:"runs"`
	// Idle is the idle cost, per instance count.
	Idle []SchedIdle `json:"idle,omitempty"`
}

// SchedIdle is the DynamoDB calls an idle deployment of Instances schedulers (the
// gateway's defaults, 16 shards) made in Seconds.
type SchedIdle struct {
	Instances     int            `json:"instances"`
	Seconds       float64        `json:"seconds"`
	Calls         map[string]int `json:"calls"`
	CallsPerMin   float64        `json:"calls_per_minute"`
	GoalPerMin    float64        `json:"goal_calls_per_minute"`
	GoalPerMinMet bool           `json:"goal_met"`
}

// SchedRun is one run of scenario 10.
type SchedRun struct {
	Spread      string  `json:"due_spread"`
	WriteSecs   float64 `json:"schedule_seconds"`
	WriteErrors int     `json:"schedule_errors"`
	// LateWrites is how many tasks were written after their due time (their lag counts
	// the wait).
	LateWrites  int `json:"written_after_due"`
	Handled     int `json:"handled"`
	Duplicates  int `json:"runs_beyond_first"`
	Missing     int `json:"missing"`
	HandlerErrs int `json:"handler_write_errors"`
	// DrainSeconds is from the first due time to the last task's handler return.
	DrainSeconds float64 `json:"drain_seconds"`
	PerSec       float64 `json:"tasks_per_sec"`
	Lag          Latency `json:"lag"`
	MaxLagMs     float64 `json:"max_lag_ms"`
	GoalP99Met   bool    `json:"goal_p99_met"`
	FirstError   string  `json:"first_error,omitempty"`
}

// schedTally is what one run's handler saw.
type schedTally struct {
	mu   sync.Mutex
	runs map[string]int
	lags []time.Duration
	last atomic.Int64 // Unix ns of the latest handler return
	errs atomic.Int64
}

func (b *harness) schedScenario(ctx context.Context) (*SchedResult, error) {
	sc := b.c.sched
	spreads, err := parseSpreads("sched-spread", sc.spreads)
	if err != nil {
		return nil, err
	}
	if sc.tasks < 1 || sc.instances < 1 || sc.shards < 1 {
		return nil, fmt.Errorf("-sched-tasks, -sched-instances and -sched-shards must be positive")
	}
	const concurrency = 8
	res := &SchedResult{Engine: b.eng.name, Tasks: sc.tasks, Shards: sc.shards, Instances: sc.instances, Poll: sc.poll.String(),
		Concurrency: concurrency, GoalP99Ms: 2000,
		Handler:  "one PutItem of a small marker item (pk T#bench#U#sched{n}, sk MARK#{task id})",
		Measures: "from the task's due time to the return of its handler's write, on this process's clock (the schedulers run in it)"}
	for _, f := range strings.Split(sc.idleInstances, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sched-idle-instances: %q is not a positive count", f)
		}
		idle, err := b.schedIdle(ctx, n)
		if err != nil {
			return nil, err
		}
		res.Idle = append(res.Idle, idle)
	}
	st := store.New(b.eng.db, b.c.table, store.WithLogger(b.log), store.WithSweepWorkers(0), store.WithSchedShards(sc.shards))
	defer st.Close()
	bus := live.NewLocal()

	var cur atomic.Pointer[schedTally]
	handler := sched.HandlerFunc(func(ctx context.Context, t inbox.Task) error {
		tl := cur.Load()
		_, err := b.eng.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(b.c.table), Item: map[string]types.AttributeValue{
			"pk":         &types.AttributeValueMemberS{Value: "T#" + tenant + "#U#" + t.Viewer.UserID},
			"sk":         &types.AttributeValueMemberS{Value: "MARK#" + t.ID},
			"entityType": &types.AttributeValueMemberS{Value: "BenchMark"},
			"token":      &types.AttributeValueMemberS{Value: t.Token},
		}})
		if err != nil {
			tl.errs.Add(1)
			return err
		}
		now := time.Now()
		tl.mu.Lock()
		tl.runs[t.ID]++
		if tl.runs[t.ID] == 1 {
			tl.lags = append(tl.lags, now.Sub(t.Due))
		}
		tl.mu.Unlock()
		tl.last.Store(now.UnixNano())
		return nil
	})
	cur.Store(&schedTally{runs: map[string]int{}})

	var scheds []*sched.Scheduler
	for i := range sc.instances {
		s := sched.New(st, sched.Options{DB: b.eng.db, Owner: fmt.Sprintf("bench-sched-%d", i), Poll: sc.poll, Concurrency: concurrency, Logger: b.log, Bus: bus})
		s.Register("bench", handler)
		if i == 0 {
			st.NotifyDue(s.Notify)
		}
		scheds = append(scheds, s)
		defer background(ctx, s.Run, s.Release)()
	}
	progress("sched: %d instance(s) sharing %d shards", sc.instances, sc.shards)
	if err := waitHeld(ctx, 30*time.Second, "the sched instances", sc.shards, func() int {
		held := 0
		for _, s := range scheds {
			held += len(s.Held())
		}
		return held
	}); err != nil {
		return nil, err
	}
	for i, spread := range spreads {
		tl := &schedTally{runs: make(map[string]int, sc.tasks)}
		cur.Store(tl)
		r := b.schedRun(ctx, st, tl, fmt.Sprintf("run%d", i), spread)
		r.GoalP99Met = r.Missing == 0 && r.Lag.P99 <= res.GoalP99Ms
		res.Runs = append(res.Runs, r)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return res, nil
}

// schedIdle counts the DynamoDB calls of n idle schedulers with the gateway's defaults
// (16 shards, sched.DefaultPoll and DefaultLease) over the -sched-idle window, after
// they share every shard (none above its fair share: the handovers are done) and a
// warm-up of a heartbeat and a half (their first passes read from their checkpoints, up
// to an hour back on a fresh table).
func (b *harness) schedIdle(ctx context.Context, n int) (SchedIdle, error) {
	window := max(b.c.sched.idle, time.Second)
	rec := &ddbtrace.Recorder{}
	db := dynamodb.New(b.eng.db.Options(), rec.Option())
	st := store.New(db, b.c.table, store.WithLogger(b.log), store.WithSweepWorkers(0), store.WithSchedShards(store.DefaultSchedShards))
	defer st.Close()
	bus := live.NewLocal()
	var scheds []*sched.Scheduler
	var stops []func() error
	defer func() {
		for _, stop := range stops {
			_ = stop()
		}
	}()
	for i := range n {
		s := sched.New(st, sched.Options{DB: db, Owner: fmt.Sprintf("bench-idle-%d-%d", n, i), Logger: b.log, Bus: bus})
		if i == 0 {
			st.NotifyDue(s.Notify)
		}
		scheds = append(scheds, s)
		stops = append(stops, background(ctx, s.Run, s.Release))
	}
	progress("sched: %d idle instance(s): waiting for them to share the shards", n)
	fair := (store.DefaultSchedShards + n - 1) / n
	if err := waitHeld(ctx, 3*time.Minute, "the idle instances, each at most its fair share,", store.DefaultSchedShards, func() int {
		held := 0
		for _, s := range scheds {
			h := len(s.Held())
			if h > fair {
				return 0 // still handing shards over: not idle yet
			}
			held += h
		}
		return held
	}); err != nil {
		return SchedIdle{}, err
	}
	select {
	case <-ctx.Done():
		return SchedIdle{}, ctx.Err()
	case <-time.After(sched.DefaultLease / 2):
	}
	rec.Reset()
	start := time.Now()
	select {
	case <-ctx.Done():
		return SchedIdle{}, ctx.Err()
	case <-time.After(window):
	}
	secs := time.Since(start).Seconds()
	calls := map[string]int{}
	total := 0
	for _, op := range rec.Ops() {
		calls[op]++
		total++
	}
	r := SchedIdle{Instances: n, Seconds: secs, Calls: calls, CallsPerMin: float64(total) * 60 / secs, GoalPerMin: 60}
	r.GoalPerMinMet = r.CallsPerMin <= r.GoalPerMin
	progress("sched: %d idle instance(s): %.1f DynamoDB calls a minute (%v)", n, r.CallsPerMin, calls)
	return r, nil
}

// schedRun writes the tasks of one run, due within one minute spread over spread, and
// waits until they ran.
func (b *harness) schedRun(ctx context.Context, st *store.Store, tl *schedTally, prefix string, spread time.Duration) SchedRun {
	sc := b.c.sched
	r := SchedRun{Spread: spread.String()}
	// The due minute: the first whole minute that starts at least 20s + 1ms a task (a
	// generous guess at the writes' time) from now.
	due0 := store.SchedBucket(time.Now().Add(20*time.Second + time.Duration(sc.tasks)*time.Millisecond)).Add(time.Minute)
	progress("sched: writing %d tasks due from %s (spread %s)", sc.tasks, due0.Format(time.TimeOnly), spread)
	started := time.Now()
	var next, writeErrs, late atomic.Int64
	var firstErr atomic.Value
	var ww sync.WaitGroup
	for range max(b.c.seedWorkers, 1) {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= sc.tasks || ctx.Err() != nil {
					return
				}
				due := due0.Add(time.Duration(int64(spread) * int64(i) / int64(sc.tasks)))
				t := inbox.Task{ID: fmt.Sprintf("bench-%s-%06d", prefix, i), Kind: "bench", Due: due,
					Viewer: inbox.Viewer{TenantID: tenant, UserID: fmt.Sprintf("sched%03d", i%1000)}, Token: due.Format(time.RFC3339Nano)}
				if err := st.Schedule(ctx, t); err != nil {
					writeErrs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else if time.Now().After(due) {
					late.Add(1)
				}
			}
		}()
	}
	ww.Wait()
	r.WriteSecs = time.Since(started).Seconds()
	r.WriteErrors = int(writeErrs.Load())
	r.LateWrites = int(late.Load())
	if v, ok := firstErr.Load().(string); ok {
		r.FirstError = v
	}
	progress("sched: wrote the tasks in %.1fs (%d after their due time); waiting for them to fall due", r.WriteSecs, r.LateWrites)

	want := sc.tasks - r.WriteErrors
	end := due0.Add(spread).Add(sc.timeout)
	for {
		tl.mu.Lock()
		n := len(tl.lags)
		tl.mu.Unlock()
		if n >= want || time.Now().After(end) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * sc.poll) // a duplicate run would show now
	tl.mu.Lock()
	r.Handled = len(tl.lags)
	for _, n := range tl.runs {
		r.Duplicates += n - 1
	}
	ls := append([]time.Duration(nil), tl.lags...)
	tl.mu.Unlock()
	r.Missing = want - r.Handled
	r.HandlerErrs = int(tl.errs.Load())
	r.Lag = summarize(ls)
	for _, l := range ls {
		r.MaxLagMs = max(r.MaxLagMs, float64(l)/float64(time.Millisecond))
	}
	if l := tl.last.Load(); l > 0 {
		r.DrainSeconds = time.Unix(0, l).Sub(due0).Seconds()
		if r.DrainSeconds > 0 {
			r.PerSec = float64(r.Handled) / r.DrainSeconds
		}
	}
	progress("sched: %d handled, lag p50 %.0f ms, p99 %.0f ms, max %.0f ms", r.Handled, r.Lag.P50, r.Lag.P99, r.MaxLagMs)
	return r
}

// callsText renders calls by operation, sorted by name.
func callsText(calls map[string]int) string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		parts = append(parts, fmt.Sprintf("%s %d", op, calls[op]))
	}
	return strings.Join(parts, ", ")
}

// Table renders scenario 10.
func (x *SchedResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 10. sched: durable scheduler lag, %d tasks due in one minute; idle cost\n\n", x.Tasks)
	if len(x.Idle) > 0 {
		fmt.Fprintln(&b, "Idle: schedulers with the gateway's defaults (16 shards, safety-net poll 1m, membership lease 30s renewed every 10s), no task anywhere, DynamoDB calls counted once they hold every shard.")
		fmt.Fprintln(&b)
		fmt.Fprintln(&b, "| instances | window s | calls by operation | calls a minute | goal |")
		fmt.Fprintln(&b, "| ---: | ---: | --- | ---: | --- |")
		for _, r := range x.Idle {
			fmt.Fprintf(&b, "| %d | %.0f | %s | %.1f | ≤ %.0f: %s |\n", r.Instances, r.Seconds, callsText(r.Calls), r.CallsPerMin, r.GoalPerMin, yes(r.GoalPerMinMet))
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "Engine: %s. %d scheduler instance(s) in this process sharing %d shards through the roster and their wake-ups through an in-process broker (the store's writes wake the first), safety-net poll %s, at most %d tasks at once per shard. "+
		"Handler: %s. Lag measured %s. Each run writes its tasks first (store.Schedule), all due within the next whole minute that starts after the writes should end.\n\n",
		x.Engine, x.Instances, x.Shards, x.Poll, x.Concurrency, x.Handler, x.Measures)
	fmt.Fprintln(&b, "| due times | tasks written in s (errors, late) | handled / missing | runs beyond the first | lag p50 ms | lag p90 ms | lag p99 ms | max lag ms | drained in s (tasks/s) | goal |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range x.Runs {
		fmt.Fprintf(&b, "| %s | %.1f (%d, %d) | %d / %d | %d | %.0f | %.0f | %.0f | %.0f | %.1f (%.0f) | p99 ≤ %.0f ms: %s |\n",
			spreadText(r.Spread), r.WriteSecs, r.WriteErrors, r.LateWrites, r.Handled, r.Missing, r.Duplicates, r.Lag.P50, r.Lag.P90, r.Lag.P99, r.MaxLagMs,
			r.DrainSeconds, r.PerSec, x.GoalP99Ms, yes(r.GoalP99Met))
	}
	for _, r := range x.Runs {
		if r.HandlerErrs > 0 || r.FirstError != "" {
			fmt.Fprintf(&b, "\nRun %s: handler write errors (each retried by the scheduler) %d; first schedule error: %s.\n", r.Spread, r.HandlerErrs, r.FirstError)
		}
	}
	fmt.Fprintln(&b, "\nAll due at one instant, the lag is bounded by the engine's write throughput (each task costs the handler's write and the task's delete): the drained tasks/s column shows it.")
	return b.String()
}

func spreadText(s string) string {
	if s == "0s" {
		return "all at one instant"
	}
	return "evenly over " + s
}
