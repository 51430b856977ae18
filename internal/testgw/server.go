package testgw

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/metrics"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/telemetry"
)

// Secret is the HS256 key of every test gateway (32+ bytes); a gateway process under test
// is started with it (INBOX_JWT_SECRET) so that Attach's tokens verify.
var Secret = []byte("inbox-gateway-integration-test-secret-0123456789")

// RequestTimeout bounds one HTTP request of a test.
const RequestTimeout = 20 * time.Second

// EventTimeout bounds the wait for one subscription event or WebSocket message.
const EventTimeout = 10 * time.Second

// Server is one gateway over one fresh table (New), or a client of a gateway process
// (Attach: only T, URL and Verifier are set).
type Server struct {
	T *testing.T
	// HTTP is the loopback server (nil after Attach).
	HTTP *httptest.Server
	// URL is the GraphQL endpoint, http://127.0.0.1:port/graphql.
	URL      string
	Verifier *auth.Verifier
	Handler  *httpapi.Handler
	Store    *store.Store
	Broker   *live.Local
	// Scheduler is the gateway's scheduler (running only with Options.Scheduler).
	Scheduler *sched.Scheduler
	// Announcements is the gateway's announcement service (and its per-tenant cache).
	Announcements *service.Announcements
	// DB and Table are the DynamoDB client and the table the store uses.
	DB    *dynamodb.Client
	Table string
	seq   *atomic.Int64 // idempotency keys
	// closeIdle closes the idle connections of the DynamoDB client's transport.
	closeIdle func()
}

// Options vary New; the zero value is the gateway of most tests.
type Options struct {
	// Config adjusts the configuration; it starts as app.Config{ComplexityLimit: 5000}
	// (the zero value of every other setting: no bounds beyond the handler's defaults).
	// Without INBOX_JWT_SECRET or INBOX_CURSOR_SECRET set here, JWTSecret is Secret.
	Config func(*app.Config)
	// Handler adjusts the handler options app.Build made from the configuration.
	Handler func(*httpapi.Options)
	// DynamoDB are more client options: every call of the store is also seen by them.
	DynamoDB []func(*dynamodb.Options)
	// Store are more store options (after the publisher and the logger).
	Store []store.Option
	// Timeouts, when set, serve the handler with httpapi.NewServer, as app.Run does.
	Timeouts *httpapi.Timeouts
	// Listener, when set, wraps the test server's listener.
	Listener func(net.Listener) net.Listener
	// Metrics, when set, is composed in as app.Run does: the client is app.LocalClient
	// with app.WithPooledHTTP and the registry's middleware, the broker observes publish
	// lag, the handler reports to it, and /metrics is routed by app.WithMetricsRoute.
	Metrics *metrics.Registry
	// Verifier, when set, verifies the gateway's tokens (and Token signs with it) instead
	// of one with Secret and the gateway's 30 s leeway.
	Verifier *auth.Verifier
	// Clock, when set, is the clock of the verifier made for the gateway (not of
	// Verifier's): the tokens Token signs are dated on it, and the gateway's WebSocket
	// and SSE connections time their token's expiry and their keep-alives on it. A test
	// advances it (a clockwork.FakeClock) instead of waiting for either.
	Clock clockwork.Clock
	// Scheduler runs the gateway's scheduler (Gateway.RunScheduler: wake-ups, expiries,
	// deliveries, broadcasts) until the test ends, with a safety-net poll of SchedPoll.
	Scheduler bool
	// Tracing, when set, traces the gateway (app.Deps.Tracing: a test's provider with an
	// in-memory exporter); unset, the gateway reads the OTEL_* variables as serve does.
	Tracing *telemetry.Tracing
	// Log, when set, receives the gateway's log (every level its handler enables)
	// instead of t.Log at warning level and above.
	Log *slog.Logger
	// SchedPoll is the scheduler's safety-net poll (0: 200 ms). A long one shows that
	// tasks run at their time through the wake-ups their writes send, not by polling.
	SchedPoll time.Duration
	// Peer, when set, makes this gateway another instance beside Peer: the same table
	// and DynamoDB client (the table is Peer's: neither created nor dropped here) and the
	// same configuration's secrets, as instances behind one load balancer are. Each has
	// its own in-process broker: a change made on one reaches the other's subscriptions
	// only through a shared broker (SharedBroker). With DynamoDB options set, the peer has
	// a client of its own on the same DynamoDB Local (its calls are seen by them alone).
	Peer *Server
	// SharedBroker, with Peer, makes the peer's broker this gateway's too: two instances
	// over one pub/sub, as Redis makes them (each with its own caches and live streams).
	SharedBroker bool
}

