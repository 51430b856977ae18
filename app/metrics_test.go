package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/metrics"
)

// newMetricsServer is the gateway as serve composes it, metrics included (the harness's
// Options.Metrics): the DynamoDB client of app.LocalClient with the metrics middleware,
// the broker with the lag observer, the handler with the registry and /metrics beside it
// (cfg.MetricsAddr empty).
func newMetricsServer(t *testing.T, cfg app.Config) (*testgw.Server, *metrics.Registry) {
	t.Helper()
	reg := metrics.New()
	s := testgw.NewWith(t, testgw.Options{Metrics: reg, Config: func(c *app.Config) {
		*c = cfg
		c.ComplexityLimit = 5000
	}})
	return s, reg
}

// scrape GETs /metrics and parses the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		t.Fatalf("GET %s: status %d, Content-Type %q: %.300s", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// sample returns the value of the series of family name with exactly labels (a
// histogram's sample count), and whether it exists.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// sum adds the values of every series of family name whose labels include labels.
func sum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	var total float64
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

func expectSample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := sample(fams, name, labels)
	if !ok {
		t.Errorf("no series %s%v", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// TestMetricsAfterQueryMutationAndSubscription scrapes /metrics from the gateway as serve
// builds it after a query, a mutation, a refused document and a WebSocket subscription:
// every series exists with the expected labels and exact counts, no client-chosen name
// or user id appears, and the gauges return to 0 when the connection closes.
func TestMetricsAfterQueryMutationAndSubscription(t *testing.T) {
	t.Parallel()
	s, _ := newMetricsServer(t, app.Config{})
	metricsURL := s.HTTP.URL + "/metrics"
	sender := s.Token("t1", "svc-metrics", auth.ScopeSend)
	alice := s.Token("t1", "alice-metrics-user")

	fams := scrape(t, metricsURL)
	for _, tr := range []string{"websocket", "sse"} {
		expectSample(t, fams, "inbox_open_connections", map[string]string{"transport": tr}, 0)
		expectSample(t, fams, "inbox_open_subscriptions", map[string]string{"transport": tr}, 0)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("runtime/process series %s missing", name)
		}
	}

	// A query with a client-chosen operation name and aliases.
	var d struct{ V struct{ N int } }
	s.MustData(alice, `query SecretClientChosenName { v: viewer { n: unreadCount } }`, nil, &d)
	// A mutation (its operation is anonymous) and one refused in validation.
	s.Seed(sender, "alice-metrics-user", 1)
	s.ExpectError(alice, `query AnotherSecretName { viewer { noSuchField } }`, nil, "GRAPHQL_VALIDATION_FAILED")

	// A WebSocket subscription: its first value, then a change from a mutation.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.DialWS(ctx, "graphql-transport-ws")
	c.Init(alice)
	c.Subscribe("1", `subscription WatchedSecretName { unreadCount }`)
	if got := c.NextCount("1"); got != 1 {
		t.Fatalf("first value = %d, want 1", got)
	}
	s.Seed(sender, "alice-metrics-user", 1)
	if got := c.NextCount("1"); got != 2 {
		t.Fatalf("after a send: %d, want 2", got)
	}

	fams = scrape(t, metricsURL)
	req := func(transport, typ, field, code string) map[string]string {
		return map[string]string{"transport": transport, "type": typ, "field": field, "code": code}
	}
	expectSample(t, fams, "inbox_graphql_requests_total", req("http", "query", "viewer", "ok"), 1)
	expectSample(t, fams, "inbox_graphql_requests_total", req("http", "mutation", "sendNotification", "ok"), 2)
	expectSample(t, fams, "inbox_graphql_requests_total", req("http", "none", "none", "GRAPHQL_VALIDATION_FAILED"), 1)
	// A subscription counts once (at its first response), not per event.
	expectSample(t, fams, "inbox_graphql_requests_total", req("websocket", "subscription", "unreadCount", "ok"), 1)
	expectSample(t, fams, "inbox_graphql_request_duration_seconds", map[string]string{"transport": "http", "type": "query", "field": "viewer"}, 1)
	expectSample(t, fams, "inbox_graphql_request_duration_seconds", map[string]string{"transport": "http", "type": "mutation", "field": "sendNotification"}, 2)
	expectSample(t, fams, "inbox_open_connections", map[string]string{"transport": "websocket"}, 1)
	expectSample(t, fams, "inbox_open_subscriptions", map[string]string{"transport": "websocket"}, 1)
	expectSample(t, fams, "inbox_open_subscriptions", map[string]string{"transport": "sse"}, 0)

	// DynamoDB: the query read META (GetItem), the sends wrote (TransactWriteItems); every
	// call succeeded on its first attempt, and DynamoDB reported the capacity.
	for _, op := range []string{"GetItem", "TransactWriteItems"} {
		if n := sum(fams, "inbox_dynamodb_calls_total", map[string]string{"operation": op, "outcome": "ok"}); n < 1 {
			t.Errorf("inbox_dynamodb_calls_total{operation=%q,outcome=ok} = %v, want at least 1", op, n)
		}
		if n := sum(fams, "inbox_dynamodb_attempts_total", map[string]string{"operation": op, "outcome": "ok"}); n < 1 {
			t.Errorf("inbox_dynamodb_attempts_total{operation=%q,outcome=ok} = %v, want at least 1", op, n)
		}
		if n, _ := sample(fams, "inbox_dynamodb_consumed_capacity_units_total", map[string]string{"operation": op}); n <= 0 {
			t.Errorf("inbox_dynamodb_consumed_capacity_units_total{operation=%q} = %v, want > 0", op, n)
		}
	}
	calls, attempts := sum(fams, "inbox_dynamodb_calls_total", nil), sum(fams, "inbox_dynamodb_attempts_total", nil)
	if calls == 0 || calls != attempts || calls != sum(fams, "inbox_dynamodb_call_duration_seconds", nil) {
		t.Errorf("DynamoDB calls %v, attempts %v, timed calls %v: want equal and > 0 without faults",
			calls, attempts, sum(fams, "inbox_dynamodb_call_duration_seconds", nil))
	}
	for _, o := range []string{"retried", "throttled", "failed"} {
		if n := sum(fams, "inbox_dynamodb_calls_total", map[string]string{"outcome": o}); n != 0 {
			t.Errorf("%v DynamoDB calls %s without faults", n, o)
		}
	}
	// Two sends to a subscribed user: two publishes delivered here, at least.
	if n, _ := sample(fams, "inbox_broker_publish_lag_seconds", map[string]string{"path": "local"}); n < 2 {
		t.Errorf("inbox_broker_publish_lag_seconds{path=local} count = %v, want at least 2", n)
	}

	// No client-chosen name, alias or user id is a label value.
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, secret := range []string{"SecretClientChosenName", "AnotherSecretName", "WatchedSecretName", "alice-metrics-user", "svc-metrics", `"v"`, `"n"`, "t1"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("/metrics contains %q", secret)
		}
	}

	// Closing the connection ends the subscription: both gauges go back to 0.
	_ = c.Conn.Close(websocket.StatusNormalClosure, "")
	testgw.WaitFor(t, testgw.EventTimeout, "the WebSocket gauges to return to 0", func() bool {
		f := scrape(t, metricsURL)
		conns, _ := sample(f, "inbox_open_connections", map[string]string{"transport": "websocket"})
		subs, _ := sample(f, "inbox_open_subscriptions", map[string]string{"transport": "websocket"})
		return conns == 0 && subs == 0
	})

	// An SSE subscription: one stream, one subscription, counted once; both end with it.
	sctx, scancel := context.WithCancel(ctx)
	sse := s.SubscribeSSE(sctx, alice, `subscription { unreadCount }`)
	if got := sse.NextCount(); got != 2 {
		t.Fatalf("SSE first value = %d, want 2", got)
	}
	fams = scrape(t, metricsURL)
	expectSample(t, fams, "inbox_open_connections", map[string]string{"transport": "sse"}, 1)
	expectSample(t, fams, "inbox_open_subscriptions", map[string]string{"transport": "sse"}, 1)
	expectSample(t, fams, "inbox_graphql_requests_total", req("sse", "subscription", "unreadCount", "ok"), 1)
	scancel()
	testgw.WaitFor(t, testgw.EventTimeout, "the SSE gauges to return to 0", func() bool {
		f := scrape(t, metricsURL)
		conns, _ := sample(f, "inbox_open_connections", map[string]string{"transport": "sse"})
		subs, _ := sample(f, "inbox_open_subscriptions", map[string]string{"transport": "sse"})
		return conns == 0 && subs == 0
	})
}

// TestMetricsOnSeparateListener: with INBOX_METRICS_ADDR set, the gateway's own listener
// does not serve /metrics, the internal listener does, with the gateway's requests.
func TestMetricsOnSeparateListener(t *testing.T) {
	t.Parallel()
	s, reg := newMetricsServer(t, app.Config{MetricsAddr: "127.0.0.1:0"})
	resp, err := http.Get(s.HTTP.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "inbox_graphql_requests_total") || strings.Contains(string(b), "go_goroutines") {
		t.Fatalf("the gateway's listener serves metrics with INBOX_METRICS_ADDR set")
	}
	url, stop, err := app.ServeMetrics(app.Config{MetricsAddr: "127.0.0.1:0"}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	s.MustData(s.Token("t1", "u"), `{ viewer { unreadCount } }`, nil, nil)
	fams := scrape(t, url)
	expectSample(t, fams, "inbox_graphql_requests_total",
		map[string]string{"transport": "http", "type": "query", "field": "viewer", "code": "ok"}, 1)
}
