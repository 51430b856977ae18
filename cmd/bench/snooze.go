package main

// Scenario 12, snooze: snooze wake-up lag end to end (issue 9's goal: p99 ≤ 2 s with
// 10,000 snoozes due in the same minute on DynamoDB Local).
//
// -snooze-notifications notifications are sent through the store to -snooze-users users
// (an equal share each, 100 recipients a send). A scheduler built as the gateway builds it
// (sched.NewInbox: the real inbox.TaskWake handler, Store.Wake) runs in this process on
// -sched-shards shards, polling every -sched-poll. Each run snoozes every notification
// through Store.ApplyState (OpSnooze, one call per user with all of the user's ids, the
// wake task written in the same transaction), all due within one minute that starts
// after the snoozes are expected to be written: spread evenly over -snooze-spread of it
// (by user: 1m, then 0s, everyone snoozed "until 9:00"). The lag of a notification is
// from its snoozedUntil to the moment the store publishes its WOKE change (the store's
// publisher is a recorder in this process; Store.Wake publishes after its write commits
// and the badge is read back). A run waits until every notification woke (or
// -sched-timeout passed), counts wake-ups published more than once, and then checks every
// user's badge (unread, unseen, per category) against a recount of the notifications and
// that none is still snoozed. The woken notifications are snoozed again by the next run.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// snoozeConfig holds the snooze scenario's flags (the scheduler's shards, poll and
// timeout are the sched scenario's).
type snoozeConfig struct {
	notifications int
	users         int
	spreads       string // comma-separated durations, one run each
}

// snoozeCategory is the category of the snooze scenario's notifications.
const snoozeCategory = "tasks"

// SnoozeResult is scenario 12: one run per due-time spread.
type SnoozeResult struct {
	Engine        string      `json:"engine"`
	Notifications int         `json:"notifications"`
	Users         int         `json:"users"`
	Shards        int         `json:"shards"`
	Poll          string      `json:"poll"`
	Scheduler     string      `json:"scheduler"`
	Measures      string      `json:"lag_measures"`
	SeedSeconds   float64     `json:"seed_seconds"`
	GoalP99Ms     float64     `json:"goal_p99_ms"`
	Runs          []SnoozeRun `json:"runs"`
}

// SnoozeRun is one run of scenario 12.
type SnoozeRun struct {
	Spread string `json:"due_spread"`
	// SnoozeSecs is how long the ApplyState calls (one per user) took; SnoozeCalls their
	// latency.
	SnoozeSecs  float64 `json:"snooze_seconds"`
	SnoozeCalls Latency `json:"snooze_call_latency"`
	SnoozeErrs  int     `json:"snooze_errors"`
	// LateSnoozes is how many notifications were snoozed after their due time.
	LateSnoozes int `json:"snoozed_after_due"`
	Woken       int `json:"woken"`
	Missing     int `json:"missing"`
	// MissingAfterCheck are the notifications whose WOKE was still not published after
	// the badge check (Missing counts at the end of the wait); RereadHints the changes
	// published without a kind (a call failed after its write may have committed).
	MissingAfterCheck int `json:"missing_after_check"`
	RereadHints       int `json:"reread_hints"`
	// LoadAvg is the machine's 1-minute load average when the run's wait ended (other
	// work on the machine weighs on every figure).
	LoadAvg string `json:"load_average"`
	// Doubled is how many WOKE changes were published beyond the first per notification.
	Doubled int `json:"woke_published_beyond_first"`
	// Sched are the scheduler's counts during the run (handler retries: Wake failed, e.g.
	// contended META past the store's retries).
	Done         int64   `json:"handler_done"`
	Retried      int64   `json:"handler_retried"`
	Dropped      int64   `json:"handler_dropped"`
	SchedErrors  int64   `json:"sched_errors"`
	DrainSeconds float64 `json:"drain_seconds"`
	PerSec       float64 `json:"wakes_per_sec"`
	Lag          Latency `json:"lag"`
	MaxLagMs     float64 `json:"max_lag_ms"`
	// CallsPerWake are the DynamoDB calls (by operation) from the end of the snoozes to
	// the check, divided by the wake-ups: the wake handler's (its retries on a contended
	// META included) and the scheduler's own (Queries, task deletes, leases).
	CallsPerWake map[string]float64 `json:"dynamodb_calls_per_wake"`
	// ByDue is the lag of the notifications due in each 10 s of the minute (spread runs):
	// where in the minute the slow wake-ups were.
	ByDue []SnoozeWindow `json:"lag_by_due_window,omitempty"`
	// BadgesChecked users' badges were compared with a recount; BadgesWrong differed
	// (FirstWrong says how); StillSnoozed notifications were still snoozed at the check.
	BadgesChecked int    `json:"badges_checked"`
	BadgesWrong   int    `json:"badges_wrong"`
	StillSnoozed  int    `json:"still_snoozed"`
	FirstWrong    string `json:"first_wrong,omitempty"`
	GoalP99Met    bool   `json:"goal_p99_met"`
	FirstError    string `json:"first_error,omitempty"`
}

