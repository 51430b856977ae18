package sched

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math"
	"os"
	"runtime/debug"
	"slices"
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

// Defaults of Options.Poll and Options.Lease: an idle instance of 16 shards makes about
// 38 DynamoDB calls a minute (a heartbeat every 10 s; each shard's safety-net pass once a
// minute, two Queries), three instances about 50 (see the package doc).
const (
	DefaultPoll  = time.Minute
	DefaultLease = 30 * time.Second
)

// Options configures a Scheduler. The shard count is the store's (store.WithSchedShards,
// from INBOX_SCHED_SHARDS), since the store places tasks; Poll comes from
// INBOX_SCHED_POLL and Lease from INBOX_SCHED_LEASE.
type Options struct {
	// DB is the DynamoDB client of the roster (required; *dynamodb.Client).
	DB lease.API
	// Owner names this instance in the roster (default: host name, pid and a random
	// suffix). Two instances must never share a name. It is a key of the roster's maps:
	// any characters ('.' and '#' included) but '[' and ']', which Run refuses.
	Owner string
	// Poll is the safety net's period (default DefaultPoll): a held shard is read at
	// least this often even when no wake-up came, so a task whose wake-up was lost (or
	// written by a writer that sends none) runs at most about Poll + Grace after it is due,
	// or after its minute closed when that minute had been read ahead (see runShard).
	// Tasks the scheduler hears of (Notify) or reads ahead run at their due time.
	Poll time.Duration
	// Lease is how long a membership lasts without renewal (default DefaultLease): a
	// crashed instance's shards are taken over within about Lease plus a heartbeat.
	// Heartbeats (one UpdateItem of the roster, renewing the membership for every shard
	// held) and rebalancing happen every Lease/3.
	Lease time.Duration
	// Bus carries wake-ups for shards held by other instances (the gateway's broker:
	// live.Local or live.Redis); nil: a task written here for a shard held elsewhere
	// runs at its holder's safety-net poll.
	Bus Bus
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
	// Clock tells the time the scheduler reads tasks due by, writes its memberships
	// with and waits on between passes and heartbeats (default the real clock). It must
	// agree with the store's clock (store.WithClock), which places tasks by their due
	// time. Tests pass a clockwork.FakeClock and advance it.
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

// attrCheckpoint is the checkpoint of an earlier version's shard lease item (SHARD#n):
// the Unix ms of the oldest minute that may still hold tasks of the shard. The roster
// keeps the checkpoints now; a shard the roster has none for starts from it.
const attrCheckpoint = "checkpoint"

// Store is what the scheduler needs of the table (*store.Store implements it): the
// tasks of a shard's minute buckets (AP11) and the keys of the scheduler's roster (AP12).
type Store interface {
	// Table is the table's name (the roster lives in it).
	Table() string
	// SchedShards is how many write shards the tasks spread over.
	SchedShards() int
	// DueTasks returns, oldest first, up to limit tasks of shard's bucket due at or
	// before upTo, after task after (nil: from the start; else a page's Last); the
	// page's Next is the due time of the bucket's next task when the Query read one. An
	// item that is not a valid task is skipped, not an error.
	DueTasks(ctx context.Context, shard int, bucket, upTo time.Time, after *inbox.Task, limit int) (inbox.TaskPage, error)
	// CompleteTask deletes t (false when it was gone or changed).
	CompleteTask(ctx context.Context, shard int, bucket time.Time, t inbox.Task) (bool, error)
	// RescheduleTask moves t to due (false when it was gone or changed).
	RescheduleTask(ctx context.Context, shard int, bucket time.Time, t inbox.Task, due time.Time) (inbox.Task, bool, error)
	// SchedBucket is the minute bucket holding t.
	SchedBucket(t time.Time) time.Time
	// SchedLeasePK is the partition of the roster (and of the shard and membership
	// leases of earlier versions).
	SchedLeasePK() string
	// SchedRosterKey is the key of the roster item.
	SchedRosterKey() map[string]types.AttributeValue
	// SchedLeaseKind tells what a sort key of SchedLeasePK's partition names (an
	// earlier version's shard or membership lease).
	SchedLeaseKind(sk string) (shard int, member, ok bool)
}

// Bus carries wake-ups between the instances (live.Local within a process, live.Redis
// between processes): a writer's Notify for a shard held elsewhere is published, and
// every instance hands what it receives to the shard's worker if it holds the shard.
type Bus interface {
	// PublishWake tells the instances that a task of shard falls due at due. It may
	// block briefly (a network publish): the scheduler calls it from its own goroutine.
	PublishWake(ctx context.Context, shard int, due time.Time)
	// OnWake registers f to receive the wake-ups published; the result unregisters it.
	OnWake(f func(shard int, due time.Time)) func()
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
	// draining are workers taken out of held (a shard given up or lost) until they
	// finished: Held still counts their shards.
	draining map[*shardRun]int
	bg       sync.WaitGroup // give-ups in progress
	// member is the context of this instance's membership: cancelled (cause
	// errLapsed) when it could not be renewed in time; the shard workers run on it.
	member      context.Context
	lapse       context.CancelCauseFunc
	until       time.Time         // the membership's expiry as last written; zero when not a member
	last        roster            // the roster as last read
	saved       map[int]time.Time // checkpoints as last written, by shard
	legacyCp    map[int]time.Time // checkpoints of the shard lease items of earlier versions
	legacyUntil map[int]time.Time // live shard leases of earlier versions, at start

	publish chan wake // wake-ups to publish on the Bus

	done, retried, dropped, errs, running atomic.Int64
}

// wake is one wake-up: a task of shard due at due.
type wake struct {
	shard int
	due   time.Time
}

// errLapsed is the cause of a shard worker's end when the membership lapsed.
var errLapsed = errors.New("sched: membership not renewed in time")

// shardRun is one held shard's worker.
type shardRun struct {
	// stop asks the worker to start no more tasks, let the running ones finish (each
	// bounded by HandlerTimeout) and return; done is closed when it has. lose ends its
	// hold (the shard is no longer ours: running handlers' contexts end too).
	stop context.CancelFunc
	lose context.CancelCauseFunc
	done chan struct{}
	// wake asks the worker to look at its pending due times again; it holds at most
	// one request.
	wake chan struct{}

	mu sync.Mutex
	// pending is what the worker knows of tasks to come: in each minute, the earliest due
	// time heard of (Notify) or read ahead, in milliseconds after base; one entry a
	// minute, ascending (so that wake-ups heard in any order keep every minute, the
	// earliest first), 4 bytes each.
	pending []uint32
	base    int64     // Unix ms, in the past (see rebase)
	cp      time.Time // the checkpoint as the worker moved it
}

// maxPending bounds a shard's pending minutes (40 KB): past it the latest are forgotten,
// as is a due time more than about 25 days ahead (beyond what an offset from base
// holds), and their tasks run at a safety-net poll (see Options.Poll) unless a pass
// reads them ahead first (each safety-net pass reads the next minute ahead).
const maxPending = 10000

// newShardRun returns a shard's worker state, its pending due times counted from now.
func newShardRun(now time.Time) *shardRun {
	return &shardRun{done: make(chan struct{}), wake: make(chan struct{}, 1), base: now.UnixMilli()}
}

// minuteOf is the minute (Unix ms / 60,000) of the pending entry off.
func (r *shardRun) minuteOf(off uint32) int64 { return (r.base + int64(off)) / 60000 }

// note records a task of the shard due at due; it reports whether it is earlier than
// every pending one (the worker's timer must move). A due time before base (already
// due) is kept as base.
func (r *shardRun) note(due time.Time) bool {
	ms := due.UnixMilli()
	r.mu.Lock()
	defer r.mu.Unlock()
	var off uint32
	if d := ms - r.base; d > 0 {
		if d > math.MaxUint32 {
			return false
		}
		off = uint32(d)
	}
	m := r.minuteOf(off)
	i, found := slices.BinarySearch(r.pending, off)
	switch {
	case found, i > 0 && r.minuteOf(r.pending[i-1]) == m:
		return false // its minute has one as early already
	case i < len(r.pending) && r.minuteOf(r.pending[i]) == m:
		r.pending[i] = off // earlier in a minute already pending
		return i == 0
	}
	if len(r.pending) >= maxPending {
		if i == len(r.pending) {
			return false // the latest: forgotten
		}
		r.pending = r.pending[:len(r.pending)-1]
	}
	r.pending = slices.Insert(r.pending, i, off)
	return i == 0
}

// earliest returns the earliest pending due time (zero when none).
func (r *shardRun) earliest() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(r.base + int64(r.pending[0])).UTC()
}

