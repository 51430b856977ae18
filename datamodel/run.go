package datamodel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/tmpl"
)

func strAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// clock is the model's time: a fake clock at start, moved only by the patterns.
type clock struct{ fake *clockwork.FakeClock }

func (c *clock) now() time.Time { return c.fake.Now().UTC() }

// Result is what a run measured: every call of every pattern.
type Result struct {
	// Table is the table as created.
	Table TableInfo
	Calls []Call
}

// Run creates table through the store's own CreateTable on the engine at endpoint (a
// DynamoDB Local; the table must not exist), seeds the model's data set, runs every
// pattern of Patterns through the gateway's code and returns the calls each made. log
// receives the components' warnings (nil: none).
func Run(ctx context.Context, newClient func(optFns ...func(*dynamodb.Options)) *dynamodb.Client, table string, log *slog.Logger) (Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rec := &Recorder{}
	db := newClient(rec.Option())
	_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	switch {
	case err == nil:
		return Result{}, fmt.Errorf("model: table %s exists; the model needs a new, empty table", table)
	case !errors.As(err, &nf):
		return Result{}, fmt.Errorf("model: describe %s: %w", table, err)
	}
	c := &clock{fake: clockwork.NewFakeClockAt(start)}
	// Seeded ids: the same ULIDs on every run (their length is fixed either way).
	entropy := rand.New(rand.NewPCG(1, 2))
	st := store.New(db, table, store.WithClock(c.now), store.WithEntropy(readerOf(entropy)),
		store.WithSweepWorkers(0), store.WithLogger(log))
	defer st.Close()
	if err := st.CreateTable(ctx); err != nil {
		return Result{}, err
	}
	info, err := describeTable(ctx, db, table)
	if err != nil {
		return Result{}, err
	}
	e := &env{db: db, table: table, st: st, clock: c, rec: rec, log: log}
	// Composed as package app's Build composes them.
	e.tpl = tmpl.New(st)
	writer := service.Writer{Store: st}
	e.bc = service.NewBroadcasts(service.BroadcastOptions{Store: st, Send: writer.Write, Templates: e.tpl,
		Lane: func(ctx context.Context, lane string, work func(context.Context) error) error {
			return e.svc.RunInLane(ctx, lane, work)
		}, Logger: log, Now: c.now})
	e.svc = service.New(st, service.Options{Templates: e.tpl, Broadcaster: e.bc, Logger: log, Now: c.now})
	defer e.svc.Close()
	// A warm instance's announcement cache (MaxAge past the model's run: no pattern but
	// 29's pays for a read of the set; pattern 29 invalidates it as every instance does).
	e.ann = service.NewAnnouncements(st, service.AnnouncementOptions{Templates: e.tpl, Hash: store.AnnouncementHash,
		Now: c.now, MaxAge: 24 * time.Hour})
	st.UseAnnouncements(e.ann)
	if _, err := e.ann.Announcements(ctx, tenant, false); err != nil {
		return Result{}, err
	}

	if err := seed(ctx, e); err != nil {
		return Result{}, err
	}
	for _, p := range Patterns {
		rec.Begin(p.N)
		err := p.run(ctx, e)
		rec.Begin(0)
		if err != nil {
			return Result{}, fmt.Errorf("model: pattern %d (%s): %w", p.N, p.Name, err)
		}
	}
	return Result{Table: info, Calls: rec.Calls()}, nil
}

// readerOf is r as an io.Reader of its bytes.
func readerOf(r *rand.Rand) io.Reader { return randReader{r} }

