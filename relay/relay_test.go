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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/jonboulle/clockwork"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/dynlocal"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/live/redistest"
	"github.com/inboxgw/gateway/relay"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// The tests' relay settings, on the fake clock: an idle shard is read at least every
// maxPoll, so one step of maxPoll reads every shard once more.
const (
	leaseTime = 30 * time.Second
	maxPoll   = time.Second
	discover  = 5 * time.Second
)

type env struct {
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	table   string
	broker  *live.Local
	log     *slog.Logger
	clk     *clockwork.FakeClock
}

func setup(t *testing.T) *env {
	t.Helper()
	dynlocaltest.KeepStreams(t) // the relay reads the table's stream
	db := dynlocaltest.Client(t)
	streams := dynlocal.StreamsClient(dynlocaltest.Endpoint(t))
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
	return &env{db: db, streams: streams, table: table, broker: live.NewLocal(), log: log, clk: clocktest.New()}
}

// options are a relay's options on e's table, clock and test settings.
func (e *env) options(owner string, pub inbox.Publisher) relay.Options {
	return relay.Options{DB: e.db, Streams: e.streams, Table: e.table, Publisher: pub, Owner: owner,
		Lease: leaseTime, MaxPoll: maxPoll, Discover: discover, Logger: e.log, Clock: e.clk}
}

// settle waits until the relays rs are back on their timers: a holder's renewals,
// discovery and each shard reader's pause; a standby's next try for the lease.
func (e *env) settle(t *testing.T, rs ...*relay.Relay) {
	t.Helper()
	clocktest.Settle(t, e.clk, func() int {
		n := 0
		for _, r := range rs {
			if relay.Holding(r) {
				n += 2 + relay.Readers(r)
			} else {
				n++
			}
		}
		return n
	}, nil)
}

// until advances the clock by step, settling rs after each, until cond holds (at most
// steps times).
func (e *env) until(t *testing.T, step time.Duration, steps int, cond func() bool, rs ...*relay.Relay) {
	t.Helper()
	clocktest.Until(t, e.clk, step, steps, func() { e.settle(t, rs...) }, cond)
}

// published reports whether r published at least n changes.
func published(r *relay.Relay, n int64) func() bool { return func() bool { return r.Published() >= n } }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// start runs a relay until the returned cancel (which does not release its lease: a crash).
func (e *env) start(t *testing.T, owner string) (*relay.Relay, context.CancelFunc) {
	t.Helper()
	r := relay.New(e.options(owner, e.broker))
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

// expect waits for notification id and badge version ver (count) on sub, once the relay
// published them (the wait is the broker's delivery, not the relay's reading).
func expect(t *testing.T, sub *live.Subscription, id string, ver int64, count int) {
	t.Helper()
	within := clocktest.Within
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
	r, _ := e.start(t, "relay-a")
	e.settle(t, r) // it holds the lease and reads the shards
	if !relay.Holding(r) {
		t.Fatal("a lone relay does not hold the lease")
	}
	for i := 1; i <= 3; i++ {
		start := e.clk.Now()
		id, ver := e.outsideWrite(t, v, i)
		// Each write is a notification and a META change: two changes published.
		e.until(t, maxPoll, 30, published(r, int64(2*i)), r)
		expect(t, sub, id, ver, i)
		t.Logf("outside write %d was published %v (on the relay's clock) after it was made", i, e.clk.Now().Sub(start))
	}
	if n := r.Published(); n != 6 {
		t.Fatalf("published %d changes, want 6", n)
	}
}

func TestRelayTakeoverLosesNothing(t *testing.T) {
	e := setup(t)
	v := inbox.Viewer{TenantID: "acme", UserID: "erin"}
	sub := e.broker.Subscribe(v)
	defer sub.Close()
	a, killA := e.start(t, "relay-a")
	e.settle(t, a)
	id, ver := e.outsideWrite(t, v, 1)
	e.until(t, maxPoll, 30, published(a, 2), a)
	expect(t, sub, id, ver, 1)

	// B stands by for a whole lease time while A holds the lease and renews it.
	b, _ := e.start(t, "relay-b")
	e.settle(t, a, b)
	for range 3 {
		e.clk.Advance(leaseTime / 3)
		e.settle(t, a, b)
	}
	if b.Published() != 0 || relay.Holding(b) || !relay.Holding(a) {
		t.Fatalf("after a lease time: A holds %v, B holds %v and published %d changes", relay.Holding(a), relay.Holding(b), b.Published())
	}

	// A crashes (no release); writes made meanwhile must arrive through B once A's lease
	// (renewed at the last step) expired.
	killA()
	killed := e.clk.Now()
	var ids []string
	for i := 2; i <= 4; i++ {
		id, ver = e.outsideWrite(t, v, i)
		ids = append(ids, id)
	}
	e.until(t, maxPoll, int(leaseTime/maxPoll)+10, published(b, 6), b)
	took := e.clk.Now().Sub(killed)
	t.Logf("B published the writes %v after A crashed (lease %v)", took, leaseTime)
	if took < leaseTime || took > leaseTime+10*maxPoll {
		t.Errorf("B took over %v after the crash; A's lease (%v) ended then", took, leaseTime)
	}
	deadline := time.After(clocktest.Within)
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
	if c := sub.Latest(); c.UnreadCount != 4 {
		t.Fatalf("badge %+v, want 4", c)
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("notification %s lost", id)
		}
	}
	// B resumed after A's last checkpoint: it replayed nothing A had published, also
	// after reading on for a while.
	for range 3 {
		e.clk.Advance(maxPoll)
		e.settle(t, b)
	}
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

	r := relay.New(e.options("", relayBroker))
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
	e.settle(t, r)
	start := time.Now()
	id, ver := e.outsideWrite(t, v, 1)
	e.until(t, maxPoll, 30, published(r, 2), r)
	expect(t, sub, id, ver, 1)
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
	r, _ := e.start(t, "relay-a")
	e.settle(t, r) // it holds the lease and reads the shards

	ctx := context.Background()
	res, err := service.Writer{Store: st, Publisher: stamp}.Send(ctx, v.TenantID, inbox.SendInput{IdempotencyKey: "k1", Recipients: []string{v.UserID}, Type: "mention", Title: "hi"})
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
	drain := func() {
		for {
			select {
			case c := <-sub.Events():
				if len(c.IDs) != 1 || c.IDs[0] != id {
					t.Fatalf("event %s of %v, want of %s", c.Kind, c.IDs, id)
				}
				got = append(got, c.Kind)
				continue
			case <-sub.BadgeChanged():
				continue
			default:
			}
			return
		}
	}
	// The relay reads the stream up to the last write (META at ver, the badge it brings);
	// it published everything before that by then, copies of the writer's events included
	// (the broker hands a change to the subscription as it is published). Then a few more
	// reads: nothing more arrives (no relay copy).
	e.until(t, maxPoll, 30, func() bool { drain(); return sub.Latest().Version >= ver }, r)
	for range 3 {
		e.clk.Advance(maxPoll)
		e.settle(t, r)
	}
	drain()
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	c := sub.Latest()
	if c.Badge.Marks == nil {
		t.Fatalf("the badge carries no announcement marks: a badge stream could not compose it with announcements")
	}
	c.Badge.Marks = nil
	wantBadge := inbox.Badge{Unread: c.UnreadCount, Unseen: 2, Version: ver, Categories: []inbox.CategoryCount{{Category: "billing", Unread: 1, Unseen: 2}}}
	if c.Version != ver || !reflect.DeepEqual(c.Badge, wantBadge) {
		t.Fatalf("latest %+v, want badge %+v", c, wantBadge)
	}
}