// claim removes the pending due times at or before now: the pass about to start reads
// their tasks (one heard of later is pending again). It reports whether it removed any.
func (r *shardRun) claim(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := now.UnixMilli()
	i, _ := slices.BinarySearchFunc(r.pending, ms, func(off uint32, ms int64) int {
		if r.base+int64(off) <= ms {
			return -1
		}
		return 1
	})
	r.pending = slices.Delete(r.pending, 0, i)
	r.rebase(ms)
	return i > 0
}

// rebase moves base up to now once it is half an offset's range (about 25 days) old,
// so that the due times ahead stay within range: every pending one is after now (claim
// removed the others).
func (r *shardRun) rebase(now int64) {
	if now-r.base < math.MaxUint32/2 {
		return
	}
	d := now - r.base
	for i := range r.pending {
		r.pending[i] -= uint32(d)
	}
	r.base = now
}

func (r *shardRun) checkpoint() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cp
}

func (r *shardRun) setCheckpoint(cp time.Time) {
	r.mu.Lock()
	r.cp = cp
	r.mu.Unlock()
}

// poke asks the worker to look at its pending due times again.
func (r *shardRun) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
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
	def(&o.Poll, DefaultPoll)
	def(&o.Lease, DefaultLease)
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
		handlers: make(map[string]Handler), held: make(map[int]*shardRun), releasing: make(map[int]bool),
		draining: make(map[*shardRun]int),
		saved:    make(map[int]time.Time), publish: make(chan wake, 1024)}
}

