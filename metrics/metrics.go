package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of the gateway ("inbox_...").
const Namespace = "inbox"

// Transports, the values of the "transport" label.
const (
	TransportHTTP      = "http"      // POST and GET /graphql
	TransportWebSocket = "websocket" // graphql-transport-ws and graphql-ws
	TransportSSE       = "sse"       // GraphQL over server-sent events
)

// latencyBuckets are the request and DynamoDB call latency buckets, in seconds: 1 ms to
// 30 s (the gateway's queries take a few ms on a warm engine; a throttled retry chain
// takes seconds; a mutation may run up to INBOX_MUTATION_TIMEOUT, 30 s by default).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// lagBuckets are the broker publish lag buckets, in seconds: 10 µs (in-process
// delivery) to 5 s (a Redis subscriber that fell behind).
var lagBuckets = []float64{.00001, .0001, .001, .005, .01, .05, .1, .5, 1, 5}

// Registry holds the gateway's metrics and the prometheus.Registry they are served from.
// Its methods are safe for concurrent use, and all of them accept a nil *Registry
// (recording nothing).
type Registry struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec   // transport, type, field, code
	requestDuration *prometheus.HistogramVec // transport, type, field

	ddbCalls       *prometheus.CounterVec   // operation, outcome
	ddbAttempts    *prometheus.CounterVec   // operation, outcome
	ddbDuration    *prometheus.HistogramVec // operation
	ddbCapacity    *prometheus.CounterVec   // operation
	storeRetries   *prometheus.CounterVec   // operation, reason
	storeExhausted *prometheus.CounterVec   // operation, code

	connections   *prometheus.GaugeVec // transport
	subscriptions *prometheus.GaugeVec // transport

	publishLag *prometheus.HistogramVec // path
}

// New returns a Registry with the gateway's metrics and the Go runtime and process
// collectors, on a prometheus.Registry of its own (not the library's global default).
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "graphql_requests_total",
		Help: "GraphQL operations answered, by transport, operation type (query, mutation, subscription; none when the document did not parse or validate), " +
			"root field of the schema (several when the operation selects more than one; none when unknown) and the first error's extensions.code (ok without errors). " +
			"A subscription counts once, at its first response.",
	}, []string{"transport", "type", "field", "code"})
	r.requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "graphql_request_duration_seconds",
		Help:    "Time from reading a GraphQL request to its response (queries, mutations and refused documents; subscriptions are long-lived and not timed), in seconds.",
		Buckets: latencyBuckets,
	}, []string{"transport", "type", "field"})
	r.ddbCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "dynamodb_calls_total",
		Help: "DynamoDB API calls (each with all its SDK retries), by operation and outcome: ok (first attempt), retried (succeeded after more than one SDK attempt), " +
			"throttled (failed, the last error a throttling error), conflict (a condition or transaction conflict the store re-plans: not a failure), " +
			"failed (failed otherwise, cancellations included). The store asks for one SDK attempt per call and retries itself: see inbox_store_retries_total.",
	}, []string{"operation", "outcome"})
	r.ddbAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "dynamodb_attempts_total",
		Help: "HTTP attempts of DynamoDB calls as the SDK's retryer makes them, by operation and outcome: ok, throttled, conflict, failed.",
	}, []string{"operation", "outcome"})
	r.ddbDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "dynamodb_call_duration_seconds",
		Help:    "Duration of DynamoDB API calls, retries and backoff included, in seconds.",
		Buckets: latencyBuckets,
	}, []string{"operation"})
	r.ddbCapacity = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "dynamodb_consumed_capacity_units_total",
		Help: "Capacity units DynamoDB reported as consumed (ReturnConsumedCapacity=TOTAL), by operation.",
	}, []string{"operation"})
	r.storeRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "store_retries_total",
		Help: "DynamoDB calls the store repeated after a transient failure, by operation and reason: throttled or unavailable (HTTP 5xx, a reset or timed-out connection).",
	}, []string{"operation", "reason"})
	r.storeExhausted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "store_retries_exhausted_total",
		Help: "DynamoDB calls whose transient failures outlived the store's retry budget or the request's deadline, by operation and the code the client got (THROTTLED, UNAVAILABLE).",
	}, []string{"operation", "code"})
	r.connections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "open_connections",
		Help: "Open long-lived connections by transport: WebSocket connections, SSE streams.",
	}, []string{"transport"})
	r.subscriptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "open_subscriptions",
		Help: "Running GraphQL subscriptions by transport (websocket, sse).",
	}, []string{"transport"})
	r.publishLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "broker_publish_lag_seconds",
		Help: "Time from a change's publish to its delivery to this process's subscriptions, in seconds, by path: local (published in this process) " +
			"or redis (published by another process: from its Redis publish to receipt here; the two clocks' skew included).",
		Buckets: lagBuckets,
	}, []string{"path"})
	r.reg.MustRegister(r.requests, r.requestDuration, r.ddbCalls, r.ddbAttempts, r.ddbDuration, r.ddbCapacity,
		r.storeRetries, r.storeExhausted,
		r.connections, r.subscriptions, r.publishLag,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The gauges exist at 0 from the start, so a scrape shows them before the first
	// connection (rate() and alerts need the series).
	for _, t := range []string{TransportWebSocket, TransportSSE} {
		r.connections.WithLabelValues(t)
		r.subscriptions.WithLabelValues(t)
	}
	return r
}

// Handler serves the metrics in the Prometheus text format (or OpenMetrics when the
// scraper asks). It needs no token: see README.md (INBOX_METRICS_ADDR moves it to an
// internal listener).
func (r *Registry) Handler() http.Handler {
	if r == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, MaxRequestsInFlight: 4})
}

// Gatherer returns the underlying registry (for tests and custom exposition).
func (r *Registry) Gatherer() prometheus.Gatherer {
	if r == nil {
		return prometheus.NewRegistry()
	}
	return r.reg
}

// ConnectionOpened counts one open connection of transport (TransportWebSocket or
// TransportSSE) and returns the func that counts it closed; call it exactly once.
func (r *Registry) ConnectionOpened(transport string) (closed func()) {
	if r == nil {
		return func() {}
	}
	g := r.connections.WithLabelValues(transport)
	g.Inc()
	return g.Dec
}

// ObservePublishLag records the time d from a change's publish to its delivery here, on
// path "local" or "redis" (the signature of live's LagObserver).
func (r *Registry) ObservePublishLag(path string, d time.Duration) {
	if r == nil {
		return
	}
	r.publishLag.WithLabelValues(path).Observe(d.Seconds())
}

type transportKey struct{}

// WithTransport marks ctx as serving transport (TransportWebSocket, TransportSSE); the
// GraphQL metrics read it. Unmarked requests count as TransportHTTP.
func WithTransport(ctx context.Context, transport string) context.Context {
	return context.WithValue(ctx, transportKey{}, transport)
}

// TransportOf returns the transport ctx was marked with, TransportHTTP when none.
func TransportOf(ctx context.Context) string {
	if t, ok := ctx.Value(transportKey{}).(string); ok {
		return t
	}
	return TransportHTTP
}
