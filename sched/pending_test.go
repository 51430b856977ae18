package sched

import (
	"testing"
	"time"
)

// newTestRun is a shard's worker state for the pending tests, counting from base.
func newTestRun(base time.Time) *shardRun { return newShardRun(base) }

// pendingLen is how many minutes r holds.
func pendingLen(r *shardRun) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// Wake-ups heard out of order keep every minute, once, with its earliest due time, and
// come out earliest first: no minute is skipped however they arrive.
func TestPendingMinutesInOrder(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r := newTestRun(base)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	for _, d := range []time.Duration{
		3*time.Minute + 5*time.Second, time.Minute + 20*time.Second, 2 * time.Minute, time.Minute + 10*time.Second,
		time.Minute + 30*time.Second, 3 * time.Minute, 2*time.Minute + 59*time.Second, -time.Hour, 5*time.Minute + 1,
	} {
		r.note(at(d))
	}
	// The minute of base holds the one already due (before base).
	want := []time.Duration{0, time.Minute + 10*time.Second, 2 * time.Minute, 3 * time.Minute, 5 * time.Minute}
	if n := pendingLen(r); n != len(want) {
		t.Fatalf("%d pending minutes, want %d", n, len(want))
	}
	for _, d := range want {
		if got := r.earliest(); !got.Equal(at(d).Truncate(time.Millisecond)) {
			t.Fatalf("earliest %v, want %v", got.Sub(base), d)
		}
		r.claim(at(d))
	}
	if got := r.earliest(); !got.IsZero() {
		t.Errorf("after every claim: %v pending", got.Sub(base))
	}
	// note reports whether the earliest moved.
	if !r.note(at(time.Hour)) || r.note(at(2*time.Hour)) || !r.note(at(30*time.Minute)) || r.note(at(30*time.Minute+time.Second)) {
		t.Error("note's report of a new earliest is wrong")
	}
}

// At its bound a shard keeps the earliest minutes, whatever order they came in, and
// forgets the latest; hearing a wake-up and asking for the earliest allocates nothing
// (a map's scan for its latest and earliest allocated at each one), and a pending minute
// costs 4 bytes.
func TestPendingIsBounded(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r := newTestRun(base)
	for i := maxPending + 100; i > 0; i-- { // latest first
		r.note(base.Add(time.Duration(i) * time.Minute))
	}
	if n := pendingLen(r); n != maxPending {
		t.Fatalf("%d pending minutes, want %d", n, maxPending)
	}
	if got := r.earliest(); !got.Equal(base.Add(time.Minute)) {
		t.Errorf("earliest %v, want base + 1m", got.Sub(base))
	}
	if r.note(base.Add((maxPending + 500) * time.Minute)) {
		t.Error("a minute after every pending one was kept at the bound")
	}
	if !r.note(base.Add(30 * time.Second)) {
		t.Error("an earlier minute heard last was not kept")
	}
	r.mu.Lock()
	last := r.base + int64(r.pending[len(r.pending)-1])
	bytes := cap(r.pending) * 4
	r.mu.Unlock()
	if want := base.Add((maxPending - 1) * time.Minute).UnixMilli(); last != want {
		t.Errorf("the latest kept is %v, want base + %d minutes", time.UnixMilli(last).Sub(base), maxPending-1)
	}
	if bytes > 2*4*maxPending {
		t.Errorf("%d bytes for %d pending minutes", bytes, maxPending)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		r.note(base.Add(time.Duration(i%5000)*time.Minute + 7*time.Second))
		_ = r.earliest()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per wake-up at the bound", allocs)
	}
	// A due time beyond what an offset holds is forgotten, not wrapped around.
	if r.note(base.AddDate(1, 0, 0)) {
		t.Error("a due time a year ahead was kept")
	}
	// Base moves with claims: a shard held for months still holds what comes.
	far := base.Add(60 * 24 * time.Hour)
	r.claim(far)
	if !r.note(far.Add(time.Minute)) || !r.earliest().Equal(far.Add(time.Minute)) {
		t.Errorf("two months on: earliest %v", r.earliest())
	}
}
