package telemetry_test

// Traces and request logs through the real gateway (internal/testgw builds it as serve
// does), recorded by an in-process span processor: a REST send's server span with its
// DynamoDB client spans, the deliver task's run as a new root linked to the send's
// trace with the provider's span under it; a GraphQL query's operation and resolver
// spans; one access log line per request; trace ids on the lines of a traced context.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/telemetry"
)

// logBuffer collects JSON log lines; safe for the gateway's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the records logged so far, decoded.
func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// traced is a gateway whose spans go to rec and whose log (Info and above, JSON) to
// logs.
type traced struct {
	gw   *testgw.Server
	rec  *tracetest.SpanRecorder
	logs *logBuffer
}

// newTraced starts a traced gateway; o's Tracing and Log are set here.
func newTraced(t *testing.T, o testgw.Options) *traced {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	logs := &logBuffer{}
	o.Tracing = telemetry.New(tp)
	o.Log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return &traced{gw: testgw.NewWith(t, o), rec: rec, logs: logs}
}

// call sends one request to the gateway (path under its root) with token and, when
// set, an incoming traceparent, and returns the status and body.
func call(t *testing.T, gw *testgw.Server, method, path, token, traceparent string, body any, header ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testgw.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(gw.URL, "/graphql")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// incoming is a caller's trace: the gateway's server span must continue it.
const (
	incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpan  = "00f067aa0ba902b7"
	incoming      = "00-" + incomingTrace + "-" + incomingSpan + "-01"
)

// spansOf returns the ended spans of trace id.
func spansOf(rec *tracetest.SpanRecorder, id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID().String() == id {
			out = append(out, s)
		}
	}
	return out
}

// attr returns span s's attribute key as a string ("" when absent).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// descends reports whether s is below ancestor in spans (its parent chain reaches it).
func descends(spans []sdktrace.ReadOnlySpan, s, ancestor sdktrace.ReadOnlySpan) bool {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, x := range spans {
		byID[x.SpanContext().SpanID()] = x
	}
	for p := s.Parent(); p.IsValid(); {
		if p.SpanID() == ancestor.SpanContext().SpanID() {
			return true
		}
		next, ok := byID[p.SpanID()]
		if !ok {
			return false
		}
		p = next.Parent()
	}
	return false
}

