package resolvers

import (
	"context"
	"testing"
	"time"
)

// Issue 8, item 7: a mutation's writes are detached from the client (committing) but keep
// the request's deadline (INBOX_MUTATION_TIMEOUT, set by the HTTP layer) instead of a
// fixed 30 s of their own.
func TestCommittingKeepsTheRequestDeadline(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.Background(), deadline)
	wctx, wcancel, err := committing(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer wcancel()
	if got, ok := wctx.Deadline(); !ok || !got.Equal(deadline) {
		t.Errorf("writes' deadline = %v (%v), want the request's %v", got, ok, deadline)
	}
	cancel() // the client goes away
	if wctx.Err() != nil {
		t.Errorf("the writes were cancelled with the client: %v", wctx.Err())
	}

	// Without a request deadline, the writes are still bounded.
	wctx, wcancel, _ = committing(context.Background())
	defer wcancel()
	if got, ok := wctx.Deadline(); !ok || time.Until(got) > mutationTimeout {
		t.Errorf("writes without a request deadline: deadline %v (%v)", got, ok)
	}
	// A client already gone does not start the writes.
	gone, stop := context.WithCancel(context.Background())
	stop()
	if _, _, err := committing(gone); err == nil {
		t.Error("committing started for a client that is gone")
	}
}
