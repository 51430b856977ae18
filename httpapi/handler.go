// Package httpapi builds the gateway's HTTP surface: /graphql with every transport
// (POST, GET, WebSocket graphql-transport-ws and graphql-ws, SSE), the error presenter,
// complexity limit, per-operation dataloaders, GraphiQL at / and the health probes.
//
// app/server.go (package app, the composition root) wires it to the configuration; the bench command
// (cmd/bench) builds the same handler, so what it measures is what the gateway serves.
package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/jonboulle/clockwork"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/graph"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/loader"
	"github.com/inboxgw/gateway/metrics"
	"github.com/inboxgw/gateway/resolvers"
	"github.com/inboxgw/gateway/telemetry"
	"github.com/inboxgw/gateway/web"
)

// Options are the dependencies and settings of the handler.
type Options struct {
	Log      *slog.Logger
	Verifier *auth.Verifier
	// Store is what the resolvers, the per-request loaders and /readyz use (implemented by
	// *store.Store; app.Build, the composition root, hands it in).
	Store  resolvers.Store
	Broker resolvers.Broker
	// Sender is the send service sendNotification calls (app.Build hands in the one its
	// scheduler and the service API share); nil: sendNotification answers UNAVAILABLE.
	Sender resolvers.Sender
	// Announcements is the announcement service sendAnnouncement and
	// withdrawAnnouncement call (nil: they answer UNAVAILABLE); Announced composes the
	// live badges with the tenants' announcements (nil: none).
	Announcements resolvers.Announcer
	Announced     *live.Announced
	// AllowedOrigins are the host patterns WebSocket upgrades and CORS (withCORS) accept
	// besides same origin.
	AllowedOrigins []string
	// ComplexityLimit bounds a query's cost (see Complexity).
	ComplexityLimit int
	// MaxMutations bounds a document's mutation fields (see MutationLimit; default
	// DefaultMaxMutationFields).
	MaxMutations int
	// AnonymousConcurrency bounds the requests without a token that run at once (see
	// anonymousGate; default DefaultAnonymousConcurrency).
	AnonymousConcurrency int
	// GraphiQLHeaders pre-fills GraphiQL's headers editor (a JSON object), "" for none.
	GraphiQLHeaders string
	// Loaders returns the dataloaders of one operation of a tenant; nil means
	// loader.New(Store, tenantID). A func that returns nil runs operations without
	// loaders (every profile is read on its own: the bench's naive mode).
	Loaders func(tenantID string) *loader.Loaders
	// InitTimeout is how long a WebSocket may take to send connection_init before it is
	// closed with 4408 (default 10s).
	InitTimeout time.Duration
	// KeepAlive is the interval of graphql-transport-ws "ping" messages, graphql-ws "ka"
	// messages and SSE ": ping" comments (default 15s).
	KeepAlive time.Duration
	// QueryCacheBytes bounds the parsed-query cache in bytes (default
	// DefaultQueryCacheBytes; see limits_cache.go). APQCacheBytes bounds the persisted
	// queries cache (default DefaultAPQCacheBytes).
	QueryCacheBytes, APQCacheBytes int
	// Introspection allows introspection (__schema, __type) and "Did you mean" suggestions
	// in validation errors: dev mode and GraphiQL. Off, both are refused/absent.
	Introspection bool
	// QueryTimeout and MutationTimeout are the deadlines of a query and a mutation
	// (defaults DefaultQueryTimeout, DefaultMutationTimeout); each field of a
	// subscription event is bounded by QueryTimeout. A deadline hit is UNAVAILABLE.
	QueryTimeout, MutationTimeout time.Duration
	// MaxResponseBytes bounds a response's data (default MaxResponseBytes).
	MaxResponseBytes int
	// Metrics, when set, counts operations, connections and subscriptions (nil: none).
	Metrics *metrics.Registry
	// REST, when set, serves the service API under /v1/ (package rest's Handler; CORS as
	// for /graphql, with the API's methods and headers). Nil: /v1/ is not served.
	REST http.Handler
	// DemoUser and DemoToken, when DemoToken is set (dev mode with a demo import), serve
	// /demo and /demo/token (web.Demo): DemoToken mints a fresh token of DemoUser.
	DemoUser  string
	DemoToken func() (string, error)
	// Tracing, when on, gives each GraphQL operation a span and each resolver that does
	// I/O a child span (see Tracer); nil or off: none.
	Tracing *telemetry.Tracing
}

