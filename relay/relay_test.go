package relay_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/live/redistest"
	"github.com/inboxgw/gateway/relay"
	"github.com/inboxgw/gateway/store"
)

type env struct {
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	table   string
	broker  *live.Local
	log     *slog.Logger
}

func setup(t *testing.T) *env {
	t.Helper()
	db := dynlocaltest.Client(t)
	streams := dynamodbstreams.New(dynamodbstreams.Options{
		Region:       dynlocaltest.Region,
		BaseEndpoint: aws.String(dynlocaltest.Endpoint(t)),
		Credentials:  credentials.NewStaticCredentialsProvider("dynlocaltest", "dynlocaltest", ""),
	})
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0))
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return &env{db: db, streams: streams, table: table, broker: live.NewLocal(), log: log}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// start runs a relay until the returned cancel (which does not release its lease: a crash).
func (e *env) start(t *testing.T, owner string, lease time.Duration) (*relay.Relay, context.CancelFunc) {
	t.Helper()
	r := relay.New(relay.Options{DB: e.db, Streams: e.streams, Table: e.table, Publisher: e.broker, Owner: owner,
		Lease: lease, MaxPoll: 100 * time.Millisecond, Discover: 500 * time.Millisecond, Logger: e.log})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := r.Run(ctx); err != nil {
			t.Errorf("relay %s: %v", owner, err)
		}
	}()
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return r, stop
}

// outsideWrite adds a notification and bumps META the way a service writing the table
// directly would (plain SDK calls, no gateway); it returns the notification id and the
// new META version.
func (e *env) outsideWrite(t *testing.T, v inbox.Viewer, count int) (string, int64) {
	t.Helper()
	ctx := context.Background()
	pk := "T#" + v.TenantID + "#U#" + v.UserID
	id := ulid.Make().String()
	item, err := store.OutsideNotificationItem(v, inbox.Notification{ID: id, Type: "outside", Title: "from a service", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(e.table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
			"sk": &types.AttributeValueMemberS{Value: "N~META"},
		},
		UpdateExpression: aws.String("SET entityType = :e, unreadCount = :c ADD version :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":e":   &types.AttributeValueMemberS{Value: "InboxMeta"},
			":c":   &types.AttributeValueMemberN{Value: strconv.Itoa(count)},
			":one": &types.AttributeValueMemberN{Value: "1"},
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	if err != nil {
		t.Fatal(err)
	}
	ver, _ := strconv.ParseInt(out.Attributes["version"].(*types.AttributeValueMemberN).Value, 10, 64)
	return id, ver
}

// expect waits for notification id and badge version ver (count) on sub.
func expect(t *testing.T, sub *live.Subscription, id string, ver int64, count int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	gotN, gotB := false, false
	for !gotN || !gotB {
		select {
		case n := <-sub.Added():
			if n.ID == id {
				if n.Title != "from a service" {
					t.Fatalf("notification %+v", n)
				}
				gotN = true
			}
		case <-sub.BadgeChanged():
			if c := sub.Latest(); c.Version >= ver {
				if c.Version == ver && c.UnreadCount != count {
					t.Fatalf("badge %+v, want count %d", c, count)
				}
				gotB = true
			}
		case <-deadline:
			t.Fatalf("within %v: notification %s seen %v, badge version %d seen %v (latest %+v)", within, id, gotN, ver, gotB, sub.Latest())
		}
	}
}

func TestRelayOutsideWriteReachesSubscriber(t *testing.T) {
	e := setup(t)
	v := inbox.Viewer{TenantID: "acme", UserID: "dora"}
	sub := e.broker.Subscribe(v)
	defer sub.Close()
	r, _ := e.start(t, "relay-a", 3*time.Second)
	time.Sleep(500 * time.Millisecond) // let it take the lease and open the shards
	for i := 1; i <= 3; i++ {
		start := time.Now()
		id, ver := e.outsideWrite(t, v, i)
		expect(t, sub, id, ver, i, 5*time.Second)
		t.Logf("outside write %d reached the subscriber in %v", i, time.Since(start))
	}
	// The relay counts a change after its Publish returned, and the subscriber may see it
	// first: wait briefly for the count.
	for deadline := time.Now().Add(2 * time.Second); r.Published() < 6 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if r.Published() < 6 {
		t.Fatalf("published %d changes, want >= 6", r.Published())
	}
}

func TestRelayTakeoverLosesNothing(t *testing.T) {
	e := setup(t)
	const lease = 2 * time.Second
	v := inbox.Viewer{TenantID: "acme", UserID: "erin"}
	sub := e.broker.Subscribe(v)
	defer sub.Close()
	_, killA := e.start(t, "relay-a", lease)
	time.Sleep(500 * time.Millisecond)
	id, ver := e.outsideWrite(t, v, 1)
	expect(t, sub, id, ver, 1, 5*time.Second)

	// B stands by while A holds the lease.
	b, _ := e.start(t, "relay-b", lease)
	time.Sleep(lease)
	if b.Published() != 0 {
		t.Fatalf("standby relay published %d changes", b.Published())
	}

	// A crashes (no release); writes made meanwhile must arrive through B within the lease.
	killA()
	killed := time.Now()
	var ids []string
	for i := 2; i <= 4; i++ {
		id, ver = e.outsideWrite(t, v, i)
		ids = append(ids, id)
	}
	deadline := time.After(lease + 5*time.Second)
	seen := map[string]bool{}
	for len(seen) < len(ids) || sub.Latest().Version < ver {
		select {
		case n := <-sub.Added():
			seen[n.ID] = true
		case <-sub.BadgeChanged():
		case <-deadline:
			t.Fatalf("after takeover: seen %v of %v, latest %+v (want version %d)", seen, ids, sub.Latest(), ver)
		}
	}
	took := time.Since(killed)
	t.Logf("takeover delivered everything %v after the crash (lease %v)", took, lease)
	if took > lease+3*time.Second {
		t.Fatalf("takeover took %v, lease is %v", took, lease)
	}
	if c := sub.Latest(); c.UnreadCount != 4 {
		t.Fatalf("badge %+v, want 4", c)
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("notification %s lost", id)
		}
	}
	// B resumed after A's last checkpoint: it replayed nothing A had published.
	time.Sleep(500 * time.Millisecond)
	if n := b.Published(); n != 6 {
		t.Fatalf("relay B published %d changes, want the 6 written after A's last batch", n)
	}
}

// TestRelayThroughRedis: an outside write reaches a subscriber of another "gateway
// instance" through relay -> Redis -> that instance's broker.
func TestRelayThroughRedis(t *testing.T) {
	e := setup(t)
	srv := redistest.Server(t)
	ctx := context.Background()
	relayBroker, err := live.NewRedis(ctx, live.RedisOptions{URL: srv.URL(), Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	defer relayBroker.Close()
	gateway, err := live.NewRedis(ctx, live.RedisOptions{URL: srv.URL(), Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	defer gateway.Close()
	v := inbox.Viewer{TenantID: "acme", UserID: "fay"}
	sub := gateway.Subscribe(v)
	defer sub.Close()

	r := relay.New(relay.Options{DB: e.db, Streams: e.streams, Table: e.table, Publisher: relayBroker,
		Lease: 3 * time.Second, MaxPoll: 100 * time.Millisecond, Discover: 500 * time.Millisecond, Logger: e.log})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if err := r.Release(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	id, ver := e.outsideWrite(t, v, 1)
	expect(t, sub, id, ver, 1, 5*time.Second)
	t.Logf("outside write reached the other instance's subscriber in %v", time.Since(start))
}
