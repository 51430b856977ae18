package telemetry

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns base (nil: http.DefaultTransport) wrapped so that each request a
// provider adapter sends inside a traced context is a client span carrying the
// traceparent header; with tracing off, base itself.
func Transport(t *Tracing, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !t.Enabled() {
		return base
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(t.TracerProvider()),
		otelhttp.WithPropagators(t.Propagators()), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		// Calls outside a trace (a JWKS refresh) make no root span.
		otelhttp.WithFilter(func(r *http.Request) bool { return traced(r) }))
}

// traced reports whether r's context holds a span.
func traced(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }
