package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/dynlocal"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// newFaultProxy is a ddbfault.Proxy in front of DynamoDB Local, served on a test server;
// FailNext makes exact numbers of calls fail.
func newFaultProxy(t *testing.T) (*ddbfault.Proxy, string) {
	t.Helper()
	p := ddbfault.New(dynlocaltest.Endpoint(t), ddbfault.Config{})
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.Close() })
	return p, srv.URL
}

// TestDynamoDBOutcomes counts calls and attempts through a fault proxy in front of
// DynamoDB Local, with the SDK's standard retryer (3 attempts): a clean call, one that
// succeeds after two throttles, one throttled on every attempt, one failing with 500s,
// one that is not retried at all (no such table).
func TestDynamoDBOutcomes(t *testing.T) {
	p, proxyURL := newFaultProxy(t)
	r := New()
	db := dynlocal.Client(proxyURL, func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.RateLimiter = ratelimit.None
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})
	}, r.DynamoDB())
	ctx := context.Background()
	list := func() error {
		_, err := db.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
		return err
	}
	calls := func(outcome string) float64 {
		return testutil.ToFloat64(r.ddbCalls.WithLabelValues("ListTables", outcome))
	}
	attempts := func(outcome string) float64 {
		return testutil.ToFloat64(r.ddbAttempts.WithLabelValues("ListTables", outcome))
	}
	check := func(what string, wantCalls, wantAttempts map[string]float64) {
		t.Helper()
		for o, want := range wantCalls {
			if got := calls(o); got != want {
				t.Errorf("%s: calls{%s} = %v, want %v", what, o, got, want)
			}
		}
		for o, want := range wantAttempts {
			if got := attempts(o); got != want {
				t.Errorf("%s: attempts{%s} = %v, want %v", what, o, got, want)
			}
		}
	}

	if err := list(); err != nil {
		t.Fatal(err)
	}
	check("clean", map[string]float64{OutcomeOK: 1, OutcomeRetried: 0}, map[string]float64{OutcomeOK: 1})

	p.FailNext(2, ddbfault.Throttling)
	if err := list(); err != nil {
		t.Fatalf("after two throttles: %v", err)
	}
	check("two throttles then ok", map[string]float64{OutcomeOK: 1, OutcomeRetried: 1},
		map[string]float64{OutcomeOK: 2, OutcomeThrottled: 2})

	p.FailNext(3, ddbfault.ThroughputExceeded)
	if err := list(); err == nil {
		t.Fatal("throttled on every attempt: no error")
	}
	check("throttled throughout", map[string]float64{OutcomeThrottled: 1, OutcomeFailed: 0},
		map[string]float64{OutcomeOK: 2, OutcomeThrottled: 5})

	p.FailNext(3, ddbfault.Outage)
	if err := list(); err == nil {
		t.Fatal("500 on every attempt: no error")
	}
	check("500s throughout", map[string]float64{OutcomeFailed: 1, OutcomeThrottled: 1},
		map[string]float64{OutcomeFailed: 3, OutcomeThrottled: 5})

	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("no_such_table_metrics"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}); err == nil {
		t.Fatal("GetItem of a missing table: no error")
	}
	if got := testutil.ToFloat64(r.ddbAttempts.WithLabelValues("GetItem", OutcomeFailed)); got != 1 {
		t.Errorf("GetItem of a missing table: %v attempts, want 1 (not retried)", got)
	}
	if got := testutil.ToFloat64(r.ddbCalls.WithLabelValues("GetItem", OutcomeFailed)); got != 1 {
		t.Errorf("GetItem of a missing table: calls{failed} = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(r.ddbDuration); got != 2 {
		t.Errorf("call duration series = %d, want 2 (ListTables, GetItem)", got)
	}
}

