package store_test

import (
	"context"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/inboxgw/gateway/store"
)

// Issue 8, item 12: the SDK retryer of a long-running gateway has no client-side retry
// quota. The SDK's default bucket (500 tokens, 5 a retry) refuses every retry after the
// first 100 of a burst ("retry quota exceeded"); this one still retries after 10,000.
func TestSDKRetryerHasNoRetryQuota(t *testing.T) {
	t.Parallel()
	r := store.NewSDKRetryer()
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	if !r.IsErrorRetryable(throttle) {
		t.Fatal("throttling is not retryable")
	}
	for i := 0; i < 10000; i++ {
		if _, err := r.GetRetryToken(context.Background(), throttle); err != nil {
			t.Fatalf("retry %d refused: %v", i+1, err)
		}
	}
	if n := r.MaxAttempts(); n < 2 || n > 5 {
		t.Fatalf("MaxAttempts %d; want a bounded few", n)
	}
}
