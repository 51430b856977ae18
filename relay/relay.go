// Package relay republishes the inbox table's DynamoDB Stream to a broker, so that
// writers other than the gateway (services writing the table directly) reach live
// subscriptions, on every gateway instance.
//
// One relay reads at a time (AWS allows at most two readers per shard): replicas compete
// for a lease item in the table (conditional writes, an expiry, takeover once it passed)
// and the holder renews it every third of its duration. The holder follows the stream's
// shard lineage (a child shard only after its parent was read to its end), picks up new
// shards, backs off on empty reads and throttling, and checkpoints each shard's last
// sequence number after publishing a batch, fenced by the lease in the same transaction:
// a restart or a takeover resumes after the last checkpoint, so it neither loses records
// nor replays more than the last batch. Each record becomes a change with its kind
// (recordChange): ADDED, DELETED, EXPIRED (a TTL removal), the state kinds of a
// notification's MODIFY, and badge refreshes from META. Badges are state (META version) and
// events are de-duplicated by subscriptions (package live), so a replayed record, or a
// gateway's write seen both from its writer and from the stream, is delivered once.
package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/lease"
	"github.com/inboxgw/gateway/store"
)

// TableAPI is what the relay needs of DynamoDB (implemented by *dynamodb.Client).
type TableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// StreamsAPI is what the relay needs of DynamoDB Streams (implemented by
// *dynamodbstreams.Client).
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Options configures a Relay.
type Options struct {
	DB        TableAPI
	Streams   StreamsAPI
	Table     string
	Publisher inbox.Publisher
	// Owner names this relay in the lease (default: host name and a random suffix).
	Owner string
	// Lease is how long the lease lasts without renewal (default 10s): a crashed
	// holder's successor takes over within it.
	Lease time.Duration
	// MaxPoll is the longest pause between reads of an idle shard (default 500ms): the
	// pause doubles from 50ms on every empty read. Each shard costs at most 1/MaxPoll
	// GetRecords calls a second when idle, and at most 5 when busy.
	MaxPoll time.Duration
	// Discover is how often the shard list is refreshed (default 10s; also at once when
	// a shard ends).
	Discover time.Duration
	Logger   *slog.Logger
	// Clock tells the time of the lease, the checkpoints and the relaying's start, and
	// times every pause of the relay (default the real clock). Tests pass a
	// clockwork.FakeClock and advance it.
	Clock clockwork.Clock
}

// Relay reads the table's stream and publishes its changes; see the package doc.
type Relay struct {
	db       TableAPI
	streams  StreamsAPI
	table    string
	pub      inbox.Publisher
	owner    string
	leaseDur time.Duration
	maxPoll  time.Duration
	discover time.Duration
	log      *slog.Logger
	clock    clockwork.Clock

	lease     *lease.Lease
	published atomic.Int64
	readers   atomic.Int64 // shard readers running
}

// New returns a relay; Run starts it.
func New(o Options) *Relay {
	r := &Relay{db: o.DB, streams: o.Streams, table: o.Table, pub: o.Publisher, owner: o.Owner,
		leaseDur: o.Lease, maxPoll: o.MaxPoll, discover: o.Discover, log: o.Logger, clock: o.Clock}
	if r.owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		r.owner = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	if r.leaseDur <= 0 {
		r.leaseDur = 10 * time.Second
	}
	if r.maxPoll <= 0 {
		r.maxPoll = 500 * time.Millisecond
	}
	if r.discover <= 0 {
		r.discover = 10 * time.Second
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.clock == nil {
		r.clock = clockwork.NewRealClock()
	}
	r.log = r.log.With("relay", r.owner)
	r.lease = lease.New(r.db, r.table, store.RelayLeaseKey(), lease.Options{Owner: r.owner, Duration: r.leaseDur, EntityType: entityLease, Clock: r.clock})
	return r
}

// Owner returns the name this relay holds the lease under.
func (r *Relay) Owner() string { return r.owner }

// Published returns how many changes this relay has published.
func (r *Relay) Published() int64 { return r.published.Load() }

// Run waits for the lease, then relays the stream while it holds it; when it loses the
// lease it waits for it again. It returns when ctx ends, without releasing the lease
// (call Release for a graceful handover), or on a configuration error (no stream).
func (r *Relay) Run(ctx context.Context) error {
	if err := r.preflight(ctx); err != nil {
		return err
	}
	for {
		if err := r.acquire(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		r.log.Info("relay: lease acquired")
		err := r.hold(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errNoStream) {
			return err
		}
		// Hand the lease over: a standby that can read the stream should not wait behind
		// a relay that cannot. Try again after one lease time.
		r.log.Warn("relay: stopped reading; releasing the lease and waiting one lease time", "err", err)
		if rerr := r.Release(context.WithoutCancel(ctx)); rerr != nil {
			r.log.Warn("relay: release lease", "err", rerr)
		}
		if !r.pause(ctx, r.leaseDur) {
			return nil
		}
	}
}

// preflight checks, before competing for the lease, that this relay can read what it
// must relay: the table exists, has a stream, and the Streams endpoint answers
// (AWS_ENDPOINT_URL_DYNAMODB_STREAMS must point at it when DynamoDB is not AWS itself).
func (r *Relay) preflight(ctx context.Context) error {
	td, err := r.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.table)})
	if err != nil {
		return fmt.Errorf("relay: table %s: %w", r.table, err)
	}
	if td.Table.LatestStreamArn == nil {
		return errNoStream
	}
	if _, err := r.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: td.Table.LatestStreamArn, Limit: aws.Int32(1)}); err != nil {
		return fmt.Errorf("relay: cannot read the table's stream (set AWS_ENDPOINT_URL_DYNAMODB_STREAMS when not on AWS): %w", err)
	}
	return nil
}