// Handler is the HTTP surface. Shutdown ends its long-lived streams.
type Handler struct {
	mux      *http.ServeMux
	conns    *connRegistry
	streams  context.Context // cancelled by Shutdown: ends SSE subscriptions
	stopSSE  context.CancelFunc
	shutOnce sync.Once
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Shutdown closes every WebSocket with 1001 (going away) and ends every SSE stream
// (event: complete), then waits until their handlers returned or ctx ends. Call it
// beside http.Server.Shutdown, which drains ordinary requests but does not know hijacked
// connections (WebSockets) and would wait for SSE streams forever.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.shutOnce.Do(h.stopSSE)
	select {
	case <-h.conns.closeAll():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WebSockets returns how many WebSocket connections are open.
func (h *Handler) WebSockets() int { return h.conns.count() }

// streamsMiddleware ties SSE requests to the handler's lifetime (WebSocket connections
// are the transport's, see ws.go).
func (h *Handler) streamsMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			stop := context.AfterFunc(h.streams, cancel)
			defer stop()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// NewHandler returns the HTTP surface: /graphql (every transport), the service API under
// /v1/ (Options.REST), GraphiQL at /, /healthz and /readyz.
func NewHandler(o Options) *Handler {
	log, verifier, st := o.Log, o.Verifier, o.Store
	if log == nil {
		log = slog.Default()
	}
	newLoaders := o.Loaders
	if newLoaders == nil {
		newLoaders = func(tenantID string) *loader.Loaders { return loader.New(st, tenantID) }
	}
	res := &resolvers.Resolver{Store: st, Sender: o.Sender, Broker: o.Broker, Log: log, Announcements: o.Announcements, Announced: o.Announced}
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: res.Root(), Complexity: Complexity()}))
	initTimeout, keepAlive := o.InitTimeout, o.KeepAlive
	if initTimeout <= 0 {
		initTimeout = 10 * time.Second
	}
	if keepAlive <= 0 {
		keepAlive = 15 * time.Second
	}
	// The long-lived connections' timers run on the verifier's clock (auth.Config.Clock):
	// a token expires, and the connections holding it end, on one clock.
	clock := clockwork.NewRealClock()
	if verifier != nil {
		clock = verifier.Clock()
	}
	res.Clock = clock
	sseCtx, stopSSE := context.WithCancel(context.Background())
	h := &Handler{conns: newConnRegistry(), streams: sseCtx, stopSSE: stopSSE}
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	for _, t := range []graphql.Transport{
		&wsTransport{verifier: verifier, log: log, origins: o.AllowedOrigins,
			initTimeout: initTimeout, keepAlive: keepAlive, reg: h.conns, metrics: o.Metrics,
			drain: cmp.Or(o.MutationTimeout, DefaultMutationTimeout) + wsDrainMargin, clock: clock},
		sseTransport{SSE: transport.SSE{KeepAlivePingInterval: keepAlive}, writeTimeout: sseWriteTimeout(keepAlive), metrics: o.Metrics},
		optionsTransport{},
		getTransport{},
		postTransport{},
		unsupportedTransport{}, // last: answers what no other took
	} {
		gql.AddTransport(strictTransport{Transport: t, schema: schema})
	}
	gql.SetParserTokenLimit(ParserTokenLimit)
	gql.SetQueryCache(newQueryCache(cmp.Or(o.QueryCacheBytes, DefaultQueryCacheBytes)))
	if o.Metrics != nil {
		gql.Use(o.Metrics.GraphQL())
	}
	if o.Tracing.Enabled() {
		gql.Use(Tracer{Tracer: o.Tracing.Tracer()})
	}
	if o.Introspection {
		gql.Use(extension.Introspection{})
	} else {
		gql.Use(introspectionGate{})
		gql.SetDisableSuggestion(true) // fields and leaf selections only
		gql.SetValidationRulesFn(rulesWithoutSuggestions)
	}
	gql.Use(persistedQueries{extension.AutomaticPersistedQuery{Cache: newAPQCache(cmp.Or(o.APQCacheBytes, DefaultAPQCacheBytes))}})
	gql.Use(repeatedKeyLimit{Max: MaxRepeatedResponseKey}) // after the persisted query is resolved
	gql.Use(spreadLimit{Max: MaxExpandedSelections})       // before anything that expands fragments
	gql.Use(singleSubscriptionField{})
	gql.Use(extension.FixedComplexityLimit(o.ComplexityLimit))
	gql.Use(MutationLimit{Max: cmp.Or(o.MaxMutations, DefaultMaxMutationFields)})
	gql.Use(resolvers.SubscriptionPaths{})
	gql.AroundResponses(boundResponse(cmp.Or(o.MaxResponseBytes, MaxResponseBytes)))
	gql.AroundResponses(deadlines(cmp.Or(o.QueryTimeout, DefaultQueryTimeout), cmp.Or(o.MutationTimeout, DefaultMutationTimeout)))
	gql.AroundFields(eventDeadline(cmp.Or(o.QueryTimeout, DefaultQueryTimeout)))
	gql.AroundResponses(func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		// Fresh dataloaders for every response: each query, mutation and subscription event.
		if c, ok := auth.FromContext(ctx); ok {
			if l := newLoaders(c.TenantID); l != nil {
				ctx = loader.With(ctx, l)
			}
		}
		return next(ctx)
	})
	gql.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error {
		gerr := graphql.DefaultErrorPresenter(ctx, err)
		var ie *inbox.Error
		if te, ok := timeoutError(err); ok {
			ie = te
		}
		if ie != nil || errors.As(err, &ie) {
			gerr.Message = ie.Message
			gerr.Extensions = map[string]any{"code": ie.Code}
			return gerr
		}
		if gerr.Extensions != nil && gerr.Extensions["code"] != nil {
			return gerr // gqlgen's own: GRAPHQL_PARSE_FAILED, GRAPHQL_VALIDATION_FAILED, ...
		}
		var ce interface{ Unwrap() error }
		if errors.As(err, &ce) && IsInputCoercion(err) {
			gerr.Extensions = map[string]any{"code": inbox.CodeBadUserInput}
			return gerr
		}
		if len(gerr.Path) == 0 && !graphql.HasOperationContext(ctx) {
			// Not from a resolver: the request itself could not be read (a body that is
			// not JSON, variables of the wrong shape). gqlgen's message quotes the whole
			// body and Go's decoder (type names): the client gets what to fix instead.
			if strings.HasPrefix(gerr.Message, "json request body could not be decoded") {
				gerr.Message = msgNotAGraphQLRequest
			}
			gerr.Extensions = map[string]any{"code": inbox.CodeBadUserInput}
			return gerr
		}
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			// The client went away (or completed its subscription) while the operation
			// ran: nobody reads this answer, and it is not the server's failure.
			log.DebugContext(ctx, "request cancelled by the client", "path", gerr.Path.String(), "err", err)
		} else {
			log.ErrorContext(ctx, "request failed", "path", gerr.Path.String(), "err", err)
		}
		gerr.Message = "internal server error"
		gerr.Extensions = map[string]any{"code": inbox.CodeInternal}
		return gerr
	})
	gql.SetRecoverFunc(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in resolver", "panic", fmt.Sprint(p))
		return errors.New("internal server error")
	})

	mux := http.NewServeMux()
	anonymous := newAnonymousGate(cmp.Or(o.AnonymousConcurrency, DefaultAnonymousConcurrency))
	mux.Handle("/graphql", telemetry.Routed(withCORS(o.AllowedOrigins, limitBody(h.streamsMiddleware(verifier.Middleware(anonymous.wrap(gql)))))))
	if o.REST != nil {
		mux.Handle("/v1/", telemetry.Routed(withRESTCORS(o.AllowedOrigins, o.REST)))
	}
	mux.Handle("GET /healthz", telemetry.Routed(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })))
	mux.Handle("GET /readyz", telemetry.Routed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := st.Badge(ctx, inbox.Viewer{TenantID: "health", UserID: "probe"}); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})))
	mux.Handle("GET /ui/inbox.js", telemetry.Routed(withCORS(o.AllowedOrigins, web.InboxJS())))
	if o.DemoToken != nil {
		demo := web.Demo(o.DemoUser, o.DemoToken)
		mux.Handle("GET /demo", telemetry.Routed(demo))
		mux.Handle("GET /demo/token", telemetry.Routed(demo))
	}
	mux.Handle("/", telemetry.Routed(web.GraphiQL(web.GraphiQLOptions{Endpoint: "/graphql", DefaultHeaders: o.GraphiQLHeaders, Title: "Inbox gateway"})))
	h.mux = mux
	return h
}