// recorder keeps every change published to it and hands it on.
type recorder struct {
	mu   sync.Mutex
	got  []inbox.Change
	next inbox.Publisher
}

func (r *recorder) Publish(ctx context.Context, c inbox.Change) {
	r.mu.Lock()
	r.got = append(r.got, c)
	r.mu.Unlock()
	r.next.Publish(ctx, c)
}

func (r *recorder) changes() []inbox.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// An announcement created and withdrawn by a gateway that published nothing (its answer
// lost, say) reaches every instance through the relay: the tenant's SEQ record becomes
// the tenant's change (the pseudo-viewer with no user, Kind EventAnnouncements, Version
// the new sequence), which a badge stream's tenant watch (live.Announced) hears; the
// announcement's own item and its idempotency guard publish nothing.
func TestRelayAnnouncementSeqBecomesTheTenantsChange(t *testing.T) {
	e := setup(t)
	st := store.New(e.db, e.table, store.WithSweepWorkers(0))
	t.Cleanup(st.Close)
	anns := service.NewAnnouncements(st, service.AnnouncementOptions{Hash: store.AnnouncementHash}) // no publisher
	tenant := inbox.Viewer{TenantID: "acme"}
	sub := e.broker.Subscribe(tenant, live.BadgeOnly())
	defer sub.Close()
	rec := &recorder{next: e.broker}
	r := relay.New(e.options("relay-a", rec))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.settle(t, r)

	waitSeq := func(what string, seq int64) {
		t.Helper()
		e.until(t, maxPoll, 30, func() bool {
			select {
			case <-sub.BadgeChanged():
			default:
			}
			return sub.Latest().Version >= seq
		}, r)
		if c := sub.Latest(); c.Version != seq || c.Viewer != tenant {
			t.Fatalf("%s: the tenant's watch heard %+v, want its announcements at sequence %d", what, c, seq)
		}
		if !slices.ContainsFunc(rec.changes(), func(c inbox.Change) bool {
			return c.Viewer == tenant && c.Kind == inbox.EventAnnouncements && c.Version == seq
		}) {
			t.Fatalf("%s: the relay published %+v, none the tenant's announcements at sequence %d", what, rec.changes(), seq)
		}
	}
	a, created, err := anns.Create(context.Background(), "acme", service.CreateRequest{Input: inbox.AnnouncementInput{
		IdempotencyKey: "k1", Type: "news", Title: "Hello"}})
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	waitSeq("created", 1)
	if _, err := anns.Withdraw(context.Background(), "acme", a.ID); err != nil {
		t.Fatal(err)
	}
	waitSeq("withdrawn", 2)
	for range 3 {
		e.clk.Advance(maxPoll)
		e.settle(t, r)
	}
	for _, c := range rec.changes() {
		if c.Viewer.UserID == "" && (c.Kind != inbox.EventAnnouncements || c.Viewer.TenantID != "acme" || c.Version < 1 || c.Version > 2) {
			t.Errorf("the relay published %+v for a tenant", c)
		}
		if c.Viewer.UserID != "" {
			t.Errorf("the relay published %+v for a user: an announcement writes no user's item", c)
		}
	}
}
