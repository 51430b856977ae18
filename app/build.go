package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/loader"
	"github.com/inboxgw/gateway/metrics"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/telemetry"
	"github.com/inboxgw/gateway/tmpl"
	"github.com/inboxgw/gateway/unsub"
)

// Deps are what a caller of Build hands in instead of having it built from the
// configuration. The zero value builds everything from Config, as serve does.
type Deps struct {
	// Log receives every component's logs (nil: slog.Default()).
	Log *slog.Logger
	// DB is the DynamoDB client the store calls (nil: the engine Config names, opened by
	// Build with DBOptions and closed by Close: DynamoDB Local started as a child process,
	// or AWS).
	DB *dynamodb.Client
	// DBOptions are options of the client Build opens (ignored with DB).
	DBOptions []func(*dynamodb.Options)
	// Broker carries committed changes to subscriptions (nil: Config.Broker's, closed by
	// Close; a caller's broker is the caller's to close).
	Broker live.Broker
	// Verifier verifies tokens (nil: Config's JWT secret and JWKS, closed by Close). It
	// does not sign cursors: their key is always Config's (INBOX_CURSOR_SECRET, or derived
	// from INBOX_JWT_SECRET), so that every instance of one configuration accepts the
	// others' cursors; a gateway whose Config has neither refuses to build.
	Verifier *auth.Verifier
	// Metrics, when set, receives every DynamoDB call of the client Build opens, the
	// broker's publish lag (for a broker Build opens), the HTTP surface's operations and
	// the scheduler's tasks; /metrics is routed beside the surface (WithMetricsRoute).
	Metrics *metrics.Registry
	// Store are more store options, applied after those from Config (a test's clock, a
	// bench's publisher).
	Store []store.Option
	// Handler adjusts the HTTP surface's options made from Config (a bench's naive
	// dataloaders); nil: none.
	Handler func(*httpapi.Options)
	// Worker builds an instance without an HTTP surface (the worker and import-github
	// commands): no verifier (no token is read), no dev mail catcher (a dev worker's mail
	// goes to the dev gateway's, at INBOX_DEV_SMTP_ADDR), no demo import, no background
	// sweep.
	Worker bool
	// Clock drives the scheduler, its leases and the delivery worker (nil: the real clock).
	Clock clockwork.Clock
	// Tracing is what traces the gateway (nil: telemetry.FromEnv, the OTEL_* variables,
	// off when they name no exporter; shut down, its spans flushed, by Close). A
	// caller's is the caller's to shut down.
	Tracing *telemetry.Tracing
}

// Gateway is one instance as Build composed it: what it serves and what it runs, over one
// store. Serve HTTP with HTTP (nil for a worker), run the scheduler with RunScheduler,
// and Close it after both stopped.
type Gateway struct {
	Config Config
	Log    *slog.Logger
	// Unsub signs the emails' one-click unsubscribe links, under UnsubBase (nil: emails
	// carry none; see unsubscribeLinks).
	Unsub     *unsub.Signer
	UnsubBase string
	// DB is the store's DynamoDB client; Table is in Config.
	DB       *dynamodb.Client
	Store    *store.Store
	Broker   live.Broker
	Verifier *auth.Verifier
	// Metrics is Deps.Metrics (nil: none).
	Metrics *metrics.Registry
	// Service is the send service (GraphQL sendNotification, REST, broadcasts' pages and
	// the scheduler's send tasks all use it); Templates and Broadcasts are its own.
	Service    *service.Service
	Templates  *tmpl.Service
	Broadcasts *service.Broadcasts
	// Announcements creates, reads and withdraws announcements and caches each tenant's
	// set for the store; Announced recomposes live badges when a set changes.
	Announcements *service.Announcements
	Announced     *live.Announced
	// Channels are the delivery adapters Config names, by channel (a channel without one
	// has no provider).
	Channels *channel.Registry
	// Scheduler runs wake-ups, expiries, deliveries, sends' recovery and broadcasts'
	// shards (sched.NewInbox and every task kind registered); it runs only in RunScheduler.
	Scheduler *sched.Scheduler
	// Handler is the HTTP surface (/graphql, /v1/, GraphiQL, health); nil for a worker.
	Handler *httpapi.Handler
	// HTTP is Handler with /metrics (Deps.Metrics, when it has no listener of its own)
	// and, in dev mode, the mail catcher at DevMailPath; nil for a worker.
	HTTP http.Handler
	// DemoUser is the demo import's busiest recipient and DemoToken a 30-day token of
	// theirs (dev mode only, pre-filled in GraphiQL); both "" without an import.
	DemoUser, DemoToken string
	// DevSMTP is the dev mail catcher's SMTP address ("" when there is none).
	DevSMTP string
	// Tracing traces requests, DynamoDB calls, tasks and provider calls (off unless the
	// OTEL_* variables or Deps.Tracing say otherwise).
	Tracing *telemetry.Tracing

	closers []func() // in the order they run
}