// acquire waits until this relay holds the lease.
func (r *Relay) acquire(ctx context.Context) error {
	logged := ""
	for {
		st, err := r.lease.TryAcquire(ctx)
		wait := r.leaseDur / 3
		switch {
		case err != nil:
			r.log.Warn("relay: lease", "err", err)
		case st.Held:
			return nil
		default:
			if st.Owner != logged {
				r.log.Info("relay: lease held by another relay; standing by", "holder", st.Owner, "until", st.Until)
				logged = st.Owner
			}
			if d := r.clock.Until(st.Until) + 50*time.Millisecond; d > 0 && d < wait {
				wait = d
			}
		}
		if !r.pause(ctx, wait) {
			return ctx.Err()
		}
	}
}

// hold relays the stream while renewing the lease; it returns when the lease is lost
// (or cannot be renewed before it expires), ctx ends, or reading fails.
func (r *Relay) hold(ctx context.Context) error {
	return r.lease.Hold(ctx, func(err error) { r.log.Warn("relay: renew lease", "err", err) }, r.read)
}

var errNoStream = errors.New("relay: the table has no stream (enable NEW_AND_OLD_IMAGES)")

// shardState is one shard's checkpoint.
type shardState struct {
	seq  string // last sequence number published, "" for none
	done bool   // read to its end (a closed shard)
}

// read follows the stream's shards until ctx ends.
func (r *Relay) read(ctx context.Context) error {
	td, err := r.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.table)})
	if err != nil {
		return fmt.Errorf("relay: describe table: %w", err)
	}
	if td.Table.LatestStreamArn == nil {
		return errNoStream
	}
	arn := *td.Table.LatestStreamArn
	since, err := r.startTime(ctx, arn)
	if err != nil {
		return err
	}
	states, err := r.loadCheckpoints(ctx, arn)
	if err != nil {
		return err
	}
	r.log.Info("relay: reading stream", "stream", arn, "checkpoints", len(states))

	type result struct {
		shard string
		err   error
	}
	results := make(chan result)
	running := make(map[string]bool)
	// Restart budget of failing shard readers: failures[id] counts a shard's consecutive
	// failures, retryAt[id] is when it may start again, started[id] when it last started.
	failures := make(map[string]int)
	retryAt := make(map[string]time.Time)
	started := make(map[string]time.Time)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := r.clock.NewTimer(r.discover)
	defer tick.Stop()
	var ticked time.Time // when the discovery timer fired; zero while it is armed
	for {
		shards, err := r.describeShards(ctx, arn)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log.Warn("relay: describe stream", "err", err)
		}
		r.log.Debug("relay: shards", "n", len(shards))
		present := make(map[string]bool, len(shards))
		for _, s := range shards {
			present[aws.ToString(s.ShardId)] = true
		}
		for _, s := range shards {
			id := aws.ToString(s.ShardId)
			if running[id] || states[id].done || r.clock.Now().Before(retryAt[id]) {
				continue
			}
			if p := aws.ToString(s.ParentShardId); p != "" && present[p] && !states[p].done {
				continue // parent first
			}
			running[id] = true
			started[id] = r.clock.Now()
			st := states[id]
			wg.Add(1)
			r.readers.Add(1)
			go func() {
				defer wg.Done()
				defer r.readers.Add(-1)
				err := r.readShard(ctx, arn, id, st.seq, since)
				select {
				case results <- result{id, err}:
				case <-ctx.Done():
				}
			}()
		}
		if !ticked.IsZero() {
			// The next discovery a period after this one was due, as a ticker would.
			tick.Reset(r.discover - r.clock.Since(ticked))
			ticked = time.Time{}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ticked = <-tick.Chan():
		case res := <-results:
			delete(running, res.shard)
			switch {
			case res.err == nil:
				states[res.shard] = shardState{done: true}
			case errors.Is(res.err, errLeaseLost):
				return res.err
			case ctx.Err() == nil:
				if r.clock.Since(started[res.shard]) >= shardHealthy {
					failures[res.shard] = 0 // it worked for a while: a new run of failures
				}
				failures[res.shard]++
				n := failures[res.shard]
				if n >= maxShardFailures {
					return fmt.Errorf("relay: shard %s failed %d times in a row: %w", res.shard, n, res.err)
				}
				delay := min(shardRetryBase<<(n-1), shardRetryMax)
				retryAt[res.shard] = r.clock.Now().Add(delay)
				r.log.Warn("relay: shard reader stopped; retrying", "shard", res.shard, "in", delay, "err", res.err)
				// Its checkpoint is in the table; reload it before the retry.
				if fresh, err := r.loadCheckpoints(ctx, arn); err == nil {
					states = fresh
				}
			}
		}
	}
}

