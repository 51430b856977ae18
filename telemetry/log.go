package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of a traced line.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps h so that every record logged with a context holding a span (a
// request's, a task's: the *Context variants of slog) carries trace_id and span_id, at
// the top level of the record whatever groups the logger opened. A handler already
// wrapped is returned as it is.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*logHandler); ok {
		return h
	}
	return &logHandler{inner: h, base: h}
}

// Logger returns l with its handler wrapped by LogHandler (nil: slog.Default()'s).
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	if _, ok := l.Handler().(*logHandler); ok {
		return l
	}
	return slog.New(LogHandler(l.Handler()))
}

// logHandler is LogHandler's handler. inner is the handler records go to (with the
// logger's attributes and groups); when groups were opened, the trace attributes are
// added through base (the handler before any group) so they stay at the top level.
type logHandler struct {
	inner slog.Handler
	// base is inner before its first WithGroup, with the attributes given before it;
	// groups is what happened after it (nil without groups).
	base   slog.Handler
	groups []func(slog.Handler) slog.Handler
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.inner.Handle(ctx, r)
	}
	ids := []slog.Attr{slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String())}
	if len(h.groups) == 0 {
		r.AddAttrs(ids...)
		return h.inner.Handle(ctx, r)
	}
	// Groups were opened: the ids go on the handler before them, then the groups again.
	inner := h.base.WithAttrs(ids)
	for _, g := range h.groups {
		inner = g(inner)
	}
	return inner.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(h.groups) == 0 {
		next := h.inner.WithAttrs(as)
		return &logHandler{inner: next, base: next}
	}
	return &logHandler{inner: h.inner.WithAttrs(as), base: h.base,
		groups: append(h.groups[:len(h.groups):len(h.groups)], func(x slog.Handler) slog.Handler { return x.WithAttrs(as) })}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &logHandler{inner: h.inner.WithGroup(name), base: h.base,
		groups: append(h.groups[:len(h.groups):len(h.groups)], func(x slog.Handler) slog.Handler { return x.WithGroup(name) })}
}
