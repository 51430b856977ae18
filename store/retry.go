package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/cenkalti/backoff/v5"

	"github.com/inboxgw/gateway/inbox"
)

// Who retries what (issue 8, items 11 and 12).
//
// Every call the store makes to DynamoDB goes through retrying (below), which is the one
// layer that retries transient failures of the store's calls: it knows the request's
// deadline, whether a write is idempotent (every store write is, by its conditions or
// its idempotency guard) and which coded error a client must get when the budget runs
// out. Each of its calls therefore asks the SDK for a single attempt
// (Options.RetryMaxAttempts = 1), so SDK retries and store retries never multiply: a
// logical call makes at most RetryPolicy.Attempts HTTP requests. The SDK's own retryer
// (configured in server.go) keeps serving callers outside the store (table creation,
// the stream relay's Streams client).
//
// Above this layer, retryConflicts repeats whole read-modify-write attempts on
// optimistic-concurrency misses (cancelled transactions, failed conditions); it never
// repeats a call that this layer gave up on (see isRetryable), so the two do not
// multiply either.

// RetryPolicy bounds the store's retries of transient DynamoDB failures.
type RetryPolicy struct {
	// Attempts is the most calls one logical DynamoDB call makes (≥ 1).
	Attempts int
	// BaseDelay and MaxDelay bound the backoff before retry k: a random duration in
	// (0, 2·min(MaxDelay, BaseDelay·2^k)) (cenkalti/backoff's exponential backoff with
	// randomization factor 1: the jitter of "Exponential Backoff And Jitter", AWS
	// Architecture Blog, that keeps retrying clients from calling in step).
	BaseDelay, MaxDelay time.Duration
	// AttemptTimeout bounds one call (0: only the caller's context does). A call that
	// DynamoDB never answers (a silent network, a stalled engine) then fails as a
	// timeout and is retried like any other transient failure.
	AttemptTimeout time.Duration
}

// DefaultRetryPolicy is 6 attempts with backoff from 25 ms capped at 800 ms (at most
// about 3.1 s of waiting, 1.55 s on average) and 10 s per attempt, within every request deadline the
// gateway sets. A wait that would end past the context's deadline is not started: the
// call fails at once with its coded error instead.
var DefaultRetryPolicy = RetryPolicy{Attempts: 6, BaseDelay: 25 * time.Millisecond, MaxDelay: 800 * time.Millisecond,
	AttemptTimeout: 10 * time.Second}

// WithRetryPolicy sets how the store retries transient DynamoDB failures (default
// DefaultRetryPolicy). Attempts below 1 count as 1; delays are clamped to at least 1 ms.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(s *Store) {
		p.Attempts = max(p.Attempts, 1)
		p.BaseDelay = max(p.BaseDelay, time.Millisecond)
		p.MaxDelay = max(p.MaxDelay, p.BaseDelay)
		s.retry = p
	}
}

// RetryObserver hears of the store's retries of transient DynamoDB failures (the
// metrics package counts them): StoreRetry before each repeat of a call (operation op,
// "GetItem", "TransactWriteItems", ...), StoreExhausted when a call's budget or the
// request's deadline ran out, with the code the client gets. Both are called on the
// request's goroutine and must not block.
type RetryObserver interface {
	StoreRetry(op string, throttled bool)
	StoreExhausted(op, code string)
}

// WithRetryObserver sets who hears of the store's retries (default: nobody).
func WithRetryObserver(o RetryObserver) Option { return func(s *Store) { s.retryObs = o } }

// Errors returned when the retry budget of a transient failure runs out. They are coded
// for the client (THROTTLED or UNAVAILABLE, both retryable) and never carry DynamoDB's
// message.
var (
	errStorageThrottled = inbox.Errorf(inbox.CodeThrottled, "the inbox storage is throttling requests; retry shortly")
	errStorageDown      = inbox.Errorf(inbox.CodeUnavailable, "the inbox storage is unavailable; retry shortly")
)

