package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/store"
)

// Attribute names of a lease item. Workers must not use them for their own attributes.
const (
	AttrOwner      = "owner"
	AttrLeaseUntil = "leaseUntil" // Unix milliseconds, N
	AttrEntityType = "entityType"
	// AttrExpiresAt is the table's TTL attribute (Unix seconds), set when
	// Options.ExpireAfter is.
	AttrExpiresAt = "expiresAt"
)

// ErrLost reports that the lease is not (or no longer) held by this owner.
var ErrLost = errors.New("lease: not held")

// API is what a lease needs of DynamoDB (implemented by *dynamodb.Client).
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Options configures a Lease.
type Options struct {
	// Owner names the holder; required. Two holders must never share a name.
	Owner string
	// Duration is how long the lease lasts without renewal (default 10s): a crashed
	// holder's successor takes over within it.
	Duration time.Duration
	// EntityType is the item's entityType (default "Lease").
	EntityType string
	// ExpireAfter, when positive, sets the TTL attribute to leaseUntil + ExpireAfter on
	// every acquisition and renewal, so DynamoDB removes the item of an owner that never
	// comes back (membership leases). Leave it zero on items that carry checkpoints.
	ExpireAfter time.Duration
	// Clock tells the time written to leaseUntil and compared with it, and times the
	// waits of Acquire and Hold (default the real clock). Tests pass a
	// clockwork.FakeClock and advance it to expire and renew leases.
	Clock clockwork.Clock
}

// Lease is one lease item as seen by one owner. It is safe for concurrent use.
type Lease struct {
	db    API
	table string
	key   map[string]types.AttributeValue
	o     Options
	until atomic.Int64 // Unix ms of our lease's expiry as last written; 0 when not held
}

// New returns the lease on the item at key (from package store) of table, for o.Owner.
// Nothing is written until TryAcquire.
func New(db API, table string, key map[string]types.AttributeValue, o Options) *Lease {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.EntityType == "" {
		o.EntityType = "Lease"
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	return &Lease{db: db, table: table, key: key, o: o}
}

// Owner returns the name this lease is held under.
func (l *Lease) Owner() string { return l.o.Owner }

// Duration returns how long the lease lasts without renewal.
func (l *Lease) Duration() time.Duration { return l.o.Duration }

// Key returns a copy of the lease item's key.
func (l *Lease) Key() map[string]types.AttributeValue { return copyKey(l.key) }

// Until returns the expiry of our lease as last written, or the zero time when we do not
// hold it (as far as this process knows).
func (l *Lease) Until() time.Time {
	if u := l.until.Load(); u > 0 {
		return time.UnixMilli(u)
	}
	return time.Time{}
}

// Held reports whether we hold the lease and it has not expired by our clock.
func (l *Lease) Held() bool { return l.until.Load() > l.o.Clock.Now().UnixMilli() }

// State is a lease item as read or written.
type State struct {
	// Held is true when the item was written by this owner's acquisition.
	Held bool
	// Owner and Until are the holder and its expiry; Owner is "" for a free lease.
	Owner string
	Until time.Time
	// Item is the whole item (all attributes): after a successful TryAcquire as it is
	// now, after a refused one as it was.
	Item map[string]types.AttributeValue
}

// Live reports whether the state names a holder whose lease has not expired at now.
func (s State) Live(now time.Time) bool { return s.Owner != "" && s.Until.After(now) }

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func copyKey(k map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(k))
	for n, v := range k {
		out[n] = v
	}
	return out
}

// decode reads owner and leaseUntil of an item.
func decode(item map[string]types.AttributeValue) State {
	s := State{Item: item}
	if o, ok := item[AttrOwner].(*types.AttributeValueMemberS); ok {
		s.Owner = o.Value
	}
	if u, ok := item[AttrLeaseUntil].(*types.AttributeValueMemberN); ok {
		if n, err := strconv.ParseInt(u.Value, 10, 64); err == nil && n > 0 {
			s.Until = time.UnixMilli(n)
		}
	}
	return s
}

// TryAcquire takes the lease until now + Duration if it is free, expired or already
// ours (which renews it). When another owner holds it, it returns that holder's State
// with Held false and a nil error. An error means the outcome is unknown.
func (l *Lease) TryAcquire(ctx context.Context) (State, error) {
	now := l.o.Clock.Now()
	until := now.Add(l.o.Duration)
	owner, leaseUntil := expression.Name(AttrOwner), expression.Name(AttrLeaseUntil)
	up := expression.Set(owner, expression.Value(l.o.Owner)).Set(leaseUntil, expression.Value(until.UnixMilli())).
		Set(expression.Name(AttrEntityType), expression.Value(l.o.EntityType))
	// Free (no item, or no holder), expired, or ours.
	free := expression.Or(expression.Name(store.PartitionKeyAttr).AttributeNotExists(), owner.AttributeNotExists(),
		leaseUntil.LessThan(expression.Value(now.UnixMilli())), owner.Equal(expression.Value(l.o.Owner)))
	x, err := expression.NewBuilder().WithUpdate(l.withExpiry(up, until)).WithCondition(free).Build()
	if err != nil {
		return State{}, fmt.Errorf("lease: acquire: %w", err)
	}
	out, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(l.table),
		Key:                                 l.key,
		UpdateExpression:                    x.Update(),
		ConditionExpression:                 x.Condition(),
		ExpressionAttributeNames:            x.Names(),
		ExpressionAttributeValues:           x.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		l.until.Store(until.UnixMilli())
		s := decode(out.Attributes)
		s.Held = true
		return s, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		l.until.Store(0)
		return decode(ccf.Item), nil
	}
	return State{}, fmt.Errorf("lease: acquire: %w", err)
}

