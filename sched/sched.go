package sched

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/cenkalti/backoff/v5"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/lease"
	"github.com/inboxgw/gateway/telemetry"
)

// Handler runs due tasks of one kind. Handle is called at least once per task, possibly
// more than once and possibly concurrently with itself for other tasks: it must be
// idempotent and check t.Token. It returns nil when the task is done (the scheduler then
// deletes it), an error to have it retried later. ctx carries Options.HandlerTimeout and
// ends early when this instance loses the task's shard (another may run the task then);
// a shutdown or a handover lets a running handler finish.
type Handler interface {
	Handle(ctx context.Context, t inbox.Task) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t inbox.Task) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, t inbox.Task) error { return f(ctx, t) }

// Options configures a Scheduler. The shard count is the store's (store.WithSchedShards,
// from INBOX_SCHED_SHARDS), since the store places tasks; Poll comes from
// INBOX_SCHED_POLL.
type Options struct {
	// DB is the DynamoDB client of the leases (required; *dynamodb.Client).
	DB lease.API
	// Owner names this instance in the leases (default: host name, pid and a random
	// suffix). Two instances must never share a name.
	Owner string
	// Poll is the pause between two passes over a held shard (default 250ms): a task
	// runs at most about Poll after it is due, when the shard's worker is idle.
	Poll time.Duration
	// Lease is how long a shard lease lasts without renewal (default 10s): a crashed
	// instance's shards are taken over within about Lease. Membership heartbeats and
	// rebalancing happen every Lease/3.
	Lease time.Duration
	// Concurrency bounds the tasks running at once per held shard (default 8).
	Concurrency int
	// MaxAttempts is how many times a task is tried before it is dropped (default 10).
	MaxAttempts int
	// RetryBase and RetryMax shape the retry delay: exponential from RetryBase (default
	// 1s), doubling, capped at RetryMax (default 5m), with ±50% jitter.
	RetryBase time.Duration
	RetryMax  time.Duration
	// HandlerTimeout is the deadline of one Handle call (default 30s).
	HandlerTimeout time.Duration
	// CallTimeout is the deadline of each DynamoDB call the scheduler makes (default 5s).
	CallTimeout time.Duration
	// Grace is how long after a minute ended its tasks are still looked for before the
	// checkpoint moves past it (default 30s): it covers writers' clock skew and
	// transactions in flight.
	Grace time.Duration
	// Lookback is where a shard without a checkpoint (the first start on a table)
	// begins: now - Lookback (default 1h). Tasks due earlier than that and written
	// before any scheduler ran are not seen.
	Lookback time.Duration
	// Logger receives the scheduler's warnings (default slog.Default()).
	Logger *slog.Logger
	// Clock tells the time the scheduler reads tasks due by, writes its leases with and
	// waits on between polls and rebalancings (default the real clock). It must agree
	// with the store's clock (store.WithClock), which places tasks by their due time.
	// Tests pass a clockwork.FakeClock and advance it.
	Clock clockwork.Clock
	// Observe, when set, is called after every task run with its outcome (see Outcome)
	// and the lag from its due time to the end of the handler's run. It must not block.
	Observe func(kind string, outcome Outcome, lag time.Duration)
	// Tracer, when set, gives each task run a span: a new root linked to the span that
	// wrote the task (inbox.Task.Traceparent), so a send's trace leads to its deliveries
	// without a trace that lasts as long as a retry's backoff. Nil: none.
	Tracer trace.Tracer
}

// Outcome is what became of one run of a task.
type Outcome string

// Outcomes reported to Options.Observe and counted in Stats.
const (
	Done    Outcome = "done"    // the handler succeeded; the task was deleted
	Retried Outcome = "retried" // the handler failed; the task was rescheduled
	Dropped Outcome = "dropped" // the handler failed MaxAttempts times; the task was deleted
)

// Stats counts what a Scheduler did since New.
type Stats struct {
	Done, Retried, Dropped int64
	// Errors counts DynamoDB failures of the scheduler's own calls (each retried later).
	Errors int64
	// Running is how many tasks are under way now (a handler running or its outcome
	// being written): a gauge, not a count since New.
	Running int64
}

// attrCheckpoint is the shard lease item's checkpoint: the Unix ms of the oldest minute
// that may still hold tasks of the shard.
const attrCheckpoint = "checkpoint"

