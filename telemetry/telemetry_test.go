package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/inboxgw/gateway/telemetry"
)

// recorder returns a tracer recording into a new SpanRecorder.
func recorder(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), rec
}

// Every line logged with a traced context carries trace_id and span_id at the top level,
// whatever attributes and groups the logger was given; a line without one carries none.
func TestLogHandlerAddsTraceIDs(t *testing.T) {
	tracer, _ := recorder(t)
	ctx, span := tracer.Start(context.Background(), "op")
	defer span.End()
	sc := span.SpanContext()
	var buf bytes.Buffer
	base := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	loggers := map[string]*slog.Logger{
		"plain":          base,
		"with attrs":     base.With("component", "sched"),
		"group":          base.WithGroup("g"),
		"group and attr": base.With("a", 1).WithGroup("g").With("b", 2),
		"nested groups":  base.WithGroup("g").WithGroup("h").With("c", 3),
		"wrapped twice":  slog.New(telemetry.LogHandler(base.Handler())),
		"Logger helper":  telemetry.Logger(slog.New(slog.NewJSONHandler(&buf, nil))),
	}
	for name, l := range loggers {
		for _, traced := range []bool{true, false} {
			buf.Reset()
			c := context.Background()
			if traced {
				c = ctx
			}
			l.InfoContext(c, "hello", "k", "v")
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v: %s", name, err, buf.Bytes())
			}
			gotTrace, gotSpan := m[telemetry.LogTraceID], m[telemetry.LogSpanID]
			if traced && (gotTrace != sc.TraceID().String() || gotSpan != sc.SpanID().String()) {
				t.Errorf("%s: line %s, want the span's ids at the top level", name, buf.Bytes())
			}
			if !traced && (gotTrace != nil || gotSpan != nil) {
				t.Errorf("%s: ids without a span: %s", name, buf.Bytes())
			}
			if name == "group and attr" && traced {
				if g, _ := m["g"].(map[string]any); g == nil || g["b"] != float64(2) || g["k"] != "v" || m["a"] != float64(1) {
					t.Errorf("%s: the groups and attributes moved: %s", name, buf.Bytes())
				}
			}
		}
	}
}

// A task's run is a new root span with one link to the writer's traceparent; with no
// traceparent, or one that is not valid, a root without a link; with no tracer, nothing.
func TestStartTaskLinksToTheWriter(t *testing.T) {
	tracer, rec := recorder(t)
	wctx, writer := tracer.Start(context.Background(), "request")
	tp := telemetry.Traceparent(wctx)
	writer.End()
	if want := "00-" + writer.SpanContext().TraceID().String() + "-" + writer.SpanContext().SpanID().String() + "-01"; tp != want {
		t.Fatalf("Traceparent %q, want %q", tp, want)
	}
	if got := telemetry.Traceparent(context.Background()); got != "" {
		t.Errorf("Traceparent without a span: %q", got)
	}
	// A worker's context may hold another span already (the shard's): still a new root.
	other, os := tracer.Start(context.Background(), "other")
	defer os.End()
	for _, c := range []struct {
		name, traceparent string
		links             int
	}{
		{"linked", tp, 1}, {"none", "", 0}, {"garbage", "00-nope", 0}, {"zero ids", "00-00000000000000000000000000000000-0000000000000000-01", 0},
	} {
		_, span := telemetry.StartTask(other, tracer, "task "+c.name, c.traceparent)
		span.End()
		got := rec.Ended()[len(rec.Ended())-1]
		if got.Parent().IsValid() || got.SpanContext().TraceID() == os.SpanContext().TraceID() {
			t.Errorf("%s: not a new root (parent %v)", c.name, got.Parent())
		}
		if len(got.Links()) != c.links || c.links == 1 && got.Links()[0].SpanContext.SpanID() != writer.SpanContext().SpanID() {
			t.Errorf("%s: links %+v, want %d to the writer", c.name, got.Links(), c.links)
		}
	}
	ctx, span := telemetry.StartTask(context.Background(), nil, "untraced", tp)
	span.End()
	if span.IsRecording() || trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("a span without a tracer")
	}
}

// With tracing off the middleware adds only its access log line: the allocations of a
// request through it, over those of the handler alone, stay small and no span exists.
func TestDisabledMiddlewareCost(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		telemetry.SetRoute(r.Context(), "GET /x")
		if trace.SpanContextFromContext(r.Context()).IsValid() {
			t.Error("a span with tracing off")
		}
		w.WriteHeader(http.StatusNoContent)
	})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	wrapped := telemetry.Middleware(telemetry.Disabled(), log, h)
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	run := func(h http.Handler) float64 {
		return testing.AllocsPerRun(200, func() { h.ServeHTTP(httptest.NewRecorder(), req) })
	}
	plain, through := run(h), run(wrapped)
	t.Logf("allocations per request: handler %.0f, through the disabled middleware %.0f (+%.0f)", plain, through, through-plain)
	// The context value, the recorder and the log record's attributes: a bound that a
	// tracer creeping in (otelhttp alone adds dozens) would break.
	if through-plain > 12 {
		t.Errorf("the disabled middleware adds %.0f allocations a request", through-plain)
	}
}