type randReader struct{ r *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

// modelTask is the kind of the tasks pattern 11 runs (no handler: the scheduler's store
// calls are what is measured).
const modelTask = "model.task"

// dueTasks is pattern 11: a shard's due tasks read, one completed, one retried.
func (e *env) dueTasks(ctx context.Context) error {
	e.rec.Begin(0)
	a := inbox.Task{ID: "task-0011-a", Kind: modelTask, Due: start, Viewer: viewer(reader)}
	shard := store.SchedShard(a.ID, e.st.SchedShards())
	// b in the same shard as a.
	var b inbox.Task
	for i := 0; ; i++ {
		id := fmt.Sprintf("task-0011-%c", 'b'+i)
		if store.SchedShard(id, e.st.SchedShards()) == shard {
			b = inbox.Task{ID: id, Kind: modelTask, Due: start, Viewer: viewer(reader)}
			break
		}
	}
	for _, t := range []inbox.Task{a, b} {
		if err := e.st.Schedule(ctx, t); err != nil {
			return err
		}
	}
	e.rec.Begin(11)
	bucket := store.SchedBucket(start)
	page, err := e.st.DueTasks(ctx, shard, bucket, start, nil, 100)
	if err != nil {
		return err
	}
	for _, t := range page.Tasks {
		switch t.ID {
		case a.ID:
			if _, err := e.st.CompleteTask(ctx, shard, bucket, t); err != nil {
				return err
			}
		case b.ID:
			if _, _, err := e.st.RescheduleTask(ctx, shard, bucket, t, start.Add(time.Minute)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rosterOwner is pattern 12's instance: named as the scheduler names one by default (host
// name, pid, random suffix), a host name with dots, so the roster's map keys are as long
// as a deployment's.
const rosterOwner = "ip-10-0-0-12.ec2.internal-4242-0a1b2c3d"

// roster is pattern 12: the scheduler's roster calls over an instance's life, through the
// scheduler's own code (sched.Scheduler.RosterCycle): it takes every shard, as one
// instance alone holds them, so the heartbeat that saves their checkpoints writes a
// roster as large as a deployment's; then it gives shard 0 back and leaves.
func (e *env) roster(ctx context.Context) error {
	s := sched.New(e.st, sched.Options{DB: e.db, Owner: rosterOwner, Clock: e.clock.fake, Logger: e.log})
	shards := make([]int, e.st.SchedShards())
	for i := range shards {
		shards[i] = i
	}
	return s.RosterCycle(ctx, shards, store.SchedBucket(start))
}

// runBroadcast is pattern 20: a broadcast to the segment started, then each shard's
// task run as the scheduler runs it (the handler, then the task's delete). Finding the
// tasks is pattern 11's Query, not recorded here.
func (e *env) runBroadcast(ctx context.Context) error {
	id, _, err := e.bc.Begin(ctx, tenant, service.BroadcastSpec{IdempotencyKey: "bcast-0001", Segment: segment,
		Send: inbox.SendInput{Type: "digest", Category: "news", Title: "Weekly digest", Body: "What happened this week."}})
	if err != nil {
		return err
	}
	e.broadcast = id
	bucket := store.SchedBucket(start)
	for shard := range e.st.SchedShards() {
		e.rec.Begin(0)
		page, err := e.st.DueTasks(ctx, shard, bucket, start, nil, 1000)
		if err != nil {
			return err
		}
		e.rec.Begin(20)
		for _, t := range page.Tasks {
			if t.Kind != inbox.TaskBroadcast {
				continue
			}
			if err := e.bc.Handle(ctx, t); err != nil {
				return fmt.Errorf("broadcast task %s: %w", t.ID, err)
			}
			if _, err := e.st.CompleteTask(ctx, shard, bucket, t); err != nil {
				return err
			}
		}
	}
	b, err := e.bc.Get(ctx, tenant, id)
	if err != nil {
		return err
	}
	if b.Status != inbox.BroadcastDone {
		return fmt.Errorf("broadcast %s is %s after its shards ran; want %s", id, b.Status, inbox.BroadcastDone)
	}
	return nil
}

// deliveries is pattern 22: the status of pattern 8's notification, one email delivery
// claimed, sent and confirmed by its provider, another claimed and retried.
func (e *env) deliveries(ctx context.Context) error {
	if _, err := e.st.Status(ctx, tenant, e.emailNotif[0]); err != nil {
		return err
	}
	ref := inbox.DeliveryRef{TenantID: tenant, NotificationID: e.emailNotif[0], Key: inbox.ChannelEmail}
	job, outcome, err := e.st.ClaimDelivery(ctx, ref, 30*time.Second)
	if err != nil || job.Attempt == 0 {
		return fmt.Errorf("claim %v: %v, %v", ref, outcome, err)
	}
	if err := e.st.DeliverySent(ctx, ref, job.Attempt, "smtp", "msg-0000000001"); err != nil {
		return err
	}
	if _, err := e.st.ApplyProviderEvent(ctx, inbox.ProviderEvent{Ref: ref, Provider: "smtp", MessageID: "msg-0000000001",
		Status: inbox.DeliveryDelivered, At: start}); err != nil {
		return err
	}
	ref2 := inbox.DeliveryRef{TenantID: tenant, NotificationID: e.emailNotif[1], Key: inbox.ChannelEmail}
	job2, outcome, err := e.st.ClaimDelivery(ctx, ref2, 30*time.Second)
	if err != nil || job2.Attempt == 0 {
		return fmt.Errorf("claim %v: %v, %v", ref2, outcome, err)
	}
	return e.st.DeliveryRetry(ctx, ref2, job2.UserID, job2.Attempt, "smtp", "connection refused", start.Add(time.Minute))
}

// Note runs the model (Run) and returns its design note (Render) and the rules its
// calls broke (Check).
func Note(ctx context.Context, newClient func(optFns ...func(*dynamodb.Options)) *dynamodb.Client, table string, log *slog.Logger) ([]byte, []Violation, error) {
	res, err := Run(ctx, newClient, table, log)
	if err != nil {
		return nil, nil, err
	}
	return Render(res), Check(res.Calls), nil
}