// Store is what the scheduler needs of the table (*store.Store implements it): the
// tasks of a shard's minute buckets (AP11) and the keys of the scheduler's leases (AP12).
type Store interface {
	// Table is the table's name (the leases live in it).
	Table() string
	// SchedShards is how many write shards the tasks spread over.
	SchedShards() int
	// DueTasks returns, oldest first, up to limit tasks of shard's bucket due at or
	// before upTo, after task after (nil: from the start).
	DueTasks(ctx context.Context, shard int, bucket, upTo time.Time, after *inbox.Task, limit int) (inbox.TaskPage, error)
	// CompleteTask deletes t (false when it was gone or changed).
	CompleteTask(ctx context.Context, shard int, bucket time.Time, t inbox.Task) (bool, error)
	// RescheduleTask moves t to due (false when it was gone or changed).
	RescheduleTask(ctx context.Context, shard int, bucket time.Time, t inbox.Task, due time.Time) (inbox.Task, bool, error)
	// SchedBucket is the minute bucket holding t.
	SchedBucket(t time.Time) time.Time
	// SchedLeasePK is the partition of the shard and membership leases.
	SchedLeasePK() string
	// SchedShardLeaseKey and SchedMemberLeaseKey are the keys of a shard's lease and of
	// an instance's membership lease.
	SchedShardLeaseKey(shard int) map[string]types.AttributeValue
	SchedMemberLeaseKey(owner string) map[string]types.AttributeValue
	// SchedLeaseKind tells what a sort key of SchedLeasePK's partition names.
	SchedLeaseKind(sk string) (shard int, member, ok bool)
}

// Scheduler runs due tasks; see the package doc. Register handlers, then Run.
type Scheduler struct {
	st     Store
	o      Options
	shards int
	log    *slog.Logger

	hmu      sync.RWMutex
	handlers map[string]Handler

	mu        sync.Mutex
	held      map[int]*shardRun // shards this instance runs
	releasing map[int]bool      // shards given up whose worker has not finished yet
	bg        sync.WaitGroup    // give-ups in progress

	done, retried, dropped, errs, running atomic.Int64
}

// shardRun is one held shard's worker.
type shardRun struct {
	l *lease.Lease
	// stop asks the worker to start no more tasks, let the running ones finish (each
	// bounded by HandlerTimeout) and return; done is closed when it has.
	stop context.CancelFunc
	done chan struct{}
	// wake asks the worker for a pass now (Kick); it holds at most one request.
	wake chan struct{}
}

// New returns a Scheduler over st's tasks. o.DB is required.
func New(st Store, o Options) *Scheduler {
	if o.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Owner = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Poll, 250*time.Millisecond)
	def(&o.Lease, 10*time.Second)
	def(&o.RetryBase, time.Second)
	def(&o.RetryMax, 5*time.Minute)
	def(&o.HandlerTimeout, 30*time.Second)
	def(&o.CallTimeout, 5*time.Second)
	def(&o.Grace, 30*time.Second)
	def(&o.Lookback, time.Hour)
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	return &Scheduler{st: st, o: o, shards: st.SchedShards(), log: o.Logger.With("sched", o.Owner),
		handlers: make(map[string]Handler), held: make(map[int]*shardRun), releasing: make(map[int]bool)}
}

// maxKickGap bounds the pause between a pass and the next one a Kick asks for.
const maxKickGap = 50 * time.Millisecond

// Kick asks the worker of shard n, when this scheduler holds it, for a pass now rather
// than at its next poll (store.Store.NotifyDue calls it when a send writes a delivery
// task due at once). It never blocks; kicks that come while one waits are one. A shard
// held elsewhere is not kicked: its holder finds the task at its next poll.
func (s *Scheduler) Kick(n int) {
	s.mu.Lock()
	r := s.held[n]
	s.mu.Unlock()
	if r == nil {
		return
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Owner returns the name this instance holds its leases under.
func (s *Scheduler) Owner() string { return s.o.Owner }

// Register sets the handler of kind (replacing any earlier one). Register every kind
// before Run, so that no task of it is retried for want of a handler.
func (s *Scheduler) Register(kind string, h Handler) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.handlers[kind] = h
}

// Stats returns the counts so far.
func (s *Scheduler) Stats() Stats {
	return Stats{Done: s.done.Load(), Retried: s.retried.Load(), Dropped: s.dropped.Load(), Errors: s.errs.Load(), Running: s.running.Load()}
}

// Held returns the shards this instance runs now, in no particular order.
func (s *Scheduler) Held() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.held))
	for n, r := range s.held {
		select {
		case <-r.done:
		default:
			out = append(out, n)
		}
	}
	return out
}