// Build composes one gateway from cfg and deps: the only composition of the gateway, used
// by serve, the worker command, the tests' harness (internal/testgw) and cmd/bench, so that
// what is tested and measured is what production serves. It opens the engine (unless
// deps.DB), creates the table when Config.CreateTable says so, and in dev mode starts
// the mail catcher and imports the demo file (Config.DemoImport). Errors: an unusable
// configuration (secrets, providers' settings, the catcher's address), the engine, the
// table, the demo import; whatever was opened is closed again.
func Build(ctx context.Context, cfg Config, deps Deps) (g *Gateway, err error) {
	// Every component logs through a handler that adds trace_id and span_id to the
	// lines logged with a traced context.
	log := telemetry.Logger(deps.Log)
	clock := deps.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	g = &Gateway{Config: cfg, Log: log, Metrics: deps.Metrics, Verifier: deps.Verifier, Broker: deps.Broker, DB: deps.DB, Tracing: deps.Tracing}
	defer func() {
		if err != nil {
			g.Close()
			g = nil
		}
	}()
	if g.Tracing == nil {
		if g.Tracing, err = telemetry.FromEnv(ctx); err != nil {
			return g, err
		}
		g.onClose(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := g.Tracing.Shutdown(sctx); err != nil {
				log.Warn("tracing: flush spans", "err", err)
			}
		})
		if g.Tracing.Enabled() {
			log.Info("tracing on", "exporter", g.Tracing.Exporter)
		}
	}

	if g.Verifier == nil && !deps.Worker {
		if g.Verifier, err = newVerifier(cfg, log); err != nil {
			return g, err
		}
		g.onClose(g.Verifier.Close)
	}
	var lag live.LagObserver
	if deps.Metrics != nil {
		lag = deps.Metrics.ObservePublishLag
	}
	if g.Broker == nil {
		if g.Broker, err = newBroker(ctx, cfg, log, lag); err != nil {
			return g, err
		}
		g.onClose(func() { _ = g.Broker.Close() })
	}
	opts := []store.Option{store.WithLogger(log), store.WithPublisher(g.Broker),
		store.WithProfileCache(cfg.ProfileCacheSize, cfg.ProfileCacheTTL), store.WithRetention(cfg.Retention)}
	if !deps.Worker {
		// Never a random key of this process: a cursor another instance of the same
		// configuration gave a client must page on, and a restart must not void it.
		key, err := cursorKey(cfg)
		if err != nil {
			return g, err
		}
		opts = append(opts, store.WithCursorKey(key))
	}
	if prefs := cfg.TenantPreferences; !reflect.ValueOf(prefs).IsZero() {
		opts = append(opts, store.WithTenantPreferences(func(string) inbox.TenantPreferences { return prefs }))
	}
	if cfg.SchedShards > 0 {
		opts = append(opts, store.WithSchedShards(cfg.SchedShards))
	}
	if deps.Metrics != nil {
		opts = append(opts, store.WithRetryObserver(deps.Metrics))
	}
	if deps.Worker {
		opts = append(opts, store.WithSweepWorkers(0))
	}
	if g.DB == nil {
		dbOpts := deps.DBOptions
		if deps.Metrics != nil {
			dbOpts = append([]func(*dynamodb.Options){deps.Metrics.DynamoDB()}, dbOpts...)
		}
		eng, err := openEngine(ctx, cfg, log, append(dbOpts, telemetry.DynamoDB(g.Tracing))...)
		if err != nil {
			return g, err
		}
		g.DB = eng.db
		g.onClose(eng.close)
	} else if g.Tracing.Enabled() {
		// A caller's client (a test's): the same client with spans (Options is a copy).
		g.DB = dynamodb.New(g.DB.Options(), telemetry.DynamoDB(g.Tracing))
	}
	// One GraphQL operation has at most loader.MaxRequests DynamoDB requests in flight.
	g.DB = dynamodb.New(g.DB.Options(), loader.LimitRequests)
	g.Store = store.New(g.DB, cfg.Table, append(opts, deps.Store...)...)
	g.onClose(g.Store.Close)
	if cfg.CreateTable != nil && *cfg.CreateTable {
		if err := g.Store.CreateTable(ctx); err != nil {
			return g, err
		}
	}

	// The send pipeline: templates, broadcasts (their pages run in the service's lanes)
	// and the send service that uses both.
	g.Templates = tmpl.New(g.Store)
	// Dev mode's mail page lists what became of the recent sends' channels (a skipped
	// email's reason): the sends tell it whom they wrote.
	var recent *recentSends
	var written func(string, []string, inbox.SendResult)
	if cfg.Dev && !deps.Worker {
		recent = &recentSends{now: clock.Now}
		written = recent.record
	}
	writer := service.Writer{Store: g.Store, Publisher: g.Broker, Written: written}
	g.Broadcasts = service.NewBroadcasts(service.BroadcastOptions{Store: g.Store, Send: writer.Write, Templates: g.Templates,
		Lane: func(ctx context.Context, lane string, work func(context.Context) error) error {
			return g.Service.RunInLane(ctx, lane, work)
		}, Logger: log})
	// Announcements: stored once, merged into every inbox and badge from this instance's
	// cache of each tenant's set (DESIGN.md "Announcements (v3)").
	g.Announcements = service.NewAnnouncements(g.Store, service.AnnouncementOptions{Templates: g.Templates, Publisher: g.Broker,
		Hash: store.AnnouncementHash, Now: clock.Now, MaxAge: cfg.AnnouncementCacheMaxAge})
	g.Store.UseAnnouncements(g.Announcements)
	g.Announced = live.NewAnnounced(g.Broker, g.Announcements, log)
	g.Service = service.New(g.Store, service.Options{Transactional: cfg.LaneTransactional, Bulk: cfg.LaneBulk,
		IdempotencyTTL: cfg.IdempotencyTTL, RecoveryDelay: cfg.SendRecovery, Logger: log, Templates: g.Templates,
		Broadcaster: g.Broadcasts, Publisher: g.Broker, Written: written})
	g.onClose(g.Service.Close)

	// Dev mode without an SMTP server: mail goes to an in-process catcher (a worker's to
	// the dev gateway's, at INBOX_DEV_SMTP_ADDR).
	var devMail *devMail
	devSMTP := ""
	if deps.Worker {
		if cfg.Dev && cfg.SMTPURL == "" {
			devSMTP = cfg.DevSMTPAddr
		}
	} else {
		if devMail, err = startDevMail(cfg, log); err != nil {
			return g, err
		}
		g.onClose(devMail.close)
		if devMail != nil {
			devMail.sends = recent.outcomes(g.Store)
		}
		devSMTP = devMail.smtpAddr()
		g.DevSMTP = devSMTP
	}
	if g.Channels, err = deliveryChannels(cfg, devSMTP, g.Tracing); err != nil {
		return g, err
	}
	if g.Unsub, g.UnsubBase, err = unsubscribeLinks(cfg); err != nil {
		return g, err
	}
	g.Scheduler = newScheduler(cfg, log, g, clock)

	if deps.Worker {
		return g, nil
	}
	if cfg.DemoImport != "" {
		if err := g.importDemo(ctx); err != nil {
			return g, err
		}
	}
	hopts, err := handlerOptions(cfg, log, g)
	if err != nil {
		return g, err
	}
	if deps.Handler != nil {
		deps.Handler(&hopts)
	}
	g.Handler = httpapi.NewHandler(hopts)
	g.HTTP = g.Handler
	if deps.Metrics != nil {
		g.HTTP = WithMetricsRoute(cfg, g.HTTP, deps.Metrics)
	}
	g.HTTP = devMail.with(g.HTTP)
	g.HTTP = g.withUnsubscribe(g.HTTP)
	// Outermost: the request's span and its access log line see every route.
	g.HTTP = telemetry.Middleware(g.Tracing, log, g.HTTP)
	return g, nil
}