// SnoozeWindow is the lag of the wake-ups due in one window of a run's minute.
type SnoozeWindow struct {
	From string  `json:"due_from"` // offset in the minute
	Lag  Latency `json:"lag"`
	Max  float64 `json:"max_lag_ms"`
}

// wakeRecorder is the store's publisher: it keeps when each notification's WOKE change
// was published.
type wakeRecorder struct {
	mu    sync.Mutex
	woke  map[string][]time.Time // notification id -> publish times
	last  time.Time
	hints int // re-read hints (Kind EventNone, no ids)
}

// Publish records c when it is a WOKE change.
func (w *wakeRecorder) Publish(_ context.Context, c inbox.Change) {
	if c.Kind == inbox.EventNone && len(c.IDs) == 0 {
		// A re-read hint: a write may have committed, its outcome unknown (the store
		// publishes one when a call fails after writing).
		w.mu.Lock()
		w.hints++
		w.mu.Unlock()
		return
	}
	if c.Kind != inbox.EventWoke {
		return
	}
	now := time.Now()
	w.mu.Lock()
	for _, id := range c.IDs {
		w.woke[id] = append(w.woke[id], now)
	}
	w.last = now
	w.mu.Unlock()
}

// reset forgets every wake-up recorded.
func (w *wakeRecorder) reset() {
	w.mu.Lock()
	w.woke = map[string][]time.Time{}
	w.last = time.Time{}
	w.hints = 0
	w.mu.Unlock()
}

// count returns how many distinct notifications woke.
func (w *wakeRecorder) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.woke)
}

// snoozeUser is one user of the scenario and the ids of its notifications.
type snoozeUser struct {
	v   inbox.Viewer
	ids []string
}