// maxKickGap bounds the pause between a pass and the next one a wake-up asks for.
const maxKickGap = 100 * time.Millisecond

// Notify tells the scheduler that a task of shard n falls due at due (store.Store.NotifyDue
// calls it after each write of a task commits). When this instance holds the shard, its
// worker arms a timer for due (or reads the shard now, if due has come); otherwise the
// wake-up is published on Options.Bus for the instance that holds it. It never blocks;
// a wake-up that cannot be delivered is lost, and the task runs at the holder's next
// safety-net poll (see Options.Poll).
func (s *Scheduler) Notify(n int, due time.Time) {
	if s.wakeLocal(n, due) || s.o.Bus == nil {
		return
	}
	select {
	case s.publish <- wake{n, due}:
	default:
	}
}

// Kick asks the worker of shard n, when this scheduler holds it, for a pass now rather
// than at its next timer. It never blocks; kicks that come while one waits are one.
func (s *Scheduler) Kick(n int) { s.wakeLocal(n, s.o.Clock.Now()) }

// wakeLocal hands a wake-up to shard n's worker if this instance holds the shard, and
// reports whether it does.
func (s *Scheduler) wakeLocal(n int, due time.Time) bool {
	s.mu.Lock()
	r := s.held[n]
	s.mu.Unlock()
	if r == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
	}
	if r.note(due) {
		r.poke()
	}
	return true
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

// Held returns the shards this instance runs now, in no particular order: a shard given
// up (or lost) counts until its worker finished.
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
	for r, n := range s.draining {
		select {
		case <-r.done:
			delete(s.draining, r)
		default:
			out = append(out, n)
		}
	}
	return out
}

