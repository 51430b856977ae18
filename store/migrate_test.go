package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/dynlocal"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// quietEngine is a DynamoDB Local of this package's migration tests alone. The run's
// shared engine will not do: it holds every test's table with TTL enabled, and DynamoDB
// Local runs an added index's backfill on the executor that also sweeps TTL on every
// table; with a few hundred of them the index stayed CREATING (not even backfilling)
// for more than a minute, though on a quiet engine it is ACTIVE within a second.
var quietEngine struct {
	once     sync.Once
	endpoint string
	err      error
}

// quietClient returns a client of quietEngine, started on first use (the kernel stops
// it when the test binary exits, as it does dynlocaltest's engine).
func quietClient(t *testing.T, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	quietEngine.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		srv, err := dynlocal.Start(ctx, dynlocal.Options{DataDir: dynlocal.MemoryDataDir})
		if err != nil {
			quietEngine.err = err
			return
		}
		quietEngine.endpoint = srv.Endpoint()
	})
	if quietEngine.err != nil {
		t.Fatalf("start a DynamoDB Local of its own: %v", quietEngine.err)
	}
	return dynlocal.Client(quietEngine.endpoint, optFns...)
}

// createBareTable creates table as a first version would have: the primary key only, no
// index, no stream, no TTL; with one item in it, so that an added index has something to
// backfill.
func createBareTable(t *testing.T, db *dynamodb.Client, table string) {
	t.Helper()
	ctx := context.Background()
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{str("pk"), str("sk")},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "unrelated"}, "sk": &types.AttributeValueMemberS{Value: "item"},
	}}); err != nil {
		t.Fatal(err)
	}
}

// updates counts the UpdateTable calls rec saw.
func updates(rec *ddbtrace.Recorder) int {
	n := 0
	for _, op := range rec.Ops() {
		if op == "UpdateTable" {
			n++
		}
	}
	return n
}

