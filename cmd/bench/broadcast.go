package main

// Scenario 13, broadcast: a broadcast to a segment against a raw TransactWriteItems loop
// writing the same items (issue 10's goal: broadcast recipients/s ≥ 0.8× raw, both on
// DynamoDB Local, side by side in one run), with the capacity units each recipient costs
// and what they mean for 1,000,000 recipients on DynamoDB itself, on paper.
//
// The broadcast side is the real pipeline: -broadcast-members members added to a segment
// through Store.UpdateSegment (1,000 a call), then service.Broadcasts.Start on a
// sched.Scheduler in this process (sched.New + Run, the gateway's defaults), its shard
// tasks paging the segment and writing each page through service.Writer; timed from just
// before Start to the broadcast's finishedAt (the store's clock, this process's).
//
// The raw side writes, for as many fresh users, exactly the transaction one recipient of
// the broadcast costs: the TransactWriteItems of one real service.Writer of the same
// notification to a probe user (recorded through ddbtrace: guard, notification, META,
// group, status summary and delivery record), with the user id, notification id and
// idempotency key replaced. It runs at the broadcast's most recipients in flight (segment
// shards × the store's 8 recipients at once per send) in two halves, before and after the
// broadcast, so that the table's growth and the engine's warm-up weigh on both sides.
//
// Every call of both sides asks for its consumed capacity (capacity.go).
//
// The setup (broadcastRig: store, scheduler, Broadcasts, the capacity meter; fillSegment;
// run) is apart from the measurement so that other scenarios (lane isolation) can run a
// broadcast as their background load.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// broadcastConfig holds the broadcast scenario's flags.
type broadcastConfig struct {
	members int
	timeout time.Duration
}

// storeSendConcurrency is the recipients at once of one send (service.Writer's default).
const storeSendConcurrency = service.DefaultWriteConcurrency

// DynamoDB's documented limits used on paper (see BroadcastOnPaper.Sources).
const (
	tableWRULimit     = 40000 // on-demand table default quota, write request units/s
	partitionWRULimit = 1000  // per partition, write units/s
	newTableWRU       = 4000  // a new on-demand table, write request units/s at once
	onPaperRecipients = 1000000
)

// BroadcastResult is scenario 13.
type BroadcastResult struct {
	Engine        string `json:"engine"`
	Members       int    `json:"segment_members"`
	SegmentShards int    `json:"segment_shards"`
	// Concurrency is the raw loop's concurrency: the broadcast's most recipients in flight.
	Concurrency  int      `json:"concurrency"`
	FillSeconds  float64  `json:"segment_fill_seconds"`
	FillCapacity Capacity `json:"segment_fill_capacity"`
	// Transaction describes one recipient's transaction (its actions' partitions).
	Transaction string           `json:"recipient_transaction"`
	Actions     int              `json:"recipient_transaction_actions"`
	Broadcast   BroadcastSide    `json:"broadcast"`
	Raw         BroadcastSide    `json:"raw"`
	Ratio       float64          `json:"recipients_per_sec_broadcast_over_raw"`
	GoalRatio   float64          `json:"goal_ratio"`
	GoalMet     bool             `json:"goal_met"`
	OnPaper     BroadcastOnPaper `json:"on_paper_1m_on_dynamodb"`
}

