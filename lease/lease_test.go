package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/lease"
	"github.com/inboxgw/gateway/store"
)

type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

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
	clk := &clock{}
	key := store.SchedShardLeaseKey(3)
	a := lease.New(db, table, key, lease.Options{Owner: "a", Duration: 10 * time.Second, Now: clk.now})
	b := lease.New(db, table, key, lease.Options{Owner: "b", Duration: 10 * time.Second, Now: clk.now})

	st, err := a.TryAcquire(ctx)
	if err != nil || !st.Held || st.Owner != "a" || !a.Held() {
		t.Fatalf("a acquires a free lease: %+v %v", st, err)
	}
	if err := a.SetAttributes(ctx, map[string]types.AttributeValue{"checkpoint": &types.AttributeValueMemberN{Value: "42"}}); err != nil {
		t.Fatal(err)
	}
	st, err = b.TryAcquire(ctx)
	if err != nil || st.Held || st.Owner != "a" || !st.Live(clk.now()) || b.Held() {
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
	clk.advance(11 * time.Second)
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
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{ConditionCheck: l.Condition()},
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
	if got := all["SHARD#3"]; got.Owner != "a" || !got.Live(clk.now()) {
		t.Errorf("List: %+v", all)
	}
}

func TestHoldRenewsAndStopsWhenLost(t *testing.T) {
	t.Parallel()
	db, table := setup(t)
	ctx := context.Background()
	key := store.LeaseKey("test-worker")
	// Long enough that a loaded engine (a -race run beside other packages) answers a
	// renewal well within it.
	const d = 3 * time.Second
	a := lease.New(db, table, key, lease.Options{Owner: "a", Duration: d})
	if _, err := a.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Held through several durations by the renewals.
	err := a.Hold(ctx, nil, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * d):
			return nil
		}
	})
	if err != nil {
		t.Fatalf("hold: %v", err)
	}
	b := lease.New(db, table, key, lease.Options{Owner: "b", Duration: d})
	if st, err := b.TryAcquire(ctx); err != nil || st.Held {
		t.Fatalf("b took a lease a renewed: %+v %v", st, err)
	}

	// Someone else takes the lease over (a release by a's owner name elsewhere, then b):
	// a's Hold ends with ErrLost within a renewal period.
	if err := lease.New(db, table, key, lease.Options{Owner: "a"}).Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := b.TryAcquire(ctx); err != nil || !st.Held {
		t.Fatalf("b after the release: %+v %v", st, err)
	}
	start := time.Now()
	err = a.Hold(ctx, nil, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Errorf("hold after a takeover: %v", err)
	}
	if took := time.Since(start); took > d {
		t.Errorf("the loss was noticed after %v", took)
	}

	// Acquire waits for b's expiry when b stops renewing.
	start = time.Now()
	if _, err := a.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*d {
		t.Errorf("acquire after b's expiry took %v", took)
	}
}
