package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traceparent returns the W3C traceparent of ctx's span ("00-{trace}-{span}-{flags}"),
// or "" when ctx holds no sampled span (tracing off, or not sampled): what a durable
// task stores so that its run can link to the request that wrote it.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// linkTo returns the span context traceparent names (invalid when it names none).
func linkTo(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// StartTask starts the span of one run of a durable task: a new root (a task runs
// long after its request ended, perhaps on another instance, perhaps again after a
// failure) with a link to the span that wrote it, named by traceparent (none when ""
// or not a traceparent). tracer nil starts nothing and returns ctx.
func StartTask(ctx context.Context, tracer trace.Tracer, name, traceparent string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, trace.SpanFromContext(context.Background()) // a no-op span: ending it ends nothing
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if sc := linkTo(traceparent); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return tracer.Start(ctx, name, opts...)
}

// StartClient starts a client span named name under ctx's span, for a call to a
// provider that no instrumented transport sees (an SMTP session, a channel adapter's
// whole send). Outside a trace it starts nothing (a no-op span).
func StartClient(ctx context.Context, tracer trace.Tracer, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// Detach returns a context without ctx's values, deadline or cancellation but with its
// span: for work that outlives the request (a send processed in a lane after its 202)
// and still belongs to its trace.
func Detach(ctx context.Context) context.Context {
	// The span itself, not only its context: children started from it use its provider.
	return trace.ContextWithSpan(context.Background(), trace.SpanFromContext(ctx))
}

// StartInternal starts an internal span named name under ctx's span, from the provider
// of that span: none (a no-op span, nothing allocated) when ctx holds no recording span.
func StartInternal(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithAttributes(attrs...))
}