// BroadcastSide is one side of scenario 13.
type BroadcastSide struct {
	Name       string  `json:"name"`
	Recipients int     `json:"recipients_written"`
	Skipped    int     `json:"skipped,omitempty"`
	Failed     int     `json:"failed,omitempty"`
	Errors     int     `json:"errors,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	PerSec     float64 `json:"recipients_per_sec"`
	// Halves are the raw side's two runs (recipients/s), before and after the broadcast.
	Halves   []float64           `json:"halves_recipients_per_sec,omitempty"`
	Capacity Capacity            `json:"capacity"`
	WCU      float64             `json:"wcu_per_recipient"`
	RCU      float64             `json:"rcu_per_recipient"`
	ByCall   map[string]Capacity `json:"capacity_by_operation_and_partition_kinds"`
}

// BroadcastOnPaper is 1,000,000 recipients on DynamoDB from the measured units and
// DynamoDB's documented limits: a computation, not a measurement.
type BroadcastOnPaper struct {
	Recipients int `json:"recipients"`
	// WCU is what one recipient costs on DynamoDB: the broadcast side's measured units
	// with its recipient transaction counted by DynamoDB's documented rule (RecipientTxnWCUDoc)
	// instead of as DynamoDB Local counts it (RecipientTxnWCULocal, the raw side's).
	WCU                  float64 `json:"wcu_per_recipient"`
	MeasuredWCU          float64 `json:"measured_wcu_per_recipient_dynamodb_local"`
	RecipientTxnWCULocal float64 `json:"recipient_transaction_wcu_dynamodb_local"`
	RecipientTxnWCUDoc   float64 `json:"recipient_transaction_wcu_documented_rule"`
	TotalWCU             float64 `json:"total_wcu"`
	// Bounds on recipients/s, each from one limit.
	AtTableLimit float64 `json:"recipients_per_sec_at_table_limit"`
	// BroadcastPartitionWCU is the WCU per recipient spent on the broadcast's own
	// partition (head and shard items: every page's bookkeeping), all in one partition.
	BroadcastPartitionWCU float64 `json:"broadcast_partition_wcu_per_recipient"`
	AtBroadcastPartition  float64 `json:"recipients_per_sec_at_broadcast_partition_limit"`
	// GuardWCU is one recipient's guard Put (2 × its KB, transactional): a page's guards
	// share the page key's partition, and each shard writes one page at a time.
	GuardWCU          float64  `json:"guard_wcu_per_recipient"`
	AtGuardPartitions float64  `json:"recipients_per_sec_at_guard_partition_limit"`
	AtNewTable        float64  `json:"recipients_per_sec_new_on_demand_table"`
	Binding           string   `json:"binding_limit"`
	PerSec            float64  `json:"recipients_per_sec"`
	Seconds           float64  `json:"seconds"`
	NewTableSeconds   float64  `json:"seconds_on_a_new_table"`
	Sources           []string `json:"sources"`
	// ItemSizes are the recipient transaction's items' sizes in bytes.
	ItemSizes []int `json:"recipient_item_sizes_bytes"`
}

func (p BroadcastOnPaper) sizes() string {
	parts := make([]string, len(p.ItemSizes))
	for i, n := range p.ItemSizes {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

// broadcastRig is a broadcast pipeline in this process: a store on a metered client, a
// scheduler running it and Broadcasts registered with it.
type broadcastRig struct {
	db    *dynamodb.Client
	meter *capacityMeter
	st    *store.Store
	b     *service.Broadcasts
	s     *sched.Scheduler
	stop  func()
}

// broadcastRigOptions shape a rig: Lane runs the pages (nil: in the scheduler's
// goroutines); Send writes them (nil: the rig store's Send); clientOptions are more
// options of the rig's client; setup runs once the rig is built, before its scheduler
// starts (to register more task kinds).
type broadcastRigOptions struct {
	owner         string
	lane          service.LaneFunc
	send          service.BroadcastSendFunc
	clientOptions []func(*dynamodb.Options)
	setup         func(*broadcastRig)
}

// startBroadcastRig starts a rig and waits until its scheduler holds every shard.
func (b *harness) startBroadcastRig(ctx context.Context, o broadcastRigOptions) (*broadcastRig, error) {
	r := &broadcastRig{meter: &capacityMeter{}}
	r.db = dynamodb.New(b.eng.db.Options(), append([]func(*dynamodb.Options){r.meter.option()}, o.clientOptions...)...)
	r.st = store.New(r.db, b.c.table, store.WithLogger(b.log), store.WithSweepWorkers(0))
	r.s = sched.New(r.st, sched.Options{DB: r.db, Owner: o.owner, Logger: b.log})
	r.st.NotifyDue(r.s.Notify) // the shards' continuation tasks wake the scheduler, as in the gateway
	send := o.send
	if send == nil {
		send = service.Writer{Store: r.st}.Write
	}
	r.b = service.NewBroadcasts(service.BroadcastOptions{Store: r.st, Send: send, Lane: o.lane, Logger: b.log,
		Register: func(kind string, h func(context.Context, inbox.Task) error) { r.s.Register(kind, sched.HandlerFunc(h)) }})
	if o.setup != nil {
		o.setup(r)
	}
	stopSched := background(ctx, r.s.Run, r.s.Release)
	r.stop = func() {
		_ = stopSched()
		r.st.Close()
	}
	if err := r.waitHeld(ctx); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// waitHeld waits until the rig's scheduler holds every shard: at its start, and again
// after a load that kept the engine so busy that lease renewals timed out (the raw
// loop's), so that a broadcast starts on a whole scheduler.
func (r *broadcastRig) waitHeld(ctx context.Context) error {
	return waitHeld(ctx, time.Minute, "the broadcast's scheduler", store.DefaultSchedShards, func() int { return len(r.s.Held()) })
}

// fillSegmentTimed fills segment seg with n users named prefix-N through st and returns
// how long it took (the scenario's label names it in the progress lines).
func fillSegmentTimed(ctx context.Context, st *store.Store, label, seg, prefix string, n int) (float64, error) {
	progress("%s: adding %d members to segment %s", label, n, seg)
	t0 := time.Now()
	if err := fillSegment(ctx, st, seg, segmentMembers(prefix, n)); err != nil {
		return 0, fmt.Errorf("fill segment: %w", err)
	}
	secs := time.Since(t0).Seconds()
	progress("%s: segment filled in %.1fs", label, secs)
	return secs, nil
}

// busyBroadcast is what a broadcast wrote during a busy phase, and its status after it.
type busyBroadcast struct {
	written int
	perSec  float64
	status  string
}

// running says whether the broadcast was still running (or queued) after the phase.
func (bb busyBroadcast) running() bool {
	return bb.status == inbox.BroadcastRunning || bb.status == inbox.BroadcastQueued
}

// idleBusyIdle runs phase for half (idle), then for busy while a broadcast runs in the
// bulk lane (start starts it and returns its id; the busy phase begins once it wrote its
// first recipients, within firstPages), cancels it if it is still running, waits until it
// writes no more, and runs phase for half again (idle). label names the scenario in the
// progress lines.
func idleBusyIdle[W any](ctx context.Context, label string, half, busy, firstPages time.Duration, phase func(time.Duration) W,
	start func() (string, error), get func(id string) (inbox.Broadcast, error), cancel func(id string) error) (idle1, busyW, idle2 W, bb busyBroadcast, err error) {
	progress("%s: idle, first half (%s)", label, half)
	idle1 = phase(half)
	id, err := start()
	if err != nil {
		return idle1, busyW, idle2, bb, fmt.Errorf("start the broadcast: %w", err)
	}
	progress("%s: broadcast %s started; waiting for its first pages", label, id)
	read := func() (inbox.Broadcast, error) { return get(id) }
	bc, err := broadcastStarted(ctx, firstPages, id, read)
	if err != nil {
		return idle1, busyW, idle2, bb, err
	}
	w0 := bc.Written
	progress("%s: busy (%s, the broadcast running in the bulk lane)", label, busy)
	tb := time.Now()
	busyW = phase(busy)
	if bc, err = read(); err != nil {
		return idle1, busyW, idle2, bb, err
	}
	bb = busyBroadcast{written: bc.Written - w0, status: bc.Status}
	bb.perSec = ratio(float64(bb.written), time.Since(tb).Seconds())
	progress("%s: the broadcast wrote %d during busy (%.0f/s), %s; cancelling it", label, bb.written, bb.perSec, bc.Status)
	if bb.running() {
		if err := cancel(id); err != nil {
			return idle1, busyW, idle2, bb, fmt.Errorf("cancel the broadcast: %w", err)
		}
	}
	if err := broadcastSettled(ctx, read); err != nil {
		return idle1, busyW, idle2, bb, err
	}
	progress("%s: idle, second half (%s)", label, half)
	idle2 = phase(half)
	return idle1, busyW, idle2, bb, nil
}

// broadcastStarted waits (at most limit) until broadcast id has written its first
// recipients, and returns it then; get reads it.
func broadcastStarted(ctx context.Context, limit time.Duration, id string, get func() (inbox.Broadcast, error)) (inbox.Broadcast, error) {
	var bc inbox.Broadcast
	err := waitUntil(ctx, limit, "broadcast "+id+" writes", func() (bool, string, error) {
		var err error
		bc, err = get()
		return bc.Written > 0, string(bc.Status), err
	})
	return bc, err
}

// broadcastSettled waits until broadcast id (cancelled, or done) writes nothing more for
// 5s: its pages already in the bulk lane (up to one a shard) still run, a page of 100
// taking about a second a worker.
func broadcastSettled(ctx context.Context, get func() (inbox.Broadcast, error)) error {
	_, err := untilQuiet(ctx, 5*time.Second, 0, "the broadcast", func() (int, error) {
		bc, err := get()
		return bc.Written, err
	})
	return err
}

// fillSegment adds users to segment seg through Store.UpdateSegment, MaxSegmentChange a
// call, 4 calls at once (each writes its shards 8 at a time).
func fillSegment(ctx context.Context, st *store.Store, seg string, users []string) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)-1) * inbox.MaxSegmentChange
				if i >= len(users) || ctx.Err() != nil {
					return
				}
				if _, err := st.UpdateSegment(ctx, tenant, seg, users[i:min(len(users), i+inbox.MaxSegmentChange)], nil); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// run starts spec and waits (polling its head) until it ends or timeout passes; it
// returns the broadcast as it ended and the time from just before Start to its
// finishedAt.
func (r *broadcastRig) run(ctx context.Context, spec service.BroadcastSpec, timeout time.Duration) (inbox.Broadcast, time.Duration, error) {
	if err := r.waitHeld(ctx); err != nil {
		return inbox.Broadcast{}, 0, err
	}
	t0 := time.Now()
	id, err := r.b.Start(ctx, tenant, spec)
	if err != nil {
		return inbox.Broadcast{}, 0, err
	}
	deadline := t0.Add(timeout)
	lastReport := t0
	for {
		bc, err := r.b.Get(ctx, tenant, id)
		if err != nil {
			return bc, 0, err
		}
		switch bc.Status {
		case inbox.BroadcastDone, inbox.BroadcastFailed, inbox.BroadcastCancelled:
			return bc, bc.FinishedAt.Sub(t0), nil
		}
		if time.Now().After(deadline) {
			return bc, time.Since(t0), fmt.Errorf("broadcast %s: %s after %s (%d of %d written)", id, bc.Status, timeout, bc.Written, bc.Recipients)
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			progress("broadcast: %d of %d written (%.0f/s)", bc.Written, bc.Recipients, float64(bc.Written)/time.Since(t0).Seconds())
		}
		select {
		case <-ctx.Done():
			return bc, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// broadcastSend is the scenario's notification: a followers broadcast of a new post.
func broadcastSend() inbox.SendInput {
	return inbox.SendInput{Type: "post", Category: "social", Title: "Ada Lovelace published a new post",
		Body:   "Notes on the Analytical Engine: what it can and cannot do, with a worked example of Bernoulli numbers.",
		Actor:  &inbox.Actor{ActorID: "ada", Name: "Ada Lovelace", URL: "https://example.com/ada"},
		Target: &inbox.Target{TargetID: "post-1843", Kind: "post", Title: "Notes on the Analytical Engine", URL: "https://example.com/p/1843"}}
}

func (b *harness) broadcastScenario(ctx context.Context) (*BroadcastResult, error) {
	n := b.c.broadcast.members
	if n < 1 {
		return nil, fmt.Errorf("-broadcast-members must be positive")
	}
	rig, err := b.startBroadcastRig(ctx, broadcastRigOptions{owner: "bench-broadcast"})
	if err != nil {
		return nil, err
	}
	defer rig.stop()
	shards := rig.st.SegmentShards()
	res := &BroadcastResult{Engine: b.eng.name, Members: n, SegmentShards: shards, Concurrency: shards * storeSendConcurrency, GoalRatio: 0.8}

	// The segment (of shards shards).
	seg := "followers:ada"
	rig.meter.take()
	if res.FillSeconds, err = fillSegmentTimed(ctx, rig.st, "broadcast", seg, "bm", n); err != nil {
		return nil, err
	}
	res.FillCapacity, _ = rig.meter.take()

	// One recipient's transaction, recorded from a real send of the same notification.
	tpl, err := b.recordRecipientTxn(ctx, broadcastSend())
	if err != nil {
		return nil, fmt.Errorf("record a recipient's transaction: %w", err)
	}
	res.Actions, res.Transaction = len(tpl.in.TransactItems), tpl.describe()

	// Raw, first half.
	// The raw loop's client has a meter of its own: the rig's also counts its idle
	// scheduler's polls and lease renewals.
	rawMeter := &capacityMeter{}
	raw := &rawBroadcast{db: dynamodb.New(b.eng.db.Options(), rawMeter.option()), tpl: tpl, conc: res.Concurrency}
	half := n / 2
	progress("broadcast: raw TransactWriteItems loop, %d recipients at concurrency %d (first half)", half, res.Concurrency)
	s1 := raw.write(ctx, 0, half)
	rawCap1, rawBy1 := rawMeter.take()

	// The broadcast.
	rig.meter.take()
	progress("broadcast: broadcasting to %d members", n)
	spec := service.BroadcastSpec{IdempotencyKey: "bench-broadcast-" + ulid.Make().String(), Segment: seg, Send: broadcastSend()}
	bc, el, err := rig.run(ctx, spec, b.c.broadcast.timeout)
	bcap, bby := rig.meter.take()
	bs := BroadcastSide{Name: "broadcast (service.Broadcasts on sched.Scheduler, pages through service.Writer)", Recipients: bc.Written,
		Skipped: bc.Skipped, Failed: bc.Failed, Seconds: el.Seconds(), PerSec: ratio(float64(bc.Written), el.Seconds()),
		Capacity: bcap, ByCall: bby}
	if err != nil {
		bs.Errors, bs.FirstError = 1, err.Error()
	}
	bs.WCU, bs.RCU = ratio(bcap.WCU, float64(bc.Written)), ratio(bcap.RCU, float64(bc.Written))
	res.Broadcast = bs
	progress("broadcast: %d written in %.1fs (%.0f/s), %.2f WCU and %.2f RCU per recipient", bc.Written, el.Seconds(), bs.PerSec, bs.WCU, bs.RCU)

	// Raw, second half.
	progress("broadcast: raw TransactWriteItems loop, %d recipients (second half)", n-half)
	s2 := raw.write(ctx, half, n)
	rawCap2, rawBy2 := rawMeter.take()
	rs := BroadcastSide{Name: "raw TransactWriteItems loop (one recipient's transaction of the broadcast, fresh users)",
		Recipients: s1.written + s2.written, Errors: s1.errors + s2.errors, Seconds: (s1.el + s2.el).Seconds(),
		Halves:   []float64{ratio(float64(s1.written), s1.el.Seconds()), ratio(float64(s2.written), s2.el.Seconds())},
		Capacity: Capacity{WCU: rawCap1.WCU + rawCap2.WCU, RCU: rawCap1.RCU + rawCap2.RCU, Calls: rawCap1.Calls + rawCap2.Calls},
		ByCall:   rawBy1}
	for k, v := range rawBy2 {
		c := rs.ByCall[k]
		rs.ByCall[k] = Capacity{WCU: c.WCU + v.WCU, RCU: c.RCU + v.RCU, Calls: c.Calls + v.Calls}
	}
	rs.FirstError = s1.firstErr
	if rs.FirstError == "" {
		rs.FirstError = s2.firstErr
	}
	rs.PerSec = ratio(float64(rs.Recipients), rs.Seconds)
	rs.WCU, rs.RCU = ratio(rs.Capacity.WCU, float64(rs.Recipients)), ratio(rs.Capacity.RCU, float64(rs.Recipients))
	res.Raw = rs
	res.Ratio = ratio(bs.PerSec, rs.PerSec)
	res.GoalMet = bs.Errors == 0 && bc.Written == n && res.Ratio >= res.GoalRatio
	res.OnPaper = onPaper(bs, rs, tpl, shards)
	progress("broadcast: raw %.0f/s (halves %.0f, %.0f); ratio %.2f", rs.PerSec, rs.Halves[0], rs.Halves[1], res.Ratio)
	return res, nil
}

// onPaper computes 1,000,000 recipients on DynamoDB from the broadcast side's measured
// units (see BroadcastOnPaper).
func onPaper(bs, rs BroadcastSide, tpl *recipientTxn, shards int) BroadcastOnPaper {
	w := bs.WCU - rs.WCU + tpl.docWCU
	p := BroadcastOnPaper{Recipients: onPaperRecipients, WCU: w, MeasuredWCU: bs.WCU, RecipientTxnWCULocal: rs.WCU,
		RecipientTxnWCUDoc: tpl.docWCU, TotalWCU: w * onPaperRecipients, GuardWCU: tpl.guardWCU(), ItemSizes: tpl.sizes,
		Sources: []string{
			"https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html (on-demand: 40,000 write request units per table by default)",
			"https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html and https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb (a partition serves up to 1,000 write units/s; a new on-demand table up to 4,000 write request units/s at once, then double its previous peak within 30 minutes)",
			"https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html (a transactional write costs two write units per KB of each item)",
		}}
	var bcast float64
	for k, c := range bs.ByCall {
		if strings.HasSuffix(k, " BCAST") {
			bcast += c.WCU
		}
	}
	p.BroadcastPartitionWCU = ratio(bcast, float64(bs.Recipients))
	p.AtTableLimit = ratio(tableWRULimit, p.WCU)
	p.AtBroadcastPartition = ratio(partitionWRULimit, p.BroadcastPartitionWCU)
	p.AtGuardPartitions = ratio(float64(shards)*partitionWRULimit, p.GuardWCU)
	p.AtNewTable = ratio(newTableWRU, p.WCU)
	p.Binding, p.PerSec = "table (40,000 WRU/s)", p.AtTableLimit
	if p.AtBroadcastPartition > 0 && p.AtBroadcastPartition < p.PerSec {
		p.Binding, p.PerSec = "the broadcast's partition (1,000 WCU/s)", p.AtBroadcastPartition
	}
	if p.AtGuardPartitions > 0 && p.AtGuardPartitions < p.PerSec {
		p.Binding, p.PerSec = fmt.Sprintf("the pages' guard partitions (%d shards × 1,000 WCU/s)", shards), p.AtGuardPartitions
	}
	p.Seconds = ratio(onPaperRecipients, p.PerSec)
	p.NewTableSeconds = ratio(onPaperRecipients, min(p.PerSec, p.AtNewTable))
	return p
}

// recipientTxn is one recipient's send transaction as service.Writer wrote it for a probe
// user, to be written again for other users (instance).
type recipientTxn struct {
	in            *dynamodb.TransactWriteItemsInput
	user, id, key string
	// docWCU is the transaction's write units by DynamoDB's documented rule, from the
	// sizes of its items as stored after the probe: 2 per KB (rounded up) of each item,
	// plus 1 per KB of each item in GSI1 (projection ALL; an index write is a standard
	// write). DynamoDB Local charges a transaction less (it rounds the transaction's
	// total size, not each item's).
	docWCU float64
	sizes  []int // the items' sizes in bytes, in the transaction's order
	// indexes are how many global secondary indexes each item is in (GSI1: it has
	// gsi1pk; GSI2: it has type and id), in the transaction's order.
	indexes []int
}

// recordRecipientTxn sends in to one probe user through a store whose client keeps its
// requests, and returns the recipient's TransactWriteItems.
func (b *harness) recordRecipientTxn(ctx context.Context, in inbox.SendInput) (*recipientTxn, error) {
	// Same lengths as the broadcast's member ids and page keys: the items' sizes match.
	return b.recordRecipientTxnFor(ctx, in, "bp-0000000", rawPageKey(0, 0))
}

// recordRecipientTxnFor is recordRecipientTxn with probe user user and idempotency key
// key (each used once per table).
func (b *harness) recordRecipientTxnFor(ctx context.Context, in inbox.SendInput, user, key string) (*recipientTxn, error) {
	rec := &ddbtrace.Recorder{}
	rec.KeepInputs()
	db := dynamodb.New(b.eng.db.Options(), rec.Option())
	st := store.New(db, b.c.table, store.WithLogger(b.log), store.WithSweepWorkers(0))
	defer st.Close()
	t := &recipientTxn{user: user, key: key}
	in.IdempotencyKey, in.Recipients = t.key, []string{t.user}
	res, err := service.Writer{Store: st}.Send(ctx, tenant, in)
	if err != nil {
		return nil, err
	}
	if len(res.NotificationIDs) != 1 {
		return nil, fmt.Errorf("the probe send wrote %d notifications", len(res.NotificationIDs))
	}
	t.id = res.NotificationIDs[0]
	for _, r := range rec.Requests() {
		if x, ok := r.Input.(*dynamodb.TransactWriteItemsInput); ok {
			if t.in != nil {
				return nil, errors.New("the probe send made more than one TransactWriteItems")
			}
			t.in = x
		}
	}
	if t.in == nil {
		return nil, errors.New("the probe send made no TransactWriteItems")
	}
	for _, a := range t.in.TransactItems {
		var key map[string]types.AttributeValue
		switch {
		case a.Put != nil:
			key = map[string]types.AttributeValue{"pk": a.Put.Item["pk"], "sk": a.Put.Item["sk"]}
		case a.Update != nil:
			key = a.Update.Key
		case a.Delete != nil:
			key = a.Delete.Key
		case a.ConditionCheck != nil:
			key = a.ConditionCheck.Key
		}
		out, err := b.eng.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &b.c.table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		size := itemSize(out.Item)
		t.sizes = append(t.sizes, size)
		kb := float64((size + 1023) / 1024)
		t.docWCU += 2 * kb
		if _, ok := out.Item["gsi1pk"]; ok {
			t.docWCU += kb
		}
		t.indexes = append(t.indexes, gsiCount(out.Item))
	}
	return t, nil
}

// rawPageKey is an idempotency key shaped as the broadcast's page keys ("bc" + 32 hex
// digits + ":{shard}:{page}").
func rawPageKey(worker, page int) string {
	return fmt.Sprintf("rw%032d:%02d:%d", 0, worker, page)
}

// describe lists the transaction's actions: operation and partition kind each.
func (t *recipientTxn) describe() string {
	var parts []string
	for _, a := range t.in.TransactItems {
		var op string
		var key map[string]types.AttributeValue
		switch {
		case a.Put != nil:
			op, key = "Put", a.Put.Item
		case a.Update != nil:
			op, key = "Update", a.Update.Key
		case a.Delete != nil:
			op, key = "Delete", a.Delete.Key
		case a.ConditionCheck != nil:
			op, key = "ConditionCheck", a.ConditionCheck.Key
		}
		pk, _ := key["pk"].(*types.AttributeValueMemberS)
		sk, _ := key["sk"].(*types.AttributeValueMemberS)
		if pk != nil && sk != nil {
			s := sk.Value
			if i := strings.IndexByte(s, '#'); i >= 0 {
				s = s[:i+1] + "…"
			}
			op += " " + partitionKind(pk.Value) + "/" + s
		}
		parts = append(parts, op)
	}
	return strings.Join(parts, ", ")
}

// guardWCU is the write units of the recipient's guard Put in a transaction: 2 per KB
// of its size (attribute names and values; numbers counted as their digits).
func (t *recipientTxn) guardWCU() float64 {
	for _, a := range t.in.TransactItems {
		if a.Put == nil {
			continue
		}
		if pk, ok := a.Put.Item["pk"].(*types.AttributeValueMemberS); ok && partitionKind(pk.Value) == "IDEM" {
			return 2 * float64((itemSize(a.Put.Item)+1023)/1024)
		}
	}
	return 0
}

// itemSize approximates an item's size as DynamoDB counts it: its attribute names and
// values.
func itemSize(item map[string]types.AttributeValue) int {
	size := 0
	for k, v := range item {
		size += len(k) + avSize(v)
	}
	return size
}

// avSize approximates an attribute value's stored size in bytes.
func avSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return len(x.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += len(k) + avSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += avSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range x.Value {
			n += len(e)
		}
		return n
	}
	return 1
}

// instance is the transaction for user with notification id and idempotency key: every
// string of the recorded one (keys, values, names, expressions) with the probe's user,
// id and key replaced.
func (t *recipientTxn) instance(user, id, key string) *dynamodb.TransactWriteItemsInput {
	r := strings.NewReplacer(t.user, user, t.id, id, t.key, key)
	out := &dynamodb.TransactWriteItemsInput{TransactItems: make([]types.TransactWriteItem, len(t.in.TransactItems))}
	for i, a := range t.in.TransactItems {
		var c types.TransactWriteItem
		switch {
		case a.Put != nil:
			p := *a.Put
			p.Item, p.ExpressionAttributeNames, p.ExpressionAttributeValues = replaceAVs(r, p.Item), replaceNames(r, p.ExpressionAttributeNames), replaceAVs(r, p.ExpressionAttributeValues)
			p.ConditionExpression = replaceStr(r, p.ConditionExpression)
			c.Put = &p
		case a.Update != nil:
			u := *a.Update
			u.Key, u.ExpressionAttributeNames, u.ExpressionAttributeValues = replaceAVs(r, u.Key), replaceNames(r, u.ExpressionAttributeNames), replaceAVs(r, u.ExpressionAttributeValues)
			u.UpdateExpression, u.ConditionExpression = replaceStr(r, u.UpdateExpression), replaceStr(r, u.ConditionExpression)
			c.Update = &u
		case a.Delete != nil:
			d := *a.Delete
			d.Key, d.ExpressionAttributeNames, d.ExpressionAttributeValues = replaceAVs(r, d.Key), replaceNames(r, d.ExpressionAttributeNames), replaceAVs(r, d.ExpressionAttributeValues)
			d.ConditionExpression = replaceStr(r, d.ConditionExpression)
			c.Delete = &d
		case a.ConditionCheck != nil:
			k := *a.ConditionCheck
			k.Key, k.ExpressionAttributeNames, k.ExpressionAttributeValues = replaceAVs(r, k.Key), replaceNames(r, k.ExpressionAttributeNames), replaceAVs(r, k.ExpressionAttributeValues)
			k.ConditionExpression = replaceStr(r, k.ConditionExpression)
			c.ConditionCheck = &k
		}
		out.TransactItems[i] = c
	}
	return out
}

func replaceStr(r *strings.Replacer, s *string) *string {
	if s == nil {
		return nil
	}
	v := r.Replace(*s)
	return &v
}

func replaceNames(r *strings.Replacer, m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[r.Replace(k)] = r.Replace(v)
	}
	return out
}

func replaceAVs(r *strings.Replacer, m map[string]types.AttributeValue) map[string]types.AttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[r.Replace(k)] = replaceAV(r, v)
	}
	return out
}

func replaceAV(r *strings.Replacer, v types.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: r.Replace(x.Value)}
	case *types.AttributeValueMemberSS:
		out := make([]string, len(x.Value))
		for i, s := range x.Value {
			out[i] = r.Replace(s)
		}
		return &types.AttributeValueMemberSS{Value: out}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: replaceAVs(r, x.Value)}
	case *types.AttributeValueMemberL:
		out := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			out[i] = replaceAV(r, e)
		}
		return &types.AttributeValueMemberL{Value: out}
	}
	return v
}

// rawBroadcast writes recipients' transactions straight into the table.
type rawBroadcast struct {
	db   *dynamodb.Client
	tpl  *recipientTxn
	conc int
}

// rawRun is one run of the raw loop.
type rawRun struct {
	written, errors int
	firstErr        string
	el              time.Duration
}

// write writes the transactions of users br-{from}..br-{to-1}, conc at once; users
// are grouped 100 to an idempotency key (a page's), as the broadcast's pages are.
func (w *rawBroadcast) write(ctx context.Context, from, to int) rawRun {
	var next atomic.Int64
	next.Store(int64(from))
	var written, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	for range w.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				user := fmt.Sprintf("br-%07d", i)
				key := rawPageKey(i/store.BroadcastPageSize%100, i/store.BroadcastPageSize/100)
				if err := w.one(ctx, user, key); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				written.Add(1)
			}
		}()
	}
	wg.Wait()
	r := rawRun{written: int(written.Load()), errors: int(errs.Load()), el: time.Since(t0)}
	if v, ok := firstErr.Load().(string); ok {
		r.firstErr = v
	}
	return r
}

// one writes user's transaction, again with a fresh id after a cancellation (as the
// store does after a conflict), at most 10 times.
func (w *rawBroadcast) one(ctx context.Context, user, key string) error {
	for attempt := 0; ; attempt++ {
		_, err := w.db.TransactWriteItems(ctx, w.tpl.instance(user, ulid.Make().String(), key))
		var tce *types.TransactionCanceledException
		if err != nil && errors.As(err, &tce) && attempt < 10 {
			time.Sleep(time.Duration(5<<attempt) * time.Millisecond / 2)
			continue
		}
		return err
	}
}

// Table renders scenario 13.
func (x *BroadcastResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 13. broadcast: %d-member segment, broadcast vs raw TransactWriteItems loop\n\n", x.Members)
	fmt.Fprintf(&b, "Engine: %s. Segment of %d members over %d shards, added through Store.UpdateSegment in %.1fs (%.0f members/s; %.2f WCU a member). "+
		"The broadcast runs on one sched.Scheduler in this process (defaults: woken by the tasks it writes, 8 tasks at once per shard), one task per segment shard, "+
		"pages of %d through service.Writer (8 recipients at once); timed from just before Start to its finishedAt. "+
		"The raw loop writes, for as many fresh users, the transaction one recipient of the broadcast costs, recorded from a real service.Writer of the same notification "+
		"(%d actions: %s), at concurrency %d (segment shards × 8, the broadcast's most recipients in flight), half before the broadcast and half after.\n\n",
		x.Engine, x.Members, x.SegmentShards, x.FillSeconds, ratio(float64(x.Members), x.FillSeconds), ratio(x.FillCapacity.WCU, float64(x.Members)),
		store.BroadcastPageSize, x.Actions, x.Transaction, x.Concurrency)
	fmt.Fprintln(&b, "| side | recipients written (errors) | seconds | recipients/s | WCU/recipient | RCU/recipient | calls/recipient |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range []BroadcastSide{x.Broadcast, x.Raw} {
		rate := f1(s.PerSec)
		if len(s.Halves) == 2 {
			rate += fmt.Sprintf(" (halves %.1f, %.1f)", s.Halves[0], s.Halves[1])
		}
		fmt.Fprintf(&b, "| %s | %d (%d) | %.1f | %s | %.2f | %.2f | %.3f |\n", s.Name, s.Recipients, s.Errors, s.Seconds, rate, s.WCU, s.RCU,
			ratio(float64(s.Capacity.Calls), float64(s.Recipients)))
	}
	fmt.Fprintf(&b, "\nRatio broadcast / raw: **%.2f** (goal ≥ %.1f: %s).", x.Ratio, x.GoalRatio, yes(x.GoalMet))
	if x.Broadcast.FirstError != "" || x.Raw.FirstError != "" {
		fmt.Fprintf(&b, " Errors: broadcast %q, raw %q.", x.Broadcast.FirstError, x.Raw.FirstError)
	}
	if x.Broadcast.Skipped+x.Broadcast.Failed > 0 {
		fmt.Fprintf(&b, " Broadcast skipped %d, failed %d.", x.Broadcast.Skipped, x.Broadcast.Failed)
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "\nCapacity of the broadcast side by operation and the partition kinds it touched (per recipient; ReturnConsumedCapacity INDEXES as DynamoDB Local computes it, GSI writes included):")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| operation partitions | calls/recipient | WCU/recipient | RCU/recipient |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: |")
	keys := make([]string, 0, len(x.Broadcast.ByCall))
	for k := range x.Broadcast.ByCall {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, c := x.Broadcast.ByCall[keys[i]], x.Broadcast.ByCall[keys[j]]
		if a.WCU+a.RCU != c.WCU+c.RCU {
			return a.WCU+a.RCU > c.WCU+c.RCU
		}
		return keys[i] < keys[j]
	})
	rn := float64(x.Broadcast.Recipients)
	for _, k := range keys {
		c := x.Broadcast.ByCall[k]
		fmt.Fprintf(&b, "| %s | %.4f | %.4f | %.4f |\n", k, ratio(float64(c.Calls), rn), ratio(c.WCU, rn), ratio(c.RCU, rn))
	}
	p := x.OnPaper
	fmt.Fprintf(&b, "\n**On paper** (computed, not measured): one recipient's transaction writes items of %v bytes; by DynamoDB's documented rule (2 WCU per KB of each item in a transaction, "+
		"plus 1 per KB of each item written to GSI1) it costs %.0f WCU, where DynamoDB Local reported %.2f. So a recipient costs %.2f WCU on DynamoDB (the broadcast side's measured %.2f with that difference). ",
		p.sizes(), p.RecipientTxnWCUDoc, p.RecipientTxnWCULocal, p.WCU, p.MeasuredWCU)
	fmt.Fprintf(&b, "%d recipients at %.2f WCU = %.0f WCU. Bounds on recipients/s: "+
		"the on-demand table's default quota of %d write request units/s gives %.0f/s; the broadcast's own partition (head and shard items, %.4f WCU a recipient as DynamoDB Local counts them) at %d WCU/s per partition gives %.0f/s; "+
		"the pages' guard partitions (%.0f WCU a guard, one page at a time per shard, %d shards) give %.0f/s. Binding: %s, so about **%.0f recipients/s, %.0f s (%.1f min)** for a million, "+
		"once the table has scaled to its quota; a new on-demand table serves %d write request units/s at once (%.0f recipients/s: %.0f s, %.1f min) and doubles its previous peak within 30 minutes. "+
		"The recipients' own items (their inbox partition, their notification's status partition) are written once each and spread over a million partitions: none is hot. "+
		"Sources: %s.\n",
		p.Recipients, p.WCU, p.TotalWCU, tableWRULimit, p.AtTableLimit, p.BroadcastPartitionWCU, partitionWRULimit, p.AtBroadcastPartition,
		p.GuardWCU, x.SegmentShards, p.AtGuardPartitions, p.Binding, p.PerSec, p.Seconds, p.Seconds/60,
		newTableWRU, p.AtNewTable, p.NewTableSeconds, p.NewTableSeconds/60, strings.Join(slices.Clone(p.Sources), "; "))
	return b.String()
}