// describeShards lists every shard of the stream (all pages).
func (r *Relay) describeShards(ctx context.Context, arn string) ([]types.Shard, error) {
	var shards []types.Shard
	var start *string
	for {
		out, err := r.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			return shards, err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return shards, nil
		}
	}
}

// startTime returns when relaying of this stream began (written by the first relay):
// records older than that (less creationSlack) are skipped, so the first start does not
// replay the stream's 24 hours of history to live subscribers.
func (r *Relay) startTime(ctx context.Context, arn string) (time.Time, error) {
	now := r.clock.Now()
	item := store.RelayStateKey(arn)
	item[attrEntityType] = &ddbtypes.AttributeValueMemberS{Value: "RelayState"}
	item["since"] = ms(now)
	x, err := expression.NewBuilder().WithCondition(expression.Name(store.PartitionKeyAttr).AttributeNotExists()).Build()
	if err != nil {
		return time.Time{}, fmt.Errorf("relay: stream state: %w", err)
	}
	_, err = r.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(r.table),
		Item:                                item,
		ConditionExpression:                 x.Condition(),
		ExpressionAttributeNames:            x.Names(),
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return now, nil
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if n, ok := ccf.Item["since"].(*ddbtypes.AttributeValueMemberN); ok {
			if v, perr := strconv.ParseInt(n.Value, 10, 64); perr == nil {
				return time.UnixMilli(v), nil
			}
		}
		return time.Time{}, nil
	}
	return time.Time{}, fmt.Errorf("relay: stream state: %w", err)
}

// loadCheckpoints reads every shard checkpoint of the stream (one Query).
func (r *Relay) loadCheckpoints(ctx context.Context, arn string) (map[string]shardState, error) {
	states := make(map[string]shardState)
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := r.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(r.table),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": store.PartitionKeyAttr},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: store.RelayStreamPK(arn)}},
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("relay: read checkpoints: %w", err)
		}
		for _, it := range out.Items {
			sk, _ := it[store.SortKeyAttr].(*ddbtypes.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			id, ok := store.RelayShardID(sk.Value)
			if !ok {
				continue
			}
			var st shardState
			if s, ok := it["seq"].(*ddbtypes.AttributeValueMemberS); ok {
				st.seq = s.Value
			}
			if d, ok := it["done"].(*ddbtypes.AttributeValueMemberBOOL); ok {
				st.done = d.Value
			}
			states[id] = st
		}
		if len(out.LastEvaluatedKey) == 0 {
			return states, nil
		}
		start = out.LastEvaluatedKey
	}
}

// checkpoint records a shard's position (and whether it was read to its end), fenced
// by the lease.
func (r *Relay) checkpoint(ctx context.Context, arn, shard, seq string, done bool) error {
	item := store.RelayShardKey(arn, shard)
	item[attrEntityType] = &ddbtypes.AttributeValueMemberS{Value: "RelayCheckpoint"}
	if seq != "" {
		item["seq"] = &ddbtypes.AttributeValueMemberS{Value: seq}
	}
	item["done"] = &ddbtypes.AttributeValueMemberBOOL{Value: done}
	item["by"] = &ddbtypes.AttributeValueMemberS{Value: r.owner}
	item["at"] = ms(r.clock.Now())
	check, err := r.lease.Condition()
	if err != nil {
		return fmt.Errorf("relay: checkpoint %s: %w", shard, err)
	}
	_, err = r.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{ConditionCheck: check},
		{Put: &ddbtypes.Put{TableName: aws.String(r.table), Item: item}},
	}})
	if err == nil {
		return nil
	}
	if lease.IsLost(err, 0) {
		return errLeaseLost
	}
	return fmt.Errorf("relay: checkpoint %s: %w", shard, err)
}

