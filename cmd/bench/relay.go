package main

// Scenario 8, relay: an outside write (no gateway) reaches a WebSocket subscriber through
// the DynamoDB Streams relay (issue 4's goal: within 1 s at p99).
//
// With a redis-server started here, this process runs a relay in-process (relay.New +
// Run on its own context, with the defaults of `go run . relay`: MaxPoll 500ms, lease
// 10s) publishing to a Redis broker of its own, and one gateway instance with another
// Redis broker. S subscribers (distinct seeded users, one WebSocket each, opened by this
// process: no gateway CPU is measured here, and one process keeps one monotonic clock)
// subscribe to `subscription { unreadCount }` on the gateway. Then, at a steady rate, for
// a random subscribed user with no write in flight, one TransactWriteItems straight into
// the table with the SDK, shaped exactly like the store's send: a Put of a notification
// item (pk T#{tenant}#U#{user}, sk N#{ulid}, on GSI1 under pk#UNREAD) and an Update of
// META (sk N~META: ADD unreadCount 1, version 1, SET clock to the new id). Each write is
// timed from just before the TransactWriteItems call to the arrival, at that user's
// subscriber, of the frame carrying the new count.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/relay"
	"github.com/inboxgw/gateway/store"
)

// relayConfig holds the relay scenario's flags.
type relayConfig struct {
	subscribers int
	writes      int
	rate        float64
	timeout     time.Duration
}

// RelayResult is scenario 8.
type RelayResult struct {
	Engine      string  `json:"engine"`
	Broker      string  `json:"broker"`
	RelayHow    string  `json:"relay"`
	Topology    string  `json:"topology"`
	Writer      string  `json:"writer"`
	Measures    string  `json:"latency_measures"`
	Bound       string  `json:"latency_bound"`
	Subscribers int     `json:"subscribers"`
	Connected   int     `json:"connected"`
	ConnectSecs float64 `json:"connect_seconds"`
	// CatchUpSeconds is how long the relay took, from its start, to deliver a first probe
	// write (lease, stream discovery, and reading past the records of the seed).
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	Rate           float64 `json:"writes_per_sec"`
	Writes         int     `json:"writes"`
	WriteErrors    int     `json:"write_errors"`
	FirstError     string  `json:"first_error,omitempty"`
	Delivered      int     `json:"delivered"`
	Lost           int     `json:"lost"`
	LostAfter      string  `json:"lost_after"`
	Skipped        int     `json:"ticks_skipped_no_idle_user"`
	Seconds        float64 `json:"seconds"`
	Delivery       Latency `json:"delivery_latency"`
	WriteRTT       Latency `json:"transact_write_latency"`
	Published      int64   `json:"relay_published_changes"`
	GoalP99Ms      float64 `json:"goal_p99_ms"`
	GoalP99Met     bool    `json:"goal_p99_met"`
	Unexpected     int     `json:"unexpected_frames"`
	SkippedNote    string  `json:"skipped,omitempty"`
}

// outsideWrite is one notification + META update for user u, as a service writing the
// table directly would make it (store.OutsideSendInput: the store's send without the
// idempotency guard).
func outsideWrite(table, user, id string) (*dynamodb.TransactWriteItemsInput, error) {
	return store.OutsideSendInput(table, inbox.Viewer{TenantID: tenant, UserID: user}, inbox.Notification{
		ID: id, Type: "comment", Title: "From a service", Body: "Written straight into the table.",
		CreatedAt: time.UnixMilli(int64(ulid.MustParse(id).Time())),
	})
}