// A table deployed by an earlier version (no GSI1, no GSI2, no stream, no TTL) gains them
// all when CreateTable runs against it, both indexes ACTIVE before CreateTable returns;
// the type index then lists the notifications written before it (nothing rewrote them)
// and the unread list (AP4, on GSI1) works; running CreateTable again changes nothing.
func TestCreateTableUpgradesADeployedTable(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	db := quietClient(t, rec.Option())
	table := dynlocaltest.TableName(t)
	createBareTable(t, db, table)
	// Notifications written before the upgrade, as every version wrote them: GSI2 (the
	// type index) is built from their pk, type and id by DynamoDB's backfill alone.
	bob := inbox.Viewer{TenantID: "acme", UserID: "bob"}
	var old []string
	for i, typ := range []string{"common", "rare", "common", "rare", "common"} {
		id := ulid.MustNew(uint64(1_700_000_000_000+i), ulid.DefaultEntropy()).String()
		item, err := store.OutsideNotificationItem(bob, inbox.Notification{ID: id, Type: typ, Title: typ})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
		if typ == "rare" {
			old = append([]string{id}, old...)
		}
	}
	st := store.New(db, table, store.WithSweepWorkers(0))
	t.Cleanup(st.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if n := updates(rec); n != 3 {
		t.Fatalf("UpdateTable calls = %d, want 3 (the stream, GSI1, GSI2)", n)
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	gsis := out.Table.GlobalSecondaryIndexes
	var names []string
	for _, g := range gsis {
		if g.IndexStatus != types.IndexStatusActive {
			t.Fatalf("index %s is %s after CreateTable", aws.ToString(g.IndexName), g.IndexStatus)
		}
		names = append(names, aws.ToString(g.IndexName))
	}
	if slices.Sort(names); !slices.Equal(names, []string{"GSI1", "GSI2"}) {
		t.Fatalf("indexes after CreateTable on a deployed table: %v, want GSI1 and GSI2", names)
	}
	typed, err := st.Inbox(ctx, bob, inbox.PageQuery{First: aws.Int(10), Types: []string{"rare"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range typed.Edges {
		got = append(got, e.Node.ID)
	}
	if !slices.Equal(got, old) {
		t.Fatalf("typed page of the notifications written before the upgrade = %v, want %v", got, old)
	}
	if sp := out.Table.StreamSpecification; sp == nil || !aws.ToBool(sp.StreamEnabled) || sp.StreamViewType != types.StreamViewTypeNewAndOldImages {
		t.Fatalf("stream after CreateTable on a deployed table: %+v", sp)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expiresAt" {
		t.Fatalf("TTL after CreateTable on a deployed table: %+v", d)
	}

	if err := st.CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable again: %v", err)
	}
	if n := updates(rec); n != 3 {
		t.Fatalf("CreateTable on an up-to-date table updated it (%d UpdateTable calls in all)", n)
	}
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	if _, err := writer(st).Send(ctx, "acme", inbox.SendInput{IdempotencyKey: "k1", Recipients: []string{"alice"}, Type: "t", Title: "hello"}); err != nil {
		t.Fatal(err)
	}
	page, err := st.Inbox(ctx, v, inbox.PageQuery{First: aws.Int(10), UnreadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Edges) != 1 {
		t.Fatalf("unread list on the upgraded table: %d notifications, want 1", len(page.Edges))
	}
}

// stuckIndex is a client whose DescribeTable reports every index CREATING and never
// backfilling: the engine's backfill starved, as seen on a busy DynamoDB Local.
type stuckIndex struct {
	*dynamodb.Client
	// reported, when set, is called after each description that showed a stuck index.
	reported func()
}

func (c stuckIndex) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := c.Client.DescribeTable(ctx, in, optFns...)
	if err == nil {
		for i := range out.Table.GlobalSecondaryIndexes {
			out.Table.GlobalSecondaryIndexes[i].IndexStatus = types.IndexStatusCreating
			out.Table.GlobalSecondaryIndexes[i].Backfilling = aws.Bool(false)
		}
		if len(out.Table.GlobalSecondaryIndexes) > 0 && c.reported != nil {
			c.reported()
		}
	}
	return out, err
}

// The wait for an added index is bounded by the caller's deadline and ends with an error
// that names the index and its state; a later CreateTable resumes the wait without
// adding the index a second time.
func TestCreateTableIndexWaitIsBounded(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	db := quietClient(t, rec.Option())
	table := dynlocaltest.TableName(t)
	createBareTable(t, db, table)
	// The caller ends the wait once the index was seen stuck: no deadline on
	// the wall clock, so how long the describes take on a loaded machine has no say.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Int32
	stuck := store.New(stuckIndex{Client: db, reported: func() {
		if seen.Add(1) == 1 {
			cancel()
		}
	}}, table, store.WithSweepWorkers(0))
	t.Cleanup(stuck.Close)
	err := stuck.CreateTable(ctx)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "GSI1") || !strings.Contains(err.Error(), "CREATING") {
		t.Fatalf("CreateTable with a starved backfill, ended by its caller = %v, want the caller's error naming GSI1 CREATING", err)
	}
	t.Logf("bounded: %v", err)

	st := store.New(db, table, store.WithSweepWorkers(0))
	t.Cleanup(st.Close)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel2()
	rec.Reset()
	rec.KeepInputs()
	if err := st.CreateTable(ctx2); err != nil {
		t.Fatalf("CreateTable after the timeout: %v", err)
	}
	// GSI1 was added already: the resumed run waits for it and adds only what the first
	// run never reached (GSI2).
	if got := createdIndexes(rec); !slices.Equal(got, []string{"GSI2"}) {
		t.Fatalf("the resumed CreateTable created indexes %v, want [GSI2] (GSI1 was added already)", got)
	}
}

// createdIndexes lists the indexes the UpdateTable calls rec kept the inputs of create.
func createdIndexes(rec *ddbtrace.Recorder) []string {
	var out []string
	for _, r := range rec.Requests() {
		in, ok := r.Input.(*dynamodb.UpdateTableInput)
		if !ok {
			continue
		}
		for _, u := range in.GlobalSecondaryIndexUpdates {
			if u.Create != nil {
				out = append(out, aws.ToString(u.Create.IndexName))
			}
		}
	}
	return out
}