// Run takes part in the shared processing of the shards until ctx ends, then stops its
// shard workers and returns nil once the handlers running have finished (each is
// bounded by HandlerTimeout; their context does not end with ctx, so that a shutdown
// does not leave a task done but not deleted). It does not leave the roster, so that a
// crash and a shutdown look alike to the others: call Release after Run for a graceful
// handover. It returns an error only for a configuration error.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.o.DB == nil {
		return errors.New("sched: Options.DB is required")
	}
	if err := checkOwner(s.o.Owner); err != nil {
		return err
	}
	if s.o.Bus != nil {
		defer s.o.Bus.OnWake(func(n int, due time.Time) { s.wakeLocal(n, due) })()
		pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		var pub sync.WaitGroup
		pub.Add(1)
		go func() {
			defer pub.Done()
			for {
				select {
				case <-pctx.Done():
					return
				case w := <-s.publish:
					s.o.Bus.PublishWake(pctx, w.shard, w.due)
				}
			}
		}()
		defer func() { stop(); pub.Wait() }()
	}
	period := s.o.Lease / 3
	ready := false
	for {
		// Every period from the start of the previous heartbeat, as a ticker would; a
		// failed one is tried again after a thirtieth of the lease.
		began := s.o.Clock.Now()
		wait := period
		if !ready {
			ready = s.prepare(ctx)
		}
		if !ready || !s.beat(ctx) {
			wait = s.o.Lease / 30
		}
		t := s.o.Clock.NewTimer(wait - s.o.Clock.Since(began))
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

// prepare creates the roster's maps if missing and reads the shard lease items of the
// earlier scheduler (one lease per shard), whose checkpoints a shard without one in the
// roster starts from, and whose live leases it leaves alone until they expire.
func (s *Scheduler) prepare(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	if err := s.ensureRoster(cctx); err != nil {
		if ctx.Err() == nil {
			s.errs.Add(1)
			s.log.Warn("sched: create the roster", "err", err)
		}
		return false
	}
	cps, until, err := s.readLegacy(cctx)
	if err != nil {
		if ctx.Err() == nil {
			s.errs.Add(1)
			s.log.Warn("sched: read leases", "err", err)
		}
		return false
	}
	s.mu.Lock()
	s.legacyCp, s.legacyUntil = cps, until
	s.mu.Unlock()
	return true
}

// readLegacy reads, in one Query of the roster's partition (all pages), the shard lease
// items of the earlier scheduler: by shard, their checkpoints (cps) and the expiry of
// those whose lease is live once read (until).
func (s *Scheduler) readLegacy(ctx context.Context) (cps, until map[int]time.Time, err error) {
	states, err := lease.List(ctx, s.o.DB, s.st.Table(), s.st.SchedLeasePK())
	if err != nil {
		return nil, nil, err
	}
	now := s.o.Clock.Now()
	cps, until = make(map[int]time.Time), make(map[int]time.Time)
	for sk, st := range states {
		n, member, ok := s.st.SchedLeaseKind(sk)
		if !ok || member || n >= s.shards {
			continue
		}
		if cp := checkpointOf(st.Item); !cp.IsZero() {
			cps[n] = cp
		}
		if st.Live(now) {
			until[n] = st.Until
		}
	}
	return cps, until, nil
}

// beat renews the membership (saving the checkpoints that moved) and rebalances from the
// roster it returns; false when the renewal failed.
func (s *Scheduler) beat(ctx context.Context) bool {
	now := s.o.Clock.Now()
	margin := s.o.Lease / 6
	s.mu.Lock()
	member := !s.until.IsZero() && s.until.After(now)
	last := s.last
	cps := make(map[int]time.Time)
	if member {
		var moved []int
		for n, r := range s.held {
			if cp := r.checkpoint(); !cp.IsZero() && !cp.Equal(s.saved[n]) {
				cps[n] = cp
				moved = append(moved, n)
			}
		}
		if len(moved) > maxSave {
			// The longest unsaved first (never saved: zero), the rest at the next heartbeats.
			slices.SortFunc(moved, func(a, b int) int {
				if c := s.saved[a].Compare(s.saved[b]); c != 0 {
					return c
				}
				return a - b
			})
			for _, n := range moved[maxSave:] {
				delete(cps, n)
			}
		}
	}
	until := s.until
	s.mu.Unlock()
	timeout := s.o.CallTimeout
	if member {
		// A renewal must end while the workers may still run: a slow engine gets the
		// membership's remaining time up to the margin, not more.
		timeout = min(timeout, until.Add(-margin).Sub(now))
	}
	if timeout <= 0 {
		s.lapsed(errLapsed)
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	r, err := s.heartbeat(cctx, now, member, cps, last)
	cancel()
	switch {
	case errors.Is(err, errCondition):
		// Our membership expired, or a shard we saved was taken: it lapsed.
		s.log.Warn("sched: membership lost; rejoining")
		s.lapsed(errLapsed)
		return false
	case err != nil:
		if ctx.Err() == nil {
			s.errs.Add(1)
			s.log.Warn("sched: membership heartbeat", "err", err)
			if member && !s.o.Clock.Now().Add(margin).Before(until) {
				s.lapsed(fmt.Errorf("%w: %w", errLapsed, err))
			}
			s.repairIfInvalid(ctx, err)
		}
		return false
	}
	s.mu.Lock()
	if !member || s.member == nil {
		s.member, s.lapse = context.WithCancelCause(context.Background())
	}
	s.until = now.Add(s.o.Lease)
	s.last = r
	for n, cp := range cps {
		s.saved[n] = cp
	}
	s.mu.Unlock()
	s.rebalance(ctx, now, r)
	return true
}

// lapsed ends the membership: every shard worker stops, its handlers' contexts ending,
// since another instance may take the shards from the membership's expiry on.
func (s *Scheduler) lapsed(cause error) {
	s.mu.Lock()
	lapse := s.lapse
	s.member, s.lapse, s.until = nil, nil, time.Time{}
	s.mu.Unlock()
	if lapse != nil {
		lapse(cause)
	}
}

// Release gives up this instance's membership and every shard it holds, so the others
// take its shards at once. Call it after Run returned.
func (s *Scheduler) Release(ctx context.Context) error {
	s.stopAll()
	s.mu.Lock()
	cps := make(map[int]time.Time)
	for n, r := range s.held {
		if cp := r.checkpoint(); !cp.IsZero() {
			cps[n] = cp
		}
	}
	s.held = make(map[int]*shardRun)
	s.mu.Unlock()
	s.lapsed(context.Canceled)
	return s.leave(ctx, cps)
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

// rebalance holds a fair share of the shards, ceil(shards / live members), from the
// roster r read at now: it stops the workers of shards the roster no longer gives it,
// gives up shards above its share, and takes free ones (or those of expired members) up
// to it, in one conditional write.
func (s *Scheduler) rebalance(ctx context.Context, now time.Time, r roster) {
	members := 0
	far := s.horizon(now)
	for owner := range r.members {
		if r.live(owner, now, far) {
			members++
		}
	}
	members = max(members, 1)
	fair := (s.shards + members - 1) / members

	s.mu.Lock()
	var lost []*shardRun
	for n, run := range s.held {
		select {
		case <-run.done:
			delete(s.held, n) // stopped
			continue
		default:
		}
		if r.shards[n] != s.o.Owner {
			delete(s.held, n)
			s.draining[run] = n
			lost = append(lost, run)
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
	for _, run := range lost {
		run.lose(errors.New("sched: the roster gives the shard to another instance"))
		run.stop()
	}
	for _, n := range extra {
		s.log.Info("sched: giving a shard up", "shard", n, "members", members, "share", fair)
		s.giveUp(ctx, n)
	}
	if held >= fair {
		return
	}
	// Take free or expired shards, starting at a point of our own so that instances
	// starting together do not all race for shard 0.
	want := make(map[int]string)
	var order []int // want's shards in the order picked
	start := startShard(s.o.Owner, s.shards)
	s.mu.Lock()
	for i := 0; i < s.shards && held+len(want) < fair; i++ {
		n := (start + i) % s.shards
		if _, mine := s.held[n]; mine || s.releasing[n] {
			continue
		}
		if u, ok := s.legacyUntil[n]; ok && u.After(now) {
			continue // held by an instance of an earlier version
		}
		owner := r.shards[n]
		if owner != "" && owner != s.o.Owner && r.live(owner, now, far) {
			continue
		}
		want[n] = owner
		order = append(order, n)
	}
	s.mu.Unlock()
	// At most maxTake shards a take, so that its expressions stay far below DynamoDB's
	// 4 KB limit however many shards there are.
	for chunk := range slices.Chunk(order, maxTake) {
		part := make(map[int]string, len(chunk))
		for _, n := range chunk {
			part[n] = want[n]
		}
		if !s.takeAndStart(ctx, now, part, r, members, fair) {
			return // the next heartbeat reads the roster again
		}
	}
}

// maxTake bounds the shards one take writes, and maxSave the checkpoints one heartbeat
// saves (the others wait for the next heartbeat, the longest unsaved first), and
// maxForget the members one heartbeat removes: each shard or member adds a path, a value
// and a condition of about 60 bytes to the UpdateItem, whose expressions DynamoDB
// refuses past 4 KB, at every try.
const (
	maxTake   = 16
	maxSave   = 32
	maxForget = 16
)

// takeAndStart takes the shards of want (see take) read from r, and starts their
// workers; false when the take failed.
func (s *Scheduler) takeAndStart(ctx context.Context, now time.Time, want map[int]string, r roster, members, fair int) bool {
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	got, err := s.take(cctx, now, want, r)
	cancel()
	if err != nil {
		if !errors.Is(err, errCondition) && ctx.Err() == nil {
			s.errs.Add(1)
			s.log.Warn("sched: take shards", "shards", len(want), "err", err)
			s.repairIfInvalid(ctx, err)
		}
		return false
	}
	s.mu.Lock()
	s.last = got
	mctx := s.member
	s.mu.Unlock()
	if mctx == nil {
		return false
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		cp, ok := got.cps[n]
		if !ok {
			cp = s.legacyCp[n]
		}
		s.log.Debug("sched: shard acquired", "shard", n, "checkpoint", cp, "members", members, "share", fair)
		s.start(ctx, mctx, n, cp)
	}
	return true
}

// giveUp stops shard n's worker and, once its running tasks finished, frees the shard in
// the roster with its checkpoint (in the background: the heartbeat does not wait for
// handlers).
func (s *Scheduler) giveUp(ctx context.Context, n int) {
	s.mu.Lock()
	r := s.held[n]
	delete(s.held, n)
	if r != nil {
		s.releasing[n] = true
		s.draining[r] = n
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
		if err := s.giveBack(rctx, n, r.checkpoint()); err != nil {
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

// checkpointOf reads the checkpoint of an earlier version's shard lease item (zero when
// it has none).
func checkpointOf(item map[string]types.AttributeValue) time.Time {
	if v, ok := item[attrCheckpoint].(*types.AttributeValueMemberN); ok {
		if n, err := strconv.ParseInt(v.Value, 10, 64); err == nil && n > 0 {
			return time.UnixMilli(n).UTC()
		}
	}
	return time.Time{}
}

// start runs shard n's worker while the membership mctx lasts. The worker's handlers run
// on a context that ends when the shard is lost, not when ctx ends (see Run).
func (s *Scheduler) start(ctx context.Context, mctx context.Context, n int, cp time.Time) {
	stopCtx, stop := context.WithCancel(context.Background())
	hold, lose := context.WithCancelCause(mctx)
	r := newShardRun(s.o.Clock.Now())
	r.stop, r.lose, r.cp = stop, lose, cp
	s.mu.Lock()
	s.held[n] = r
	s.mu.Unlock()
	go func() {
		defer close(r.done)
		defer stop()
		defer lose(nil)
		dispatch, cancel := context.WithCancel(hold)
		defer cancel()
		defer context.AfterFunc(stopCtx, cancel)()
		if err := s.runShard(hold, dispatch, n, r); err != nil && ctx.Err() == nil {
			s.log.Warn("sched: shard stopped", "shard", n, "err", err)
		}
	}()
}

// shardState is what one shard's worker keeps between passes: the tasks running, and
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

// safetyPoll returns shard n's first safety-net pass after now: the instants Grace plus
// a tenth of a second per shard past a multiple of Poll, so that with a one-minute Poll
// each pass comes just after the previous minute's Grace ended (it reads that minute one
// last time and the current one, two Queries) and the shards' passes are spread.
func (s *Scheduler) safetyPoll(n int, now time.Time) time.Time {
	phase := (s.o.Grace + time.Duration(n+1)*100*time.Millisecond) % s.o.Poll
	next := now.Truncate(s.o.Poll).Add(phase)
	for !next.After(now) {
		next = next.Add(s.o.Poll)
	}
	return next
}

// runShard processes shard n from its checkpoint until dispatch ends (nil: stopped) or
// hold does (the shard is lost: its cause). Tasks start only while dispatch lasts and
// run on hold; runShard returns after the running ones finished. A pass reads every
// minute from the checkpoint to now, starts what is due and reads ahead the current
// minute's next task; then the worker sleeps until the earliest due time it knows of
// (read ahead or heard of through Notify) or its next safety-net poll, whichever comes
// first, or until a wake-up.
func (s *Scheduler) runShard(hold, dispatch context.Context, n int, r *shardRun) error {
	cp := r.checkpoint()
	if now := s.o.Clock.Now(); cp.After(s.st.SchedBucket(now)) {
		// No holder moves a checkpoint past its current minute: one beyond ours is a
		// clock far ahead or a forged roster, and trusting it would skip every minute up
		// to it. It is ignored, as if the shard had none.
		s.log.Warn("sched: checkpoint in the future ignored", "shard", n, "checkpoint", cp)
		cp = time.Time{}
	}
	if cp.IsZero() {
		cp = s.st.SchedBucket(s.o.Clock.Now().Add(-s.o.Lookback))
	}
	sh := &shardState{sem: make(chan struct{}, s.o.Concurrency), running: make(map[string]bool), finished: make(map[string]int64)}
	defer sh.wg.Wait()
	ended := func() error {
		if hold.Err() != nil {
			return context.Cause(hold)
		}
		return nil
	}
	// safety is when the next safety-net pass is due; aheadOf the minute the last one
	// read ahead.
	var safety, aheadOf time.Time
	for {
		now := s.o.Clock.Now()
		claimed := r.claim(now)
		// A safety-net pass (and the first pass, which knows nothing yet) reads the next
		// minute ahead: the tasks written before this instance held the shard (before a
		// restart or a takeover) were heard of by no one here, and each minute's are so
		// known before it begins. A safety-net pass skips the current minute when it was
		// read ahead before it began (every task written into it since woke the shard,
		// and the passes the read-ahead timed read it), unless it claimed a wake-up: one
		// due at this very pass is read by it, not left until the minute closes. It reads
		// the minutes it closes.
		// So an idle shard costs two Queries a minute; a task whose wake-up was lost runs
		// at the next safety-net pass that reads its minute: within Poll + Grace when its
		// minute was not read ahead, else once the minute closed (at most a minute more).
		safetyPass := !now.Before(safety)
		if safetyPass {
			safety = s.safetyPoll(n, now)
		}
		cur := s.st.SchedBucket(now)
		failed := false
		for b := cp; !b.After(cur); b = b.Add(time.Minute) {
			if b.Equal(cur) && safetyPass && aheadOf.Equal(cur) && !claimed {
				continue
			}
			empty, next, err := s.dispatchBucket(hold, dispatch, sh, n, b, now)
			if hold.Err() != nil {
				return context.Cause(hold)
			}
			if dispatch.Err() != nil {
				return nil
			}
			if err != nil {
				s.errs.Add(1)
				s.log.Warn("sched: read due tasks", "shard", n, "bucket", b, "err", err)
				// Look again soon rather than at the safety net.
				r.note(now.Add(min(s.o.Poll, time.Second)))
				failed = true
				break
			}
			if !next.IsZero() {
				r.note(next)
			}
			if b.Equal(cp) && empty && now.After(b.Add(time.Minute+s.o.Grace)) {
				cp = b.Add(time.Minute)
			}
		}
		if safetyPass && !failed {
			err := s.readAhead(dispatch, n, cur.Add(time.Minute), now, r)
			if err == nil {
				aheadOf = cur.Add(time.Minute)
			} else {
				if hold.Err() != nil {
					return context.Cause(hold)
				}
				if dispatch.Err() != nil {
					return nil
				}
				s.errs.Add(1)
				s.log.Warn("sched: read the next minute ahead", "shard", n, "err", err)
				safety = now.Add(min(s.o.Poll, time.Second))
			}
		}
		r.setCheckpoint(cp)
		// The next pass: at the earliest due time known or the safety net's, or at a
		// wake-up; never sooner than kickGap (a tenth of Poll, at most 100 ms) after this
		// one began: a stream of wake-ups under load reads the shard continuously at
		// most, not in a tight loop.
		for {
			at := safety
			if e := r.earliest(); !e.IsZero() && e.Before(at) {
				at = e
			}
			at = later(at, now.Add(min(s.o.Poll/10, maxKickGap)))
			d := at.Sub(s.o.Clock.Now())
			if d <= 0 {
				break
			}
			t := s.o.Clock.NewTimer(d)
			select {
			case <-dispatch.Done():
				t.Stop()
				return ended()
			case <-t.Chan():
			case <-r.wake:
				t.Stop()
				continue
			}
			break
		}
	}
}

// readAhead learns the first task of shard n's minute b (one Query, Limit 1) and notes
// its due time on r, so that a pass runs when it is due; a task already due (the clock
// crossed into b) is noted at now.
func (s *Scheduler) readAhead(dispatch context.Context, n int, b, now time.Time, r *shardRun) error {
	ctx, cancel := context.WithTimeout(dispatch, s.o.CallTimeout)
	defer cancel()
	page, err := s.st.DueTasks(ctx, n, b, now, nil, 1)
	if err != nil {
		return err
	}
	switch {
	case len(page.Tasks) > 0:
		r.note(now)
	case !page.Next.IsZero():
		r.note(page.Next)
	}
	return nil
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// dispatchBucket starts every task of shard n's bucket b due by now that is not running
// already, at most Concurrency running at once per shard (it waits for a slot); it does
// not wait for them to finish, so a slow handler holds one slot, not the shard. It reads
// pages and starts tasks only while dispatch lasts; tasks run on hold. empty is true when
// the bucket held no task due by now: every earlier one is done, rescheduled or dropped
// (a finished task's item is gone; the Query is strongly consistent); next is the due
// time of the bucket's first task after now, when the last Query read one.
func (s *Scheduler) dispatchBucket(hold, dispatch context.Context, sh *shardState, n int, b, now time.Time) (empty bool, next time.Time, err error) {
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
		// The first page is small: it reads the bucket's tasks due by now and its next one
		// (read ahead), usually a few; the following ones, of a burst due at once, large.
		limit := firstPage
		if after != nil {
			limit = 100
		}
		cctx, cancel := context.WithTimeout(dispatch, s.o.CallTimeout)
		page, err := s.st.DueTasks(cctx, n, b, now, after, limit)
		cancel()
		if err != nil {
			return false, time.Time{}, err
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
				return false, time.Time{}, dispatch.Err()
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
		if !page.More || page.Last == nil {
			return empty, page.Next, nil
		}
		// Last, not the last task: the page may end with items the store skipped.
		after = page.Last
	}
}

// firstPage is the Limit of a bucket's first Query in a pass: enough for the tasks due
// since the previous pass while they come a few at a time, plus the next one (read
// ahead), without reading a busy minute's later tasks at every pass.
const firstPage = 4

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
