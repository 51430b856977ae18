package delivery_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/store"
)

// fixture is a store over a fresh table whose operations are recorded.
type fixture struct {
	st  *store.Store
	db  *dynamodb.Client
	rec *ddbtrace.Recorder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	db := dynlocaltest.Client(t, rec.Option())
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0), store.WithSchedShards(2))
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if slices.Contains(rec.Ops(), "Scan") {
			t.Errorf("a Scan was sent: %v", rec.Ops())
		}
	})
	return &fixture{st: st, db: db, rec: rec}
}

// sendEmail sends one notification whose EMAIL is queued for user "a" of tenant "acme"
// and returns its id and the deliver task the send wrote.
func (f *fixture) sendEmail(t *testing.T) (string, inbox.Task) {
	t.Helper()
	ctx := context.Background()
	v := inbox.Viewer{TenantID: "acme", UserID: "a"}
	if _, err := f.st.PutUserProfile(ctx, v, inbox.UserProfile{Email: "a@example.com"}); err != nil {
		t.Fatal(err)
	}
	res, err := f.st.Send(ctx, "acme", inbox.SendInput{IdempotencyKey: "k", Recipients: []string{"a"}, Type: "t",
		TemplateChannels: []string{inbox.ChannelInApp, inbox.ChannelEmail}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.NotificationIDs[0]
	var tasks []inbox.Task
	now := time.Now()
	for shard := range f.st.SchedShards() {
		// The send's minute: this one or, when it just turned, the one before.
		for _, bucket := range []time.Time{now.Add(-time.Minute), now} {
			page, err := f.st.DueTasks(ctx, shard, bucket, now.Add(time.Minute), nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, page.Tasks...)
		}
	}
	if len(tasks) != 1 || tasks[0].Kind != store.TaskDeliver || tasks[0].Ref != id || tasks[0].Token != inbox.ChannelEmail || tasks[0].Viewer != v {
		t.Fatalf("tasks %+v, want one deliver task of %s's EMAIL", tasks, id)
	}
	return id, tasks[0]
}

func (f *fixture) email(t *testing.T, id string) inbox.ChannelStatus {
	t.Helper()
	st, err := f.st.Status(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Channels {
		if c.Channel == inbox.ChannelEmail {
			return c
		}
	}
	t.Fatalf("no EMAIL record in %+v", st)
	return inbox.ChannelStatus{}
}

// The handler marks the record SKIPPED no_provider once: a second run of the same task
// (a crash after the write, a lease takeover) sends one refused conditional UpdateItem
// and changes nothing.
func TestDeliverMarksNoProviderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id, task := f.sendEmail(t)
	if c := f.email(t, id); c.Status != inbox.DeliveryQueued {
		t.Fatalf("before: %+v", c)
	}
	h := delivery.NewHandler(f.st)
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	first := f.email(t, id)
	if first.Status != inbox.DeliverySkipped || first.Reason != inbox.ReasonNoProvider {
		t.Fatalf("after one run: %+v", first)
	}
	f.rec.Reset()
	if err := h.Handle(ctx, task); err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"UpdateItem"}) {
		t.Errorf("second run sent %v, want one (refused) UpdateItem", ops)
	}
	if again := f.email(t, id); again != first {
		t.Fatalf("second run changed the record: %+v, was %+v", again, first)
	}
	changed, err := f.st.SkipDelivery(ctx, "acme", id, inbox.ChannelEmail, inbox.ReasonNoProvider)
	if err != nil || changed {
		t.Fatalf("SkipDelivery on a handled record = %v, %v", changed, err)
	}
	// A malformed task is dropped without a write.
	f.rec.Reset()
	if err := h.Handle(ctx, inbox.Task{Kind: store.TaskDeliver, Ref: id, Token: "FAX", Viewer: task.Viewer}); err != nil || len(f.rec.Ops()) != 0 {
		t.Fatalf("malformed task: %v, ops %v", err, f.rec.Ops())
	}
}

// Through the real scheduler: the task the send wrote runs and the status shows it.
func TestDeliverThroughScheduler(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.sendEmail(t)
	s := sched.New(f.st, sched.Options{DB: f.db, Poll: 50 * time.Millisecond, Lease: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	delivery.NewHandler(f.st).Register(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := f.email(t, id)
		if c.Status == inbox.DeliverySkipped {
			if c.Reason != inbox.ReasonNoProvider {
				t.Fatalf("record %+v", c)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deliver task did not run: %+v, stats %+v", c, s.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
