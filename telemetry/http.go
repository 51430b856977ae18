package telemetry

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// requestInfo is what the handlers of one request tell the access log: the route
// pattern that served it and the tenant of its token. Set by SetRoute and SetTenant from
// deep inside the handler (where the mux matched, where the token was verified), read
// by Middleware when the request is done.
type requestInfo struct {
	mu     sync.Mutex
	route  string
	tenant string
}

type requestInfoKey struct{}

// SetRoute records route (a ServeMux pattern: "POST /v1/notifications",
// "GET /v1/broadcasts/{id}", "/graphql") as the route of ctx's request, for its access
// log line and its span's name. The innermost mux's pattern wins. Outside Middleware it
// does nothing.
func SetRoute(ctx context.Context, route string) {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok && route != "" {
		ri.mu.Lock()
		ri.route = route
		ri.mu.Unlock()
	}
}

// SetTenant records the tenant of ctx's request's verified token (auth.WithClaims calls
// it). Outside Middleware it does nothing.
func SetTenant(ctx context.Context, tenant string) {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		ri.mu.Lock()
		ri.tenant = tenant
		ri.mu.Unlock()
	}
}

// Routed wraps a handler registered on an http.ServeMux so that the pattern the mux
// matched (r.Pattern) becomes the request's route (SetRoute).
func Routed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetRoute(r.Context(), r.Pattern)
		next.ServeHTTP(w, r)
	})
}

// Middleware traces each request through next and writes its one access log line.
//
// With tracing on, the request gets an otelhttp server span (its parent from an
// incoming traceparent), renamed when it is done to "{method} {route}" with http.route
// set, so that spans group by route and never by a raw path holding ids. The access
// log line ("request", level Info, logged with the request's context so that it carries
// trace_id and span_id) has method, route, status, duration_ms and tenant: never the
// path's query, a header or the token.
//
// A method the semantic conventions do not name (see knownMethod) is "_OTHER" in the
// log line and on the span (named "HTTP {route}" then), and otelhttp never sees it: a
// client's arbitrary token would make the spans' names and the log's values unbounded,
// and write what it chose into the log. The handlers see the request's own method.
func Middleware(t *Tracing, log *slog.Logger, next http.Handler) http.Handler {
	log = Logger(log)
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if raw, ok := r.Context().Value(rawMethodKey{}).(string); ok {
			r = r.Clone(r.Context()) // the handlers see the method the client sent
			r.Method = raw
		}
		method := methodOther
		if knownMethod(r.Method) {
			method = r.Method
		}
		ri := &requestInfo{}
		ctx := context.WithValue(r.Context(), requestInfoKey{}, ri)
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		ri.mu.Lock()
		route, tenant := ri.route, ri.tenant
		ri.mu.Unlock()
		if route == "" {
			route = "unmatched"
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		if rec.hijacked {
			status = http.StatusSwitchingProtocols
		}
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			name := method
			if method == methodOther {
				name = "HTTP" // the conventions' name for a span of an unknown method
			}
			span.SetName(name + " " + routePath(route))
			span.SetAttributes(attribute.String("http.route", routePath(route)))
			if tenant != "" {
				span.SetAttributes(attribute.String("inbox.tenant", tenant))
			}
		}
		log.LogAttrs(ctx, slog.LevelInfo, "request",
			slog.String("method", method), slog.String("route", route), slog.Int("status", status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000), slog.String("tenant", tenant))
	})
	if !t.Enabled() {
		return logged
	}
	traced := otelhttp.NewHandler(logged, "http",
		otelhttp.WithTracerProvider(t.TracerProvider()), otelhttp.WithPropagators(t.Propagators()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !knownMethod(r.Method) {
			// otelhttp would record the raw method (http.request.method_original): it
			// sees "_OTHER", and logged restores the client's method for the handlers.
			r = r.Clone(context.WithValue(r.Context(), rawMethodKey{}, r.Method))
			r.Method = methodOther
		}
		traced.ServeHTTP(w, r)
	})
}

// methodOther is the semantic conventions' value of http.request.method for a method
// they do not name.
const methodOther = "_OTHER"

// rawMethodKey holds, in the context of a request whose method Middleware hid from
// otelhttp, the method the client sent.
type rawMethodKey struct{}

// knownMethod reports whether m is one of the HTTP methods the semantic conventions name
// (RFC 9110's and PATCH), exactly as written: any other is recorded as "_OTHER".
func knownMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch:
		return true
	}
	return false
}

// routePath is the path part of a ServeMux pattern ("POST /v1/notifications" →
// "/v1/notifications").
func routePath(pattern string) string {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == ' ' {
			return pattern[i+1:]
		}
		if pattern[i] == '/' {
			break
		}
	}
	return pattern
}

// statusRecorder remembers the status a handler wrote. It unwraps (http.ResponseController
// reaches the connection through it) and flushes and hijacks as the writer it wraps.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap is for http.ResponseController.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the writer underneath (SSE streams assert http.Flusher).
func (w *statusRecorder) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over (WebSocket upgrades that assert http.Hijacker).
func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, brw, err
}
