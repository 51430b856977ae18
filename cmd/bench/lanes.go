package main

// Scenario 14, lanes: lane isolation (issue 10's goal: a transactional send's
// accept→stored p99 while a bulk broadcast runs ≤ 2× its p99 idle, both measured in one
// run on one engine).
//
// One send pipeline in this process, built as app.Build builds it: a
// service.Service (default lanes: 16 transactional workers, 4 bulk) and
// service.Broadcasts whose pages run through the service's RunInLane, so a broadcast
// only ever takes bulk workers; the broadcast rig's scheduler (broadcast.go) runs the
// broadcasts' shard tasks and the service's recovery tasks (service.TaskSend), as the
// gateway's scheduler does.
//
// Transactional sends come at a steady -lanes-rate (20/s, open loop: one goroutine per
// send, so a slow send never delays the next): service.Send with one recipient (a
// distinct user of 1,000), priority transactional. Send returns once the notification is
// stored (it waits for its processing in the transactional lane); each is then checked
// once with Store.Notifications (one BatchGetItem), and one not readable counts as
// missing. Latency is from the call of Send to its return.
//
// Phases, one run: idle (-duration/2), busy (-duration, while a broadcast to a
// -lanes-members segment runs through the bulk lane; it starts first and the phase
// begins once it has written recipients), idle again (-duration/2, after the broadcast
// was cancelled and its last pages finished). Idle is both idle halves.
//
// To tell the lanes from the engine, every DynamoDB call the transactional sends make is
// timed at the client (its keys carry the sends' marker); the rest of a send's time is
// this process's own (lane handoff, goroutine scheduling, encoding). The engine's CPU
// (the DynamoDB Local JVM, from /proc) and this process's are reported per phase.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// lanesConfig holds the lanes scenario's flags.
type lanesConfig struct {
	members int
	rate    float64
}

// lanesGoal is issue 10's bound on busy p99 / idle p99.
const lanesGoal = 2.0

// lanesMarker is in every key of the transactional sends (their users and idempotency
// keys), so the client's timer tells their calls from the broadcast's.
const lanesMarker = "ltx-"

// LanesResult is scenario 14.
type LanesResult struct {
	Engine  string  `json:"engine"`
	Members int     `json:"segment_members"`
	Rate    float64 `json:"transactional_sends_per_sec"`
	// TransactionalWorkers and BulkWorkers are the service's lanes (service defaults).
	TransactionalWorkers int        `json:"transactional_workers"`
	BulkWorkers          int        `json:"bulk_workers"`
	FillSeconds          float64    `json:"segment_fill_seconds"`
	Idle                 LanesPhase `json:"idle"`
	// IdleHalves are the idle halves' p50 and p99 (before the broadcast, after it).
	IdleHalves []Latency  `json:"idle_halves"`
	Busy       LanesPhase `json:"busy"`
	// Broadcast is what the broadcast did during the busy phase.
	BroadcastWritten int     `json:"broadcast_written_during_busy"`
	BroadcastPerSec  float64 `json:"broadcast_recipients_per_sec_during_busy"`
	BroadcastRunning bool    `json:"broadcast_running_at_end_of_busy"`
	BroadcastStatus  string  `json:"broadcast_status_at_end_of_busy"`
	P99Ratio         float64 `json:"p99_busy_over_idle"`
	P50Ratio         float64 `json:"p50_busy_over_idle"`
	DynamoRatio      float64 `json:"dynamodb_ms_per_send_busy_over_idle"`
	OwnRatio         float64 `json:"own_ms_per_send_busy_over_idle"`
	GoalRatio        float64 `json:"goal_ratio"`
	GoalMet          bool    `json:"goal_met"`
}

