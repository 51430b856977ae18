// Package clocktest drives the workers' fake clocks in tests (sched, lease, relay and the
// delivery worker take a clockwork.Clock): a fake clock at a fixed point of a minute, and
// a wait for the workers to finish what an advance started before the next one.
//
// A test moves time only by advancing the fake clock; between two advances it waits for
// the workers to settle: every worker goroutine back on its timer (the clock has as many
// waiters as the test expects) and nothing else in flight (a task, a write). While it
// waits the clock stands still, so what it waits for is the workers' DynamoDB I/O, never
// a tick: a slow or loaded engine makes a test slower, not different.
package clocktest

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// Within bounds every wait of this package in real time: past it the test fails, since
// the workers are stuck rather than slow (a DynamoDB Local shared by a loaded machine
// has taken more than a minute to answer a burst of a hundred deletes).
const Within = 5 * time.Minute

// New returns a fake clock at ten seconds past the current minute: a real date, so that
// items look like today's, and the same place within the minute on every run, so that
// the scheduler's minute buckets split the same way each time.
func New() *clockwork.FakeClock {
	return clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second))
}

// Settle waits until clk has at least want() waiters (worker goroutines parked on a timer
// of clk) and idle (when not nil) reports true, re-reading both until they agree: want
// may change meanwhile (a scheduler took or gave up a shard). It fails tb after Within,
// saying what it waited for.
func Settle(tb testing.TB, clk *clockwork.FakeClock, want func() int, idle func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Within)
	pace := time.NewTicker(time.Millisecond)
	defer pace.Stop()
	for {
		n := want()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		err := clk.BlockUntilContext(ctx, n)
		cancel()
		if err == nil && (idle == nil || idle()) && want() == n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("clocktest: the workers did not settle within %v (want %d waiters on the clock; reached: %v)", Within, n, err == nil)
		}
		if err == nil {
			<-pace.C // the waiters are there; what is left is I/O in flight
		}
	}
}

// Until advances clk by step and then calls settle, as long as cond is false, at most
// steps times; it fails tb when cond is still false after that (what the test waited for
// did not happen within steps×step of the fake clock).
func Until(tb testing.TB, clk *clockwork.FakeClock, step time.Duration, steps int, settle func(), cond func() bool) {
	tb.Helper()
	for i := 0; !cond(); i++ {
		if i == steps {
			tb.Fatalf("clocktest: not reached after %d steps of %v on the fake clock", steps, step)
		}
		clk.Advance(step)
		settle()
	}
}
