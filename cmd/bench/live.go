package main

// Scenario 7, live: `subscription { unreadCount }` over WebSocket (graphql-transport-ws).
//
// For each broker (local; redis, two gateway instances over one redis-server) and each
// subscriber count S, a child process (this binary with -livegen) opens S WebSocket
// connections, one subscription each, one distinct seeded user each, to the subscribers'
// gateway. This process measures its own RSS and goroutines at rest and with the S
// subscribers connected, then the child sends markRead / markUnread / sendNotification
// mutations at a steady rate to random subscribed users (never two in flight for one
// user) through the mutations' gateway (the same instance with local, the other instance
// with redis) and times each change from just before its HTTP request is issued to the
// arrival, at that user's subscriber, of the frame carrying the expected count (one
// monotonic clock: both ends are in the child). Then a burst: one user, a fast and a slow
// subscriber, B markRead/markUnread toggles as fast as one client can send them.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/coder/websocket"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/store"
)

// liveConfig holds the live scenario's flags.
type liveConfig struct {
	subscribers   string // comma-separated S values
	brokers       string // comma-separated: local,redis
	rate          float64
	duration      time.Duration
	sendShare     float64
	notifications int
	burst         int
	slowDelay     time.Duration
	redisServer   string
	dialWorkers   int
	events        int // inboxEvents rounds (0 skips the measurement)
	// heapProfile is -live-heapprofile: a file-name prefix ("" writes no profile).
	heapProfile string
}