// onClose adds f to what Close runs, after what was added before it.
func (g *Gateway) onClose(f func()) { g.closers = append(g.closers, f) }

// Close closes what Build opened, in the reverse order: the send service's lanes, the
// store's sweep, the engine, the mail catcher, the broker and the verifier it built.
// Stop the HTTP server and the scheduler first.
func (g *Gateway) Close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
}

// RunScheduler runs the scheduler until ctx ends, then hands its shards over (Release)
// so that another instance takes them at once rather than after the leases expire. It
// returns when the scheduler has stopped: nil after ctx ended, else its error.
func (g *Gateway) RunScheduler(ctx context.Context) error {
	s := g.Scheduler
	g.Log.Info("scheduler: starting", "owner", s.Owner())
	err := s.Run(ctx)
	relCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rerr := s.Release(relCtx); rerr != nil {
		g.Log.Warn("scheduler: release shards", "err", rerr)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// importDemo imports Config.DemoImport as the demo tenant's notifications and, in dev
// mode, signs the demo user's token (30 days, the user's own: no service scope, which
// would make it a service token without an inbox). Outside dev mode the token would be
// signed with the production secret and printed to the log stream, so there is none.
func (g *Gateway) importDemo(ctx context.Context) error {
	cfg := g.Config
	user, err := ImportDemo(ctx, cfg, g.Log, service.Sender{S: g.Service})
	if err != nil || user == "" {
		return err
	}
	g.DemoUser = user
	if cfg.Dev {
		if g.DemoToken, err = g.Verifier.Sign(auth.Claims{TenantID: cfg.DemoTenant, UserID: user}, 30*24*time.Hour); err != nil {
			return err
		}
	}
	g.Log.Info("demo user", "tenant", cfg.DemoTenant, "user", user)
	return nil
}

// newScheduler is the durable scheduler of g's store with the inbox's handlers
// (sched.NewInbox: a snooze's wake-up and an expiry), the channel deliveries (package
// delivery, over g.Channels), the send service's requests (service.TaskSend: recovery
// after a crash, scheduled sends), batches' closes (inbox.TaskBatch) and broadcasts'
// shard runs (inbox.TaskBroadcast),
// configured from cfg. Sends and broadcasts accepted anywhere (REST, GraphQL, another
// instance) run wherever a scheduler runs.
func newScheduler(cfg Config, log *slog.Logger, g *Gateway, clock clockwork.Clock) *sched.Scheduler {
	deliver := delivery.NewHandler(g.Store, delivery.Options{Channels: g.Channels, Attempts: cfg.DeliveryAttempts,
		Backoff: cfg.DeliveryBackoff, Timeout: cfg.DeliveryTimeout, Logger: log, Clock: clock, Tracer: g.Tracing.Tracer(),
		OnConfigError: metrics.NewDelivery(g.Metrics).ConfigError, Unsubscribe: unsubscribeURL(g.Unsub, g.UnsubBase)})
	// A deliver task sends once within INBOX_DELIVERY_TIMEOUT and then records the
	// outcome: the handler deadline covers both.
	o := sched.Options{DB: g.DB, Poll: cfg.SchedPoll, Lease: cfg.SchedLease, Logger: log, Clock: clock, Tracer: g.Tracing.Tracer(),
		HandlerTimeout: max(30*time.Second, deliver.HandlerTimeout())}
	if bus, ok := g.Broker.(sched.Bus); ok {
		o.Bus = bus // wake-ups for shards other instances hold
	}
	if m := metrics.NewSched(g.Metrics); m != nil {
		o.Observe = func(kind string, outcome sched.Outcome, lag time.Duration) { m.Observe(kind, string(outcome), lag) }
	}
	s := sched.NewInbox(g.Store, o)
	deliver.Register(s)
	s.Register(service.TaskSend, sched.HandlerFunc(g.Service.Handler()))
	s.Register(inbox.TaskBroadcast, sched.HandlerFunc(g.Broadcasts.Handle))
	s.Register(inbox.TaskBatch, sched.HandlerFunc(g.Service.BatchHandler()))
	// Every task written wakes its shard's worker when its write commits: a timer for its
	// due time (or a pass now) on the instance holding the shard, through the broker
	// when that is another; the workers' polls are only a slow safety net.
	g.Store.NotifyDue(s.Notify)
	return s
}

// handlerOptions are the HTTP surface's options for cfg over g: GraphQL and the service
// API (package rest, over rest.NewGateway) share g's send service, templates and
// broadcasts. Errors: provider callbacks whose settings cannot be used (LoadConfig
// refuses them first), or the service API's document not matching its generated code.
func handlerOptions(cfg Config, log *slog.Logger, g *Gateway) (httpapi.Options, error) {
	headers := ""
	if cfg.Dev && g.DemoToken != "" {
		headers = `{"Authorization": "Bearer ` + g.DemoToken + `"}`
	}
	hooks, err := providerHooks(cfg)
	if err != nil {
		return httpapi.Options{}, err
	}
	restHandler, err := rest.NewHandler(rest.Options{Backend: rest.NewGateway(g.Store, g.Templates, g.Broadcasts, g.Service, g.Announcements),
		Auth: g.Verifier, Log: log, Providers: hooks})
	if err != nil {
		return httpapi.Options{}, err
	}
	var demoToken func() (string, error)
	if cfg.Dev && g.DemoUser != "" {
		demoToken = func() (string, error) {
			return g.Verifier.Sign(auth.Claims{TenantID: cfg.DemoTenant, UserID: g.DemoUser}, time.Hour)
		}
	}
	return httpapi.Options{
		DemoUser:             g.DemoUser,
		DemoToken:            demoToken,
		REST:                 restHandler,
		Sender:               g.Service,
		Announcements:        g.Announcements,
		Announced:            g.Announced,
		Log:                  log,
		Verifier:             g.Verifier,
		Store:                g.Store,
		Broker:               g.Broker,
		AllowedOrigins:       cfg.AllowedOrigins,
		ComplexityLimit:      cfg.ComplexityLimit,
		MaxMutations:         cfg.MaxMutations,
		AnonymousConcurrency: cfg.AnonymousConcurrency,
		GraphiQLHeaders:      headers,
		InitTimeout:          cfg.WSInitTimeout,
		KeepAlive:            cfg.KeepAlive,
		Introspection:        cfg.Dev || cfg.Introspection == "on",
		QueryCacheBytes:      cfg.QueryCacheBytes,
		APQCacheBytes:        cfg.APQCacheBytes,
		QueryTimeout:         cfg.QueryTimeout,
		MutationTimeout:      cfg.MutationTimeout,
		Metrics:              g.Metrics,
		Tracing:              g.Tracing,
	}, nil
}