// A REST send (POST /v1/notifications) with an incoming traceparent: the server span
// continues the caller's trace, is named by its route, and DynamoDB client spans (table
// and consumed capacity) sit under it, the lane's processing included. The deliver task
// written by that send runs as a new root whose link points into the send's trace, with
// its DynamoDB calls and the SMTP send under it. No DynamoDB span is a root: the
// scheduler's polls and lease renewals trace nothing.
func TestRESTSendTrace(t *testing.T) {
	t.Parallel()
	smtpSrv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	tr := newTraced(t, testgw.Options{Scheduler: true, Config: func(c *app.Config) {
		c.SMTPURL, c.EmailFrom = smtpSrv.URL(), "Inbox Tests <inbox@example.test>"
	}})
	gw := tr.gw
	tok := gw.Token("t1", "svc", auth.ScopeSend, scopeAdmin)
	if st, b := call(t, gw, http.MethodPut, "/v1/users/u1", tok, "", map[string]any{"email": "u1@example.test"}); st != http.StatusOK {
		t.Fatalf("PUT user: %d %s", st, b)
	}
	if st, b := call(t, gw, http.MethodPut, "/v1/templates/welcome", tok, "", map[string]any{
		"locale": "en", "title": "Welcome", "body": "hello", "email": map[string]any{"subject": "Welcome", "text": "Hello"},
	}); st != http.StatusOK {
		t.Fatalf("PUT template: %d %s", st, b)
	}
	st, b := call(t, gw, http.MethodPost, "/v1/notifications", tok, incoming,
		map[string]any{"recipientUserId": "u1", "type": "welcome", "template": "welcome"}, "Idempotency-Key", "trace-1")
	if st != http.StatusAccepted {
		t.Fatalf("POST /v1/notifications: %d %s", st, b)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := smtpSrv.WaitMessages(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The task's span ends after its outcome is written, a moment after the message; the
	// lane's span when the request is marked done, which may be later still.
	var task sdktrace.ReadOnlySpan
	testgw.WaitFor(t, 30*time.Second, "the deliver task's and the lane's spans", func() bool {
		for _, s := range tr.rec.Ended() {
			if s.Name() == "task "+inbox.TaskDeliver {
				task = s
			}
		}
		return task != nil && hasName(tr.rec.Ended(), "send process")
	})

	sendTrace := spansOf(tr.rec, incomingTrace)
	var server sdktrace.ReadOnlySpan
	for _, s := range sendTrace {
		if s.SpanKind() == trace.SpanKindServer {
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no server span in the caller's trace; spans: %v", names(sendTrace))
	}
	if server.Name() != "POST /v1/notifications" || attr(server, "http.route") != "/v1/notifications" ||
		server.Parent().SpanID().String() != incomingSpan || attr(server, "inbox.tenant") != "t1" {
		t.Errorf("server span %q route %q parent %v tenant %q", server.Name(), attr(server, "http.route"), server.Parent().SpanID(), attr(server, "inbox.tenant"))
	}
	var calls int
	for _, s := range sendTrace {
		if !strings.HasPrefix(s.Name(), "DynamoDB.") {
			continue
		}
		calls++
		if s.SpanKind() != trace.SpanKindClient || !descends(sendTrace, s, server) {
			t.Errorf("%s: kind %v, under the server span %v", s.Name(), s.SpanKind(), descends(sendTrace, s, server))
		}
		if got := attr(s, telemetry.AttrTableNames); got != "["+`"`+gw.Table+`"`+"]" {
			t.Errorf("%s: table names %s, want [%q]", s.Name(), got, gw.Table)
		}
		if !strings.Contains(attr(s, telemetry.AttrConsumedCapacity), "CapacityUnits") {
			t.Errorf("%s: consumed capacity %q", s.Name(), attr(s, telemetry.AttrConsumedCapacity))
		}
	}
	if calls < 2 || !hasName(sendTrace, "DynamoDB.TransactWriteItems") || !hasName(sendTrace, "send process") {
		t.Errorf("the send's trace has %d DynamoDB spans: %v", calls, names(sendTrace))
	}

	if task.Parent().IsValid() || task.SpanContext().TraceID().String() == incomingTrace {
		t.Errorf("the task's span is not a new root: parent %v, trace %v", task.Parent(), task.SpanContext().TraceID())
	}
	if ls := task.Links(); len(ls) != 1 || ls[0].SpanContext.TraceID().String() != incomingTrace {
		t.Errorf("the task's links %+v, want one into trace %s", ls, incomingTrace)
	}
	taskTrace := spansOf(tr.rec, task.SpanContext().TraceID().String())
	var smtp sdktrace.ReadOnlySpan
	for _, s := range taskTrace {
		if s.Name() == "smtp send" {
			smtp = s
		}
	}
	if smtp == nil || smtp.SpanKind() != trace.SpanKindClient || !descends(taskTrace, smtp, task) || attr(smtp, "inbox.channel") != inbox.ChannelEmail {
		t.Errorf("no SMTP client span under the task's: %v", names(taskTrace))
	}
	if !hasName(taskTrace, "DynamoDB.UpdateItem") && !hasName(taskTrace, "DynamoDB.TransactWriteItems") {
		t.Errorf("the task's trace has no DynamoDB write: %v", names(taskTrace))
	}
	for _, s := range tr.rec.Ended() {
		if strings.HasPrefix(s.Name(), "DynamoDB.") && !s.Parent().IsValid() {
			t.Errorf("a root DynamoDB span: %s", s.Name())
		}
	}

	// The request's access log line carries the server span's ids.
	var line map[string]any
	for _, l := range tr.logs.lines(t) {
		if l["msg"] == "request" && l["route"] == "POST /v1/notifications" {
			line = l
		}
	}
	if line == nil || line[telemetry.LogTraceID] != incomingTrace || line[telemetry.LogSpanID] != server.SpanContext().SpanID().String() {
		t.Errorf("access log line %v, want trace_id %s and the server span's id", line, incomingTrace)
	}
}

// scopeAdmin is the admin scope (package rest's ScopeAdmin).
const scopeAdmin = "notifications:admin"

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func hasName(spans []sdktrace.ReadOnlySpan, name string) bool {
	for _, s := range spans {
		if s.Name() == name {
			return true
		}
	}
	return false
}

// A GraphQL query: one span for the operation, named by its type and name, under the
// server span; one span per resolver that does I/O (viewer.inbox, viewer.unreadCount)
// with the DynamoDB calls under them; none for the trivial Query.viewer or the per-row
// fields the dataloaders batch (Notification.actor).
func TestGraphQLTrace(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, testgw.Options{})
	gw := tr.gw
	gw.Seed(gw.ServiceToken("t1", "svc"), "u1", 2)
	query := `query Feed { viewer { unreadCount inbox(first: 5) { edges { node { id title actor { name } } } } } }`
	st, b := call(t, gw, http.MethodPost, "/graphql", gw.Token("t1", "u1"), incoming, map[string]any{"query": query})
	if st != http.StatusOK || bytes.Contains(b, []byte(`"errors"`)) {
		t.Fatalf("query: %d %s", st, b)
	}
	// The server span ends as the handler returns, which the client need not wait for.
	testgw.WaitFor(t, 10*time.Second, "the server span", func() bool { return hasName(spansOf(tr.rec, incomingTrace), "POST /graphql") })
	spans := spansOf(tr.rec, incomingTrace)
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	server, op := byName["POST /graphql"], byName["query Feed"]
	if server == nil || op == nil || op.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("want the operation's span under the server span; spans %v", names(spans))
	}
	if attr(op, "graphql.operation.type") != "query" || attr(op, "graphql.operation.name") != "Feed" {
		t.Errorf("operation attributes %v", op.Attributes())
	}
	for _, f := range []string{"Viewer.inbox", "Viewer.unreadCount"} {
		if s := byName[f]; s == nil || !descends(spans, s, op) {
			t.Errorf("no span of resolver %s under the operation; spans %v", f, names(spans))
		}
	}
	for _, f := range []string{"Query.viewer", "Notification.actor", "Notification.title", "Notification.id"} {
		if byName[f] != nil {
			t.Errorf("a span for the trivial or batched field %s", f)
		}
	}
	var underResolver bool
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), "DynamoDB.") && descends(spans, s, byName["Viewer.inbox"]) {
			underResolver = true
		}
	}
	if !underResolver {
		t.Errorf("no DynamoDB span under Viewer.inbox; spans %v", names(spans))
	}
}

