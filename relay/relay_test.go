package relay_test

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
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
	deadline := time.After(lease + 10*time.Second)
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
	// The bound leaves room for DynamoDB Local on a loaded 2-CPU machine (make test runs
	// four packages at once); a takeover that never happens, or only on a retry, still fails.
	if took > lease+6*time.Second {
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

// markThroughGateway marks id read or unread through the store, as a gateway does (the
// store publishes the change itself). The one place that names the store's mark call.
func markThroughGateway(t *testing.T, st *store.Store, k *kindStamper, v inbox.Viewer, id string, read bool) {
	t.Helper()
	kind := inbox.EventUnread
	if read {
		kind = inbox.EventRead
	}
	k.expect(kind, id)
	if _, err := st.Mark(context.Background(), v, []string{id}, read); err != nil {
		t.Fatal(err)
	}
}

// kindStamper gives the kind and ids of the mark under way to a versioned change the
// store publishes without them, as a store that names its events does; a change that
// names its kind passes unchanged.
type kindStamper struct {
	pub  inbox.Publisher
	mu   sync.Mutex
	kind inbox.EventKind
	id   string
}

func (k *kindStamper) expect(kind inbox.EventKind, id string) {
	k.mu.Lock()
	k.kind, k.id = kind, id
	k.mu.Unlock()
}

func (k *kindStamper) Publish(ctx context.Context, c inbox.Change) {
	k.mu.Lock()
	if c.Version > 0 && c.Kind == inbox.EventNone && c.Notification == nil && k.kind != "" {
		c.Kind, c.IDs = k.kind, []string{k.id}
		k.kind = ""
	}
	k.mu.Unlock()
	k.pub.Publish(ctx, c)
}

// TestRelayEventsOnceBesideTheWriter: with the relay running next to a store that
// publishes its own writes, with their kinds and META versions, to the same broker, an
// events subscriber gets each change of the inbox once, in commit order: the gateway's
// send and marks (the writer's versioned event first; the relay's copy is dropped), and
// an outside writer's archive and snooze,
// which only the relay sees. META written by an outside writer with category counters
// reaches the badge whole.
func TestRelayEventsOnceBesideTheWriter(t *testing.T) {
	e := setup(t)
	stamp := &kindStamper{pub: e.broker}
	st := store.New(e.db, e.table, store.WithSweepWorkers(0), store.WithPublisher(stamp))
	t.Cleanup(st.Close)
	v := inbox.Viewer{TenantID: "acme", UserID: "gus"}
	sub := e.broker.Subscribe(v, live.WithEvents())
	defer sub.Close()
	e.start(t, "relay-a", 3*time.Second)
	time.Sleep(500 * time.Millisecond) // let it take the lease and open the shards

	ctx := context.Background()
	res, err := st.Send(ctx, v.TenantID, inbox.SendInput{IdempotencyKey: "k1", Recipients: []string{v.UserID}, Type: "mention", Title: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.NotificationIDs[0]
	markThroughGateway(t, st, stamp, v, id, true)
	markThroughGateway(t, st, stamp, v, id, false)
	markThroughGateway(t, st, stamp, v, id, true)
	pk := "T#" + v.TenantID + "#U#" + v.UserID
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "N#" + id}}
	for _, expr := range []string{"SET archivedAt = :t", "SET snoozedUntil = :t", "REMOVE snoozedUntil"} {
		in := &dynamodb.UpdateItemInput{TableName: aws.String(e.table), Key: key, UpdateExpression: aws.String(expr)}
		if strings.HasPrefix(expr, "SET") {
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: "1700000000000"}}
		}
		if _, err := e.db.UpdateItem(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	metaOut, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(e.table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "N~META"}},
		UpdateExpression:          aws.String("SET unseenCount = :two, #cu = :one, #cs = :two ADD version :one"),
		ExpressionAttributeNames:  map[string]string{"#cu": "cu#billing", "#cs": "cs#billing"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}, ":two": &types.AttributeValueMemberN{Value: "2"}},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		t.Fatal(err)
	}
	ver, _ := strconv.ParseInt(metaOut.Attributes["version"].(*types.AttributeValueMemberN).Value, 10, 64)

	want := []inbox.EventKind{inbox.EventAdded, inbox.EventRead, inbox.EventUnread, inbox.EventRead,
		inbox.EventArchived, inbox.EventSnoozed, inbox.EventWoke}
	var got []inbox.EventKind
	quiet := time.NewTimer(10 * time.Second)
	for {
		select {
		case c := <-sub.Events():
			if len(c.IDs) != 1 || c.IDs[0] != id {
				t.Fatalf("event %s of %v, want of %s", c.Kind, c.IDs, id)
			}
			got = append(got, c.Kind)
			if len(got) >= len(want) {
				quiet.Reset(1500 * time.Millisecond) // then: nothing more (no relay copy)
			}
			continue
		case <-sub.BadgeChanged():
			continue
		case <-quiet.C:
		}
		break
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	c := sub.Latest()
	wantBadge := inbox.Badge{Unread: c.UnreadCount, Unseen: 2, Version: ver, Categories: []inbox.CategoryCount{{Category: "billing", Unread: 1, Unseen: 2}}}
	if c.Version != ver || !reflect.DeepEqual(c.Badge, wantBadge) {
		t.Fatalf("latest %+v, want badge %+v", c, wantBadge)
	}
}