func (lc liveConfig) sizes() ([]int, error) {
	var out []int
	for _, f := range strings.Split(lc.subscribers, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-live-subscribers: %q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// LiveRun is one (broker, S) run of the live scenario.
type LiveRun struct {
	Broker      string `json:"broker"`
	Subscribers int    `json:"subscribers"`
	Connected   int    `json:"connected"`
	// Topology says where subscribers and mutations go.
	Topology       string  `json:"topology"`
	ConnectSeconds float64 `json:"connect_seconds"`
	ConnectErrors  int     `json:"connect_errors"`
	FirstError     string  `json:"first_error,omitempty"`
	// Gateway process (this process) at rest and with the subscribers connected.
	RSSAtRestMiB    float64 `json:"rss_at_rest_mib"`
	RSSConnectedMiB float64 `json:"rss_connected_mib"`
	RSSPeakLoadMiB  float64 `json:"rss_peak_under_load_mib"`
	RSSPerSubKiB    float64 `json:"rss_kib_per_subscriber"`
	// The same after a GC and a scavenge (debug.FreeOSMemory), as the at-rest figure is
	// taken: what the subscribers hold, without the garbage and the GC's headroom (GOGC
	// 100 lets the heap grow to twice its live size, the at-rest heap's included, before
	// collecting) that the figure above attributes to them.
	RSSConnectedAfterGCMiB float64 `json:"rss_connected_after_gc_mib"`
	RSSPerSubAfterGCKiB    float64 `json:"rss_kib_per_subscriber_after_gc"`
	GoLiveHeapPerSubKiB    float64 `json:"go_live_heap_kib_per_subscriber"`
	GoHeapStackPerSubKiB   float64 `json:"go_heap_and_stacks_kib_per_subscriber"`
	GoStackPerSubKiB       float64 `json:"go_stacks_kib_per_subscriber"`
	GoroutinesAtRest       int     `json:"goroutines_at_rest"`
	GoroutinesConnected    int     `json:"goroutines_connected"`
	GoroutinesPerSub       float64 `json:"goroutines_per_subscriber"`
	// The steady load.
	Steady liveSteadyResult `json:"steady"`
	// Goals.
	GoalP99Ms  float64 `json:"goal_p99_ms"`
	GoalP99Met bool    `json:"goal_p99_met"`
	GoalRSSMet *bool   `json:"goal_rss_32kib_met,omitempty"` // only judged at 10,000 or more
	// GoalRSSAfterGCMet judges RSSPerSubAfterGCKiB.
	GoalRSSAfterGCMet *bool `json:"goal_rss_32kib_met_after_gc,omitempty"`
}

// LiveResult is scenario 7.
type LiveResult struct {
	Engine        string        `json:"engine"`
	Transport     string        `json:"transport"`
	Measures      string        `json:"latency_measures"`
	Rate          float64       `json:"mutations_per_sec"`
	Duration      string        `json:"duration"`
	SendShare     float64       `json:"send_share"`
	Notifications int           `json:"seeded_unread_per_user"`
	SeedSeconds   float64       `json:"seed_seconds"`
	RLimitNoFile  uint64        `json:"rlimit_nofile"`
	Runs          []LiveRun     `json:"runs"`
	Burst         *liveBurstOut `json:"burst,omitempty"`
	// Events is the inboxEvents delivery measurement (local broker).
	Events       *LiveEventsResult `json:"inbox_events,omitempty"`
	RedisSkipped string            `json:"redis_skipped,omitempty"`
}

// --- child protocol ---------------------------------------------------------------

type liveSpec struct {
	Mode        string // "steady" or "burst"
	SubURL      string // ws:// URL of the subscribers' gateway
	SlowSubURL  string // burst: the listener with small socket buffers
	MutURL      string // http:// URL the mutations go to
	Users       []liveUser
	SenderToken string
	Rate        float64
	Duration    time.Duration
	SendShare   float64
	DialWorkers int
	Burst       int
	SlowDelay   time.Duration
	Timeout     time.Duration // how long one delivery may take before it counts as lost
}

type liveUser struct {
	ID     string
	Token  string
	Notifs []string // global ids of the seeded notifications
	Read   uint64   // bit i set: Notifs[i] is read
}

type liveReady struct {
	Connected  int
	Errors     int
	FirstError string
	Seconds    float64
}

type liveSteadyResult struct {
	Mutations     int     `json:"mutations"`
	Marks         int     `json:"mark_mutations"`
	Sends         int     `json:"send_mutations"`
	MutationErrs  int     `json:"mutation_errors"`
	FirstError    string  `json:"first_error,omitempty"`
	Delivered     int     `json:"delivered"`
	Lost          int     `json:"lost"`
	Skipped       int     `json:"ticks_skipped_no_idle_user"`
	Seconds       float64 `json:"seconds"`
	FramesBefore  int     `json:"frames_before_http_response"`
	Delivery      Latency `json:"delivery_latency"`
	DeliveryMarks Latency `json:"delivery_latency_mark"`
	DeliverySends Latency `json:"delivery_latency_send"`
	MutationRTT   Latency `json:"mutation_http_latency"`
	Unexpected    int     `json:"unexpected_frames"`
	// Read masks after the run, by user index (carried into the next run's spec).
	Read []uint64 `json:"-"`
}

type liveBurstOut struct {
	Broker        string  `json:"broker"`
	Changes       int     `json:"changes"`
	Seconds       float64 `json:"burst_seconds"`
	Initial       int     `json:"initial_count"`
	Final         int     `json:"final_count_last_mutation"`
	StoreFinal    int     `json:"final_count_store"`
	FastFrames    int     `json:"fast_frames"`
	FastLast      int     `json:"fast_last_value"`
	SlowFrames    int     `json:"slow_frames"`
	SlowLast      int     `json:"slow_last_value"`
	SlowDelay     string  `json:"slow_sleep_per_frame"`
	SlowDrainSecs float64 `json:"slow_last_frame_after_burst_seconds"`
	Errors        int     `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	Correct       bool    `json:"both_end_on_final_count"`
	How           string  `json:"slow_subscriber"`
}

// --- parent side --------------------------------------------------------------------

func notificationGID(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("Notification:" + id))
}

// raiseNoFile raises RLIMIT_NOFILE's soft limit to the hard limit and returns it.
func raiseNoFile() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	return uint64(rl.Cur)
}

// liveSeed writes n unread notifications and a matching META for each user, with
// BatchWriteItem in the store's item format (as bulkInbox does for the big inboxes).
func liveSeed(ctx context.Context, db *dynamodb.Client, table string, users []string, n, workers int) (map[string][]string, error) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	entropy := ulid.Monotonic(mrand.New(mrand.NewSource(int64(7+len(users)))), 0)
	base := time.Now().Add(-time.Hour)
	ids := map[string][]string{}
	var items []map[string]types.AttributeValue
	for ui, u := range users {
		pk := userPK(u)
		for i := range n {
			id := ulid.MustNew(ulid.Timestamp(base.Add(time.Duration(ui*n+i)*time.Millisecond)), entropy).String()
			ids[u] = append(ids[u], id)
			items = append(items, map[string]types.AttributeValue{
				"pk": s(pk), "sk": s("N#" + id), "gsi1pk": s(pk + "#UNREAD"), "gsi1sk": s("N#" + id),
				"entityType": s("Notification"), "id": s(id), "type": s("comment"), "title": s("New comment"),
				"body":      s("Looks good to me."),
				"createdAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(ulid.MustParse(id).Time()), 10)},
			})
		}
		items = append(items, map[string]types.AttributeValue{
			"pk": s(pk), "sk": s("N~META"), "gsi1pk": s(pk + "#UNREAD"), "gsi1sk": s("N~META"), "entityType": s("InboxMeta"),
			"unreadCount": &types.AttributeValueMemberN{Value: strconv.Itoa(n)}, "clock": s(ids[u][n-1]),
			"version": &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
		})
	}
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(max(workers, 1))
	for lo := 0; lo < len(items); lo += 25 {
		chunk := items[lo:min(len(items), lo+25)]
		eg.Go(func() error {
			reqs := make([]types.WriteRequest, len(chunk))
			for i, it := range chunk {
				reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
			}
			return batchWrite(gctx, db, table, reqs)
		})
	}
	return ids, eg.Wait()
}

// smallSendBufListener sets SO_SNDBUF on every accepted connection: the burst's slow
// subscriber connects through it, so that its pipe fills after a few KiB, as a slow link's
// would (loopback's auto-tuned buffers hold megabytes: every frame of a burst would fit).
type smallSendBufListener struct {
	net.Listener
	bytes int
}

func (l smallSendBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		_ = tc.SetWriteBuffer(l.bytes)
	}
	return c, err
}

// liveGateway is one gateway instance of the live scenario, with its own store
// (publishing to its broker).
type liveGateway struct {
	url     string // http://.../graphql
	slowURL string // the same handler behind small send buffers (local only)
	st      *store.Store
	h       *httpapi.Handler
	gw      *app.Gateway
	srvs    []*http.Server
}

func (b *harness) startLiveGateway(broker live.Broker, slowListener bool) (*liveGateway, error) {
	gw, err := build(context.Background(), b.eng.db, b.c.table, b.log, b.secret, nil,
		app.Deps{Broker: broker, Store: []store.Option{store.WithSweepWorkers(0)}})
	if err != nil {
		return nil, err
	}
	st, h := gw.Store, gw.Handler
	g := &liveGateway{st: st, h: h, gw: gw}
	serve := func(ln net.Listener) string {
		srv := &http.Server{Handler: gw.HTTP, ReadHeaderTimeout: 10 * time.Second}
		g.srvs = append(g.srvs, srv)
		go func() { _ = srv.Serve(ln) }()
		return "http://" + ln.Addr().String() + "/graphql"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gw.Close()
		return nil, err
	}
	g.url = serve(ln)
	if slowListener {
		ln2, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			g.close()
			return nil, err
		}
		g.slowURL = serve(smallSendBufListener{Listener: ln2, bytes: 1024})
	}
	return g, nil
}

func (g *liveGateway) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = g.h.Shutdown(ctx)
	for _, s := range g.srvs {
		_ = s.Close()
	}
	g.gw.Close()
}

func wsURL(u string) string { return "ws" + strings.TrimPrefix(u, "http") }

// startRedis runs redis-server on a free loopback port; "" when it is not installed.
func startRedis(ctx context.Context, bin string) (url string, stop func(), err error) {
	if bin == "" {
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return "", nil, errRedisMissing
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--maxclients", "1000")
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server did not listen on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Sprintf("redis://%s/0", addr), stop, nil
}

var errRedisMissing = errors.New("redis-server not found on PATH (apt-get install -y redis-server, or -redis-server PATH)")

// settle waits until the engine saw no DynamoDB call for quiet (at most limit): the
// subscriptions' first badge reads, and with redis the re-reads that follow each
// channel's SUBSCRIBE confirmation, are over.
func (b *harness) settle(quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	n, since := len(b.eng.rec.Ops()), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if m := len(b.eng.rec.Ops()); m != n {
			n, since = m, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

func (b *harness) liveScenario(ctx context.Context) (*LiveResult, error) {
	lc := b.c.live
	if lc.heapProfile != "" {
		// One sample per 4 KiB allocated from now on: the default rate (one per 512 KiB)
		// leaves a few samples of each per-subscriber allocation site, too few to count.
		runtime.MemProfileRate = 4096
	}
	sizes, err := lc.sizes()
	if err != nil {
		return nil, err
	}
	maxS := 0
	for _, s := range sizes {
		maxS = max(maxS, s)
	}
	res := &LiveResult{Engine: b.eng.name, Rate: lc.rate, Duration: lc.duration.String(), SendShare: lc.sendShare,
		Notifications: lc.notifications, RLimitNoFile: raiseNoFile(),
		Transport: "graphql-transport-ws over github.com/coder/websocket, one WebSocket connection per subscriber (no multiplexing), from a child process",
		Measures: "delivery latency: from just before the mutation's HTTP request is issued (markRead/markUnread/sendNotification) to the arrival, " +
			"at that user's subscriber, of the `next` frame carrying the expected unreadCount; it includes the mutation's DynamoDB commit " +
			"(and for a send, the subscriber's re-read of the badge); both ends are in the child, on one monotonic clock"}
	if lc.notifications < 1 || lc.notifications > 64 {
		return nil, fmt.Errorf("-live-notifications must be 1..64")
	}

	users := make([]string, maxS)
	for i := range users {
		users[i] = fmt.Sprintf("live%05d", i)
	}
	progress("live: seeding %d users with %d unread notifications each (BatchWriteItem)", maxS+1, lc.notifications)
	t0 := time.Now()
	ids, err := liveSeed(ctx, b.eng.db, b.c.table, append(append([]string{}, users...), "liveburst"), lc.notifications, b.c.seedWorkers)
	if err != nil {
		return nil, fmt.Errorf("live seed: %w", err)
	}
	res.SeedSeconds = time.Since(t0).Seconds()
	specUsers := make([]liveUser, maxS)
	for i, u := range users {
		tok, err := b.token(u)
		if err != nil {
			return nil, err
		}
		specUsers[i] = liveUser{ID: u, Token: tok}
		for _, id := range ids[u] {
			specUsers[i].Notifs = append(specUsers[i].Notifs, notificationGID(id))
		}
	}
	sender, err := b.token("live-sender", auth.ScopeSend)
	if err != nil {
		return nil, err
	}

	for _, brokerName := range strings.Split(lc.brokers, ",") {
		if brokerName = strings.TrimSpace(brokerName); brokerName != "" {
			if err := b.liveBroker(ctx, res, brokerName, sizes, specUsers, ids["liveburst"], sender); err != nil {
				return nil, err
			}
		}
	}
	if res.Burst != nil {
		res.Burst.How = "subscribes through a listener whose accepted sockets have SO_SNDBUF 1 KiB (the kernel's minimum, about 4.5 KiB), " +
			"with SO_RCVBUF 1 KiB on its own socket and at most 16 bytes per read, and sleeps " + lc.slowDelay.String() +
			" after each frame: its pipe fills after a few KiB, as a slow link's would; with loopback's auto-tuned buffers (megabytes) every frame of the burst would fit in the kernel and nothing would need coalescing"
	}
	return res, nil
}

// liveBroker runs the live runs of one broker (local: one gateway instance; redis: two
// over the shared redis-server, subscribers on one and mutations to the other) into res,
// and on the local broker the burst (burstIDs are its user's notifications) and the
// inboxEvents measurement.
func (b *harness) liveBroker(ctx context.Context, res *LiveResult, brokerName string, sizes []int, specUsers []liveUser, burstIDs []string, sender string) error {
	lc := b.c.live
	var subGW, mutGW *liveGateway
	var channels func() int
	switch brokerName {
	case "local":
		g, err := b.startLiveGateway(live.NewLocal(), true)
		if err != nil {
			return err
		}
		defer g.close()
		subGW, mutGW = g, g
	case "redis":
		url, err := b.redisURL(ctx)
		if errors.Is(err, errRedisMissing) {
			res.RedisSkipped = err.Error()
			progress("live: redis skipped: %v", err)
			return nil
		}
		if err != nil {
			return err
		}
		var gws [2]*liveGateway
		var brs [2]*live.Redis
		for i := range gws {
			br, err := live.NewRedis(ctx, live.RedisOptions{URL: url, Logger: b.log})
			if err != nil {
				return err
			}
			defer br.Close()
			g, err := b.startLiveGateway(br, false)
			if err != nil {
				return err
			}
			defer g.close() // before its broker's Close
			gws[i], brs[i] = g, br
		}
		subGW, mutGW = gws[0], gws[1]
		channels = brs[0].Channels
	default:
		return fmt.Errorf("-live-brokers: unknown broker %q (local, redis)", brokerName)
	}
	for _, S := range sizes {
		run, err := b.liveRun(ctx, brokerName, S, subGW, mutGW, channels, specUsers[:S], sender)
		if err != nil {
			return fmt.Errorf("%s, %d subscribers: %w", brokerName, S, err)
		}
		res.Runs = append(res.Runs, run)
	}
	if brokerName != "local" {
		return nil
	}
	if lc.burst > 0 {
		bu := liveUser{ID: "liveburst"}
		var err error
		if bu.Token, err = b.token(bu.ID); err != nil {
			return err
		}
		for _, id := range burstIDs {
			bu.Notifs = append(bu.Notifs, notificationGID(id))
		}
		progress("live: burst of %d markRead/markUnread toggles on one user, a fast and a slow (%s a frame) subscriber", lc.burst, lc.slowDelay)
		out, err := runLiveChild(ctx, liveSpec{Mode: "burst", SubURL: wsURL(subGW.url), SlowSubURL: wsURL(subGW.slowURL), MutURL: mutGW.url,
			Users: []liveUser{bu}, Burst: lc.burst, SlowDelay: lc.slowDelay, Timeout: 30 * time.Second}, nil)
		if err != nil {
			return fmt.Errorf("burst: %w", err)
		}
		bo := out.Burst
		bo.Broker = brokerName
		res.Burst = bo
	}
	if lc.events > 0 {
		eu := liveUser{ID: "liveevents"}
		var err error
		if eu.Token, err = b.token(eu.ID); err != nil {
			return err
		}
		progress("live: inboxEvents delivery, %d rounds of sendNotification + markRead on one user", lc.events)
		ev, err := b.liveEvents(ctx, eu, sender, lc.events)
		if err != nil {
			return fmt.Errorf("inboxEvents: %w", err)
		}
		res.Events = ev
	}
	return nil
}

// liveRun is one (broker, S) run.
func (b *harness) liveRun(ctx context.Context, broker string, S int, subGW, mutGW *liveGateway, channels func() int, users []liveUser, sender string) (LiveRun, error) {
	lc := b.c.live
	r := LiveRun{Broker: broker, Subscribers: S, Topology: "subscribers and mutations on one gateway instance (in-process broker)"}
	r.GoalP99Ms = 50
	if broker == "redis" {
		r.Topology = "subscribers on instance A, mutations to instance B; both Redis brokers on one redis-server"
		r.GoalP99Ms = 100
	}
	// At rest: garbage collected and returned to the OS, so the delta is what the
	// subscribers hold (measured at S without forcing a GC: conservative).
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	r.RSSAtRestMiB = rssMiB()
	r.GoroutinesAtRest = runtime.NumGoroutine()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	profile := ""
	if lc.heapProfile != "" {
		profile = fmt.Sprintf("%s-%s-%d", lc.heapProfile, broker, S)
		if err := writeProfile("heap", profile+".heap.base", 0); err != nil {
			return r, err
		}
	}

	progress("live %s: connecting %d subscribers (child process, %d dialing at a time)", broker, S, lc.dialWorkers)
	spec := liveSpec{Mode: "steady", SubURL: wsURL(subGW.url), MutURL: mutGW.url, Users: users, SenderToken: sender,
		Rate: lc.rate, Duration: lc.duration, SendShare: lc.sendShare, DialWorkers: lc.dialWorkers, Timeout: 5 * time.Second}
	var pk peak
	var stopPeak func()
	out, err := runLiveChild(ctx, spec, func(ready liveReady) {
		r.Connected, r.ConnectErrors, r.FirstError, r.ConnectSeconds = ready.Connected, ready.Errors, ready.FirstError, ready.Seconds
		progress("live %s: %d connected in %.1fs (%d errors); waiting for the gateway to settle", broker, ready.Connected, ready.Seconds, ready.Errors)
		if channels != nil {
			for deadline := time.Now().Add(30 * time.Second); channels() < ready.Connected && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
		}
		b.settle(time.Second, 60*time.Second)
		r.RSSConnectedMiB = rssMiB()
		r.GoroutinesConnected = runtime.NumGoroutine()
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		n := float64(max(ready.Connected, 1))
		r.RSSPerSubKiB = (r.RSSConnectedMiB - r.RSSAtRestMiB) * 1024 / n
		r.GoroutinesPerSub = float64(r.GoroutinesConnected-r.GoroutinesAtRest) / n
		r.GoHeapStackPerSubKiB = (float64(ms1.HeapInuse+ms1.StackInuse) - float64(ms0.HeapInuse+ms0.StackInuse)) / 1024 / n
		r.GoStackPerSubKiB = (float64(ms1.StackInuse) - float64(ms0.StackInuse)) / 1024 / n
		runtime.GC()
		debug.FreeOSMemory()
		time.Sleep(200 * time.Millisecond)
		r.RSSConnectedAfterGCMiB = rssMiB()
		r.RSSPerSubAfterGCKiB = (r.RSSConnectedAfterGCMiB - r.RSSAtRestMiB) * 1024 / n
		var ms2 runtime.MemStats
		runtime.ReadMemStats(&ms2)
		r.GoLiveHeapPerSubKiB = (float64(ms2.HeapAlloc) - float64(ms0.HeapAlloc)) / 1024 / n
		if profile != "" {
			progress("live %s: after a GC, KiB/subscriber: heap in use %.2f (live %.2f), stacks %.2f, spans %.2f, GC metadata %.2f, other runtime %.2f, heap idle not returned %.2f",
				broker, perSub(ms2.HeapInuse, ms0.HeapInuse, n), perSub(ms2.HeapAlloc, ms0.HeapAlloc, n), perSub(ms2.StackInuse, ms0.StackInuse, n),
				perSub(ms2.MSpanInuse, ms0.MSpanInuse, n), perSub(ms2.GCSys, ms0.GCSys, n), perSub(ms2.OtherSys, ms0.OtherSys, n),
				perSub(ms2.HeapIdle-ms2.HeapReleased, ms0.HeapIdle-ms0.HeapReleased, n))
			if err := errors.Join(writeProfile("heap", profile+".heap", 0), writeProfile("goroutine", profile+".goroutines", 1)); err != nil {
				progress("live %s: profile: %v", broker, err)
			}
		}
		progress("live %s: RSS %.1f -> %.1f MiB (%.1f KiB/subscriber; after a GC %.1f MiB, %.1f KiB/subscriber), goroutines %d -> %d; %s of %.0f mutations/s",
			broker, r.RSSAtRestMiB, r.RSSConnectedMiB, r.RSSPerSubKiB, r.RSSConnectedAfterGCMiB, r.RSSPerSubAfterGCKiB,
			r.GoroutinesAtRest, r.GoroutinesConnected, lc.duration, lc.rate)
		stopPeak = pk.sampleWhile(ctx)
	})
	if stopPeak != nil {
		stopPeak()
	}
	if err != nil {
		return r, err
	}
	r.RSSPeakLoadMiB = pk.max()
	r.Steady = *out.Steady
	for i := range users {
		if i < len(out.Steady.Read) {
			users[i].Read = out.Steady.Read[i]
		}
	}
	r.GoalP99Met = r.Steady.Delivery.N > 0 && r.Steady.Delivery.P99 <= r.GoalP99Ms && r.Steady.Lost == 0
	if S >= 10000 {
		ok := r.Connected == S && r.RSSPerSubKiB <= 32
		r.GoalRSSMet = &ok
		okGC := r.Connected == S && r.RSSPerSubAfterGCKiB <= 32
		r.GoalRSSAfterGCMet = &okGC
	}
	progress("live %s: %d delivered, %d lost; delivery p50 %.2f ms, p99 %.2f ms", broker, r.Steady.Delivered, r.Steady.Lost, r.Steady.Delivery.P50, r.Steady.Delivery.P99)
	// Wait for the gateway to tear the connections down before the next run's baseline.
	// (until the goroutine count is back near rest, or stops falling for 2s, at most 20s).
	n, since := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(20 * time.Second); n > r.GoroutinesAtRest+20 && time.Since(since) < 2*time.Second && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if m := runtime.NumGoroutine(); m < n {
			n, since = m, time.Now()
		}
	}
	return r, nil
}

type liveChildOut struct {
	Steady *liveSteadyResult
	Read   []uint64
	Burst  *liveBurstOut
}

// runLiveChild runs spec in a child process (this binary with -livegen). In steady mode
// the child reports when its subscribers are connected; onReady runs then, and the load
// starts when it returns.
func runLiveChild(ctx context.Context, spec liveSpec, onReady func(liveReady)) (*liveChildOut, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "-livegen")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	fail := func(err error) (*liveChildOut, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	enc := json.NewEncoder(stdin)
	dec := json.NewDecoder(bufio.NewReader(stdout))
	if err := writeSpec(stdin, spec); err != nil {
		return fail(err)
	}
	if spec.Mode == "steady" {
		var ready liveReady
		if err := dec.Decode(&ready); err != nil {
			return fail(fmt.Errorf("live client: %w", err))
		}
		if ready.Connected == 0 {
			return fail(fmt.Errorf("live client connected no subscriber: %s", ready.FirstError))
		}
		if onReady != nil {
			onReady(ready)
		}
		if err := enc.Encode(map[string]bool{"go": true}); err != nil {
			return fail(err)
		}
	}
	var out liveChildOut
	if err := dec.Decode(&out); err != nil {
		return fail(fmt.Errorf("live client result: %w", err))
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("live client: %w", err)
	}
	if out.Steady != nil {
		out.Steady.Read = out.Read
	}
	return &out, nil
}

// writeSpec writes spec as one JSON object, its users one at a time: encoding/json keeps
// its encoding buffers in a sync.Pool, and one of 19,000 users (megabytes) would stay in
// this process (the gateway's) across the GC the after-GC figures are taken after.
func writeSpec(w io.Writer, spec liveSpec) error {
	users := spec.Users
	spec.Users = nil
	head, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(head[:len(head)-1]) // without its "}": a later "Users" overrides the null one
	bw.WriteString(`,"Users":[`)
	for i := range users {
		if i > 0 {
			bw.WriteByte(',')
		}
		b, err := json.Marshal(&users[i])
		if err != nil {
			return err
		}
		bw.Write(b)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// --- child side ---------------------------------------------------------------------

type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

type countPayload struct {
	Data *struct {
		UnreadCount int `json:"unreadCount"`
	} `json:"data"`
	Errors []json.RawMessage `json:"errors"`
}

// liveSub is one subscriber connection of the child.
type liveSub struct {
	u    *liveUser
	conn *websocket.Conn

	mu      sync.Mutex
	count   int // the last value received
	frames  int
	pending bool
	want    int
	t0      time.Time
	done    chan time.Duration
	// unexpected counts frames with a value nobody was waiting for.
	unexpected int
	onFrame    func(v int) // burst mode: called (outside mu) on every frame
}

const unreadCountSubscription = `{"id":"1","type":"subscribe","payload":{"query":"subscription { unreadCount }"}}`

// dialSub connects, initialises and subscribes; it returns once the first value arrived.
func dialSub(ctx context.Context, url string, u *liveUser, opts *websocket.DialOptions) (*liveSub, error) {
	if opts == nil {
		opts = &websocket.DialOptions{}
	}
	opts.Subprotocols = []string{"graphql-transport-ws"}
	conn, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	s := &liveSub{u: u, conn: conn, done: make(chan time.Duration, 1)}
	init := `{"type":"connection_init","payload":{"Authorization":"Bearer ` + u.Token + `"}}`
	if err := conn.Write(ctx, websocket.MessageText, []byte(init)); err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	for stage := 0; stage < 2; {
		_, b, err := conn.Read(ctx)
		if err != nil {
			_ = conn.CloseNow()
			return nil, err
		}
		var m wsMsg
		if err := json.Unmarshal(b, &m); err != nil {
			_ = conn.CloseNow()
			return nil, err
		}
		switch {
		case m.Type == "ping":
			_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
		case m.Type == "ka" || m.Type == "pong":
		case stage == 0 && m.Type == "connection_ack":
			stage = 1
			if err := conn.Write(ctx, websocket.MessageText, []byte(unreadCountSubscription)); err != nil {
				_ = conn.CloseNow()
				return nil, err
			}
		case stage == 1 && m.Type == "next":
			var p countPayload
			if err := json.Unmarshal(m.Payload, &p); err != nil || p.Data == nil {
				_ = conn.CloseNow()
				return nil, fmt.Errorf("first value: %s", m.Payload)
			}
			s.count, s.frames = p.Data.UnreadCount, 1
			stage = 2
		default:
			_ = conn.CloseNow()
			return nil, fmt.Errorf("unexpected %s message: %.200s", m.Type, m.Payload)
		}
	}
	return s, nil
}

// read runs until the connection ends: every value is recorded, a pending change is
// resolved when its expected value arrives. delay is slept after each frame.
func (s *liveSub) read(delay time.Duration) error {
	ctx := context.Background()
	for {
		_, b, err := s.conn.Read(ctx)
		if err != nil {
			return err
		}
		var m wsMsg
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		switch m.Type {
		case "ping":
			_ = s.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		case "next":
		case "ka", "pong":
			continue
		default:
			return fmt.Errorf("unexpected %s message: %.200s", m.Type, m.Payload)
		}
		var p countPayload
		if err := json.Unmarshal(m.Payload, &p); err != nil || p.Data == nil {
			return fmt.Errorf("bad value: %s", m.Payload)
		}
		v := p.Data.UnreadCount
		s.mu.Lock()
		s.frames++
		s.count = v
		if s.pending && v == s.want {
			s.pending = false
			s.done <- time.Since(s.t0)
		} else {
			s.unexpected++
		}
		f := s.onFrame
		s.mu.Unlock()
		if f != nil {
			f(v)
		}
		if delay > 0 {
			time.Sleep(delay)
		}
	}
}

func runLivegen(r io.Reader, w io.Writer) error {
	raiseNoFile()
	dec := json.NewDecoder(r)
	enc := json.NewEncoder(w)
	var spec liveSpec
	if err := dec.Decode(&spec); err != nil {
		return err
	}
	switch spec.Mode {
	case "steady":
		return liveSteady(spec, dec, enc)
	case "burst":
		out, err := liveBurst(spec)
		if err != nil {
			return err
		}
		return enc.Encode(liveChildOut{Burst: out})
	}
	return fmt.Errorf("unknown mode %q", spec.Mode)
}

func liveSteady(spec liveSpec, dec *json.Decoder, enc *json.Encoder) error {
	// Connect.
	subs := make([]*liveSub, len(spec.Users))
	var errs atomic.Int64
	var firstErr atomic.Value
	next := atomic.Int64{}
	t0 := time.Now()
	var wg sync.WaitGroup
	for range max(spec.DialWorkers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(subs) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				s, err := dialSub(ctx, spec.SubURL, &spec.Users[i], nil)
				cancel()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				subs[i] = s
				// Read from now on: the WebSocket library answers the gateway's pings only
				// while it reads, and the gateway drops a peer silent for two keep-alive
				// intervals (30 s), which connecting many may take.
				go func() { _ = s.read(0) }()
			}
		}()
	}
	wg.Wait()
	ready := liveReady{Errors: int(errs.Load()), Seconds: time.Since(t0).Seconds()}
	if s, ok := firstErr.Load().(string); ok {
		ready.FirstError = s
	}
	var live []*liveSub
	for _, s := range subs {
		if s != nil {
			live = append(live, s)
		}
	}
	ready.Connected = len(live)
	if err := enc.Encode(ready); err != nil {
		return err
	}
	var goMsg map[string]bool
	if err := dec.Decode(&goMsg); err != nil {
		return err
	}

	// The steady load: one change in flight per user at most; users come from a shuffled
	// queue and go back to it when their change was delivered (or lost).
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	idle := make(chan *liveSub, len(live))
	for _, i := range rand.Perm(len(live)) {
		idle <- live[i]
	}
	var (
		mu                      sync.Mutex
		res                     liveSteadyResult
		all, marks, sends, rtts []time.Duration
		seq                     atomic.Int64
		pid                     = os.Getpid()
		opsWG                   sync.WaitGroup
	)
	addErr := func(err error) {
		mu.Lock()
		res.MutationErrs++
		if res.FirstError == "" {
			res.FirstError = err.Error()
		}
		mu.Unlock()
	}
	op := func(s *liveSub) {
		defer func() { idle <- s }()
		send := rand.Float64() < spec.SendShare
		j := rand.IntN(len(s.u.Notifs))
		var body string
		s.mu.Lock()
		want := s.count + 1
		switch {
		case send:
			in := map[string]any{"idempotencyKey": fmt.Sprintf("live-%d-%d", pid, seq.Add(1)), "recipients": []string{s.u.ID},
				"type": "comment", "title": "New comment", "body": "Looks good to me."}
			b, _ := json.Marshal(map[string]any{"query": "mutation($in: SendNotificationInput!) { sendNotification(input: $in) { accepted } }", "variables": map[string]any{"in": in}})
			body = string(b)
		case s.u.Read&(1<<j) != 0:
			body = `{"query":"mutation { markUnread(ids: [\"` + s.u.Notifs[j] + `\"]) { unreadCount } }"}`
		default:
			want = s.count - 1
			body = `{"query":"mutation { markRead(ids: [\"` + s.u.Notifs[j] + `\"]) { unreadCount } }"}`
		}
		select {
		case <-s.done: // a stale resolution (none expected)
		default:
		}
		s.pending, s.want = true, want
		s.t0 = time.Now()
		t0 := s.t0
		s.mu.Unlock()
		tok := s.u.Token
		if send {
			tok = spec.SenderToken
		}
		var out struct {
			Data struct {
				Mark *struct {
					UnreadCount int `json:"unreadCount"`
				} `json:"markRead"`
				Unmark *struct {
					UnreadCount int `json:"unreadCount"`
				} `json:"markUnread"`
				Send *struct {
					Accepted int `json:"accepted"`
				} `json:"sendNotification"`
			} `json:"data"`
		}
		err := postGraphQL(context.Background(), client, spec.MutURL, tok, body, &out)
		rtt := time.Since(t0)
		if err == nil {
			switch {
			case send && (out.Data.Send == nil || out.Data.Send.Accepted != 1):
				err = fmt.Errorf("send accepted %+v", out.Data.Send)
			case out.Data.Mark != nil && out.Data.Mark.UnreadCount != want:
				err = fmt.Errorf("markRead answered %d, want %d", out.Data.Mark.UnreadCount, want)
			case out.Data.Unmark != nil && out.Data.Unmark.UnreadCount != want:
				err = fmt.Errorf("markUnread answered %d, want %d", out.Data.Unmark.UnreadCount, want)
			}
		}
		if err != nil {
			addErr(err)
		}
		if !send && err == nil {
			s.u.Read ^= 1 << j
		}
		var d time.Duration
		delivered := false
		select {
		case d = <-s.done:
			delivered = true
		default:
		}
		frameFirst := delivered
		if !delivered && err == nil {
			t := time.NewTimer(spec.Timeout)
			select {
			case d = <-s.done:
				delivered = true
			case <-t.C:
			}
			t.Stop()
		}
		s.mu.Lock()
		if !delivered {
			s.pending = false
		}
		s.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		res.Mutations++
		rtts = append(rtts, rtt)
		if send {
			res.Sends++
		} else {
			res.Marks++
		}
		switch {
		case delivered:
			res.Delivered++
			all = append(all, d)
			if send {
				sends = append(sends, d)
			} else {
				marks = append(marks, d)
			}
			if frameFirst {
				res.FramesBefore++
			}
		case err == nil:
			res.Lost++
		}
	}
	load := func(d time.Duration) time.Duration {
		start := time.Now()
		tick := time.NewTicker(time.Duration(float64(time.Second) / spec.Rate))
		for time.Since(start) < d {
			<-tick.C
			select {
			case s := <-idle:
				opsWG.Add(1)
				go func() { defer opsWG.Done(); op(s) }()
			default:
				mu.Lock()
				res.Skipped++
				mu.Unlock()
			}
		}
		tick.Stop()
		opsWG.Wait()
		return time.Since(start)
	}
	// A warm-up at the same rate (not measured): the first changes of a run pay for cold
	// paths (the JVM's, the connection pool's).
	load(min(max(spec.Duration/5, time.Second), 3*time.Second))
	mu.Lock()
	res, all, marks, sends, rtts = liveSteadyResult{}, nil, nil, nil, nil
	for _, s := range live {
		s.mu.Lock()
		s.unexpected = 0
		s.mu.Unlock()
	}
	mu.Unlock()
	res.Seconds = load(spec.Duration).Seconds()
	res.Delivery, res.DeliveryMarks, res.DeliverySends, res.MutationRTT = summarize(all), summarize(marks), summarize(sends), summarize(rtts)
	for _, s := range live {
		s.mu.Lock()
		res.Unexpected += s.unexpected
		s.mu.Unlock()
	}
	read := make([]uint64, len(spec.Users))
	for i, u := range spec.Users {
		read[i] = u.Read
	}
	if err := enc.Encode(liveChildOut{Steady: &res, Read: read}); err != nil {
		return err
	}
	for _, s := range live {
		_ = s.conn.CloseNow()
	}
	return nil
}

// limitedReadConn hands out at most 16 bytes a Read, so that neither net/http's nor the
// WebSocket library's read buffer holds frames the subscriber has not asked for yet.
type limitedReadConn struct{ net.Conn }

func (c limitedReadConn) Read(p []byte) (int, error) {
	if len(p) > 16 {
		p = p[:16]
	}
	return c.Conn.Read(p)
}

func slowDialOptions() *websocket.DialOptions {
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		})
	}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return limitedReadConn{c}, nil
	}}
	return &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}}
}

func liveBurst(spec liveSpec) (*liveBurstOut, error) {
	u := &spec.Users[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fast, err := dialSub(ctx, spec.SubURL, u, nil)
	if err != nil {
		return nil, err
	}
	defer fast.conn.CloseNow()
	slow, err := dialSub(ctx, spec.SlowSubURL, u, slowDialOptions())
	if err != nil {
		return nil, err
	}
	defer slow.conn.CloseNow()
	out := &liveBurstOut{Changes: spec.Burst, Initial: fast.count, SlowDelay: spec.SlowDelay.String()}
	var lastSlow atomic.Int64 // unix nanos of the slow subscriber's last frame
	slow.onFrame = func(int) { lastSlow.Store(time.Now().UnixNano()) }
	go func() { _ = fast.read(0) }()
	go func() { _ = slow.read(spec.SlowDelay) }()

	client := &http.Client{Timeout: 30 * time.Second}
	k := min(len(u.Notifs), 3) // toggle 3 notifications in turn: the final count differs from the first
	final := out.Initial
	t0 := time.Now()
	for i := range spec.Burst {
		j := i % k
		op := "markRead"
		if u.Read&(1<<j) != 0 {
			op = "markUnread"
		}
		var resp struct {
			Data map[string]struct {
				UnreadCount int `json:"unreadCount"`
			} `json:"data"`
		}
		body := `{"query":"mutation { ` + op + `(ids: [\"` + u.Notifs[j] + `\"]) { unreadCount } }"}`
		if err := postGraphQL(context.Background(), client, spec.MutURL, u.Token, body, &resp); err != nil {
			out.Errors++
			if out.FirstError == "" {
				out.FirstError = err.Error()
			}
			continue
		}
		u.Read ^= 1 << j
		final = resp.Data[op].UnreadCount
	}
	burstEnd := time.Now()
	out.Seconds = burstEnd.Sub(t0).Seconds()
	out.Final = final
	var q struct {
		Data struct {
			Viewer struct {
				UnreadCount int `json:"unreadCount"`
			} `json:"viewer"`
		} `json:"data"`
	}
	if err := postGraphQL(context.Background(), client, spec.MutURL, u.Token, `{"query":"{ viewer { unreadCount } }"}`, &q); err != nil {
		return nil, err
	}
	out.StoreFinal = q.Data.Viewer.UnreadCount
	// Wait until both show the final count and the slow one has been quiet for a while.
	deadline := time.Now().Add(spec.Timeout)
	for time.Now().Before(deadline) {
		fast.mu.Lock()
		fv := fast.count
		fast.mu.Unlock()
		slow.mu.Lock()
		sv := slow.count
		slow.mu.Unlock()
		quiet := time.Since(time.Unix(0, lastSlow.Load())) > time.Second+spec.SlowDelay
		if fv == final && sv == final && quiet {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fast.mu.Lock()
	out.FastFrames, out.FastLast = fast.frames-1, fast.count // not counting the initial value
	fast.mu.Unlock()
	slow.mu.Lock()
	out.SlowFrames, out.SlowLast = slow.frames-1, slow.count
	slow.mu.Unlock()
	if ls := lastSlow.Load(); ls > 0 {
		out.SlowDrainSecs = time.Unix(0, ls).Sub(burstEnd).Seconds()
	}
	out.Correct = out.FastLast == final && out.SlowLast == final && out.StoreFinal == final
	return out, nil
}

// perSub is (after - before) / n in KiB.
func perSub(after, before uint64, n float64) float64 {
	return (float64(after) - float64(before)) / 1024 / n
}