// TestDynamoDBConsumedCapacity: the middleware asks for the total consumed capacity on a
// copy of the caller's input and counts what DynamoDB Local reports.
func TestDynamoDBConsumedCapacity(t *testing.T) {
	r := New()
	db := dynlocaltest.Client(t, r.DynamoDB())
	ctx := context.Background()
	table := dynlocaltest.TableName(t)
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key}); err != nil {
		t.Fatal(err)
	}
	in := &dynamodb.GetItemInput{TableName: aws.String(table), Key: key}
	out, err := db.GetItem(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if in.ReturnConsumedCapacity != "" {
		t.Errorf("the caller's input was changed: ReturnConsumedCapacity = %q", in.ReturnConsumedCapacity)
	}
	if out.ConsumedCapacity == nil || out.ConsumedCapacity.CapacityUnits == nil {
		t.Fatalf("GetItem output carries no consumed capacity: %+v", out.ConsumedCapacity)
	}
	if got, want := testutil.ToFloat64(r.ddbCapacity.WithLabelValues("GetItem")), *out.ConsumedCapacity.CapacityUnits; got != want || got <= 0 {
		t.Errorf("consumed capacity of GetItem = %v, want %v (> 0)", got, want)
	}
	if got := testutil.ToFloat64(r.ddbCapacity.WithLabelValues("PutItem")); got <= 0 {
		t.Errorf("consumed capacity of PutItem = %v, want > 0", got)
	}
	// An explicit choice of the caller is kept.
	out, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ReturnConsumedCapacity: types.ReturnConsumedCapacityNone})
	if err != nil {
		t.Fatal(err)
	}
	if out.ConsumedCapacity != nil {
		t.Errorf("ReturnConsumedCapacity=NONE was overridden: %+v", out.ConsumedCapacity)
	}
}

// TestNilRegistry: a nil Registry records nothing and breaks nothing.
func TestNilRegistry(t *testing.T) {
	var r *Registry
	r.ConnectionOpened(TransportWebSocket)()
	r.ObservePublishLag("local", time.Millisecond)
	db := dynlocaltest.Client(t, r.DynamoDB())
	if _, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{Limit: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil registry's handler: %d, want 404", rec.Code)
	}
}

// TestStoreRetriesAndConflicts: the store asks the SDK for one attempt per call and
// retries transient failures itself, so its retries are counted through
// store.WithRetryObserver (inbox_store_retries_total, inbox_store_retries_exhausted_total),
// and a condition that fails (the store's optimistic concurrency) is a conflict, not a
// failure.
func TestStoreRetriesAndConflicts(t *testing.T) {
	p, proxyURL := newFaultProxy(t)
	r := New()
	db := dynlocal.Client(proxyURL, func(o *dynamodb.Options) { o.Retryer = store.NewSDKRetryer() }, r.DynamoDB())
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0), store.WithRetryObserver(r),
		store.WithRetryPolicy(store.RetryPolicy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}))
	t.Cleanup(st.Close)
	ctx := context.Background()
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	count := func(c *prometheus.CounterVec, labels ...string) float64 {
		return testutil.ToFloat64(c.WithLabelValues(labels...))
	}

	p.FailNext(2, ddbfault.Throttling)
	if _, err := st.Badge(ctx, v); err != nil {
		t.Fatalf("badge after two throttles: %v", err)
	}
	if got := count(r.storeRetries, "GetItem", ReasonThrottled); got != 2 {
		t.Errorf("store retries{GetItem,throttled} = %v, want 2", got)
	}
	if got := count(r.ddbCalls, "GetItem", OutcomeThrottled); got != 2 {
		t.Errorf("calls{GetItem,throttled} = %v, want 2 (each store attempt is one SDK call)", got)
	}

	p.FailNext(4, ddbfault.Outage)
	_, err := st.Badge(ctx, v)
	if code := inbox.ErrorCode(err); code != inbox.CodeUnavailable {
		t.Fatalf("badge under an outage: %v (code %q), want UNAVAILABLE", err, code)
	}
	if got := count(r.storeRetries, "GetItem", ReasonUnavailable); got != 3 {
		t.Errorf("store retries{GetItem,unavailable} = %v, want 3", got)
	}
	if got := count(r.storeExhausted, "GetItem", inbox.CodeUnavailable); got != 1 {
		t.Errorf("store retries exhausted{GetItem,UNAVAILABLE} = %v, want 1", got)
	}

	put := func() error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "metrics"}, "sk": &types.AttributeValueMemberS{Value: "conflict"}},
			ConditionExpression: aws.String("attribute_not_exists(pk)")})
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}
	if err := put(); err == nil {
		t.Fatal("second conditional put: no error")
	}
	if got := count(r.ddbCalls, "PutItem", OutcomeConflict); got != 1 {
		t.Errorf("calls{PutItem,conflict} = %v, want 1", got)
	}
	if got := count(r.ddbCalls, "PutItem", OutcomeFailed); got != 0 {
		t.Errorf("calls{PutItem,failed} = %v, want 0: a failed condition is not a fault", got)
	}
}