func (b *harness) snoozeScenario(ctx context.Context) (*SnoozeResult, error) {
	sz, sc := b.c.snooze, b.c.sched
	spreads, err := parseSpreads("snooze-spread", sz.spreads)
	if err != nil {
		return nil, err
	}
	if sz.users < 1 || sz.notifications < sz.users || sz.notifications/sz.users > inbox.MaxStateIDs || sc.shards < 1 {
		return nil, fmt.Errorf("-snooze-users must be positive, -snooze-notifications at least that and at most %d a user, -sched-shards positive", inbox.MaxStateIDs)
	}
	rec := &wakeRecorder{woke: map[string][]time.Time{}}
	st := store.New(b.eng.db, b.c.table, store.WithLogger(b.log), store.WithSweepWorkers(0), store.WithSchedShards(sc.shards), store.WithPublisher(rec))
	defer st.Close()
	res := &SnoozeResult{Engine: b.eng.name, Users: sz.users, Shards: sc.shards, Poll: sc.poll.String(), GoalP99Ms: 2000,
		Scheduler: "sched.NewInbox (the gateway's scheduler: inbox.TaskWake handled by Store.Wake), one instance in this process, default concurrency (8 tasks at once per shard)",
		Measures:  "from the notification's snoozedUntil to the store's publish of its WOKE change (after the wake's transaction committed and the badge was read back), on this process's clock"}

	users, secs, err := b.seedSnooze(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	res.SeedSeconds = secs
	for _, u := range users {
		res.Notifications += len(u.ids)
	}

	s := sched.NewInbox(st, sched.Options{DB: b.eng.db, Owner: "bench-snooze", Poll: sc.poll, Logger: b.log})
	st.NotifyDue(s.Notify) // each snooze's wake-up task arms the scheduler's timer, as in the gateway
	defer background(ctx, s.Run, s.Release)()
	if err := waitHeld(ctx, 30*time.Second, "the scheduler", sc.shards, func() int { return len(s.Held()) }); err != nil {
		return nil, err
	}
	for _, spread := range spreads {
		rec.reset()
		r := b.snoozeRun(ctx, st, s, rec, users, spread)
		r.GoalP99Met = r.Missing == 0 && r.Doubled == 0 && r.SnoozeErrs == 0 && r.Lag.P99 <= res.GoalP99Ms
		res.Runs = append(res.Runs, r)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return res, nil
}

// seedSnooze sends every user its notifications through the store: rounds of sends to
// groups of at most 100 users, the groups in parallel (one META per user, so no two sends
// at once touch one inbox).
func (b *harness) seedSnooze(ctx context.Context, st *store.Store) ([]snoozeUser, float64, error) {
	sz := b.c.snooze
	per := sz.notifications / sz.users
	users := make([]snoozeUser, sz.users)
	for i := range users {
		users[i].v = inbox.Viewer{TenantID: tenant, UserID: fmt.Sprintf("snz%05d", i)}
	}
	progress("snooze: sending %d notifications to %d users (%d each)", per*sz.users, sz.users, per)
	t0 := time.Now()
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(max(b.c.seedWorkers/8, 1)) // each send writes 8 recipients at once
	var mu sync.Mutex
	for lo := 0; lo < len(users); lo += 100 {
		group := users[lo:min(lo+100, len(users))]
		eg.Go(func() error {
			rcpt := make([]string, len(group))
			for i, u := range group {
				rcpt[i] = u.v.UserID
			}
			for round := range per {
				out, err := service.Writer{Store: st}.Send(gctx, tenant, inbox.SendInput{IdempotencyKey: fmt.Sprintf("snooze-%d-%d", lo, round), Recipients: rcpt,
					Type: "reminder", Category: snoozeCategory, Title: fmt.Sprintf("Follow up on review %d", round),
					Body: "Snoozed until later: the review is waiting for the CI run."})
				if err != nil {
					return err
				}
				if out.Accepted != len(rcpt) {
					return fmt.Errorf("send accepted %d of %d", out.Accepted, len(rcpt))
				}
				mu.Lock()
				for i, d := range out.Delivered {
					if d.UserID != group[i].v.UserID {
						mu.Unlock()
						return fmt.Errorf("delivery %d is %s's, want %s's", i, d.UserID, group[i].v.UserID)
					}
					group[i].ids = append(group[i].ids, d.Notification.ID)
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, 0, err
	}
	secs := time.Since(t0).Seconds()
	progress("snooze: sent in %.1fs", secs)
	return users, secs, nil
}

// snoozeRun snoozes every user's notifications until due times within one minute spread
// over spread, waits for the wake-ups and checks the badges.
func (b *harness) snoozeRun(ctx context.Context, st *store.Store, s *sched.Scheduler, rec *wakeRecorder, users []snoozeUser, spread time.Duration) SnoozeRun {
	sc := b.c.sched
	r := SnoozeRun{Spread: spread.String()}
	total := 0
	for _, u := range users {
		total += len(u.ids)
	}
	// The due minute: the first whole minute that starts at least 20s + 2ms a notification
	// + 3ms a call (a generous guess at the snoozes' time on a busy 2-core machine, where
	// 1,000 calls of 10 took 12 to 16s) from now.
	due0 := store.SchedBucket(time.Now().Add(20*time.Second + time.Duration(2*total+3*len(users))*time.Millisecond)).Add(time.Minute)
	progress("snooze: snoozing %d notifications of %d users until %s (spread %s)", total, len(users), due0.Format(time.TimeOnly), spread)
	due := make(map[string]time.Time, total)
	for i, u := range users {
		until := due0.Add(time.Duration(int64(spread) * int64(i) / int64(len(users)))).Truncate(time.Millisecond)
		for _, id := range u.ids {
			due[id] = until
		}
	}
	st0 := s.Stats()
	started := time.Now()
	var next, errs, late atomic.Int64
	var firstErr atomic.Value
	var mu sync.Mutex
	var calls []time.Duration
	var wg sync.WaitGroup
	for range max(b.c.seedWorkers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(users) || ctx.Err() != nil {
					return
				}
				u := users[i]
				until := due[u.ids[0]]
				t0 := time.Now()
				out, err := st.ApplyState(ctx, u.v, inbox.StateChange{Op: inbox.OpSnooze, IDs: u.ids, Until: until})
				el := time.Since(t0)
				if err == nil && out.Changed != len(u.ids) {
					err = fmt.Errorf("snooze of %s changed %d of %d (not found %v)", u.v.UserID, out.Changed, len(u.ids), out.NotFound)
				}
				if err != nil {
					errs.Add(int64(len(u.ids)))
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				if time.Now().After(until) {
					late.Add(int64(len(u.ids)))
				}
				mu.Lock()
				calls = append(calls, el)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.SnoozeSecs = time.Since(started).Seconds()
	r.SnoozeCalls = summarize(calls)
	r.SnoozeErrs = int(errs.Load())
	r.LateSnoozes = int(late.Load())
	if v, ok := firstErr.Load().(string); ok {
		r.FirstError = v
	}
	progress("snooze: snoozed in %.1fs (call p50 %.1f ms, %d errors, %d after their due time); waiting for the wake-ups",
		r.SnoozeSecs, r.SnoozeCalls.P50, r.SnoozeErrs, r.LateSnoozes)

	want := total - r.SnoozeErrs
	ops0 := len(b.eng.rec.Ops())
	end := due0.Add(spread).Add(sc.timeout)
	for rec.count() < want && time.Now().Before(end) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * sc.poll) // a second wake-up would show now
	st1 := s.Stats()
	ops := b.eng.rec.Ops()[ops0:]
	r.Done, r.Retried, r.Dropped, r.SchedErrors = st1.Done-st0.Done, st1.Retried-st0.Retried, st1.Dropped-st0.Dropped, st1.Errors-st0.Errors
	rec.mu.Lock()
	lags := make([]time.Duration, 0, len(rec.woke))
	for id, ts := range rec.woke {
		d, ok := due[id]
		if !ok {
			continue
		}
		lags = append(lags, ts[0].Sub(d))
		r.Doubled += len(ts) - 1
	}
	last := rec.last
	rec.mu.Unlock()
	if spread > 0 {
		const window = 10 * time.Second
		byWin := map[time.Duration][]time.Duration{}
		rec.mu.Lock()
		for id, ts := range rec.woke {
			if d, ok := due[id]; ok {
				w := d.Sub(due0).Truncate(window)
				byWin[w] = append(byWin[w], ts[0].Sub(d))
			}
		}
		rec.mu.Unlock()
		for w := time.Duration(0); w < spread; w += window {
			sw := SnoozeWindow{From: w.String(), Lag: summarize(byWin[w])}
			for _, l := range byWin[w] {
				sw.Max = max(sw.Max, float64(l)/float64(time.Millisecond))
			}
			r.ByDue = append(r.ByDue, sw)
		}
	}
	r.Woken = len(lags)
	r.CallsPerWake = map[string]float64{}
	for _, op := range ops {
		r.CallsPerWake[op] += 1 / float64(max(r.Woken, 1))
	}
	r.Missing = want - r.Woken
	r.Lag = summarize(lags)
	for _, l := range lags {
		r.MaxLagMs = max(r.MaxLagMs, float64(l)/float64(time.Millisecond))
	}
	if !last.IsZero() {
		r.DrainSeconds = last.Sub(due0).Seconds()
		if r.DrainSeconds > 0 {
			r.PerSec = float64(r.Woken) / r.DrainSeconds
		}
	}
	progress("snooze: %d woken, %d missing, %d published twice; lag p50 %.0f ms, p99 %.0f ms, max %.0f ms; checking every badge against a recount",
		r.Woken, r.Missing, r.Doubled, r.Lag.P50, r.Lag.P99, r.MaxLagMs)
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.LoadAvg = strings.Join(strings.Fields(string(la))[:3], " ")
	}
	b.checkSnoozeBadges(ctx, st, users, &r)
	rec.mu.Lock()
	for id := range due {
		if len(rec.woke[id]) == 0 {
			r.MissingAfterCheck++
		}
	}
	r.RereadHints = rec.hints
	rec.mu.Unlock()
	r.MissingAfterCheck -= r.SnoozeErrs
	progress("snooze: %d badges checked, %d wrong, %d notifications still snoozed", r.BadgesChecked, r.BadgesWrong, r.StillSnoozed)
	return r
}

// checkSnoozeBadges compares every user's badge with a recount of its notifications (all
// of the partition's notification items, a raw Query; their state as Store.Notifications
// reports it; the counts of the active ones) and counts those still snoozed.
func (b *harness) checkSnoozeBadges(ctx context.Context, st *store.Store, users []snoozeUser, r *SnoozeRun) {
	var mu sync.Mutex
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(max(b.c.seedWorkers/2, 1))
	for _, u := range users {
		eg.Go(func() error {
			want, snoozed, err := b.recount(gctx, st, u.v)
			if err != nil {
				return err
			}
			got, err := st.Badge(gctx, u.v)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			r.BadgesChecked++
			r.StillSnoozed += snoozed
			if got.Unread != want.Unread || got.Unseen != want.Unseen || !sameCategories(got.Categories, want.Categories) {
				r.BadgesWrong++
				if r.FirstWrong == "" {
					r.FirstWrong = fmt.Sprintf("%s: badge %+v, recount %+v", u.v.UserID, got, want)
				}
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil && r.FirstError == "" {
		r.FirstError = "badge check: " + err.Error()
	}
}

// recount counts v's active unread and unseen notifications (global and per category)
// from the notifications themselves, and those snoozed.
func (b *harness) recount(ctx context.Context, st *store.Store, v inbox.Viewer) (inbox.Badge, int, error) {
	var ids []string
	in := &dynamodb.QueryInput{
		TableName:                aws.String(b.c.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :n)"),
		ExpressionAttributeNames: map[string]string{"#pk": "pk", "#sk": "sk", "#id": "id"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: userPK(v.UserID)},
			":n":  &types.AttributeValueMemberS{Value: "N#"},
		},
		ProjectionExpression: aws.String("#id"),
		ConsistentRead:       aws.Bool(true),
	}
	for {
		out, err := b.eng.db.Query(ctx, in)
		if err != nil {
			return inbox.Badge{}, 0, err
		}
		for _, raw := range out.Items {
			var it struct {
				ID string `dynamodbav:"id"`
			}
			if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
				return inbox.Badge{}, 0, err
			}
			ids = append(ids, it.ID)
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	var bd inbox.Badge
	snoozed := 0
	cats := map[string]*inbox.CategoryCount{}
	for lo := 0; lo < len(ids); lo += 99 {
		ns, err := st.Notifications(ctx, v, ids[lo:min(lo+99, len(ids))])
		if err != nil {
			return inbox.Badge{}, 0, err
		}
		for _, n := range ns {
			if n == nil {
				continue
			}
			if n.SnoozedUntil != nil {
				snoozed++
			}
			if n.Archived || n.SnoozedUntil != nil {
				continue
			}
			c := cats[n.Category]
			if c == nil {
				c = &inbox.CategoryCount{Category: n.Category}
				cats[n.Category] = c
			}
			if !n.Read {
				bd.Unread++
				c.Unread++
			}
			if !n.Seen {
				bd.Unseen++
				c.Unseen++
			}
		}
	}
	for _, c := range cats {
		if c.Category != "" && (c.Unread != 0 || c.Unseen != 0) {
			bd.Categories = append(bd.Categories, *c)
		}
	}
	return bd, snoozed, nil
}

// sameCategories says whether a and b hold the same counts, in any order.
func sameCategories(a, b []inbox.CategoryCount) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[inbox.CategoryCount]int, len(a))
	for _, c := range a {
		m[c]++
	}
	for _, c := range b {
		if m[c] == 0 {
			return false
		}
		m[c]--
	}
	return true
}

// Table renders scenario 12.
func (x *SnoozeResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 11. snooze: wake-up lag, %d notifications of %d users snoozed until the same minute\n\n", x.Notifications, x.Users)
	fmt.Fprintf(&b, "Engine: %s. Scheduler: %s, on %d shards, poll %s. Notifications sent through the store (%.1fs), then per run snoozed with Store.ApplyState "+
		"(OpSnooze, one call per user with all of the user's ids; the wake task in the same transaction), due within the next whole minute that starts after the snoozes should end, "+
		"spread by user. Lag measured %s. After each run every user's badge (unread, unseen, per category) is compared with a recount of its notifications.\n\n",
		x.Engine, x.Scheduler, x.Shards, x.Poll, x.SeedSeconds, x.Measures)
	fmt.Fprintln(&b, "| due times | snoozed in s (call p50 ms; errors, late) | woken / missing | WOKE published twice | handler runs done / retried / dropped | lag p50 ms | lag p90 ms | lag p99 ms | max lag ms | drained in s (wakes/s) | badges = recount (still snoozed) | goal |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range x.Runs {
		fmt.Fprintf(&b, "| %s | %.1f (%.1f; %d, %d) | %d / %d | %d | %d / %d / %d | %.0f | %.0f | %.0f | %.0f | %.1f (%.0f) | %d of %d (%d) | p99 ≤ %.0f ms: %s |\n",
			spreadText(r.Spread), r.SnoozeSecs, r.SnoozeCalls.P50, r.SnoozeErrs, r.LateSnoozes, r.Woken, r.Missing, r.Doubled,
			r.Done, r.Retried, r.Dropped, r.Lag.P50, r.Lag.P90, r.Lag.P99, r.MaxLagMs, r.DrainSeconds, r.PerSec,
			r.BadgesChecked-r.BadgesWrong, r.BadgesChecked, r.StillSnoozed, x.GoalP99Ms, yes(r.GoalP99Met))
	}
	for _, r := range x.Runs {
		var n float64
		for _, v := range r.CallsPerWake {
			n += v
		}
		fmt.Fprintf(&b, "\nRun %s: DynamoDB calls per wake-up, the scheduler's own included: %s. Load average (1, 5, 15 min) at the end of the wait: %s. "+
			"WOKE never published (after the badge check): %d; re-read hints published: %d.\n",
			spreadText(r.Spread), calls(Cost{CallsPerRequest: n, DynamoDBCalls: r.CallsPerWake}), r.LoadAvg, r.MissingAfterCheck, r.RereadHints)
	}
	for _, r := range x.Runs {
		if len(r.ByDue) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nRun %s, lag by when in the minute the wake-ups were due (p50 / p99 / max ms):", spreadText(r.Spread))
		for _, w := range r.ByDue {
			fmt.Fprintf(&b, " from %s %.0f / %.0f / %.0f (n %d);", w.From, w.Lag.P50, w.Lag.P99, w.Max, w.Lag.N)
		}
		b.WriteString("\n")
	}
	for _, r := range x.Runs {
		if r.FirstWrong != "" || r.FirstError != "" || r.SchedErrors > 0 {
			fmt.Fprintf(&b, "\nRun %s: scheduler call errors %d; first wrong badge: %s; first error: %s.\n", r.Spread, r.SchedErrors, r.FirstWrong, r.FirstError)
		}
	}
	return b.String()
}
