package main

// Scenario 18, workflows: what a batch and a throttle cost (issue 19).
//
// Batch: -wf-joins sends (service.Send, one recipient, each its own idempotency key and
// actor) join ONE batch of a window long enough for them all (maxItems 1,000, so the
// window closes it), -concurrency at a time, through a store and a send service built on
// a metered client. A scheduler in this process (sched.New, the gateway's defaults, the
// service's BatchHandler) closes the batch at the window's end. Reported: the DynamoDB
// calls and write units per joining send (ReturnConsumedCapacity: the accept's request
// and recovery task, the join, the completion), split by operation; the close's calls
// and units; the close's latency after the window (from the batch's close time to the
// notification's ADDED change); and the notification's activity count (it must equal
// the joins) and unread badge (1).
//
// Throttle: a burst of 100 concurrent sends to one user under a throttle of 10 an hour:
// calls and units per send, and how many notifications landed (exactly 10).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// WorkflowsResult is scenario 18.
type WorkflowsResult struct {
	Engine      string `json:"engine"`
	Concurrency int    `json:"concurrency"`
	Joins       int    `json:"joins"`
	Window      string `json:"window"`
	// JoinSeconds is how long the joins took; JoinLatency their latency.
	JoinSeconds float64 `json:"join_seconds"`
	JoinLatency Latency `json:"join_latency"`
	// PerJoin is the engine's work per joining send; PerJoinByCall the same by operation
	// and partition kinds.
	PerJoin       Capacity            `json:"per_join"`
	PerJoinByCall map[string]Capacity `json:"per_join_by_call"`
	// MaxItemsCloseMs is from the end of the joins to the notification's ADDED change
	// (the last join closes the batch: negative when it came before the last answer).
	MaxItemsCloseMs float64 `json:"max_items_close_ms"`
	// WindowJoins join a second batch of ShortWindow, which the scheduler closes: Close
	// is the engine's work of that close (freeze and the notification's send), CloseLagMs
	// from the window's end to the notification's ADDED change.
	WindowJoins   int      `json:"window_joins"`
	ShortWindow   string   `json:"short_window"`
	Close         Capacity `json:"close"`
	CloseLagMs    float64  `json:"close_lag_ms"`
	ActivityCount int      `json:"activity_count"`
	Activities    int      `json:"activities_kept"`
	Unread        int      `json:"unread"`
	Notifications int      `json:"notifications"`
	// The throttled burst.
	Burst        int                 `json:"burst"`
	Limit        int                 `json:"limit"`
	Landed       int                 `json:"landed"`
	PerSend      Capacity            `json:"per_send"`
	PerSendByOp  map[string]Capacity `json:"per_send_by_call"`
	BurstLatency Latency             `json:"burst_latency"`
}

// addedRecorder is a publisher that notes when each notification's ADDED change came.
type addedRecorder struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (r *addedRecorder) Publish(_ context.Context, c inbox.Change) {
	if c.Kind != inbox.EventAdded || c.Notification == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.at[c.Notification.ID]; !ok {
		r.at[c.Notification.ID] = time.Now()
	}
}

func (r *addedRecorder) when(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[id]
	return t, ok
}