// Acquire waits until this owner holds the lease: it tries every third of the lease's
// duration, or just after the current holder's expiry when that comes sooner. It returns
// the State of the acquisition, or ctx's error. Failed attempts are reported to onErr
// (may be nil) and retried.
func (l *Lease) Acquire(ctx context.Context, onErr func(error)) (State, error) {
	for {
		s, err := l.TryAcquire(ctx)
		wait := l.o.Duration / 3
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return State{}, ctx.Err()
			}
			if onErr != nil {
				onErr(err)
			}
		case s.Held:
			return s, nil
		default:
			if d := s.Until.Sub(l.o.Clock.Now()) + 50*time.Millisecond; d > 0 && d < wait {
				wait = d
			}
		}
		t := l.o.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return State{}, ctx.Err()
		case <-t.Chan():
		}
	}
}

// heldCondition is the condition "ours and unexpired at now".
func (l *Lease) heldCondition(now time.Time) expression.ConditionBuilder {
	return expression.Name(AttrOwner).Equal(expression.Value(l.o.Owner)).
		And(expression.Name(AttrLeaseUntil).GreaterThanEqual(expression.Value(now.UnixMilli())))
}

// Renew extends our lease to now + Duration; ErrLost when it is not ours any more (or
// expired).
func (l *Lease) Renew(ctx context.Context) error {
	now := l.o.Clock.Now()
	until := now.Add(l.o.Duration)
	up := expression.Set(expression.Name(AttrLeaseUntil), expression.Value(until.UnixMilli()))
	x, err := expression.NewBuilder().WithUpdate(l.withExpiry(up, until)).WithCondition(l.heldCondition(now)).Build()
	if err != nil {
		return fmt.Errorf("lease: renew: %w", err)
	}
	_, err = l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       l.key,
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	})
	if err == nil {
		l.until.Store(until.UnixMilli())
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		l.until.Store(0)
		return ErrLost
	}
	return fmt.Errorf("lease: renew: %w", err)
}

// Release gives the lease up when this owner holds it (expired or not), so that a
// successor need not wait for the expiry; the item's other attributes stay. Releasing a
// lease held by another owner, or by nobody, does nothing and is not an error.
func (l *Lease) Release(ctx context.Context) error {
	l.until.Store(0)
	owner := expression.Name(AttrOwner)
	x, err := expression.NewBuilder().WithUpdate(expression.Remove(owner).Set(expression.Name(AttrLeaseUntil), expression.Value(0))).
		WithCondition(owner.Equal(expression.Value(l.o.Owner))).Build()
	if err != nil {
		return fmt.Errorf("lease: release: %w", err)
	}
	_, err = l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       l.key,
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("lease: release: %w", err)
	}
	return nil
}

// Condition is the ConditionCheck that fences a write: put it in the same
// TransactWriteItems, and the transaction commits only while the lease is ours and
// unexpired. A cancellation with reason ConditionalCheckFailed on this action means the
// lease was lost (see IsLost). The error is the expression builder's.
func (l *Lease) Condition() (*types.ConditionCheck, error) {
	x, err := expression.NewBuilder().WithCondition(l.heldCondition(l.o.Clock.Now())).Build()
	if err != nil {
		return nil, fmt.Errorf("lease: condition: %w", err)
	}
	return &types.ConditionCheck{
		TableName:                 aws.String(l.table),
		Key:                       copyKey(l.key),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}, nil
}

// IsLost reports whether err, returned by a TransactWriteItems whose action at index i
// was this lease's Condition, was cancelled because the lease is not ours.
func IsLost(err error, i int) bool {
	var tce *types.TransactionCanceledException
	return errors.As(err, &tce) && i < len(tce.CancellationReasons) &&
		aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
}