// logWriter forwards the server's log lines to t.Log until the test ends (a late line
// from a background goroutine is dropped rather than logged after the test completed).
type logWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// New starts the gateway's whole HTTP surface on a loopback port, over a new table;
// everything (server, streams, store, table) is closed when the test ends.
func New(t *testing.T) *Server {
	t.Helper()
	return NewWith(t, Options{})
}

// NewConfig is New with the configuration adjusted by set (timeouts, keep-alive, allowed
// origins).
func NewConfig(t *testing.T, set func(*app.Config)) *Server {
	t.Helper()
	return NewWith(t, Options{Config: set})
}

// NewWith is New varied by o.
func NewWith(t *testing.T, o Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// An hour's announcement cache: a slow run must not see a tenant's cached set expire
	// (one more Query) in the middle of a test that counts calls (WarmAnnouncements).
	cfg := app.Config{ComplexityLimit: 5000, AnnouncementCacheMaxAge: time.Hour}
	if o.Config != nil {
		o.Config(&cfg)
	}
	if cfg.JWTSecret == "" && cfg.CursorSecret == "" {
		// What a gateway process under test is started with (INBOX_JWT_SECRET): its
		// cursors are signed with the key derived from it, as serve's are, the same on
		// every instance of this configuration (Options.Peer).
		cfg.JWTSecret = string(Secret)
	}
	lw := &logWriter{t: t}
	log := slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if o.Log != nil {
		log = o.Log
	}
	var (
		db        *dynamodb.Client
		broker    *live.Local
		closeIdle = func() {}
	)
	switch {
	case o.Peer != nil:
		db = o.Peer.DB
		if len(o.DynamoDB) > 0 {
			db = dynlocaltest.Client(t, o.DynamoDB...)
		}
		broker = live.NewLocal()
		if o.SharedBroker {
			broker = o.Peer.Broker
		}
	case o.Metrics != nil:
		db = app.LocalClient(dynlocaltest.Endpoint(t), append([]func(*dynamodb.Options){app.WithPooledHTTP(), o.Metrics.DynamoDB(), dynlocaltest.StreamOption(t)}, o.DynamoDB...)...)
		broker = live.NewLocal(live.WithLagObserver(o.Metrics.ObservePublishLag))
	default:
		// A transport of its own, so that CloseIdleConnections reaches its pool.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		closeIdle = tr.CloseIdleConnections
		t.Cleanup(tr.CloseIdleConnections)
		own := func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: tr} }
		db = dynlocaltest.Client(t, append([]func(*dynamodb.Options){own}, o.DynamoDB...)...)
		broker = live.NewLocal()
	}
	table := dynlocaltest.TableName(t)
	if o.Peer != nil {
		table = o.Peer.Table
	}
	cfg.Table = table
	v := o.Verifier
	if v == nil {
		var err error
		if v, err = auth.NewVerifier(auth.Config{Secret: Secret, Leeway: 30 * time.Second, Clock: o.Clock}); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.SchedShards == 0 {
		// Every shard is Queried once a poll: 16 shards at 50 ms were 320 Queries a second
		// per test gateway on one DynamoDB Local, which then answered lease renewals too
		// late (3 s leases were lost, broadcasts stalled). 4 shards at 200 ms: 20 a second.
		cfg.SchedShards = 4
	}
	if o.Scheduler {
		cfg.SchedPoll, cfg.SchedLease = 200*time.Millisecond, 6*time.Second
		if o.SchedPoll > 0 {
			cfg.SchedPoll = o.SchedPoll
		}
	}
	createTable := o.Peer == nil
	cfg.CreateTable = &createTable
	// The gateway as serve composes it (app.Build), over this test's client, broker and
	// verifier.
	g, err := app.Build(ctx, cfg, app.Deps{Log: log, DB: db, Broker: broker, Verifier: v, Metrics: o.Metrics,
		Store: o.Store, Handler: o.Handler, Tracing: o.Tracing})
	if err != nil {
		t.Fatalf("build the gateway: %v", err)
	}
	st, h := g.Store, g.Handler
	t.Cleanup(func() {
		g.Close()
		lw.mu.Lock()
		lw.done = true
		lw.mu.Unlock()
		if o.Peer != nil {
			return // the table is the peer's to drop
		}
		// A finished test's table is dropped so that its items stop costing the engine
		// memory (and time: see package dynlocaltest).
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_, _ = db.DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	if o.Scheduler {
		sctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = g.RunScheduler(sctx)
		}()
		// Registered after the gateway's cleanup, so it runs first: the scheduler stops
		// (its running handlers finish) before the gateway closes and the table goes.
		t.Cleanup(func() { stop(); <-done })
	}
	served := g.HTTP
	srv := httptest.NewUnstartedServer(served)
	if o.Timeouts != nil {
		srv.Config = httpapi.NewServer(served, *o.Timeouts)
	}
	if o.Listener != nil {
		srv.Listener = o.Listener(srv.Listener)
	}
	srv.Start()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = h.Shutdown(sctx)
		srv.Close()
	})
	return &Server{T: t, HTTP: srv, URL: srv.URL + "/graphql", Verifier: v, Handler: h, Store: st, Broker: broker,
		Scheduler: g.Scheduler, Announcements: g.Announcements, DB: db, Table: table, closeIdle: closeIdle, seq: new(atomic.Int64)}
}