// Every request writes one access log line: method, the route pattern (never the raw
// path with its ids, nor the query string), status, duration and the token's tenant
// (empty without one); never the token. With tracing off too (the default).
func TestAccessLog(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	gw := testgw.NewWith(t, testgw.Options{Tracing: telemetry.Disabled(),
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	svc := gw.Token("t7", "svc", auth.ScopeSend, scopeAdmin)
	user := gw.Token("t7", "u1")
	type want struct {
		method, route string
		status        int
		tenant        string
	}
	cases := []struct {
		method, path, token string
		body                any
		want                want
	}{
		{http.MethodGet, "/v1/broadcasts/bc-secret-id?x=1", svc, nil, want{"GET", "GET /v1/broadcasts/{id}", 404, "t7"}},
		{http.MethodGet, "/v1/users/u-secret/preferences", svc, nil, want{"GET", "GET /v1/users/{id}/preferences", 200, "t7"}},
		{http.MethodPost, "/graphql", user, map[string]any{"query": "{ viewer { unreadCount } }"}, want{"POST", "/graphql", 200, "t7"}},
		{http.MethodPost, "/graphql", "", map[string]any{"query": "{ viewer { unreadCount } }"}, want{"POST", "/graphql", 200, ""}},
		{http.MethodGet, "/healthz", "", nil, want{"GET", "GET /healthz", 200, ""}},
		{http.MethodPost, "/v1/notifications", "not-a-token", map[string]any{}, want{"POST", "POST /v1/notifications", 401, ""}},
	}
	for _, c := range cases {
		before := len(logs.lines(t))
		st, b := call(t, gw, c.method, c.path, c.token, "", c.body)
		if st != c.want.status {
			t.Fatalf("%s %s: %d %s", c.method, c.path, st, b)
		}
		// The line is written as the handler returns, which the client need not wait for.
		var got []map[string]any
		testgw.WaitFor(t, 10*time.Second, "the access log line", func() bool {
			got = nil
			for _, l := range logs.lines(t)[before:] {
				if l["msg"] == "request" {
					got = append(got, l)
				}
			}
			return len(got) > 0
		})
		if len(got) != 1 {
			t.Fatalf("%s %s: %d access log lines, want 1: %v", c.method, c.path, len(got), got)
		}
		l := got[0]
		if l["method"] != c.want.method || l["route"] != c.want.route || l["status"] != float64(c.want.status) || l["tenant"] != c.want.tenant {
			t.Errorf("%s %s: line %v, want %+v", c.method, c.path, l, c.want)
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("%s %s: duration_ms %v", c.method, c.path, l["duration_ms"])
		}
		if _, ok := l[telemetry.LogTraceID]; ok {
			t.Errorf("%s %s: a trace id with tracing off: %v", c.method, c.path, l)
		}
	}
	all := logs.String()
	for _, secret := range []string{svc, user, "not-a-token", "Bearer", "bc-secret-id", "u-secret", "x=1"} {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// With no OTEL_* variable (and with OTEL_TRACES_EXPORTER=none) the gateway traces
// nothing: its Tracing is off, no exporter runs, the DynamoDB client keeps the SDK's
// no-op tracer, and a request with a traceparent gets no trace ids in its log line.
func TestDefaultConfigInstallsNoExporter(t *testing.T) {
	for _, v := range []string{"", "none"} {
		t.Setenv("OTEL_TRACES_EXPORTER", v)
		tr, err := telemetry.FromEnv(t.Context())
		if err != nil || tr.Enabled() || tr.Tracer() != nil || tr.Exporter != "" {
			t.Fatalf("OTEL_TRACES_EXPORTER=%q: enabled %v exporter %q err %v", v, tr.Enabled(), tr.Exporter, err)
		}
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	logs := &logBuffer{}
	gw := testgw.NewWith(t, testgw.Options{Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if st, b := call(t, gw, http.MethodGet, "/healthz", "", incoming, nil); st != http.StatusOK {
		t.Fatalf("healthz: %d %s", st, b)
	}
	testgw.WaitFor(t, 10*time.Second, "the access log line", func() bool { return strings.Contains(logs.String(), `"msg":"request"`) })
	for _, l := range logs.lines(t) {
		if _, ok := l[telemetry.LogTraceID]; ok {
			t.Errorf("a trace id with tracing off: %v", l)
		}
	}
}

// OTEL_TRACES_EXPORTER names the exporter: console is on, an unknown name an error.
func TestFromEnvExporters(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_SERVICE_NAME", "")
	tr, err := telemetry.FromEnv(t.Context())
	if err != nil || !tr.Enabled() || tr.Exporter != "console" {
		t.Fatalf("console: enabled %v exporter %q err %v", tr.Enabled(), tr.Exporter, err)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin-nope")
	if _, err := telemetry.FromEnv(t.Context()); err == nil {
		t.Fatal("an unknown exporter was accepted")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if tr, err := telemetry.FromEnv(t.Context()); err != nil || tr.Enabled() {
		t.Fatalf("OTEL_SDK_DISABLED=true: enabled %v err %v", tr.Enabled(), err)
	}
}

// The long-lived transports work through the traced middleware (the writer it wraps
// hijacks and flushes): a WebSocket subscription and an SSE one each get their first
// count and the next one after a send; the subscription's operation has its span.
func TestStreamsTraced(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, testgw.Options{})
	gw := tr.gw
	tok, svc := gw.Token("t1", "u1"), gw.ServiceToken("t1", "svc")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws := gw.DialWS(ctx, "graphql-transport-ws")
	ws.Init(tok)
	ws.Subscribe("1", `subscription Count { unreadCount }`)
	if n := ws.NextCount("1"); n != 0 {
		t.Fatalf("WebSocket: first count %d", n)
	}
	sse := gw.SubscribeSSE(ctx, tok, `subscription { unreadCount }`)
	if n := sse.NextCount(); n != 0 {
		t.Fatalf("SSE: first count %d", n)
	}
	gw.Seed(svc, "u1", 1)
	if n := ws.NextCount("1"); n != 1 {
		t.Errorf("WebSocket: count after a send %d", n)
	}
	if n := sse.NextCount(); n != 1 {
		t.Errorf("SSE: count after a send %d", n)
	}
	testgw.WaitFor(t, 10*time.Second, "the subscription's operation span", func() bool {
		return hasName(tr.rec.Ended(), "subscription Count")
	})
}

// A broadcast to a segment: each run of a shard's task is one root span with one link
// to the request that started the broadcast, and its recipients get no span or link of
// their own (their writes are the run's DynamoDB calls).
func TestBroadcastShardLinksOnce(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, testgw.Options{Scheduler: true})
	gw := tr.gw
	admin := gw.Token("t1", "svc", auth.ScopeSend, scopeAdmin)
	members := make([]string, 40)
	for i := range members {
		members[i] = "m" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	if st, b := call(t, gw, http.MethodPut, "/v1/segments/vip/members", admin, "", map[string]any{"add": members}); st != http.StatusOK {
		t.Fatalf("segment: %d %s", st, b)
	}
	st, b := call(t, gw, http.MethodPost, "/v1/broadcasts", admin, incoming, map[string]any{"segment": "vip", "type": "promo", "title": "Hi"},
		"Idempotency-Key", "bc-1")
	if st != http.StatusAccepted {
		t.Fatalf("broadcast: %d %s", st, b)
	}
	var acc struct {
		BroadcastID string `json:"broadcastId"`
	}
	if err := json.Unmarshal(b, &acc); err != nil || acc.BroadcastID == "" {
		t.Fatalf("broadcast answer %s: %v", b, err)
	}
	testgw.WaitFor(t, 60*time.Second, "the broadcast is done", func() bool {
		_, b := call(t, gw, http.MethodGet, "/v1/broadcasts/"+acc.BroadcastID, admin, "", nil)
		return bytes.Contains(b, []byte(`"status":"`+inbox.BroadcastDone+`"`))
	})
	var runs int
	for _, s := range tr.rec.Ended() {
		if s.Name() == "task "+inbox.TaskBroadcast {
			runs++
			if s.Parent().IsValid() || len(s.Links()) != 1 || s.Links()[0].SpanContext.TraceID().String() != incomingTrace {
				t.Errorf("a shard run: parent %v, links %+v; want a root with one link to the request", s.Parent(), s.Links())
			}
		}
	}
	if runs == 0 || runs > 16 {
		t.Errorf("%d shard runs for 40 recipients", runs)
	}
	for _, s := range tr.rec.Ended() {
		if len(s.Links()) > 1 {
			t.Errorf("span %s has %d links", s.Name(), len(s.Links()))
		}
		for _, m := range members {
			if strings.Contains(s.Name(), m) {
				t.Errorf("a span per recipient: %s", s.Name())
			}
		}
	}
}
