package main

// Time spent in DynamoDB calls by operation, timed at the client: a client option whose
// middleware times each call from its start to its answer (the SDK's retries of a call
// included). The send scenario reports each side's mean latency per operation with it.

import (
	"context"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// opTimer sums the calls and their time by operation. Safe for concurrent use.
type opTimer struct {
	mu sync.Mutex
	by map[string]opTime
}

// opTime is the calls of one operation and the time they took in all.
type opTime struct {
	Calls int
	Total time.Duration
}

// option returns the dynamodb client option that times the client's calls.
func (t *opTimer) option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchoptimer",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					t0 := time.Now()
					out, md, err := next.HandleInitialize(ctx, in)
					el := time.Since(t0)
					op := awsmiddleware.GetOperationName(ctx)
					t.mu.Lock()
					if t.by == nil {
						t.by = map[string]opTime{}
					}
					ot := t.by[op]
					ot.Calls++
					ot.Total += el
					t.by[op] = ot
					t.mu.Unlock()
					return out, md, err
				}), middleware.Before)
		})
	}
}

// snapshot returns a copy of the sums so far.
func (t *opTimer) snapshot() map[string]opTime {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]opTime, len(t.by))
	for k, v := range t.by {
		out[k] = v
	}
	return out
}

// meanMillis is the mean latency in ms of each operation called between snapshots a and b.
func meanMillis(a, b map[string]opTime) map[string]float64 {
	out := map[string]float64{}
	for op, v := range b {
		n := v.Calls - a[op].Calls
		if n > 0 {
			out[op] = float64((v.Total - a[op].Total).Microseconds()) / 1000 / float64(n)
		}
	}
	return out
}