// Attach returns clients of the gateway (a process) whose GraphQL endpoint is url, signing
// tokens with Secret.
func Attach(t *testing.T, url string) *Server {
	t.Helper()
	v, err := auth.NewVerifier(auth.Config{Secret: Secret, Leeway: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &Server{T: t, URL: url, Verifier: v, seq: new(atomic.Int64)}
}

// WithT returns s reporting to t: a subtest uses its own t, never its parent's.
func (s *Server) WithT(t *testing.T) *Server {
	c := *s
	c.T = t
	return &c
}

// WarmAnnouncements reads tenants' announcement sets into the gateway's cache, as any
// first page or badge of a tenant does (one Query each): a test counting a request's
// DynamoDB calls counts those of a warm instance.
func (s *Server) WarmAnnouncements(tenants ...string) {
	s.T.Helper()
	for _, t := range tenants {
		if _, err := s.Announcements.Announcements(context.Background(), t, false); err != nil {
			s.T.Fatalf("warm tenant %s's announcements: %v", t, err)
		}
	}
}

// Token signs a real token for user of tenant with scopes, valid for an hour. With
// notifications:send or notifications:admin among scopes it is a service token (sub names
// the service; no user): ServiceToken says so at the call.
func (s *Server) Token(tenant, user string, scopes ...string) string {
	s.T.Helper()
	tok, err := s.Verifier.Sign(auth.Claims{TenantID: tenant, UserID: user, Scopes: scopes}, time.Hour)
	if err != nil {
		s.T.Fatalf("sign token: %v", err)
	}
	return tok
}

// ServiceToken signs a real service token for service of tenant (scope
// notifications:send, then scopes), valid for an hour: it sends, and it has no user, so
// viewer fields and subscriptions answer it FORBIDDEN.
func (s *Server) ServiceToken(tenant, service string, scopes ...string) string {
	s.T.Helper()
	tok, err := s.Verifier.Sign(auth.Claims{TenantID: tenant, Subject: service, Scopes: append([]string{auth.ScopeSend}, scopes...)}, time.Hour)
	if err != nil {
		s.T.Fatalf("sign service token: %v", err)
	}
	return tok
}

// WaitFor polls cond every 10 ms until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CloseIdleConnections closes the idle keep-alive connections of the store's DynamoDB
// client (not with Options.Metrics: that client is app's own) and of http.DefaultClient (the harness's requests): their goroutines belong to
// the connection pools, not to what a test counts; DynamoDB Local would close them only
// after its 30 s idle timeout.
func (s *Server) CloseIdleConnections() {
	if s.closeIdle != nil {
		s.closeIdle()
	}
	http.DefaultClient.CloseIdleConnections()
}
