package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/cenkalti/backoff/v5"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

// API is the subset of *dynamodb.Client the store uses. There is no Scan in it on purpose.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// Store reads and writes the inbox table. It is safe for concurrent use.
type Store struct {
	// ann is the announcement set source (UseAnnouncements; nil: none).
	ann AnnouncementSource
	// dueHook is the NotifyDue function (nil: none).
	dueHook     atomic.Pointer[func(shard int, due time.Time)]
	db          API
	table       string
	now         func() time.Time
	ids         *idSource
	log         *slog.Logger
	idemTTL     time.Duration
	sweeper     *sweeper
	pub         inbox.Publisher
	profiles    *profileCache
	cursors     *cursorKey
	retry       RetryPolicy
	retryObs    RetryObserver
	schedShards int
	segShards   int
	bcPage      int
	tenantPrefs func(tenantID string) inbox.TenantPreferences
	retention   time.Duration
	settings    *settingsCache
	statusTTL   time.Duration
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock used for createdAt, readAt and TTLs (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithEntropy sets the randomness of generated ULIDs (default crypto/rand). Tests pass a
// seeded reader for repeatable ids.
func WithEntropy(r io.Reader) Option { return func(s *Store) { s.ids = newIDSource(r) } }

// WithLogger sets the logger for background work (the sweep). Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithIdempotencyTTL sets how long idempotency guards are kept (TTL attribute expiresAt;
// default 30 days). A replay after that notifies again.
func WithIdempotencyTTL(d time.Duration) Option { return func(s *Store) { s.idemTTL = d } }

// WithSweepWorkers sets how many goroutines run the background sweep after markAllRead
// (default 2; 0 disables it, which changes nothing a user sees, only GSI1's size).
func WithSweepWorkers(n int) Option {
	return func(s *Store) { s.sweeper = newSweeper(n) }
}

// WithRetention sets the default retention of notifications sent without expiresAt
// (0, the default: they never expire). At expiry they leave the inbox and its counters
// (Expire, run by the scheduler); DynamoDB's TTL removes the item 7 days later.
func WithRetention(d time.Duration) Option { return func(s *Store) { s.retention = d } }

// WithPublisher sets who hears of every committed change (badge moves, new
// notifications); by default nobody.
func WithPublisher(p inbox.Publisher) Option { return func(s *Store) { s.pub = p } }

// publish hands c to the publisher, if any.
func (s *Store) publish(ctx context.Context, c inbox.Change) {
	if s.pub != nil {
		s.pub.Publish(ctx, c)
	}
}

// New returns a Store over table through db. Call Close to stop its background sweep.
// Every data-plane call to db is retried by the store on transient failures (see
// WithRetryPolicy and retry.go), with one SDK attempt each.
func New(db API, table string, opts ...Option) *Store {
	s := &Store{
		db:          db,
		table:       table,
		now:         time.Now,
		ids:         newIDSource(rand.Reader),
		log:         slog.Default(),
		idemTTL:     30 * 24 * time.Hour,
		cursors:     randomCursorKey(),
		retry:       DefaultRetryPolicy,
		schedShards: DefaultSchedShards,
		segShards:   DefaultSegmentShards,
		bcPage:      BroadcastPageSize,
		settings:    newSettingsCache(DefaultSettingsCacheTTL),
		statusTTL:   DefaultStatusTTL,
	}
	s.sweeper = newSweeper(2)
	for _, o := range opts {
		o(s)
	}
	s.settings.now = s.now
	s.db = notifyingAPI{API: retryingAPI{API: db, p: s.retry, obs: s.retryObs}, s: s}
	s.sweeper.start(s)
	return s
}

// Close stops the background sweep, waiting for the item in progress.
func (s *Store) Close() { s.sweeper.stop() }

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// idSource hands out strictly increasing ULIDs (oklog/ulid monotonic entropy): within one
// process an id generated later always sorts after one generated earlier, which is what
// lets a send and a markAllRead race without ever miscounting (see the package doc).
type idSource struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
	last    ulid.ULID
}

func newIDSource(r io.Reader) *idSource {
	return &idSource{entropy: ulid.Monotonic(r, 0)}
}

// next returns a new ULID for time t, strictly greater than after (a ULID string, or "")
// and, unless after lies ahead of t, than every id this source returned.
//
// An after ahead of the clock (an inbox whose clock a batch's notification set to the
// batch's planned close time, up to its window ahead) gets an id above it with fresh random
// low bits, and the source stays where it was: stepping the shared source past it would put
// every later id of the process, for every inbox, that far ahead of the clock, and with it
// notifications' order and announcements' createdAt. Exactness never rests on this order
// across inboxes: each write's condition on its inbox's META does.
func (g *idSource) next(t time.Time, after string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, err := ulid.New(ulid.Timestamp(t), g.entropy)
	if err != nil || id.Compare(g.last) <= 0 {
		// Clock went backwards or entropy overflowed in this millisecond: step from last.
		id = increment(g.last)
	}
	if after != "" {
		if a, err := ulid.ParseStrict(after); err == nil && id.Compare(a) <= 0 {
			if a.Time() > ulid.Timestamp(t) {
				return above(a).String()
			}
			id = increment(a)
		}
	}
	g.last = id
	return id.String()
}

// above returns a ULID greater than u in u's millisecond (or the next, on overflow): u plus
// a random 32-bit step, so that two callers above the same u do not meet.
func above(u ulid.ULID) ulid.ULID {
	var b [4]byte
	_, _ = rand.Read(b[:])
	step := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3]) | 1
	carry := step
	for i := len(u) - 1; i >= 0 && carry > 0; i-- {
		sum := uint64(u[i]) + carry&0xff
		u[i] = byte(sum)
		carry = carry>>8 + sum>>8
	}
	return u
}

