package github

import (
	"context"
	"fmt"

	"github.com/inboxgw/gateway/inbox"
)

// ImportResult counts what Import did.
type ImportResult struct {
	// Sent is the number of Send calls that returned without error.
	Sent int
	// Accepted sums SendResult.Accepted: notifications written, one per accepting recipient.
	Accepted int
	// Duplicates is the number of sends whose idempotency key had already completed
	// (SendResult.Duplicate): nothing was written for them.
	Duplicates int
}

// Import sends ns, in order and one at a time, to s for tenantID (for instance "default",
// chosen by the caller). A second Import of the same notifications writes nothing: every
// send comes back Duplicate.
//
// It stops at the first error, returning the counts so far and the error wrapped with the
// notification's type, example index and idempotency key; the error chain keeps the
// sender's error (an *inbox.Error keeps its code) or ctx.Err() when ctx is done.
func Import(ctx context.Context, s inbox.Sender, tenantID string, ns []Notification) (ImportResult, error) {
	var res ImportResult
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return res, fmt.Errorf("github: import: %w", err)
	}
	for _, n := range ns {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("github: import %s: %w", n.Input.Type, err)
		}
		r, err := s.Send(ctx, tenantID, n.Input)
		if err != nil {
			return res, fmt.Errorf("github: import %s (example %d, key %s): %w", n.Input.Type, n.Index, n.Input.IdempotencyKey, err)
		}
		res.Sent++
		res.Accepted += r.Accepted
		if r.Duplicate {
			res.Duplicates++
		}
	}
	return res, nil
}
