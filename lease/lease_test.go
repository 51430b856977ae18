package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/lease"
	"github.com/inboxgw/gateway/store"
)

func setup(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	db := dynlocaltest.Client(t)
	table := dynlocaltest.TableName(t)
	st := store.New(db, table, store.WithSweepWorkers(0))
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, table
}

func num(item map[string]types.AttributeValue, name string) string {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}

func TestAcquireRenewTakeoverRelease(t *testing.T) {
	t.Parallel()
	db, table := setup(t)
	ctx := context.Background()
	clk := clocktest.New()
	key := store.SchedShardLeaseKey(3)
	a := lease.New(db, table, key, lease.Options{Owner: "a", Duration: 10 * time.Second, Clock: clk})
	b := lease.New(db, table, key, lease.Options{Owner: "b", Duration: 10 * time.Second, Clock: clk})

	st, err := a.TryAcquire(ctx)
	if err != nil || !st.Held || st.Owner != "a" || !a.Held() {
		t.Fatalf("a acquires a free lease: %+v %v", st, err)
	}
	if err := a.SetAttributes(ctx, map[string]types.AttributeValue{"checkpoint": &types.AttributeValueMemberN{Value: "42"}}); err != nil {
		t.Fatal(err)
	}
	st, err = b.TryAcquire(ctx)
	if err != nil || st.Held || st.Owner != "a" || !st.Live(clk.Now()) || b.Held() {
		t.Fatalf("b while a holds it: %+v %v", st, err)
	}
	if err := b.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("b renews a's lease: %v", err)
	}
	if err := b.SetAttributes(ctx, map[string]types.AttributeValue{"checkpoint": &types.AttributeValueMemberN{Value: "7"}}); !errors.Is(err, lease.ErrLost) {
		t.Errorf("b writes a's checkpoint: %v", err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Errorf("a renews: %v", err)
	}
	if err := a.SetAttributes(ctx, map[string]types.AttributeValue{"owner": &types.AttributeValueMemberS{Value: "x"}}); err == nil {
		t.Error("a reserved attribute was accepted")
	}

	// a stops renewing; after its expiry b takes over, and the checkpoint comes with it.
	clk.Advance(11 * time.Second)
	st, err = b.TryAcquire(ctx)
	if err != nil || !st.Held || st.Owner != "b" || num(st.Item, "checkpoint") != "42" {
		t.Fatalf("b after a's expiry: %+v %v", st, err)
	}
	if err := a.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("a renews after the takeover: %v", err)
	}
	if a.Held() {
		t.Error("a still thinks it holds the lease")
	}

	// a's fenced write fails; b's succeeds.
	put := func(l *lease.Lease) error {
		check, err := l.Condition()
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{ConditionCheck: check},
			{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "TEST#fenced"}, "sk": &types.AttributeValueMemberS{Value: "X"}}}},
		}})
		return err
	}
	if err := put(a); !lease.IsLost(err, 0) {
		t.Errorf("a's fenced write: %v", err)
	}
	if err := put(b); err != nil {
		t.Errorf("b's fenced write: %v", err)
	}

	// Release by a (not the holder) does nothing; b's release frees it at once and keeps
	// the checkpoint.
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.TryAcquire(ctx); st.Held {
		t.Fatal("a's release freed b's lease")
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = a.TryAcquire(ctx)
	if err != nil || !st.Held || num(st.Item, "checkpoint") != "42" {
		t.Fatalf("a after b's release: %+v %v", st, err)
	}

	all, err := lease.List(ctx, db, table, store.SchedLeasePK())
	if err != nil {
		t.Fatal(err)
	}
	if got := all["SHARD#3"]; got.Owner != "a" || !got.Live(clk.Now()) {
		t.Errorf("List: %+v", all)
	}
}

// TestHoldRenewsAndStopsWhenLost drives Hold and Acquire with a fake clock: Hold renews
// every third of the duration, so the lease outlives several durations; a takeover ends
// Hold with ErrLost at its next renewal; Acquire waits out the holder's expiry. The clock
// moves only between renewals (clocktest.Settle: the renewal goroutine is back on its
// timer), so the engine's speed changes nothing but the test's run time.
func TestHoldRenewsAndStopsWhenLost(t *testing.T) {
	t.Parallel()
	db, table := setup(t)
	ctx := context.Background()
	clk := clocktest.New()
	key := store.LeaseKey("test-worker")
	const d = 30 * time.Second
	a := lease.New(db, table, key, lease.Options{Owner: "a", Duration: d, Clock: clk})
	b := lease.New(db, table, key, lease.Options{Owner: "b", Duration: d, Clock: clk})
	if _, err := a.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// parked: the one goroutine of Hold (its renewals) or Acquire waits on the clock.
	parked := func() { clocktest.Settle(t, clk, func() int { return 1 }, nil) }
	// hold runs a.Hold until its function is told to return (end) or its context ends; the
	// result arrives on the returned channel.
	hold := func() (end chan struct{}, res chan error) {
		end, res = make(chan struct{}), make(chan error, 1)
		go func() {
			res <- a.Hold(ctx, nil, func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-end:
					return nil
				}
			})
		}()
		return end, res
	}

	// Held through three durations by the renewals: b finds it live at every step.
	end, res := hold()
	for step := range 9 {
		parked()
		clk.Advance(d / 3)
		parked()
		if st, err := b.TryAcquire(ctx); err != nil || st.Held || st.Owner != "a" {
			t.Fatalf("after %v of holding, b: %+v %v", time.Duration(step+1)*d/3, st, err)
		}
		if !a.Held() || a.Until().Before(clk.Now().Add(d/2)) {
			t.Fatalf("after %v of holding, a's lease ends %v (now %v)", time.Duration(step+1)*d/3, a.Until(), clk.Now())
		}
	}
	close(end)
	if err := <-res; err != nil {
		t.Fatalf("hold: %v", err)
	}

	// Someone else takes the lease over (a release by a's owner name elsewhere, then b):
	// a's Hold ends with ErrLost at its next renewal, a third of the duration on.
	if err := lease.New(db, table, key, lease.Options{Owner: "a", Clock: clk}).Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := b.TryAcquire(ctx); err != nil || !st.Held {
		t.Fatalf("b after the release: %+v %v", st, err)
	}
	taken := clk.Now()
	_, res = hold()
	parked()
	clk.Advance(d / 3)
	if err := <-res; !errors.Is(err, lease.ErrLost) {
		t.Errorf("hold after a takeover: %v", err)
	}

	// Acquire waits for b's expiry when b stops renewing: not a moment before it.
	got := make(chan error, 1)
	go func() {
		_, err := a.Acquire(ctx, nil)
		got <- err
	}()
	for clk.Now().Before(taken.Add(d)) {
		parked()
		select {
		case err := <-got:
			t.Fatalf("a acquired at %v, before b's lease (taken at %v) expired: %v", clk.Now(), taken, err)
		default:
		}
		clk.Advance(d / 6)
	}
	parked()
	clk.Advance(d / 3)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !a.Held() || a.Until().Before(taken.Add(d)) {
		t.Errorf("a after b's expiry: held %v until %v", a.Held(), a.Until())
	}
}
