// Package telemetry is the gateway's tracing (OpenTelemetry) and its request logging:
// the tracer provider configured only by the standard OTEL_* variables (FromEnv), the
// HTTP server middleware that traces each request and writes its one access log line
// (Middleware), the slog handler that puts trace_id and span_id on every line logged
// with a traced context (LogHandler), the DynamoDB client option that makes one client
// span per call (DynamoDB), provider spans (StartClient, Transport), and what links a
// durable task's run to the request that wrote it (Traceparent, StartTask).
//
// Tracing is off unless OTEL_TRACES_EXPORTER names an exporter (otlp, console). Off,
// nothing is wrapped that need not be, the components get a nil tracer and start no
// span, and a request pays only for its access log line (4 allocations; about 50 more
// with tracing on). It imports nothing of the module, so that store, auth and sched can
// use it.
package telemetry