func (b *harness) relayScenario(ctx context.Context) (*RelayResult, error) {
	rc := b.c.relay
	res := &RelayResult{Engine: b.eng.name, Broker: "redis", Subscribers: rc.subscribers, Rate: rc.rate, GoalP99Ms: 1000,
		LostAfter: rc.timeout.String(),
		RelayHow: "in-process: relay.New + Run on its own context in the bench process, with the defaults of `go run . relay` " +
			"(MaxPoll 500ms, Discover 10s, Lease 10s), publishing to a Redis broker of its own",
		Topology: "relay (its own Redis broker) -> redis-server -> one gateway instance (another Redis broker) -> WebSocket subscribers",
		Writer: "one TransactWriteItems per change with the SDK, no gateway: Put of a notification item (pk T#{tenant}#U#{user}, sk N#{ulid}, " +
			"gsi1pk pk#UNREAD, gsi1sk N#{ulid}) + Update of META (sk N~META: ADD unreadCount 1, version 1; SET clock, GSI1 keys), " +
			"the store's send without its idempotency guard",
		Measures: "from just before the TransactWriteItems call to the arrival, at that user's subscriber, of the `next` frame carrying " +
			"the new unreadCount; subscribers are WebSockets opened by the bench process itself (graphql-transport-ws), one monotonic clock",
		Bound: "the stream's visibility on DynamoDB Local plus the relay's polling: after a non-empty GetRecords it pauses 200ms " +
			"(at most 5 reads/s a shard), after an empty one 50ms doubling up to MaxPoll (500ms); then the Redis hop and the subscription's frame"}
	if rc.subscribers < 1 || rc.writes < 1 || rc.rate <= 0 {
		return nil, fmt.Errorf("-relay-subscribers, -relay-writes and -relay-rate must be positive")
	}
	if b.eng.streams == nil {
		res.SkippedNote = "no DynamoDB Streams client for this engine"
		return res, nil
	}
	url, err := b.redisURL(ctx)
	if errors.Is(err, errRedisMissing) {
		res.SkippedNote = err.Error()
		progress("relay: skipped: %v", err)
		return res, nil
	}
	if err != nil {
		return nil, err
	}

	users := make([]string, rc.subscribers)
	for i := range users {
		users[i] = fmt.Sprintf("relay%05d", i)
	}
	progress("relay: seeding %d users with 1 unread notification each", len(users))
	if _, err := liveSeed(ctx, b.eng.db, b.c.table, users, 1, b.c.seedWorkers); err != nil {
		return nil, fmt.Errorf("relay seed: %w", err)
	}

	// The relay, with a broker of its own (as `go run . relay` would be: another process).
	relayBroker, err := live.NewRedis(ctx, live.RedisOptions{URL: url, Logger: b.log})
	if err != nil {
		return nil, err
	}
	defer relayBroker.Close()
	r := relay.New(relay.Options{DB: b.eng.db, Streams: b.eng.streams, Table: b.c.table, Publisher: relayBroker, Owner: "bench-relay", Logger: b.log})
	relayStart := time.Now()
	stopRelay := background(ctx, r.Run, r.Release)
	defer func() {
		if err := stopRelay(); err != nil {
			progress("relay: %v", err)
		}
	}()

	// The gateway instance.
	gwBroker, err := live.NewRedis(ctx, live.RedisOptions{URL: url, Logger: b.log})
	if err != nil {
		return nil, err
	}
	defer gwBroker.Close()
	gw, err := b.startLiveGateway(gwBroker, false)
	if err != nil {
		return nil, err
	}
	defer gw.close()

	// The subscribers.
	progress("relay: connecting %d subscribers", len(users))
	subs := make([]*liveSub, len(users))
	counts := make([]int, len(users)) // the count each user's META holds, as written here
	t0 := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		next     int
		firstErr error
	)
	for range min(32, len(users)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(users) {
					return
				}
				tok, err := b.token(users[i])
				var s *liveSub
				if err == nil {
					dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					s, err = dialSub(dctx, wsURL(gw.url), &liveUser{ID: users[i], Token: tok}, nil)
					cancel()
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				subs[i] = s
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.ConnectSecs = time.Since(t0).Seconds()
	var idx []int
	for i, s := range subs {
		if s != nil {
			idx = append(idx, i)
			counts[i] = s.count
			go func() { _ = s.read(0) }()
		}
	}
	defer func() {
		for _, s := range subs {
			if s != nil {
				_ = s.conn.CloseNow()
			}
		}
	}()
	res.Connected = len(idx)
	if res.Connected == 0 {
		return nil, fmt.Errorf("relay: no subscriber connected: %v", firstErr)
	}
	progress("relay: %d connected in %.1fs; waiting for the gateway's Redis subscriptions", res.Connected, res.ConnectSecs)
	for deadline := time.Now().Add(30 * time.Second); gwBroker.Channels() < res.Connected && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}

	// One write: returns the delivery latency (ok false when lost) and the write's own
	// round trip.
	write := func(i int, timeout time.Duration) (d, rtt time.Duration, ok bool, err error) {
		s := subs[i]
		id := ulid.Make().String()
		in, err := outsideWrite(b.c.table, users[i], id)
		if err != nil {
			return 0, 0, false, err
		}
		s.mu.Lock()
		select {
		case <-s.done: // a stale resolution (none expected)
		default:
		}
		s.pending, s.want = true, counts[i]+1
		s.t0 = time.Now()
		start := s.t0
		s.mu.Unlock()
		_, err = b.eng.db.TransactWriteItems(ctx, in)
		rtt = time.Since(start)
		if err != nil {
			s.mu.Lock()
			s.pending = false
			s.mu.Unlock()
			return 0, rtt, false, err
		}
		counts[i]++
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case d = <-s.done:
			return d, rtt, true, nil
		case <-t.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
		if s.pending {
			s.pending = false
		} else {
			d, ok = <-s.done, true // resolved just now
		}
		s.mu.Unlock()
		return d, rtt, ok, nil
	}

	// Catch-up: a probe write to the first subscriber, repeated until one arrives (the
	// relay takes its lease, finds the stream, and reads past everything written so far).
	progress("relay: waiting for the relay to catch up with the stream (probe writes)")
	for {
		_, _, ok, err := write(idx[0], 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("relay probe write: %w", err)
		}
		if ok {
			break
		}
		if time.Since(relayStart) > 5*time.Minute || ctx.Err() != nil {
			return nil, fmt.Errorf("relay: no probe write delivered within %v of the relay's start", time.Since(relayStart).Round(time.Second))
		}
	}
	res.CatchUpSeconds = time.Since(relayStart).Seconds()
	progress("relay: caught up %.1fs after its start; %d writes at %.0f/s", res.CatchUpSeconds, rc.writes, rc.rate)

	// The steady writes, after a short unmeasured warm-up at the same rate.
	idle := make(chan int, len(idx))
	for _, j := range rand.Perm(len(idx)) {
		idle <- idx[j]
	}
	var (
		rmu        sync.Mutex
		delivs, rs []time.Duration
		opsWG      sync.WaitGroup
	)
	load := func(n int, record bool) time.Duration {
		start := time.Now()
		tick := time.NewTicker(time.Duration(float64(time.Second) / rc.rate))
		for issued := 0; issued < n && ctx.Err() == nil; {
			<-tick.C
			select {
			case i := <-idle:
				issued++
				opsWG.Add(1)
				go func() {
					defer opsWG.Done()
					defer func() { idle <- i }()
					d, rtt, ok, err := write(i, rc.timeout)
					if !record {
						return
					}
					rmu.Lock()
					defer rmu.Unlock()
					res.Writes++
					switch {
					case err != nil:
						res.WriteErrors++
						if res.FirstError == "" {
							res.FirstError = err.Error()
						}
					case ok:
						res.Delivered++
						delivs = append(delivs, d)
						rs = append(rs, rtt)
					default:
						res.Lost++
						rs = append(rs, rtt)
					}
				}()
			default:
				if record {
					rmu.Lock()
					res.Skipped++
					rmu.Unlock()
				}
			}
		}
		tick.Stop()
		opsWG.Wait()
		return time.Since(start)
	}
	load(min(max(rc.writes/10, 5), 20), false)
	for _, s := range subs {
		if s != nil {
			s.mu.Lock()
			s.unexpected = 0
			s.mu.Unlock()
		}
	}
	pub0 := r.Published()
	res.Seconds = load(rc.writes, true).Seconds()
	res.Published = r.Published() - pub0
	res.Delivery, res.WriteRTT = summarize(delivs), summarize(rs)
	for _, s := range subs {
		if s != nil {
			s.mu.Lock()
			res.Unexpected += s.unexpected
			s.mu.Unlock()
		}
	}
	res.GoalP99Met = res.Delivery.N > 0 && res.Delivery.P99 <= res.GoalP99Ms && res.Lost == 0 && res.WriteErrors == 0
	progress("relay: %d delivered, %d lost, %d write errors; delivery p50 %.1f ms, p99 %.1f ms (goal p99 ≤ %.0f ms: %s)",
		res.Delivered, res.Lost, res.WriteErrors, res.Delivery.P50, res.Delivery.P99, res.GoalP99Ms, yes(res.GoalP99Met))
	return res, nil
}