// Run takes part in the shared processing of the shards until ctx ends, then stops its
// shard workers and returns nil once the handlers running have finished (each is
// bounded by HandlerTimeout; their context does not end with ctx, so that a shutdown
// does not leave a task done but not deleted). It does not release its leases, so that
// a crash and a shutdown look alike to the others: call Release after Run for a
// graceful handover. It returns an error only for a configuration error.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.o.DB == nil {
		return errors.New("sched: Options.DB is required")
	}
	member := lease.New(s.o.DB, s.st.Table(), s.st.SchedMemberLeaseKey(s.o.Owner), lease.Options{
		Owner: s.o.Owner, Duration: s.o.Lease, EntityType: "SchedMember", ExpireAfter: 24 * time.Hour, Clock: s.o.Clock})
	period := s.o.Lease / 3
	for {
		// Every period from the start of the previous rebalancing, as a ticker would.
		began := s.o.Clock.Now()
		s.rebalance(ctx, member)
		t := s.o.Clock.NewTimer(period - s.o.Clock.Since(began))
		select {
		case <-ctx.Done():
			t.Stop()
			s.stopAll()
			s.bg.Wait()
			return nil
		case <-t.Chan():
		}
	}
}

// Release gives up this instance's membership and every shard lease it holds, so the
// others take its shards at once. Call it after Run returned.
func (s *Scheduler) Release(ctx context.Context) error {
	s.stopAll()
	s.mu.Lock()
	runs := s.held
	s.held = make(map[int]*shardRun)
	s.mu.Unlock()
	var errs []error
	for _, r := range runs {
		errs = append(errs, r.l.Release(ctx))
	}
	member := lease.New(s.o.DB, s.st.Table(), s.st.SchedMemberLeaseKey(s.o.Owner), lease.Options{Owner: s.o.Owner, Clock: s.o.Clock})
	errs = append(errs, member.Release(ctx))
	return errors.Join(errs...)
}

// stopAll stops every shard worker and waits for them.
func (s *Scheduler) stopAll() {
	s.mu.Lock()
	runs := make([]*shardRun, 0, len(s.held))
	for _, r := range s.held {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.stop()
	}
	for _, r := range runs {
		<-r.done
	}
}

// rebalance heartbeats the membership lease, reads every lease, and takes or gives up
// shards to hold a fair share.
func (s *Scheduler) rebalance(ctx context.Context, member *lease.Lease) {
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	if _, err := member.TryAcquire(cctx); err != nil {
		if ctx.Err() == nil {
			s.errs.Add(1)
			s.log.Warn("sched: membership heartbeat", "err", err)
		}
		return
	}
	states, err := lease.List(cctx, s.o.DB, s.st.Table(), s.st.SchedLeasePK())
	if err != nil {
		if ctx.Err() == nil {
			s.errs.Add(1)
			s.log.Warn("sched: read leases", "err", err)
		}
		return
	}
	now := s.o.Clock.Now()
	members := 0
	shardStates := make(map[int]lease.State)
	for sk, st := range states {
		shard, isMember, ok := s.st.SchedLeaseKind(sk)
		switch {
		case !ok:
		case isMember:
			if st.Live(now) {
				members++
			}
		case shard < s.shards:
			shardStates[shard] = st
		}
	}
	members = max(members, 1)
	fair := (s.shards + members - 1) / members

	s.mu.Lock()
	for n, r := range s.held {
		select {
		case <-r.done:
			delete(s.held, n) // lost its lease or stopped
		default:
		}
	}
	held := len(s.held)
	var extra []int
	for n := range s.held {
		if held-len(extra) <= fair {
			break
		}
		extra = append(extra, n)
	}
	s.mu.Unlock()

	for _, n := range extra {
		s.log.Info("sched: giving a shard up", "shard", n, "members", members, "share", fair)
		s.giveUp(ctx, n)
	}
	if held >= fair {
		return
	}
	// Take free or expired shards, starting at a point of our own so that instances
	// starting together do not all race for shard 0.
	start := startShard(s.o.Owner, s.shards)
	for i := 0; i < s.shards && held < fair; i++ {
		n := (start + i) % s.shards
		s.mu.Lock()
		_, mine := s.held[n]
		busy := s.releasing[n]
		s.mu.Unlock()
		if mine || busy {
			continue
		}
		if st, ok := shardStates[n]; ok && st.Live(now) && st.Owner != s.o.Owner {
			continue
		}
		l := lease.New(s.o.DB, s.st.Table(), s.st.SchedShardLeaseKey(n), lease.Options{
			Owner: s.o.Owner, Duration: s.o.Lease, EntityType: "SchedShardLease", Clock: s.o.Clock})
		st, err := l.TryAcquire(cctx)
		if err != nil {
			if ctx.Err() == nil {
				s.errs.Add(1)
				s.log.Warn("sched: acquire shard", "shard", n, "err", err)
			}
			return
		}
		if !st.Held {
			continue
		}
		s.log.Debug("sched: shard acquired", "shard", n, "checkpoint", checkpointOf(st.Item), "members", members, "share", fair)
		s.start(ctx, n, l, checkpointOf(st.Item))
		held++
	}
}