// exhaustedError is a transient DynamoDB failure that outlived the store's retry budget:
// its chain holds the coded error for the client (Code) and the last DynamoDB error
// (Last). retryConflicts never retries it.
type exhaustedError struct {
	Code *inbox.Error
	Op   string
	Last error
}

func (e *exhaustedError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Op, e.Code.Message, e.Last)
}

func (e *exhaustedError) Unwrap() []error { return []error{e.Code, e.Last} }

// throttleCodes and outageCodes are DynamoDB error codes worth retrying, beyond the
// SDK's default lists (which classify some of them by HTTP status only, which a proxy or a
// mapped error may lack).
var (
	throttleCodes = map[string]bool{"ThrottlingException": true, "LimitExceededException": true,
		"RequestLimitExceeded": true, "ProvisionedThroughputExceededException": true, "TransactionInProgressException": true}
	outageCodes = map[string]bool{"InternalServerError": true, "InternalFailure": true, "ServiceUnavailable": true}
)

var (
	sdkRetryables = retry.IsErrorRetryables(retry.DefaultRetryables)
	sdkThrottles  = retry.IsErrorThrottles(retry.DefaultThrottles)
)

// transient reports whether err is a failure that a later identical call may not meet
// (throttling, HTTP 5xx, a reset or timed-out connection, EOF), and whether it is
// throttling. The SDK's own classification (aws/retry.DefaultRetryables and
// DefaultThrottles) decides, plus throttleCodes and outageCodes. A cancelled or expired
// context is not transient: the caller has stopped waiting.
func transient(ctx context.Context, err error) (retryable, throttle bool) {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return false, false
	}
	var ex *exhaustedError
	if errors.As(err, &ex) {
		return false, false
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if throttleCodes[api.ErrorCode()] {
			return true, true
		}
		if outageCodes[api.ErrorCode()] {
			return true, false
		}
	}
	if sdkThrottles.IsErrorThrottle(err) == aws.TrueTernary {
		return true, true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// An HTTP client timeout of one attempt (the context itself is still alive).
		return true, false
	}
	return sdkRetryables.IsErrorRetryable(err) == aws.TrueTernary, false
}

