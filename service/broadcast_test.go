package service_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

type bcEnv struct {
	db  *dynamodb.Client
	st  *store.Store
	rec *ddbtrace.Recorder
	log *slog.Logger
}

// testPage is the broadcast page of these tests: a tenth of production's, so that
// every path through pages, shards and runs is walked with a tenth of the recipients
// (each one a transaction on DynamoDB Local).
const testPage = store.BroadcastPageSize / 10

// setup makes a store over a fresh table; at the end it fails on any Scan.
func bcSetup(t *testing.T, opts ...store.Option) *bcEnv {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	rec.KeepInputs()
	db := dynlocaltest.Client(t, rec.Option())
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, append([]store.Option{store.WithSweepWorkers(0), store.WithSchedShards(4),
		store.WithBroadcastPageSize(testPage)}, opts...)...)
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if slices.Contains(rec.Ops(), "Scan") {
			t.Errorf("a Scan was sent")
		}
	})
	return &bcEnv{db: db, st: st, rec: rec, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// fill adds n members named prefix00000.. to segment seg.
func (e *bcEnv) fill(t *testing.T, seg, prefix string, n int) []string {
	t.Helper()
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("%s%05d", prefix, i))
	}
	for i := 0; i < n; i += inbox.MaxSegmentChange {
		if _, err := e.st.UpdateSegment(context.Background(), tenant, seg, all[i:min(n, i+inbox.MaxSegmentChange)], nil); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// instance is one gateway process's scheduler and broadcasts; kill ends it as a crash
// would: every running handler's context ends, the scheduler stops without releasing
// its leases.
type instance struct {
	b    *service.Broadcasts
	kill context.CancelFunc
	done chan struct{}
}

// start runs an instance; send wraps the send loop's Write (nil: Write itself).
func (e *bcEnv) start(t *testing.T, owner string, pagesPerRun int, send service.BroadcastSendFunc) *instance {
	t.Helper()
	if send == nil {
		send = service.Writer{Store: e.st}.Write
	}
	s := sched.New(e.st, sched.Options{DB: e.db, Owner: owner, Poll: 200 * time.Millisecond, Lease: 6 * time.Second,
		Lookback: 2 * time.Minute, Grace: time.Second, RetryBase: 50 * time.Millisecond, RetryMax: time.Second, Logger: e.log})
	ctx, kill := context.WithCancel(context.Background())
	in := &instance{kill: kill, done: make(chan struct{})}
	in.b = service.NewBroadcasts(service.BroadcastOptions{Store: e.st, Send: send, PagesPerRun: pagesPerRun, Logger: e.log,
		Register: func(kind string, h func(context.Context, inbox.Task) error) {
			s.Register(kind, sched.HandlerFunc(func(hctx context.Context, task inbox.Task) error {
				hctx, stop := context.WithCancel(hctx)
				defer stop()
				defer context.AfterFunc(ctx, stop)()
				return h(hctx, task)
			}))
		}})
	go func() {
		defer close(in.done)
		_ = s.Run(ctx)
	}()
	t.Cleanup(func() { kill(); <-in.done })
	return in
}

// wait polls broadcast id until cond holds, failing after d.
func (e *bcEnv) wait(t *testing.T, id string, d time.Duration, cond func(inbox.Broadcast) bool) inbox.Broadcast {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		bc, err := e.st.GetBroadcast(context.Background(), tenant, id)
		if err == nil && cond(bc) {
			return bc
		}
		if time.Now().After(deadline) {
			t.Fatalf("broadcast %s: condition not met after %v: %+v, %v", id, d, bc, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// notified returns how many notifications each user has (their inbox's first page,
// and the badge must agree).
func (e *bcEnv) notified(t *testing.T, users []string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	hist := map[int]int{}
	g := new(errgroup.Group)
	g.SetLimit(16)
	for _, u := range users {
		g.Go(func() error {
			first := 5
			p, err := e.st.Inbox(context.Background(), inbox.Viewer{TenantID: tenant, UserID: u}, inbox.PageQuery{First: &first})
			if err != nil {
				return err
			}
			if p.HasUnreadCount && p.UnreadCount != len(p.Edges) {
				return fmt.Errorf("user %s: badge %d, %d notifications", u, p.UnreadCount, len(p.Edges))
			}
			mu.Lock()
			hist[len(p.Edges)]++
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return hist
}

func spec(key, seg string) service.BroadcastSpec {
	return service.BroadcastSpec{IdempotencyKey: key, Segment: seg,
		Send: inbox.SendInput{Type: "release", Category: "news", Title: "v2 is out", Body: "read all about it"}}
}

func done(bc inbox.Broadcast) bool { return bc.Status == inbox.BroadcastDone }

// A broadcast to a 160-member followers segment (pages of 10) reaches done with exactly one
// notification each and exact counters; its reads spread over every segment shard.
func TestBroadcastToFollowers(t *testing.T) {
	// Not parallel: a broadcast writes hundreds of recipients' transactions, and
	// beside the package's other broadcasts it saturated the shared DynamoDB Local
	// (leases lost, every broadcast past its wait in a full run).
	e := bcSetup(t)
	// About 4 members a segment shard: every shard is read, none more than the others.
	const members = 4 * store.DefaultSegmentShards
	seg := "followers:actor-42"
	users := e.fill(t, seg, "fan-", members)
	e.rec.Reset()
	in := e.start(t, "a", 5, nil)
	id, err := in.b.Start(context.Background(), tenant, spec("launch-1", seg))
	if err != nil {
		t.Fatal(err)
	}
	bc := e.wait(t, id, 2*time.Minute, done)
	if bc.Recipients != members || bc.Written != members || bc.Skipped != 0 || bc.Failed != 0 || bc.FinishedAt.IsZero() || bc.StartedAt.IsZero() {
		t.Fatalf("progress %+v", bc)
	}
	// Reads: every segment shard was Queried, none more than twice the mean.
	queries := map[string]int{}
	for _, r := range e.rec.Requests() {
		if q, ok := r.Input.(*dynamodb.QueryInput); ok {
			if v, ok := q.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS); ok && strings.Contains(v.Value, "#SEG#"+seg+"#S#") {
				queries[v.Value]++
			}
		}
	}
	if len(queries) != store.DefaultSegmentShards {
		t.Fatalf("Queries reached %d shards, want %d", len(queries), store.DefaultSegmentShards)
	}
	total := 0
	for _, n := range queries {
		total += n
	}
	for pk, n := range queries {
		if float64(n) > 2*float64(total)/float64(len(queries)) {
			t.Errorf("shard %s was Queried %d times of %d", pk, n, total)
		}
	}
	if h := e.notified(t, users); h[1] != members {
		t.Fatalf("notifications per user: %v, want %d with one", h, members)
	}
	// A repeated start is the same broadcast; the same key with another spec a CONFLICT.
	again, err := in.b.Start(context.Background(), tenant, spec("launch-1", seg))
	if err != nil || again != id {
		t.Fatalf("replay: %q, %v; want %q", again, err, id)
	}
	other := spec("launch-1", seg)
	other.Send.Title = "something else"
	if _, err := in.b.Start(context.Background(), tenant, other); inbox.ErrorCode(err) != "CONFLICT" {
		t.Fatalf("reused key: %v, want CONFLICT", err)
	}
	if slices.Contains(e.rec.Ops(), "Scan") {
		t.Fatal("a Scan")
	}
}

// A crash in the middle of a broadcast, twice: each instance's handlers are killed after
// some pages (the last page written but not checkpointed), and a fresh instance
// resumes; every recipient ends with exactly one notification and the counters exact.
func TestBroadcastResumesAfterCrashes(t *testing.T) {
	// Not parallel: a broadcast writes hundreds of recipients' transactions, and
	// beside the package's other broadcasts it saturated the shared DynamoDB Local
	// (leases lost, every broadcast past its wait in a full run).
	// 4 shards of about 25: 3 pages of 10 each, runs of 2 pages and a continuation.
	e := bcSetup(t, store.WithSegmentShards(4))
	seg := "everyone"
	users := e.fill(t, seg, "u-", 100)
	// crashAfter returns a Send that kills its instance after its n-th page, once that
	// page is written (its checkpoint never happens), and the func that names the
	// instance (the page may be written before start returns: the kill waits for it).
	crashAfter := func(n int64) (service.BroadcastSendFunc, func(*instance)) {
		var pages atomic.Int64
		named := make(chan *instance, 1)
		return func(ctx context.Context, tenantID string, si inbox.SendInput, render service.RenderFunc) (inbox.SendResult, error) {
			res, err := service.Writer{Store: e.st}.Write(ctx, tenantID, si, render)
			if pages.Add(1) == n {
				(<-named).kill()
			}
			return res, err
		}, func(in *instance) { named <- in }
	}
	send1, name1 := crashAfter(3)
	first := e.start(t, "a", 2, send1)
	name1(first)
	id, err := first.b.Start(context.Background(), tenant, spec("crash-1", seg))
	if err != nil {
		t.Fatal(err)
	}
	<-first.done
	bc1, _ := e.st.GetBroadcast(context.Background(), tenant, id)
	send2, name2 := crashAfter(3)
	second := e.start(t, "b", 2, send2)
	name2(second)
	<-second.done
	bc2, _ := e.st.GetBroadcast(context.Background(), tenant, id)
	if bc1.Status == inbox.BroadcastDone || bc2.Status == inbox.BroadcastDone || bc2.Written < bc1.Written {
		t.Fatalf("both instances should have crashed mid-broadcast: after the first %+v, after the second %+v", bc1, bc2)
	}
	third := e.start(t, "c", 2, nil)
	_ = third
	bc := e.wait(t, id, 3*time.Minute, done)
	if bc.Recipients != 100 || bc.Written != 100 || bc.Skipped != 0 || bc.Failed != 0 || bc.ShardsDone != bc.Shards {
		t.Fatalf("progress after the crashes %+v (first crash at %d written, second at %d)", bc, bc1.Written, bc2.Written)
	}
	if h := e.notified(t, users); h[1] != 100 {
		t.Fatalf("notifications per user: %v, want 100 with one", h)
	}
}

// Cancel stops a running broadcast: the recipients written stay written, exactly as
// many as the counters say, and nothing more is written.
func TestBroadcastCancel(t *testing.T) {
	// Not parallel: a broadcast writes hundreds of recipients' transactions, and
	// beside the package's other broadcasts it saturated the shared DynamoDB Local
	// (leases lost, every broadcast past its wait in a full run).
	// One shard: 6 pages one after the other, slow enough to cancel in the middle.
	e := bcSetup(t, store.WithSegmentShards(1))
	seg := "slow"
	users := e.fill(t, seg, "s-", 60)
	slow := func(ctx context.Context, tenantID string, si inbox.SendInput, render service.RenderFunc) (inbox.SendResult, error) {
		time.Sleep(300 * time.Millisecond)
		return service.Writer{Store: e.st}.Write(ctx, tenantID, si, render)
	}
	in := e.start(t, "a", 2, slow)
	id, err := in.b.Start(context.Background(), tenant, spec("cancel-1", seg))
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, id, time.Minute, func(bc inbox.Broadcast) bool { return bc.Written >= 20 })
	bc, err := in.b.Cancel(context.Background(), tenant, id)
	if err != nil || bc.Status != inbox.BroadcastCancelled {
		t.Fatalf("cancel: %+v, %v", bc, err)
	}
	// The page in flight finishes and is counted (the shard has no pending page left:
	// a page takes 300 ms per send, longer than any fixed quiet window on a loaded
	// machine); then nothing moves.
	settled := time.Now().Add(time.Minute)
	for {
		sh, err := e.st.BroadcastShardState(context.Background(), tenant, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if sh.Pending == nil || sh.Done {
			break
		}
		if time.Now().After(settled) {
			t.Fatalf("a page still pending a minute after the cancel: %+v", sh)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var last inbox.Broadcast
	for stable := 0; stable < 3; {
		time.Sleep(time.Second)
		cur, err := in.b.Get(context.Background(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Written == last.Written {
			stable++
		} else {
			stable = 0
		}
		last = cur
	}
	if last.Status != inbox.BroadcastCancelled || last.Written >= 60 || last.FinishedAt.IsZero() {
		t.Fatalf("after cancel: %+v", last)
	}
	h := e.notified(t, users)
	if h[1] != last.Written || h[0] != 60-last.Written {
		t.Fatalf("notifications per user %v, written %d", h, last.Written)
	}
	// Cancelling again changes nothing.
	if again, err := in.b.Cancel(context.Background(), tenant, id); err != nil || again.Written != last.Written || again.Status != inbox.BroadcastCancelled {
		t.Fatalf("second cancel: %+v, %v", again, err)
	}
}

// A list broadcast writes each listed user once (repeats count once); bad specs are
// refused before anything is written.
func TestBroadcastListAndBadInput(t *testing.T) {
	// Not parallel: a broadcast writes hundreds of recipients' transactions, and
	// beside the package's other broadcasts it saturated the shared DynamoDB Local
	// (leases lost, every broadcast past its wait in a full run).
	e := bcSetup(t)
	in := e.start(t, "a", 20, nil)
	ctx := context.Background()
	var list []string
	for i := range 25 {
		list = append(list, fmt.Sprintf("l-%03d", i))
	}
	s := service.BroadcastSpec{IdempotencyKey: "list-1", Recipients: append(slices.Clone(list), list[:10]...),
		Send: inbox.SendInput{Type: "digest", Title: "weekly"}}
	id, err := in.b.Start(ctx, tenant, s)
	if err != nil {
		t.Fatal(err)
	}
	bc := e.wait(t, id, time.Minute, done)
	if bc.Recipients != 25 || bc.Written != 25 || bc.Shards != 3 {
		t.Fatalf("list broadcast %+v", bc)
	}
	if h := e.notified(t, list); h[1] != 25 {
		t.Fatalf("notifications per user %v", h)
	}
	e.rec.Reset()
	many := make([]string, inbox.MaxSegmentChange+1)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	for name, sp := range map[string]service.BroadcastSpec{
		"unknown segment": spec("k1", "nobody-here"),
		"both":            {IdempotencyKey: "k2", Segment: "s", Recipients: []string{"u"}, Send: inbox.SendInput{Type: "t"}},
		"neither":         {IdempotencyKey: "k3", Send: inbox.SendInput{Type: "t"}},
		"too many":        {IdempotencyKey: "k4", Recipients: many, Send: inbox.SendInput{Type: "t"}},
		"bad recipient":   {IdempotencyKey: "k5", Recipients: []string{"a#b"}, Send: inbox.SendInput{Type: "t"}},
		"bad segment":     spec("k6", "a#b"),
		"no type":         {IdempotencyKey: "k7", Recipients: []string{"u"}},
		"bad lane":        {IdempotencyKey: "k8", Recipients: []string{"u"}, Send: inbox.SendInput{Type: "t"}, Lane: "fast"},
		"no key":          {Recipients: []string{"u"}, Send: inbox.SendInput{Type: "t"}},
	} {
		if _, err := in.b.Start(ctx, tenant, sp); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v, want BAD_USER_INPUT", name, err)
		}
	}
	for _, r := range e.rec.Requests() {
		if _, ok := r.Input.(*dynamodb.TransactWriteItemsInput); ok {
			if tx := r.Input.(*dynamodb.TransactWriteItemsInput); len(tx.TransactItems) > 0 && tx.TransactItems[0].Put != nil {
				if v, ok := tx.TransactItems[0].Put.Item["sk"].(*types.AttributeValueMemberS); ok && v.Value == "B" {
					t.Fatal("a refused broadcast was written")
				}
			}
		}
	}
	if _, err := in.b.Get(ctx, tenant, service.BroadcastID("k1")); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Fatalf("get of an unknown broadcast: %v", err)
	}
}

// A run that wrote its page and died before its checkpoint, while the broadcast was
// cancelled: the page's recipients stay written, and the task's next run counts them
// (it finishes the fixed page, reads no further one), so written matches the inboxes.
func TestBroadcastCancelledMidPageCountsItsPage(t *testing.T) {
	// Not parallel, as the other broadcast tests (its retry waited past a minute beside
	// the package's parallel tests in CI).
	e := bcSetup(t, store.WithSegmentShards(1))
	users := e.fill(t, "mid", "p-", 15)
	var (
		first atomic.Bool
		in    *instance
		id    = service.BroadcastID("cancel-mid")
	)
	crashOnce := func(ctx context.Context, tenantID string, si inbox.SendInput, render service.RenderFunc) (inbox.SendResult, error) {
		if first.CompareAndSwap(false, true) {
			if _, err := in.b.Cancel(ctx, tenantID, id); err != nil {
				return inbox.SendResult{}, err
			}
			if _, err := (service.Writer{Store: e.st}).Write(ctx, tenantID, si, render); err != nil {
				return inbox.SendResult{}, err
			}
			return inbox.SendResult{}, fmt.Errorf("the run dies after its page's write, before its checkpoint")
		}
		return service.Writer{Store: e.st}.Write(ctx, tenantID, si, render)
	}
	in = e.start(t, "a", 5, crashOnce)
	if got, err := in.b.Start(context.Background(), tenant, spec("cancel-mid", "mid")); err != nil || got != id {
		t.Fatalf("start: %s %v", got, err)
	}
	bc := e.wait(t, id, 3*time.Minute, func(bc inbox.Broadcast) bool { return bc.Written > 0 })
	time.Sleep(time.Second) // nothing more moves
	if bc, _ = in.b.Get(context.Background(), tenant, id); bc.Status != inbox.BroadcastCancelled || bc.Written != 10 {
		t.Fatalf("after the cancel: %+v", bc)
	}
	if h := e.notified(t, users); h[1] != 10 || h[0] != 5 {
		t.Fatalf("notifications per user %v, written %d", h, bc.Written)
	}
}