// giveUp stops shard n's worker and, once its running tasks finished, releases its
// lease (in the background: the rebalancing, which heartbeats the membership, does not
// wait for handlers).
func (s *Scheduler) giveUp(ctx context.Context, n int) {
	s.mu.Lock()
	r := s.held[n]
	delete(s.held, n)
	if r != nil {
		s.releasing[n] = true
	}
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.stop()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		<-r.done
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.CallTimeout)
		defer cancel()
		if err := r.l.Release(rctx); err != nil {
			s.errs.Add(1)
			s.log.Warn("sched: release shard", "shard", n, "err", err)
		} else {
			s.log.Debug("sched: shard released", "shard", n)
		}
		s.mu.Lock()
		delete(s.releasing, n)
		s.mu.Unlock()
	}()
}

// checkpointOf reads the checkpoint of a shard lease item (zero when it has none).
func checkpointOf(item map[string]types.AttributeValue) time.Time {
	if v, ok := item[attrCheckpoint].(*types.AttributeValueMemberN); ok {
		if n, err := strconv.ParseInt(v.Value, 10, 64); err == nil && n > 0 {
			return time.UnixMilli(n).UTC()
		}
	}
	return time.Time{}
}

// start runs shard n's worker while l is held. The worker's handlers run on a context
// that ends when the lease is lost, not when ctx ends (see Run).
func (s *Scheduler) start(ctx context.Context, n int, l *lease.Lease, cp time.Time) {
	stopCtx, stop := context.WithCancel(context.Background())
	r := &shardRun{l: l, stop: stop, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.held[n] = r
	s.mu.Unlock()
	go func() {
		defer close(r.done)
		defer stop()
		err := l.Hold(context.WithoutCancel(ctx), func(err error) {
			s.errs.Add(1)
			s.log.Warn("sched: renew shard lease", "shard", n, "err", err)
		}, func(hold context.Context) error {
			dispatch, cancel := context.WithCancel(hold)
			defer cancel()
			defer context.AfterFunc(stopCtx, cancel)()
			return s.runShard(hold, dispatch, n, l, cp, r.wake)
		})
		if err != nil {
			s.log.Warn("sched: shard stopped", "shard", n, "err", err)
		}
	}()
}

// shardState is what one shard's worker keeps between polls: the tasks running, and
// which of them finished when, so that a Query read before a task's delete does not
// start it again.
type shardState struct {
	sem chan struct{} // one slot per running task (Concurrency)
	wg  sync.WaitGroup

	mu       sync.Mutex
	seq      int64            // Queries issued so far
	running  map[string]bool  // taskKey -> running
	finished map[string]int64 // taskKey -> seq when its item left the bucket
}

// taskKey names a task item within its shard: its id and due time.
func taskKey(t inbox.Task) string { return t.ID + "@" + strconv.FormatInt(t.Due.UnixMilli(), 10) }

// runShard processes shard n from checkpoint cp until dispatch ends (nil: stopped) or
// hold does (the lease is lost: its cause). Tasks start only while dispatch lasts and
// run on hold; runShard returns after the running ones finished.
func (s *Scheduler) runShard(hold, dispatch context.Context, n int, l *lease.Lease, cp time.Time, wake <-chan struct{}) error {
	if cp.IsZero() {
		cp = s.st.SchedBucket(s.o.Clock.Now().Add(-s.o.Lookback))
	}
	sh := &shardState{sem: make(chan struct{}, s.o.Concurrency), running: make(map[string]bool), finished: make(map[string]int64)}
	defer sh.wg.Wait()
	saved := cp
	for {
		now := s.o.Clock.Now()
		cur := s.st.SchedBucket(now)
		for b := cp; !b.After(cur); b = b.Add(time.Minute) {
			empty, err := s.dispatchBucket(hold, dispatch, sh, n, b, now)
			if hold.Err() != nil {
				return context.Cause(hold)
			}
			if dispatch.Err() != nil {
				return nil
			}
			if err != nil {
				s.errs.Add(1)
				s.log.Warn("sched: read due tasks", "shard", n, "bucket", b, "err", err)
				break
			}
			if b.Equal(cp) && empty && now.After(b.Add(time.Minute+s.o.Grace)) {
				cp = b.Add(time.Minute)
			}
		}
		if !cp.Equal(saved) {
			cctx, cancel := context.WithTimeout(hold, s.o.CallTimeout)
			err := l.SetAttributes(cctx, map[string]types.AttributeValue{
				attrCheckpoint: &types.AttributeValueMemberN{Value: strconv.FormatInt(cp.UnixMilli(), 10)}})
			cancel()
			switch {
			case err == nil:
				saved = cp
			case errors.Is(err, lease.ErrLost):
				return err
			case hold.Err() == nil:
				s.errs.Add(1)
				s.log.Warn("sched: save checkpoint", "shard", n, "err", err)
			}
		}
		// The next pass: after Poll, or at a Kick, but never sooner than kickGap (a tenth
		// of Poll, at most 50 ms) after this one began: a stream of kicks under load reads
		// the shard continuously at most, not in a tight loop.
		t := s.o.Clock.NewTimer(s.o.Poll)
		select {
		case <-dispatch.Done():
			t.Stop()
			if hold.Err() != nil {
				return context.Cause(hold)
			}
			return nil
		case <-t.Chan():
		case <-wake:
			t.Stop()
			if gap := min(s.o.Poll/10, maxKickGap) - s.o.Clock.Since(now); gap > 0 {
				g := s.o.Clock.NewTimer(gap)
				select {
				case <-dispatch.Done():
					g.Stop()
					if hold.Err() != nil {
						return context.Cause(hold)
					}
					return nil
				case <-g.Chan():
				}
			}
		}
	}
}

// dispatchBucket starts every task of shard n's bucket b due by now that is not running
// already, at most Concurrency running at once per shard (it waits for a slot); it does
// not wait for them to finish, so a slow handler holds one slot, not the shard. It reads
// pages and starts tasks only while dispatch lasts; tasks run on hold. empty is true when
// the bucket held no task due by now: every earlier one is done, rescheduled or dropped
// (a finished task's item is gone; the Query is strongly consistent).
func (s *Scheduler) dispatchBucket(hold, dispatch context.Context, sh *shardState, n int, b, now time.Time) (empty bool, err error) {
	empty = true
	var after *inbox.Task
	for {
		sh.mu.Lock()
		sh.seq++
		q := sh.seq
		for k, at := range sh.finished {
			if at < q {
				delete(sh.finished, k) // left before this Query: it cannot return it
			}
		}
		sh.mu.Unlock()
		cctx, cancel := context.WithTimeout(dispatch, s.o.CallTimeout)
		page, err := s.st.DueTasks(cctx, n, b, now, after, 100)
		cancel()
		if err != nil {
			return false, err
		}
		if len(page.Tasks) > 0 {
			empty = false
		}
		for _, t := range page.Tasks {
			k := taskKey(t)
			sh.mu.Lock()
			_, gone := sh.finished[k]
			skip := sh.running[k] || gone
			sh.mu.Unlock()
			if skip {
				continue
			}
			select {
			case sh.sem <- struct{}{}:
			case <-dispatch.Done():
				return false, dispatch.Err()
			}
			sh.mu.Lock()
			_, gone = sh.finished[k] // it may have finished while we waited for a slot
			if gone || sh.running[k] {
				sh.mu.Unlock()
				<-sh.sem
				continue
			}
			sh.running[k] = true
			sh.mu.Unlock()
			sh.wg.Add(1)
			s.running.Add(1)
			go func() {
				defer sh.wg.Done()
				defer s.running.Add(-1)
				left := s.runTask(hold, n, b, t)
				sh.mu.Lock()
				delete(sh.running, k)
				if left {
					sh.finished[k] = sh.seq
				}
				sh.mu.Unlock()
				<-sh.sem
			}()
		}
		if !page.More || len(page.Tasks) == 0 {
			return empty, nil
		}
		after = &page.Tasks[len(page.Tasks)-1]
	}
}

// runTask runs one task and records its outcome. It returns true when the task's item
// left the bucket (deleted or moved, by this run or another), false when it is left in
// place (the shard was lost, or a DynamoDB call failed) to be run again.
func (s *Scheduler) runTask(ctx context.Context, n int, b time.Time, t inbox.Task) bool {
	ctx, span := telemetry.StartTask(ctx, s.o.Tracer, "task "+t.Kind, t.Traceparent,
		attribute.String("inbox.task.kind", t.Kind), attribute.Int("inbox.task.attempt", t.Attempts+1), attribute.Int("inbox.sched.shard", n))
	defer span.End()
	err := s.handle(ctx, t)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "task failed")
	}
	if ctx.Err() != nil {
		// Lost the shard: the next holder runs the task again.
		return false
	}
	lag := s.o.Clock.Since(t.Due)
	// The outcome is written even if ctx ends meanwhile: a finished handler's task should
	// not run again.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.CallTimeout)
	defer cancel()
	var outcome Outcome
	switch {
	case err == nil:
		outcome = Done
		if _, derr := s.st.CompleteTask(cctx, n, b, t); derr != nil {
			s.errs.Add(1)
			s.log.WarnContext(ctx, "sched: delete done task", "task", t.ID, "kind", t.Kind, "err", derr)
			return false
		}
		s.done.Add(1)
	case t.Attempts+1 >= s.o.MaxAttempts:
		outcome = Dropped
		s.log.ErrorContext(ctx, "sched: task failed too often; dropped", "task", t.ID, "kind", t.Kind, "attempts", t.Attempts+1, "ref", t.Ref, "err", err)
		if _, derr := s.st.CompleteTask(cctx, n, b, t); derr != nil {
			s.errs.Add(1)
			s.log.WarnContext(ctx, "sched: delete dropped task", "task", t.ID, "kind", t.Kind, "err", derr)
			return false
		}
		s.dropped.Add(1)
	default:
		outcome = Retried
		delay := s.retryDelay(t.Attempts + 1)
		s.log.WarnContext(ctx, "sched: task failed; retrying", "task", t.ID, "kind", t.Kind, "attempt", t.Attempts+1, "in", delay, "err", err)
		due := s.o.Clock.Now().Add(delay)
		if due.Before(t.Due) {
			due = t.Due
		}
		if _, _, rerr := s.st.RescheduleTask(cctx, n, b, t, due); rerr != nil {
			s.errs.Add(1)
			s.log.WarnContext(ctx, "sched: reschedule task", "task", t.ID, "kind", t.Kind, "err", rerr)
			return false
		}
		s.retried.Add(1)
	}
	if s.o.Observe != nil {
		s.o.Observe(t.Kind, outcome, lag)
	}
	return true
}

