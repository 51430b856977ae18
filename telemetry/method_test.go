package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/inboxgw/gateway/telemetry"
)

// An HTTP method the semantic conventions do not know (any token the server accepts, in
// any case, or a long one meant for the log) is recorded as "_OTHER" in the access log
// line and on the span (its name "HTTP {route}"), never echoed: the raw method would make
// the spans' cardinality unbounded and carry what a client chose into the log. Known
// methods are kept as they are; the handler sees the client's method either way.
func TestUnknownMethodIsOther(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var buf bytes.Buffer
	var seen string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Method
		telemetry.SetRoute(r.Context(), "/x")
		w.WriteHeader(http.StatusNoContent)
	})
	wrapped := telemetry.Middleware(telemetry.New(tp), slog.New(slog.NewJSONHandler(&buf, nil)), h)
	long := "BREW" + strings.Repeat("A", 5000)
	for _, c := range []struct{ method, want string }{
		{"GET", "GET"}, {"PATCH", "PATCH"}, {"OPTIONS", "OPTIONS"}, {"QUERY", "_OTHER"},
		{"get", "_OTHER"}, {"BREW", "_OTHER"}, {long, "_OTHER"}, {"X\"injected\":1", "_OTHER"},
	} {
		buf.Reset()
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		req.Method = c.method
		wrapped.ServeHTTP(httptest.NewRecorder(), req)
		if seen != c.method {
			t.Errorf("%.20q: the handler saw the method %.20q", c.method, seen)
		}
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("%.20q: %v: %s", c.method, err, buf.Bytes())
		}
		if line["method"] != c.want {
			t.Errorf("%.20q: logged method %q, want %q", c.method, line["method"], c.want)
		}
		spans := rec.Ended()
		span := spans[len(spans)-1]
		name := c.want
		if name == "_OTHER" {
			name = "HTTP"
		}
		if span.Name() != name+" /x" {
			t.Errorf("%.20q: span %.40q, want %q", c.method, span.Name(), name+" /x")
		}
		for _, a := range span.Attributes() {
			if c.want == "_OTHER" && strings.Contains(a.Value.String(), c.method) {
				t.Errorf("%.20q: span attribute %s echoes the method", c.method, a.Key)
			}
			if a.Key == "http.request.method" && a.Value.AsString() != c.want {
				t.Errorf("%.20q: http.request.method %q, want %q", c.method, a.Value.AsString(), c.want)
			}
		}
	}
}