// Table renders scenario 8.
func (x *RelayResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 8. relay: an outside write reaches a subscriber through the DynamoDB Streams relay\n\n")
	if x.SkippedNote != "" {
		fmt.Fprintf(&b, "Skipped: %s.\n", x.SkippedNote)
		return b.String()
	}
	fmt.Fprintf(&b, "Engine: %s. Relay: %s. Path: %s. Writer: %s. %d subscribers (distinct users), %d writes at %.0f/s to random subscribed users, never two in flight for one user.\n\n",
		x.Engine, x.RelayHow, x.Topology, x.Writer, x.Subscribers, x.Writes, x.Rate)
	fmt.Fprintf(&b, "Latency measured: %s. Bounded by %s.\n\n", x.Measures, x.Bound)
	fmt.Fprintln(&b, "| broker | subscribers (connected) | relay catch-up s | writes (errors) | delivered / lost | delivery p50 ms | delivery p90 ms | delivery p99 ms | TransactWriteItems p50 / p99 ms | goal |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	fmt.Fprintf(&b, "| %s | %d (%d) | %.1f | %d (%d) | %d / %d | %.1f | %.1f | %.1f | %.1f / %.1f | p99 ≤ %.0f ms: %s |\n\n",
		x.Broker, x.Subscribers, x.Connected, x.CatchUpSeconds, x.Writes, x.WriteErrors, x.Delivered, x.Lost,
		x.Delivery.P50, x.Delivery.P90, x.Delivery.P99, x.WriteRTT.P50, x.WriteRTT.P99, x.GoalP99Ms, yes(x.GoalP99Met))
	fmt.Fprintf(&b, "A write counts as lost when its frame has not arrived %s after it. The relay published %d changes during the measured writes (a notification and a META record each). %d ticks found no idle user; %d frames nobody waited for.",
		x.LostAfter, x.Published, x.Skipped, x.Unexpected)
	if x.FirstError != "" {
		fmt.Fprintf(&b, " First write error: %s.", x.FirstError)
	}
	fmt.Fprintf(&b, " Catch-up: from the relay's start to the first probe write delivered (lease, stream discovery, reading past the records written before).\n")
	return b.String()
}