// handle calls t's handler with the handler deadline; a panic is an error.
func (s *Scheduler) handle(ctx context.Context, t inbox.Task) (err error) {
	s.hmu.RLock()
	h := s.handlers[t.Kind]
	s.hmu.RUnlock()
	if h == nil {
		return fmt.Errorf("sched: no handler for kind %q on this instance", t.Kind)
	}
	hctx, cancel := context.WithTimeout(ctx, s.o.HandlerTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sched: handler of %q panicked: %v\n%s", t.Kind, p, debug.Stack())
		}
	}()
	return h.Handle(hctx, t)
}

// retryDelay is the pause before attempt (1-based count of failures so far):
// RetryBase doubling per failure, capped at RetryMax, ±50% jitter (cenkalti/backoff).
func (s *Scheduler) retryDelay(attempt int) time.Duration {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = s.o.RetryBase
	b.MaxInterval = s.o.RetryMax
	b.Multiplier = 2
	b.RandomizationFactor = 0.5
	d := b.NextBackOff()
	for i := 1; i < attempt && d < s.o.RetryMax; i++ {
		d = b.NextBackOff()
	}
	return d
}

// startShard is where owner starts looking for free shards among shards: FNV-1a of the
// owner's name, modulo shards.
func startShard(owner string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(owner))
	return int(h.Sum32() % uint32(max(shards, 1)))
}