// singleAttempt makes the SDK send one HTTP request per call: this layer retries.
func singleAttempt(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

// retrying runs call (one DynamoDB operation named op) and retries it on transient
// failures within s.retry and ctx's deadline, with full-jitter backoff. What still fails
// transiently is an *exhaustedError coded THROTTLED (the last failure was throttling) or
// UNAVAILABLE; any other error is returned as it is.
//
// Writes are retried too: every write of the store is idempotent under a repeat after an
// ambiguous failure (an answer lost after the commit). Sends and marks are conditional
// transactions whose repeat is refused by their conditions and re-planned from a fresh
// read (and TransactWriteItems keeps its ClientRequestToken across repeats, so DynamoDB
// itself treats a repeat within 10 minutes as the same transaction); markAllRead's
// update is conditional on the clock and re-planned; profile upserts, preference puts and
// sweep removals set the same values again.
func retrying[O any](ctx context.Context, p RetryPolicy, obs RetryObserver, op string, call func(context.Context, ...func(*dynamodb.Options)) (O, error)) (O, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier = p.BaseDelay, p.MaxDelay, 2
	b.RandomizationFactor = 1 // each wait uniform in (0, 2×interval): the jitter spreads retries
	var last error            // the last transient failure, nil when the last failure was not one
	throttled := false
	opts := []backoff.RetryOption{backoff.WithBackOff(b), backoff.WithMaxTries(uint(p.Attempts)), backoff.WithMaxElapsedTime(0)}
	if obs != nil {
		opts = append(opts, backoff.WithNotify(func(error, time.Duration) { obs.StoreRetry(op, throttled) }))
	}
	if dl, ok := ctx.Deadline(); ok {
		// A wait that would end past the deadline is not started (backoff.Retry checks
		// elapsed + next against this bound): the call fails at once, coded.
		opts = append(opts, backoff.WithMaxElapsedTime(max(time.Until(dl), time.Nanosecond)))
	}
	out, err := backoff.Retry(ctx, func() (O, error) {
		out, err := attempt1(ctx, p.AttemptTimeout, call)
		if err == nil {
			return out, nil
		}
		retryable, throttle := transient(ctx, err)
		if !retryable {
			last = nil
			return out, backoff.Permanent(err)
		}
		last, throttled = err, throttle
		return out, err
	}, opts...)
	switch {
	case err == nil:
		return out, nil
	case last == nil:
		var perm *backoff.PermanentError
		if errors.As(err, &perm) { // backoff.Retry returns it wrapped on the last try
			err = perm.Unwrap()
		}
		return out, err
	}
	code := errStorageDown
	if throttled {
		code = errStorageThrottled
	}
	if obs != nil {
		obs.StoreExhausted(op, code.Code)
	}
	return out, &exhaustedError{Code: code, Op: op, Last: last}
}

// attempt1 makes one call, bounded by timeout when it is positive.
func attempt1[O any](ctx context.Context, timeout time.Duration, call func(context.Context, ...func(*dynamodb.Options)) (O, error)) (O, error) {
	if timeout <= 0 {
		return call(ctx, singleAttempt)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(actx, singleAttempt)
}

// retryingAPI is the store's view of DynamoDB: every data-plane call goes through
// retrying. Table management (CreateTable, DescribeTable, UpdateTimeToLive) is passed
// through to the SDK, whose retryer serves it.
type retryingAPI struct {
	API
	p   RetryPolicy
	obs RetryObserver
}

func (r retryingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return retrying(ctx, r.p, r.obs, "GetItem", func(ctx context.Context, more ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
		return r.API.GetItem(ctx, in, append(opts, more...)...)
	})
}

func (r retryingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return retrying(ctx, r.p, r.obs, "Query", func(ctx context.Context, more ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
		return r.API.Query(ctx, in, append(opts, more...)...)
	})
}

func (r retryingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return retrying(ctx, r.p, r.obs, "BatchGetItem", func(ctx context.Context, more ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
		return r.API.BatchGetItem(ctx, in, append(opts, more...)...)
	})
}

func (r retryingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return retrying(ctx, r.p, r.obs, "TransactWriteItems", func(ctx context.Context, more ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
		return r.API.TransactWriteItems(ctx, in, append(opts, more...)...)
	})
}

func (r retryingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return retrying(ctx, r.p, r.obs, "UpdateItem", func(ctx context.Context, more ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
		return r.API.UpdateItem(ctx, in, append(opts, more...)...)
	})
}

func (r retryingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return retrying(ctx, r.p, r.obs, "PutItem", func(ctx context.Context, more ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
		return r.API.PutItem(ctx, in, append(opts, more...)...)
	})
}

func (r retryingAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return retrying(ctx, r.p, r.obs, "DeleteItem", func(ctx context.Context, more ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
		return r.API.DeleteItem(ctx, in, append(opts, more...)...)
	})
}

// SDK retryer settings (NewSDKRetryer).
const (
	sdkAttempts   = 4
	sdkMaxBackoff = time.Second
)

// NewSDKRetryer returns the retryer every DynamoDB and DynamoDB Streams client of the
// gateway is built with (server.go, the bench, the relay's Streams client): the SDK's
// standard retryer (its error classification, full-jitter backoff) with sdkAttempts
// attempts, backoff capped at sdkMaxBackoff, and no client-side retry quota
// (ratelimit.None).
//
// Why no quota: the standard retryer's token bucket (500 tokens, 5 taken per retry, 10
// per timeout, 1 given back per success) is made for short-lived clients; in a
// long-running gateway the first burst of throttles drains it in about 100 retries, and
// then every transient fault fails at once with "retry quota exceeded" until enough
// successes refill it (issue 8, item 12). Retry storms are bounded here per call instead:
// by the attempts, the backoff and the request's deadline.
//
// The store's own calls do not use these retries (each asks for a single attempt; the
// store retries them itself, see retrying), so SDK and store retries never multiply; this
// retryer serves table management, the stream relay and other direct callers.
func NewSDKRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = sdkAttempts
		o.MaxBackoff = sdkMaxBackoff
		o.RateLimiter = ratelimit.None
	})
}