func (b *harness) workflowsScenario(ctx context.Context) (*WorkflowsResult, error) {
	c := b.c
	joins := c.wfJoins
	meter := &capacityMeter{}
	db := dynamodb.New(b.eng.db.Options(), meter.option())
	st := store.New(db, c.table, store.WithSweepWorkers(0))
	defer st.Close()
	rec := &addedRecorder{at: map[string]time.Time{}}
	svc := service.New(st, service.Options{Publisher: rec, Logger: b.log})
	defer svc.Close()
	// The scheduler's own calls (its passes and claims) are not the batch's: it runs on
	// an unmetered store; the close it runs is the service's, metered.
	schedStore := store.New(b.eng.db, c.table, store.WithSweepWorkers(0))
	defer schedStore.Close()
	s := sched.New(schedStore, sched.Options{DB: b.eng.db, Logger: b.log})
	s.Register(inbox.TaskBatch, sched.HandlerFunc(svc.BatchHandler()))
	st.NotifyDue(s.Notify)
	defer st.NotifyDue(nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(runCtx) }()
	defer func() { stop(); <-done }()

	run := fmt.Sprintf("%d", time.Now().UnixNano())
	res := &WorkflowsResult{Engine: b.eng.name, Concurrency: c.concurrency, Joins: joins, Window: c.wfWindow.String()}
	// Batch A: the joins fill it (maxItems = the joins): the last one closes it at once.
	a, err := b.joinBatch(ctx, meter, svc, st, rec, "wf-a-"+run, joins, c.wfWindow, joins)
	if err != nil {
		return nil, err
	}
	res.JoinSeconds, res.JoinLatency, res.PerJoin, res.PerJoinByCall = a.seconds, a.latency, a.perJoin, a.byCall
	res.ActivityCount, res.Activities, res.Unread, res.Notifications = a.count, a.kept, a.unread, a.notifications
	res.MaxItemsCloseMs = a.closeMs
	// Batch B: fewer joins than maxItems: the scheduler closes it at the window's end.
	res.WindowJoins, res.ShortWindow = 50, "5s"
	bb, err := b.joinBatch(ctx, meter, svc, st, rec, "wf-b-"+run, res.WindowJoins, 5*time.Second, inbox.MaxBatchMaxItems)
	if err != nil {
		return nil, err
	}
	res.CloseLagMs, res.Close = bb.closeMs, bb.close
	if bb.count != res.WindowJoins || bb.notifications != 1 || bb.unread != 1 {
		return nil, fmt.Errorf("the window's batch: %d notifications, count %d, unread %d", bb.notifications, bb.count, bb.unread)
	}

	// The throttled burst.
	res.Burst, res.Limit = 100, 10
	burstUser := "wf-thr-" + run
	blat := make([]time.Duration, res.Burst)
	meter.take()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.concurrency)
	for i := range res.Burst {
		g.Go(func() error {
			s0 := time.Now()
			_, err := svc.Send(gctx, tenant, service.SendRequest{IdempotencyKey: fmt.Sprintf("wft-%s-%03d", run, i),
				Recipients: []string{burstUser}, Type: "alert", Category: "ops", Title: "CPU high",
				Throttle: &inbox.Throttle{Key: "cpu", Limit: res.Limit, Window: time.Hour}})
			blat[i] = time.Since(s0)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("burst: %w", err)
	}
	total, by := meter.take()
	res.BurstLatency = summarize(blat)
	res.PerSend = perN(total, res.Burst)
	res.PerSendByOp = map[string]Capacity{}
	for k, v := range by {
		res.PerSendByOp[k] = perN(v, res.Burst)
	}
	all := 100
	page, err := st.Inbox(ctx, inbox.Viewer{TenantID: tenant, UserID: burstUser}, inbox.PageQuery{First: &all})
	if err != nil {
		return nil, err
	}
	res.Landed = len(page.Edges)
	return res, nil
}

// batchRun is one batch's joins and close.
type batchRun struct {
	seconds                            float64
	latency                            Latency
	perJoin, close                     Capacity
	byCall                             map[string]Capacity
	closeMs                            float64
	count, kept, unread, notifications int
}

// joinBatch sends joins sends, concurrently, into one batch of user with window and
// maxItems, waits for its notification's ADDED change and reads it back. closeMs is from
// the batch's close time (its window's end) to the change when the window closed it,
// from the end of the joins when maxItems did.
func (b *harness) joinBatch(ctx context.Context, meter *capacityMeter, svc *service.Service, st *store.Store, rec *addedRecorder,
	user string, joins int, window time.Duration, maxItems int) (batchRun, error) {
	var out batchRun
	b.log.Info("workflows: joining one batch", "joins", joins, "window", window, "maxItems", maxItems, "concurrency", b.c.concurrency)
	meter.take()
	lat := make([]time.Duration, joins)
	ids := make([]string, joins)
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.c.concurrency)
	for i := range joins {
		g.Go(func() error {
			s0 := time.Now()
			sent, err := svc.Send(gctx, tenant, service.SendRequest{IdempotencyKey: fmt.Sprintf("%s-%04d", user, i),
				Recipients: []string{user}, Type: "comment", Category: "social", Title: "New comments on your post",
				Actor:   &inbox.Actor{ActorID: fmt.Sprintf("commenter%04d", i), Name: fmt.Sprintf("Commenter %d", i)},
				Payload: inbox.JSON(`{"text":"Nice post!"}`), Batch: &inbox.Batch{Key: "post-1", Window: window, MaxItems: maxItems}})
			lat[i] = time.Since(s0)
			if err != nil {
				return err
			}
			ids[i] = sent.Result.NotificationIDs[0]
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return out, fmt.Errorf("joins: %w", err)
	}
	joined := time.Now()
	out.seconds = joined.Sub(t0).Seconds()
	out.latency = summarize(lat)
	total, by := meter.take()
	out.perJoin = perN(total, joins)
	out.byCall = map[string]Capacity{}
	for k, v := range by {
		out.byCall[k] = perN(v, joins)
	}
	id := ids[0]
	for _, x := range ids {
		if x != id {
			return out, fmt.Errorf("the joins answered different batches (%s, %s): the window (%v) closed before they all joined: raise -wf-window", id, x, window)
		}
	}
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return out, fmt.Errorf("batch id %q: %w", id, err)
	}
	from := ulid.Time(u.Time())
	if joins >= maxItems {
		from = joined
	}
	b.log.Info("workflows: joined; waiting for the close", "seconds", out.seconds)
	deadline := time.Now().Add(window + 2*time.Minute)
	for {
		if at, ok := rec.when(id); ok {
			out.closeMs = float64(at.Sub(from).Microseconds()) / 1000
			break
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("the batch %s did not close within 2 minutes of its window", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	out.close, _ = meter.take()
	v := inbox.Viewer{TenantID: tenant, UserID: user}
	first := 10
	page, err := st.Inbox(ctx, v, inbox.PageQuery{First: &first})
	if err != nil {
		return out, err
	}
	out.notifications = len(page.Edges)
	if len(page.Edges) > 0 {
		out.count, out.kept = page.Edges[0].Node.ActivityCount, len(page.Edges[0].Node.Activities)
	}
	badge, err := st.Badge(ctx, v)
	if err != nil {
		return out, err
	}
	out.unread = badge.Unread
	return out, nil
}

// perN is c per one of n.
func perN(c Capacity, n int) Capacity {
	if n == 0 {
		return c
	}
	return Capacity{WCU: c.WCU / float64(n), RCU: c.RCU / float64(n), Calls: c.Calls}
}

// Table renders scenario 18.
func (x *WorkflowsResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 18. workflows: a batch of %d joins, a throttled burst of %d\n\n", x.Joins, x.Burst)
	fmt.Fprintf(&b, "Engine: %s. The store and the send service in this process on a metered client (ReturnConsumedCapacity), "+
		"a scheduler closing batches; %d joining sends at concurrency %d, each its own key and actor, into one batch (window %s, maxItems %d: the last join closes it); then %d into a batch of window %s that the scheduler closes.\n\n",
		x.Engine, x.Joins, x.Concurrency, x.Window, x.Joins, x.WindowJoins, x.ShortWindow)
	fmt.Fprintln(&b, "| measure | value |")
	fmt.Fprintln(&b, "| --- | ---: |")
	fmt.Fprintf(&b, "| joins took | %.2f s (p50 %.2f ms, p99 %.2f ms a send) |\n", x.JoinSeconds, x.JoinLatency.P50, x.JoinLatency.P99)
	fmt.Fprintf(&b, "| DynamoDB calls per joining send | %.2f |\n", float64(x.PerJoin.Calls)/float64(max(1, x.Joins)))
	fmt.Fprintf(&b, "| write units per joining send | %.2f |\n", x.PerJoin.WCU)
	fmt.Fprintf(&b, "| read units per joining send | %.2f |\n", x.PerJoin.RCU)
	fmt.Fprintf(&b, "| the maxItems close: its notification's change after the last join's answer | %.0f ms |\n", x.MaxItemsCloseMs)
	fmt.Fprintf(&b, "| the window's close (%d joins): calls, WCU, RCU | %d, %.1f, %.1f |\n", x.WindowJoins, x.Close.Calls, x.Close.WCU, x.Close.RCU)
	fmt.Fprintf(&b, "| the window's close: its notification's change after the window's end | %.0f ms |\n", x.CloseLagMs)
	fmt.Fprintf(&b, "| notifications written / activityCount / activities kept / unread | %d / %d / %d / %d |\n",
		x.Notifications, x.ActivityCount, x.Activities, x.Unread)
	fmt.Fprintf(&b, "| throttled burst: landed of %d (limit %d) | %d |\n", x.Burst, x.Limit, x.Landed)
	fmt.Fprintf(&b, "| throttled burst: calls, WCU per send | %.2f, %.2f (p50 %.2f ms, p99 %.2f ms) |\n",
		float64(x.PerSend.Calls)/float64(max(1, x.Burst)), x.PerSend.WCU, x.BurstLatency.P50, x.BurstLatency.P99)
	fmt.Fprintln(&b, "\nA joining send's calls by operation and partition kinds (calls and units per send; the accept's request and recovery task, the completion, and the recovery task's delete are the durable 202's; the GetItem and the two-item transaction the join's; the actor's upsert the activity's):")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| operation partitions | calls/send | WCU/send | RCU/send |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: |")
	keys := make([]string, 0, len(x.PerJoinByCall))
	for k := range x.PerJoinByCall {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := x.PerJoinByCall[k]
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f |\n", k, float64(v.Calls)/float64(max(1, x.Joins)), v.WCU, v.RCU)
	}
	return b.String()
}