// Retry budgets of the stream reading (issue 8, item 7). A shard reader that fails is
// restarted after shardRetryBase, doubling to shardRetryMax (and no sooner than the next
// shard discovery); after maxShardFailures failures in a row (a run that lasted
// shardHealthy or more starts a new count) the relay stops reading, releases its lease
// and waits one lease time (Run), so a standby that can read takes over. Within a
// reader, GetRecords is retried with its pause (200 ms doubling to 5 s) at most
// maxReadFailures times in a row.
const (
	shardRetryBase   = time.Second
	shardRetryMax    = 30 * time.Second
	maxShardFailures = 6
	shardHealthy     = time.Minute
	maxReadFailures  = 10
)

// creationSlack is how much older than the relay's first start a record may be and still
// be published: ApproximateCreationDateTime is rounded (down to the minute on DynamoDB
// Local), so the first start may replay up to a minute of history, never more.
const creationSlack = time.Minute

// idleCheckpoint bounds how far a shard's checkpoint may lag behind records the relay
// read but had nothing to publish for (its own lease and checkpoint writes).
const idleCheckpoint = 30 * time.Second

// readShard reads one shard from after seq (or its start) to its end, publishing and
// checkpointing batch by batch. It returns nil when the shard is closed and read.
func (r *Relay) readShard(ctx context.Context, arn, shard, seq string, since time.Time) error {
	iter, err := r.iterator(ctx, arn, shard, seq)
	if err != nil {
		return err
	}
	pause := time.Duration(0)
	saved, savedAt := seq, r.clock.Now()
	failed := 0 // GetRecords failures in a row
	for {
		if pause > 0 && !r.pause(ctx, pause) {
			return ctx.Err()
		}
		out, err := r.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(iter), Limit: aws.Int32(1000)})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if failed++; failed >= maxReadFailures {
				return fmt.Errorf("relay: get records of %s failed %d times in a row: %w", shard, failed, err)
			}
			var ae smithy.APIError
			if errors.As(err, &ae) {
				switch ae.ErrorCode() {
				case "ExpiredIteratorException":
					if iter, err = r.iterator(ctx, arn, shard, seq); err != nil {
						return err
					}
					pause = 0
					continue
				case "TrimmedDataAccessException":
					r.log.Warn("relay: records trimmed before they were read", "shard", shard)
					if iter, err = r.iterator(ctx, arn, shard, ""); err != nil {
						return err
					}
					continue
				case "ResourceNotFoundException":
					return err
				case "LimitExceededException", "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
					pause = min(max(2*pause, 200*time.Millisecond), 5*time.Second)
					continue
				}
			}
			pause = min(max(2*pause, 200*time.Millisecond), 5*time.Second)
			r.log.Warn("relay: get records", "shard", shard, "err", err)
			continue
		}
		failed = 0
		if len(out.Records) > 0 {
			r.log.Debug("relay: records", "shard", shard, "n", len(out.Records))
		}
		relevant := false
		for i := range out.Records {
			rec := &out.Records[i]
			if rec.Dynamodb == nil {
				continue
			}
			seq = aws.ToString(rec.Dynamodb.SequenceNumber)
			if t := rec.Dynamodb.ApproximateCreationDateTime; t != nil && t.Before(since.Add(-creationSlack)) {
				continue // before relaying began
			}
			c, ok, err := recordChange(rec)
			if err != nil {
				r.log.Warn("relay: undecodable record", "shard", shard, "seq", seq, "err", err)
				continue
			}
			if !ok {
				continue
			}
			relevant = true
			r.pub.Publish(ctx, c)
			r.published.Add(1)
		}
		closed := out.NextShardIterator == nil
		if seq != saved && (relevant || closed || r.clock.Since(savedAt) >= idleCheckpoint) || closed {
			if err := r.checkpoint(ctx, arn, shard, seq, closed); err != nil {
				return err
			}
			saved, savedAt = seq, r.clock.Now()
		}
		if closed {
			r.log.Info("relay: shard read to its end", "shard", shard)
			return nil
		}
		iter = aws.ToString(out.NextShardIterator)
		if len(out.Records) == 0 {
			pause = min(max(2*pause, 50*time.Millisecond), r.maxPoll)
		} else {
			pause = 200 * time.Millisecond // at most 5 reads a second per shard
		}
	}
}

// iterator returns a shard iterator after seq, or at the shard's start when seq is "".
func (r *Relay) iterator(ctx context.Context, arn, shard, seq string) (string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if seq != "" {
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(seq)
	}
	out, err := r.streams.GetShardIterator(ctx, in)
	if err != nil {
		var tr *types.TrimmedDataAccessException
		if seq != "" && errors.As(err, &tr) {
			return r.iterator(ctx, arn, shard, "")
		}
		return "", fmt.Errorf("relay: shard iterator %s: %w", shard, err)
	}
	return aws.ToString(out.ShardIterator), nil
}

// pause waits d on the relay's clock; false when ctx ended first.
func (r *Relay) pause(ctx context.Context, d time.Duration) bool {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}
