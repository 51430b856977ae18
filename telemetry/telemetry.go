package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the gateway's own spans.
const ScopeName = "github.com/inboxgw/gateway"

// DefaultServiceName is the service.name of the gateway's spans unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES names another.
const DefaultServiceName = "inbox-gateway"

// Tracing is the tracer provider the gateway's components share, and the propagator
// of incoming and outgoing trace context (W3C tracecontext and baggage). The zero value
// and Disabled() trace nothing.
type Tracing struct {
	// Provider makes the tracers (nil: no-op).
	Provider trace.TracerProvider
	// Propagator reads and writes traceparent headers (nil: W3C tracecontext).
	Propagator propagation.TextMapPropagator
	// Exporter names the exporter in use ("" when tracing is off).
	Exporter string
	enabled  bool
	shutdown func(context.Context) error
}

// Disabled returns a Tracing that records nothing: the default without OTEL_* settings.
func Disabled() *Tracing { return &Tracing{} }

// New returns a Tracing over tp (tests pass an SDK provider with an in-memory
// exporter). tp nil is Disabled.
func New(tp trace.TracerProvider) *Tracing {
	if tp == nil {
		return Disabled()
	}
	return &Tracing{Provider: tp, enabled: true, Exporter: "custom"}
}

// FromEnv builds the tracing the OTEL_* variables ask for: OTEL_TRACES_EXPORTER unset
// or "none", or OTEL_SDK_DISABLED=true, is Disabled; "otlp" (OTEL_EXPORTER_OTLP_*,
// http/protobuf by default, grpc by OTEL_EXPORTER_OTLP_PROTOCOL) and "console" (stdout)
// export through a batching SDK provider. The resource comes from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name defaults to DefaultServiceName); the sampler
// from OTEL_TRACES_SAMPLER (parent-based always-on by default); the batching from
// OTEL_BSP_* (see batchEnv for their bounds). Errors: an exporter name autoexport does
// not know, a setting it refuses, an OTEL_BSP_* value out of its bounds.
func FromEnv(ctx context.Context) (*Tracing, error) {
	name := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if name == "" || name == "none" || strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return Disabled(), nil
	}
	if err := checkBatchEnv(); err != nil {
		return nil, err
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: %w", name, err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return Disabled(), nil
	}
	detected, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// The default name first: OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES win over it.
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", DefaultServiceName)), detected)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, enabled: true, Exporter: name, shutdown: tp.Shutdown}, nil
}

// Enabled reports whether spans are recorded (an exporter or a caller's provider).
func (t *Tracing) Enabled() bool { return t != nil && t.enabled }

// TracerProvider returns the provider (a no-op one when tracing is off).
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil || t.Provider == nil {
		return noop.NewTracerProvider()
	}
	return t.Provider
}

// Tracer returns the gateway's tracer (ScopeName), or nil when tracing is off: the
// components given nil start no span at all (StartTask and StartClient accept nil).
func (t *Tracing) Tracer() trace.Tracer {
	if !t.Enabled() {
		return nil
	}
	return t.TracerProvider().Tracer(ScopeName)
}

// Propagators returns the propagator of trace context (W3C tracecontext and baggage).
func (t *Tracing) Propagators() propagation.TextMapPropagator {
	if t == nil || t.Propagator == nil {
		return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return t.Propagator
}

// Shutdown flushes the spans not exported yet and stops the exporter (FromEnv's); a
// caller's provider (New) is the caller's to shut down.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// batchEnv are the batch span processor's variables and the values FromEnv accepts: the
// SDK takes them as they are, so a negative size panicked in makechan at the start, a
// huge one (OTEL_BSP_MAX_QUEUE_SIZE=100000000000) allocated its queue until the process
// died, and a delay of zero or less exported in a busy loop. Sizes are spans, times
// milliseconds (an export timeout of 0: none).
var batchEnv = []struct {
	key      string
	min, max int
}{
	{"OTEL_BSP_MAX_QUEUE_SIZE", 1, 1 << 20},
	{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, 1 << 20},
	{"OTEL_BSP_SCHEDULE_DELAY", 1, 3_600_000},
	{"OTEL_BSP_EXPORT_TIMEOUT", 0, 3_600_000},
}

// checkBatchEnv refuses an OTEL_BSP_* value that is not an integer within batchEnv's
// bounds (unset or empty: the SDK's default).
func checkBatchEnv() error {
	for _, b := range batchEnv {
		v := os.Getenv(b.key)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < b.min || n > b.max {
			return fmt.Errorf("%s=%.32q: want an integer from %d to %d", b.key, v, b.min, b.max)
		}
	}
	return nil
}
