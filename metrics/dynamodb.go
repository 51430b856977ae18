package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// Outcomes of DynamoDB calls and attempts (the "outcome" label).
const (
	OutcomeOK        = "ok"        // the call's first attempt succeeded; an attempt that succeeded
	OutcomeRetried   = "retried"   // the call succeeded after more than one attempt
	OutcomeThrottled = "throttled" // a throttling error (retry.DefaultThrottleErrorCodes)
	// OutcomeConflict is a failed condition or a transaction cancelled or in conflict:
	// the optimistic concurrency the store expects and re-plans, not a fault.
	OutcomeConflict = "conflict"
	OutcomeFailed   = "failed" // any other error: 5xx, network, cancellation
)

// DynamoDB returns the client option that counts every DynamoDB call of the client it is
// given to (dynamodb.New or NewFromConfig; server.go's openEngine): two middlewares on
// each operation's stack.
//
//   - In the Initialize step (once per call): the call's outcome and duration, and
//     ReturnConsumedCapacity=TOTAL on the operations that accept it, unless the caller
//     asked for something else; the capacity in the output is then counted. It is cheap:
//     a field in the request and a few in the answer, no extra call. The caller's input
//     is copied, not changed.
//   - In the Finalize step right after the SDK's "Retry" middleware: every HTTP attempt
//     the retryer makes, with its own outcome, so retries and throttles are visible
//     even when the call finally succeeds.
//
// A nil Registry returns an option that adds nothing.
func (r *Registry) DynamoDB() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		if r == nil {
			return
		}
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			if err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("InboxMetricsCall", r.countCall), middleware.Before); err != nil {
				return err
			}
			return s.Finalize.Insert(middleware.FinalizeMiddlewareFunc("InboxMetricsAttempt", r.countAttempt), "Retry", middleware.After)
		})
	}
}

type attemptsKey struct{}

func (r *Registry) countCall(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	op := middleware.GetOperationName(ctx)
	in.Parameters = withConsumedCapacity(in.Parameters)
	attempts := new(int)
	start := time.Now()
	out, md, err := next.HandleInitialize(context.WithValue(ctx, attemptsKey{}, attempts), in)
	r.ddbDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	outcome := OutcomeOK
	switch {
	case err != nil:
		outcome = errorOutcome(err)
	case *attempts > 1:
		outcome = OutcomeRetried
	}
	r.ddbCalls.WithLabelValues(op, outcome).Inc()
	if err == nil {
		if units := consumedUnits(out.Result); units > 0 {
			r.ddbCapacity.WithLabelValues(op).Add(units)
		}
	}
	return out, md, err
}

func (r *Registry) countAttempt(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if n, ok := ctx.Value(attemptsKey{}).(*int); ok {
		*n++ // the retryer runs attempts one after the other: no race
	}
	out, md, err := next.HandleFinalize(ctx, in)
	outcome := OutcomeOK
	if err != nil {
		outcome = errorOutcome(err)
	}
	r.ddbAttempts.WithLabelValues(middleware.GetOperationName(ctx), outcome).Inc()
	return out, md, err
}

// errorOutcome is OutcomeThrottled for the error codes the SDK's retryer treats as
// throttling, OutcomeConflict for failed conditions and cancelled or conflicting
// transactions, OutcomeFailed otherwise.
func errorOutcome(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if _, ok := retry.DefaultThrottleErrorCodes[ae.ErrorCode()]; ok {
			return OutcomeThrottled
		}
		switch ae.ErrorCode() {
		case "ConditionalCheckFailedException", "TransactionCanceledException", "TransactionConflictException":
			return OutcomeConflict
		}
	}
	return OutcomeFailed
}

// Reasons of a store retry (the "reason" label of inbox_store_retries_total).
const (
	ReasonThrottled   = "throttled"
	ReasonUnavailable = "unavailable"
)

// StoreRetry counts a DynamoDB call (operation op) the store repeats after a transient
// failure, throttling or not. It implements store.RetryObserver.
func (r *Registry) StoreRetry(op string, throttled bool) {
	if r == nil {
		return
	}
	reason := ReasonUnavailable
	if throttled {
		reason = ReasonThrottled
	}
	r.storeRetries.WithLabelValues(op, reason).Inc()
}

// StoreExhausted counts a DynamoDB call whose transient failures outlived the store's
// retry budget; code is what the client got (THROTTLED or UNAVAILABLE). It implements
// store.RetryObserver.
func (r *Registry) StoreExhausted(op, code string) {
	if r == nil {
		return
	}
	r.storeExhausted.WithLabelValues(op, code).Inc()
}

// withConsumedCapacity returns a copy of a DynamoDB input asking for the total consumed
// capacity, when the operation accepts it and the caller left it unset.
func withConsumedCapacity(p any) any {
	const total = types.ReturnConsumedCapacityTotal
	switch v := p.(type) {
	case *dynamodb.GetItemInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.QueryInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.BatchGetItemInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.PutItemInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.UpdateItemInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.DeleteItemInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.BatchWriteItemInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.TransactWriteItemsInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.TransactGetItemsInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	case *dynamodb.ScanInput:
		if v != nil && v.ReturnConsumedCapacity == "" {
			c := *v
			c.ReturnConsumedCapacity = total
			return &c
		}
	}
	return p
}

// consumedUnits is the total capacity units an output reports (0 when it carries none).
func consumedUnits(result any) float64 {
	one := func(c *types.ConsumedCapacity) float64 {
		if c == nil || c.CapacityUnits == nil {
			return 0
		}
		return *c.CapacityUnits
	}
	many := func(cs []types.ConsumedCapacity) (sum float64) {
		for i := range cs {
			sum += one(&cs[i])
		}
		return sum
	}
	switch v := result.(type) {
	case *dynamodb.GetItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		return many(v.ConsumedCapacity)
	case *dynamodb.BatchWriteItemOutput:
		return many(v.ConsumedCapacity)
	case *dynamodb.TransactWriteItemsOutput:
		return many(v.ConsumedCapacity)
	case *dynamodb.TransactGetItemsOutput:
		return many(v.ConsumedCapacity)
	}
	return 0
}
