package loader

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// MaxRequests is how many DynamoDB requests one operation has in flight at most, whatever
// its store calls fan out to: a page filtered by k types is one Query per type and META's
// GetItem at once, a later page a Query and a GetItem, a BatchGetItem over more than 100
// keys one request per 100. A request holds its slot from the first attempt to the last
// retry; waiting for a slot is not DynamoDB time (LimitRequests sits outside the SDK's
// retries, metrics and spans).
const MaxRequests = MaxConcurrent

// LimitRequests is the DynamoDB client option that makes every request sent under an
// operation's loaders (For(ctx) != nil) hold one of the operation's MaxRequests request
// slots; requests outside an operation (REST, workers) pass at once. It cannot deadlock:
// a request slot is held only while one SDK call runs, and nothing waits for a slot while
// holding one. A request whose context ends while it waits returns the context's error
// without being sent.
func LimitRequests(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("loader.requests", limitRequest), middleware.Before)
	})
}

func limitRequest(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	l := For(ctx)
	if l == nil {
		return next.HandleInitialize(ctx, in)
	}
	select {
	case l.requests <- struct{}{}:
	case <-ctx.Done():
		return middleware.InitializeOutput{}, middleware.Metadata{}, ctx.Err()
	}
	defer func() { <-l.requests }()
	return next.HandleInitialize(ctx, in)
}
