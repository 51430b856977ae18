// Package httpapi builds the gateway's HTTP surface: /graphql with every transport
// (POST, GET, WebSocket graphql-transport-ws and graphql-ws, SSE), the error presenter,
// complexity limit, per-operation dataloaders, GraphiQL at / and the health probes.
//
// server.go (package main) wires it to the configuration; the bench command
// (cmd/bench) builds the same handler, so what it measures is what the gateway serves.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/graph"
	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
	"github.com/inboxgw/gateway/resolvers"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/web"
)

// Options are the dependencies and settings of the handler.
type Options struct {
	Log      *slog.Logger
	Verifier *auth.Verifier
	Store    *store.Store
	Broker   resolvers.Broker
	// AllowedOrigins are the host patterns WebSocket upgrades accept besides same origin.
	AllowedOrigins []string
	// ComplexityLimit bounds a query's cost (see Complexity).
	ComplexityLimit int
	// GraphiQLHeaders pre-fills GraphiQL's headers editor (a JSON object), "" for none.
	GraphiQLHeaders string
	// Loaders returns the dataloaders of one operation of a tenant; nil means
	// loader.New(Store, tenantID). A func that returns nil runs operations without
	// loaders (every profile is read on its own: the bench's naive mode).
	Loaders func(tenantID string) *loader.Loaders
}

// NewHandler returns the HTTP surface: /graphql (every transport), GraphiQL at /,
// /healthz and /readyz.
func NewHandler(o Options) http.Handler {
	log, verifier, st := o.Log, o.Verifier, o.Store
	if log == nil {
		log = slog.Default()
	}
	newLoaders := o.Loaders
	if newLoaders == nil {
		newLoaders = func(tenantID string) *loader.Loaders { return loader.New(st, tenantID) }
	}
	res := &resolvers.Resolver{Store: st, Broker: o.Broker, Log: log}
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: res, Complexity: Complexity()}))
	initFunc := func(ctx context.Context, p transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		c, err := verifier.FromHeader(p.Authorization())
		if err != nil {
			return transport.WithWebsocketCloseCode(ctx, 4403), nil, err
		}
		return auth.WithClaims(ctx, c), nil, nil
	}
	ws := transport.Websocket{
		InitFunc:              initFunc,
		InitTimeout:           10 * time.Second,
		KeepAlivePingInterval: 15 * time.Second,
		Implementation: transport.CoderWebsocketImplementation{AcceptOptions: websocket.AcceptOptions{
			// Same origin only, unless INBOX_ALLOWED_ORIGINS lists others (host patterns).
			OriginPatterns: o.AllowedOrigins,
		}},
	}
	gql.AddTransport(ws)
	gql.AddTransport(transport.SSE{KeepAlivePingInterval: 15 * time.Second})
	gql.AddTransport(transport.Options{})
	gql.AddTransport(transport.GET{})
	gql.AddTransport(transport.POST{})
	gql.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	gql.Use(extension.Introspection{})
	gql.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	gql.Use(extension.FixedComplexityLimit(o.ComplexityLimit))
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
		if errors.As(err, &ie) {
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
		log.Error("request failed", "path", gerr.Path.String(), "err", err)
		gerr.Message = "internal server error"
		gerr.Extensions = map[string]any{"code": inbox.CodeInternal}
		return gerr
	})
	gql.SetRecoverFunc(func(ctx context.Context, p any) error {
		log.Error("panic in resolver", "panic", fmt.Sprint(p))
		return errors.New("internal server error")
	})

	mux := http.NewServeMux()
	mux.Handle("/graphql", verifier.Middleware(gql))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, _, err := st.Badge(ctx, inbox.Viewer{TenantID: "health", UserID: "probe"}); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("/", web.GraphiQL(web.GraphiQLOptions{Endpoint: "/graphql", DefaultHeaders: o.GraphiQLHeaders, Title: "Inbox gateway"}))
	return mux
}

// IsInputCoercion reports whether err came from coercing an argument (a bad scalar value),
// which gqlgen reports without a code.
func IsInputCoercion(err error) bool {
	return strings.Contains(err.Error(), "JSON scalar")
}

// Complexity sets list fields' cost to their page size times their children's.
func Complexity() graph.ComplexityRoot {
	var c graph.ComplexityRoot
	c.Viewer.Inbox = func(childComplexity int, first *int, _ *string, last *int, _ *string, _ *model.InboxFilter) int {
		n := inbox.DefaultPageSize
		if first != nil {
			n = *first
		} else if last != nil {
			n = *last
		}
		return 1 + max(n, 1)*childComplexity
	}
	c.Query.Nodes = func(childComplexity int, ids []string) int { return 1 + len(ids)*childComplexity }
	return c
}