// increment returns the ULID one above u (the 128-bit value plus one).
func increment(u ulid.ULID) ulid.ULID {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]++
		if u[i] != 0 {
			break
		}
	}
	return u
}

// newID returns a fresh ULID string above after (which may be "").
func (s *Store) newID(after string) string { return s.ids.next(s.now(), after) }

// ulidTime returns the time encoded in a ULID string, or the zero time.
func ulidTime(id string) time.Time {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return time.Time{}
	}
	return ulid.Time(u.Time()).UTC()
}

// ValidNotificationID reports whether id is a well-formed notification id (a ULID).
func ValidNotificationID(id string) bool {
	_, err := ulid.ParseStrict(id)
	return err == nil && len(id) == ulid.EncodedSize
}

// retryConflicts runs op until it succeeds, fails with an error that is not a transient
// conflict (TransactionCanceledException whose reasons are conflicts or conditions that a
// re-read resolves, TransactionConflictException, errRetry), or ctx ends. Backoff is
// exponential from 5 ms, capped at 100 ms, with jitter (cenkalti/backoff), at most 40
// tries or 15 s. When the budget (or ctx's deadline) runs out on conflicts (many writers
// on one inbox at once), the error is THROTTLED: the client may retry, nothing was half
// written. Transient DynamoDB failures are not repeated here: retryingAPI retried each
// call within its own budget already, and what it gave up on ends the loop.
func retryConflicts[T any](ctx context.Context, op func() (T, error)) (T, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 5 * time.Millisecond
	b.MaxInterval = 100 * time.Millisecond
	b.RandomizationFactor = 0.6
	var conflict error // the last conflict met, if any
	v, err := backoff.Retry(ctx, func() (T, error) {
		v, err := op()
		if err != nil && !isRetryable(err) {
			return v, backoff.Permanent(err)
		}
		if err != nil {
			conflict = err
		}
		return v, err
	}, backoff.WithBackOff(b), backoff.WithMaxTries(40), backoff.WithMaxElapsedTime(15*time.Second))
	switch {
	case err == nil || conflict == nil:
		return v, err
	case isRetryable(err) && ctx.Err() == nil:
		// The budget ran out on conflicts.
		return v, fmt.Errorf("%w (%w)", errBusy, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The deadline ended the loop (in a wait or in the next attempt's calls) while
		// it was still meeting conflicts.
		return v, fmt.Errorf("%w (%w; %w)", errBusy, conflict, err)
	}
	return v, err
}

// errBusy is returned when an inbox stayed contended for the whole retry budget.
var errBusy = inbox.Errorf(inbox.CodeThrottled, "too many concurrent changes to this inbox; retry shortly")

// errRetry marks an optimistic-concurrency miss found by the store itself.
var errRetry = errors.New("store: state changed during the operation; retrying")

func isRetryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var ex *exhaustedError
	if errors.As(err, &ex) {
		// Transient failures are retried, within their own budget, by retryingAPI.
		return false
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		return true
	}
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		return true
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var pte *types.ProvisionedThroughputExceededException
	if errors.As(err, &pte) {
		return true
	}
	var rle *types.RequestLimitExceeded
	if errors.As(err, &rle) {
		return true
	}
	var tip *types.TransactionInProgressException
	return errors.As(err, &tip)
}

// CreateTable creates the table with its indexes (GSI1: sparse, projection ALL), a stream
// (NEW_AND_OLD_IMAGES) and on-demand billing, waits until it is ACTIVE, and enables TTL on
// expiresAt. A table that exists (deployed by an earlier version) gets what it lacks of
// these: the stream, each missing index (UpdateTable, then a wait until it is ACTIVE:
// DynamoDB backfills it), TTL. The waits end at ctx's deadline, or after 15 minutes
// without one, with an error saying what is still pending (store/migrate.go).
func (s *Store) CreateTable(ctx context.Context) error {
	keys := []string{attrPK, attrSK}
	for _, g := range tableIndexes() {
		for _, k := range g.KeySchema {
			keys = append(keys, aws.ToString(k.AttributeName))
		}
	}
	_, err := s.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(s.table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: stringAttrs(keys...),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: tableIndexes(),
		StreamSpecification:    tableStream(),
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", s.table, err)
	}
	// New or deployed by an earlier version, the table gets what this version needs
	// (store/migrate.go); a new one has it all but TTL.
	return s.ensureTable(ctx)
}

// checkViewer rejects a viewer whose ids could break out of their key.
func checkViewer(v inbox.Viewer) error { return inbox.CheckViewer(v) }
