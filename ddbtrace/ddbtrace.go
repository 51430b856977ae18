// Package ddbtrace records every DynamoDB operation a client sends, through an
// aws-sdk-go-v2 middleware. Tests use it to prove access patterns (never a Scan) and to
// count round trips; the bench command uses it to report calls per request.
package ddbtrace

import (
	"context"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// Recorder collects the names of the operations sent ("Query", "BatchGetItem", ...), in the
// order they were sent, and with them, after KeepInputs, their inputs (Requests). It is
// safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	ops    []string
	inputs bool
	reqs   []Request
}

// KeepInputs has r keep, from now on, every operation's input for Requests. Tests that
// look at keys call it; a long run such as the bench does not, so the inputs are not
// held.
func (r *Recorder) KeepInputs() {
	r.mu.Lock()
	r.inputs = true
	r.mu.Unlock()
}

// Request is one operation sent: its name and its input (*dynamodb.QueryInput,
// *dynamodb.TransactWriteItemsInput, ...), as the SDK had it before sending. Inputs are
// shared with the caller: read them, never change them.
type Request struct {
	Op    string
	Input any
}

// Option returns a dynamodb client option that records into r, for dynamodb.New or
// dynamodb.NewFromConfig (or a single call's optFns).
func (r *Recorder) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("ddbtrace",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					r.mu.Lock()
					op := awsmiddleware.GetOperationName(ctx)
					r.ops = append(r.ops, op)
					if r.inputs {
						r.reqs = append(r.reqs, Request{Op: op, Input: in.Parameters})
					}
					r.mu.Unlock()
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	}
}

// Ops returns a copy of the operations recorded so far.
func (r *Recorder) Ops() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...)
}

// Requests returns a copy of the requests recorded so far (see Request); none unless
// KeepInputs was called.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Count returns how many times op was recorded.
func (r *Recorder) Count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.ops {
		if o == op {
			n++
		}
	}
	return n
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.ops = r.ops[:0]
	r.reqs = nil
	r.mu.Unlock()
}