// IsInputCoercion reports whether err came from coercing an argument (a bad scalar value),
// which gqlgen reports without a code.
func IsInputCoercion(err error) bool {
	return strings.Contains(err.Error(), "JSON scalar")
}

// MaxBodyBytes bounds a request body on /graphql (1 MiB): a send's payload is at most
// 16 KiB, so anything near this is not a legitimate operation.
const MaxBodyBytes = 1 << 20

// limitBody refuses a request body over MaxBodyBytes with 413. A declared length is
// checked at once; a body of unknown length (chunked) is read here, up to the limit, so
// that it gets the same 413 (the transports would report the cut-off read as a bad
// body). The usual request, with a Content-Length, is not read twice.
func limitBody(next http.Handler) http.Handler {
	tooLarge := func(w http.ResponseWriter) {
		writeRequestError(w, http.StatusRequestEntityTooLarge, inbox.CodeBadUserInput, "request body over 1 MiB")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyBytes {
			tooLarge(w)
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		if r.ContentLength < 0 {
			b, err := io.ReadAll(r.Body)
			if _, over := errors.AsType[*http.MaxBytesError](err); over {
				tooLarge(w)
				return
			}
			if err != nil {
				writeRequestError(w, http.StatusBadRequest, inbox.CodeBadUserInput, "the request body could not be read")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		next.ServeHTTP(w, r)
	})
}