// LanesPhase is one phase's transactional sends.
type LanesPhase struct {
	Sends      int     `json:"sends"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Missing    int     `json:"not_readable_after_send"`
	Seconds    float64 `json:"seconds"`
	Latency    Latency `json:"send_latency"`
	// DynamoCalls and DynamoMs are the sends' DynamoDB calls and their time at the
	// client, per send; OwnMs is the mean send latency less DynamoMs.
	DynamoCalls float64 `json:"dynamodb_calls_per_send"`
	DynamoMs    float64 `json:"dynamodb_ms_per_send"`
	// DynamoCallP99 is the p99 of a single DynamoDB call of the sends.
	DynamoCallP50 float64 `json:"dynamodb_call_p50_ms"`
	DynamoCallP99 float64 `json:"dynamodb_call_p99_ms"`
	OwnMs         float64 `json:"own_ms_per_send"`
	// MaxInFlight is the most sends in flight at once (the transactional lane has
	// TransactionalWorkers workers; sends beyond them wait for one).
	MaxInFlight int `json:"max_sends_in_flight"`
	// EngineCPU and OwnCPU are cores busy on average: the DynamoDB Local JVM's and this
	// process's.
	EngineCPU float64 `json:"engine_cpu_cores"`
	OwnCPU    float64 `json:"process_cpu_cores"`
}

// callTimer times the DynamoDB calls of a client whose keys or key values mention a
// marker, except calls whose context is marked untimed.
type callTimer struct {
	marker string
	mu     sync.Mutex
	lat    []time.Duration
}

type untimedKey struct{}

// untimed marks ctx: the timer leaves its calls out.
func untimed(ctx context.Context) context.Context { return context.WithValue(ctx, untimedKey{}, true) }

// option returns the client option that times the client's calls.
func (t *callTimer) option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchcalltimer",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if ctx.Value(untimedKey{}) != nil || !mentions(in.Parameters, t.marker) {
						return next.HandleInitialize(ctx, in)
					}
					t0 := time.Now()
					out, md, err := next.HandleInitialize(ctx, in)
					d := time.Since(t0)
					t.mu.Lock()
					t.lat = append(t.lat, d)
					t.mu.Unlock()
					return out, md, err
				}), middleware.Before)
		})
	}
}

// take returns the calls timed since the last take.
func (t *callTimer) take() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lat
	t.lat = nil
	return l
}

// mentions reports whether a call's keys (or a Query's values) contain marker.
func mentions(params any, marker string) bool {
	var keys []map[string]types.AttributeValue
	switch p := params.(type) {
	case *dynamodb.TransactWriteItemsInput:
		keys = append(keys, txnKeys(p)...)
	case *dynamodb.PutItemInput:
		keys = append(keys, p.Item)
	case *dynamodb.UpdateItemInput:
		keys = append(keys, p.Key)
	case *dynamodb.DeleteItemInput:
		keys = append(keys, p.Key)
	case *dynamodb.GetItemInput:
		keys = append(keys, p.Key)
	case *dynamodb.QueryInput:
		keys = append(keys, p.ExpressionAttributeValues)
	case *dynamodb.BatchGetItemInput:
		for _, ka := range p.RequestItems {
			keys = append(keys, ka.Keys...)
		}
	case *dynamodb.BatchWriteItemInput:
		for _, ws := range p.RequestItems {
			for _, w := range ws {
				switch {
				case w.PutRequest != nil:
					keys = append(keys, w.PutRequest.Item)
				case w.DeleteRequest != nil:
					keys = append(keys, w.DeleteRequest.Key)
				}
			}
		}
	}
	for _, k := range keys {
		for name, v := range k {
			if name != "pk" && name != "sk" && !strings.HasPrefix(name, ":") {
				continue
			}
			if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, marker) {
				return true
			}
		}
	}
	return false
}

// cpuNow is this process's CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (b *harness) lanesScenario(ctx context.Context) (*LanesResult, error) {
	c := b.c.lanes
	if c.members < 1 || c.rate <= 0 {
		return nil, fmt.Errorf("-lanes-members and -lanes-rate must be positive")
	}
	timer := &callTimer{marker: lanesMarker}
	var svc *service.Service
	// The pipeline as app.Build builds it: the broadcasts' pages in the
	// service's lanes, the service starting the broadcasts; and the service's recovery
	// tasks on the scheduler, as app.Build registers them.
	rig, err := b.startBroadcastRig(ctx, broadcastRigOptions{owner: "bench-lanes",
		lane: func(ctx context.Context, lane string, work func(context.Context) error) error {
			return svc.RunInLane(ctx, lane, work)
		},
		clientOptions: []func(*dynamodb.Options){timer.option()},
		setup: func(r *broadcastRig) {
			svc = service.New(r.st, service.Options{Logger: b.log, Broadcaster: r.b})
			r.s.Register(service.TaskSend, sched.HandlerFunc(svc.Handler()))
		}})
	if err != nil {
		return nil, err
	}
	defer rig.stop()
	defer svc.Close()
	res := &LanesResult{Engine: b.eng.name, Members: c.members, Rate: c.rate, TransactionalWorkers: 16, BulkWorkers: 4, GoalRatio: lanesGoal}

	seg := "followers:lanes"
	if res.FillSeconds, err = fillSegmentTimed(ctx, rig.st, "lanes", seg, "lm", c.members); err != nil {
		return nil, err
	}
	// The fill keeps the engine so busy that lease renewals time out: the idle phase
	// starts on a whole scheduler and an engine that has worked off the fill.
	if err := rig.waitHeld(ctx); err != nil {
		return nil, err
	}
	time.Sleep(5 * time.Second)

	var seq atomic.Int64
	phase := func(d time.Duration) lanesWindow {
		return b.lanesWindow(ctx, svc, rig.st, timer, &seq, c.rate, d)
	}
	progress("lanes: warming up (%.0f transactional sends/s for %s)", c.rate, 2*b.warmup())
	phase(2 * b.warmup())
	// The broadcast runs through the bulk lane.
	i1, busy, i2, bb, err := idleBusyIdle(ctx, "lanes", b.c.duration/2, b.c.duration, time.Minute, phase,
		func() (string, error) {
			if err := rig.waitHeld(ctx); err != nil {
				return "", err
			}
			return rig.b.Start(ctx, tenant, service.BroadcastSpec{IdempotencyKey: "bench-lanes-" + ulid.Make().String(), Segment: seg, Send: broadcastSend()})
		},
		func(id string) (inbox.Broadcast, error) { return rig.b.Get(ctx, tenant, id) },
		func(id string) error { _, err := rig.b.Cancel(ctx, tenant, id); return err })
	if err != nil {
		return nil, err
	}
	res.BroadcastWritten, res.BroadcastPerSec, res.BroadcastStatus, res.BroadcastRunning = bb.written, bb.perSec, bb.status, bb.running()

	res.Idle = lanesPhaseOf(i1, i2)
	res.IdleHalves = []Latency{lanesPhaseOf(i1).Latency, lanesPhaseOf(i2).Latency}
	res.Busy = lanesPhaseOf(busy)
	res.P99Ratio = ratio(res.Busy.Latency.P99, res.Idle.Latency.P99)
	res.P50Ratio = ratio(res.Busy.Latency.P50, res.Idle.Latency.P50)
	res.DynamoRatio = ratio(res.Busy.DynamoMs, res.Idle.DynamoMs)
	res.OwnRatio = ratio(res.Busy.OwnMs, res.Idle.OwnMs)
	res.GoalMet = res.P99Ratio > 0 && res.P99Ratio <= lanesGoal && res.Busy.Errors == 0 && res.Idle.Errors == 0 &&
		res.Busy.Missing == 0 && res.Idle.Missing == 0
	progress("lanes: p99 idle %.1f ms, busy %.1f ms (%.2fx)", res.Idle.Latency.P99, res.Busy.Latency.P99, res.P99Ratio)
	return res, nil
}

// lanesWindow is one stretch of transactional sends.
type lanesWindow struct {
	lat            []time.Duration
	calls          []time.Duration
	errors         int
	missing        int
	firstErr       string
	seconds        float64
	cpu, engineCPU time.Duration
	maxInFlight    int
}

// lanesWindow sends at rate for d (open loop), waits for the sends, and checks each.
func (b *harness) lanesWindow(ctx context.Context, svc *service.Service, st *store.Store, timer *callTimer, seq *atomic.Int64, rate float64, d time.Duration) lanesWindow {
	timer.take()
	cpu0, eng0 := cpuNow(), procCPU(b.eng.pid)
	var (
		mu sync.Mutex
		w  lanesWindow
		wg sync.WaitGroup
	)
	var inFlight, maxInFlight atomic.Int64
	interval := time.Duration(float64(time.Second) / rate)
	t0 := time.Now()
	for n := 0; ctx.Err() == nil; n++ {
		at := t0.Add(time.Duration(n) * interval)
		if at.Sub(t0) >= d {
			break
		}
		time.Sleep(time.Until(at))
		i := seq.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("%s%04d", lanesMarker, i%1000)
			r := service.SendRequest{IdempotencyKey: lanesMarker + ulid.Make().String(), Recipients: []string{user},
				Priority: service.Transactional, Type: "comment", Category: "social", Title: "Grace Hopper replied to your comment",
				Body:  "Have you tried the compiler? It saves a great deal of work.",
				Actor: &inbox.Actor{ActorID: "grace", Name: "Grace Hopper"}}
			n := inFlight.Add(1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
			s0 := time.Now()
			sent, err := svc.Send(ctx, tenant, r)
			el := time.Since(s0)
			inFlight.Add(-1)
			missing := false
			if err == nil {
				if len(sent.Result.NotificationIDs) != 1 {
					err = fmt.Errorf("send wrote %d notifications", len(sent.Result.NotificationIDs))
				} else {
					ns, cerr := st.Notifications(untimed(ctx), inbox.Viewer{TenantID: tenant, UserID: user}, sent.Result.NotificationIDs)
					switch {
					case cerr != nil:
						err = cerr
					case ns[0] == nil:
						missing = true
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			w.lat = append(w.lat, el)
			if missing {
				w.missing++
			}
			if err != nil {
				w.errors++
				if w.firstErr == "" {
					w.firstErr = err.Error()
				}
			}
		}()
	}
	wg.Wait()
	w.seconds = time.Since(t0).Seconds()
	w.cpu, w.engineCPU = cpuNow()-cpu0, procCPU(b.eng.pid)-eng0
	w.calls = timer.take()
	w.maxInFlight = int(maxInFlight.Load())
	return w
}

// lanesPhaseOf merges windows into a phase's figures.
func lanesPhaseOf(ws ...lanesWindow) LanesPhase {
	var p LanesPhase
	var lat, calls []time.Duration
	var cpu, eng time.Duration
	for _, w := range ws {
		lat = append(lat, w.lat...)
		calls = append(calls, w.calls...)
		p.Errors += w.errors
		p.Missing += w.missing
		p.Seconds += w.seconds
		cpu += w.cpu
		eng += w.engineCPU
		p.MaxInFlight = max(p.MaxInFlight, w.maxInFlight)
		if p.FirstError == "" {
			p.FirstError = w.firstErr
		}
	}
	p.Sends = len(lat)
	p.Latency = summarize(lat)
	var sum time.Duration
	for _, d := range calls {
		sum += d
	}
	cl := summarize(calls)
	p.DynamoCallP50, p.DynamoCallP99 = cl.P50, cl.P99
	p.DynamoCalls = ratio(float64(len(calls)), float64(p.Sends))
	p.DynamoMs = ratio(ms(sum), float64(p.Sends))
	p.OwnMs = p.Latency.Mean - p.DynamoMs
	p.OwnCPU = ratio(cpu.Seconds(), p.Seconds)
	p.EngineCPU = ratio(eng.Seconds(), p.Seconds)
	return p
}

// Table renders scenario 14.
func (x *LanesResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 14. lanes: transactional send while a %d-member broadcast runs in the bulk lane vs idle\n\n", x.Members)
	fmt.Fprintf(&b, "Engine: %s. One send pipeline in this process as app builds it (service.Service with %d transactional and %d bulk workers; "+
		"service.Broadcasts writing its pages through the service's RunInLane; one sched.Scheduler running the broadcast's shards and the service's recovery tasks). "+
		"Transactional sends at %.0f/s (open loop): service.Send, one recipient, priority transactional, timed from the call to its return (the notification stored), "+
		"then checked once with Store.Notifications. Idle: before the broadcast and after it was cancelled (halves); busy: while the broadcast ran "+
		"(segment of %d members filled in %.1fs; it wrote %d recipients during the busy phase, %.0f/s, and was %s at its end, then cancelled).\n\n",
		x.Engine, x.TransactionalWorkers, x.BulkWorkers, x.Rate, x.Members, x.FillSeconds, x.BroadcastWritten, x.BroadcastPerSec, x.BroadcastStatus)
	fmt.Fprintln(&b, "| phase | sends (errors, not readable) | p50 ms | p90 ms | p99 ms | mean ms | DynamoDB calls/send | DynamoDB ms/send | DynamoDB call p50 / p99 ms | own ms/send | most sends in flight | engine CPU cores | this process CPU cores |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range []struct {
		name string
		p    LanesPhase
	}{{"idle", x.Idle}, {"busy (broadcast in the bulk lane)", x.Busy}} {
		p := r.p
		fmt.Fprintf(&b, "| %s | %d (%d, %d) | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f / %.1f | %.1f | %d | %.2f | %.2f |\n", r.name, p.Sends, p.Errors, p.Missing,
			p.Latency.P50, p.Latency.P90, p.Latency.P99, p.Latency.Mean, p.DynamoCalls, p.DynamoMs, p.DynamoCallP50, p.DynamoCallP99, p.OwnMs, p.MaxInFlight, p.EngineCPU, p.OwnCPU)
	}
	if len(x.IdleHalves) == 2 {
		fmt.Fprintf(&b, "\nIdle halves, before the broadcast / after it: p50 %.1f / %.1f ms, p99 %.1f / %.1f ms.\n",
			x.IdleHalves[0].P50, x.IdleHalves[1].P50, x.IdleHalves[0].P99, x.IdleHalves[1].P99)
	}
	fmt.Fprintf(&b, "\nRatio busy / idle: p99 **%.2f** (goal ≤ %.0f: %s), p50 %.2f; DynamoDB time per send %.2f, own time per send %.2f.",
		x.P99Ratio, x.GoalRatio, yes(x.GoalMet), x.P50Ratio, x.DynamoRatio, x.OwnRatio)
	if x.Idle.FirstError != "" || x.Busy.FirstError != "" {
		fmt.Fprintf(&b, " Errors: idle %q, busy %q.", x.Idle.FirstError, x.Busy.FirstError)
	}
	fmt.Fprintln(&b, " DynamoDB ms/send is the time of the sends' own DynamoDB calls at the client (SDK retries included); own ms/send is the mean latency less it: "+
		"the lanes' handoff (waiting for one of the transactional lane's workers once more sends than workers are in flight) and this process's work and waits for a core.")
	return b.String()
}