// SetAttributes writes attrs (names other than the key and lease attributes) on the lease
// item, on condition that the lease is ours and unexpired: a holder's checkpoint, fenced.
// Each name is one top-level attribute, dots included; a name with '[' or ']' is refused,
// and then nothing is written (the expression builder would read "x[0]" as an element of
// the list x, a path into another attribute). ErrLost when it is not ours.
func (l *Lease) SetAttributes(ctx context.Context, attrs map[string]types.AttributeValue) error {
	if len(attrs) == 0 {
		return nil
	}
	var up expression.UpdateBuilder
	for _, n := range slices.Sorted(maps.Keys(attrs)) {
		switch n {
		case AttrOwner, AttrLeaseUntil, AttrEntityType, AttrExpiresAt, store.PartitionKeyAttr, store.SortKeyAttr:
			return fmt.Errorf("lease: attribute %q is reserved", n)
		}
		if strings.ContainsAny(n, "[]") {
			return fmt.Errorf("lease: attribute name %q has a bracket: it would be a path, not one attribute", n)
		}
		up = up.Set(expression.NameNoDotSplit(n), expression.Value(attrs[n]))
	}
	x, err := expression.NewBuilder().WithUpdate(up).WithCondition(l.heldCondition(l.o.Clock.Now())).Build()
	if err != nil {
		return fmt.Errorf("lease: set attributes: %w", err)
	}
	_, err = l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       l.key,
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrLost
	}
	return fmt.Errorf("lease: set attributes: %w", err)
}

// Hold runs fn while renewing the lease every third of its duration; the lease must be
// held already (TryAcquire or Acquire). A renewal that fails is tried again at once
// (after a pause of a thirtieth of the duration), each try with a deadline that ends a
// sixth of the duration before the lease would expire: a slow engine gets most of the
// lease's remaining time, not a fixed slice of it (with a fixed sixth, a loaded DynamoDB
// Local that answered in 1.2 s lost leases that had 4 s left). fn's context is cancelled
// when ctx ends, when a renewal finds the lease lost (cause ErrLost), or when renewals
// keep failing until only that sixth is left (cause wraps the last error): fn must stop
// touching what the lease guards once its context is done. Hold returns after fn did:
// fn's error, or the cause of the loss when fn returned because of it. Failed renewals
// that leave time are reported to onErr (may be nil). Hold does not release the lease.
func (l *Lease) Hold(ctx context.Context, onErr func(error), fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	period := l.o.Duration / 3
	// The timer is armed before the goroutine starts, so that a fake clock advanced at
	// once already finds the renewal waiting.
	t := l.o.Clock.NewTimer(period)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer t.Stop()
		margin := l.o.Duration / 6
		for {
			var tick time.Time
			select {
			case <-ctx.Done():
				return
			case tick = <-t.Chan():
			}
			for {
				left := time.Duration(l.until.Load()-l.o.Clock.Now().UnixMilli())*time.Millisecond - margin
				final := left <= 0
				if final {
					// Past our own margin: one last try, which also tells a lease
					// another owner took (ErrLost) from one that merely ran out.
					left = margin
				}
				rctx, rcancel := context.WithTimeout(ctx, left)
				err := l.Renew(rctx)
				rcancel()
				if err == nil {
					break
				}
				if errors.Is(err, ErrLost) {
					cancel(ErrLost)
					return
				}
				if ctx.Err() != nil {
					return
				}
				if onErr != nil {
					onErr(err)
				}
				if final || l.o.Clock.Now().Add(margin).UnixMilli() >= l.until.Load() {
					cancel(fmt.Errorf("lease not renewed in time: %w", err))
					return
				}
				t.Reset(l.o.Duration / 30)
				select {
				case <-ctx.Done():
					return
				case <-t.Chan():
				}
			}
			// The next renewal a period after this one was due, as a ticker would have it
			// (at once when the renewals took longer than that).
			t.Reset(period - l.o.Clock.Since(tick))
		}
	}()
	err := fn(ctx)
	cancel(err)
	wg.Wait()
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

// List reads every lease item of partition pk (one Query, all pages, strongly
// consistent), keyed by sort key. Workers that keep a group of leases in one partition
// (the earlier scheduler's shards and members) see the whole group at once.
func List(ctx context.Context, db API, table, pk string) (map[string]State, error) {
	out := make(map[string]State)
	var start map[string]types.AttributeValue
	for {
		res, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": store.PartitionKeyAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("lease: list: %w", err)
		}
		for _, it := range res.Items {
			sk, ok := it[store.SortKeyAttr].(*types.AttributeValueMemberS)
			if !ok {
				continue
			}
			out[sk.Value] = decode(it)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

// withExpiry adds to the update up the SET of the TTL attribute (ExpireAfter past until,
// epoch seconds) when Options.ExpireAfter is set, so an abandoned lease item is removed;
// it returns up unchanged otherwise.
func (l *Lease) withExpiry(up expression.UpdateBuilder, until time.Time) expression.UpdateBuilder {
	if l.o.ExpireAfter <= 0 {
		return up
	}
	return up.Set(expression.Name(AttrExpiresAt), expression.Value(until.Add(l.o.ExpireAfter).Unix()))
}
