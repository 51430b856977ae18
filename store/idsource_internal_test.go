package store

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestIDSourceStaysOnTheClock: an id asked for above a floor ahead of the clock (an inbox
// whose clock a batch's planned close time set) is above that floor, each such id differs,
// and the ids that follow for everyone else are of the clock's time again, still
// increasing. Before, the floor moved the whole source ahead: every later id of the process
// was a batch window ahead of the clock (an announcement's createdAt with it).
func TestIDSourceStaysOnTheClock(t *testing.T) {
	g := newIDSource(rand.Reader)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	first := g.next(now, "")
	ahead := ulid.MustNew(ulid.Timestamp(now.Add(time.Hour)), rand.Reader).String()
	seen := map[string]bool{}
	for range 100 {
		id := g.next(now, ahead)
		if id <= ahead || seen[id] {
			t.Fatalf("id %s above %s: not above it, or given twice", id, ahead)
		}
		seen[id] = true
	}
	next := g.next(now.Add(time.Millisecond), "")
	if next <= first {
		t.Fatalf("the source went backwards: %s after %s", next, first)
	}
	if got := ulidTime(next); !got.Equal(now.Add(time.Millisecond)) {
		t.Fatalf("the next id is of %v, want the clock's %v (not the floor's hour ahead)", got, now.Add(time.Millisecond))
	}
	// A floor behind or at the clock still moves the source, as before.
	behind := g.next(now.Add(2*time.Millisecond), "")
	if id := g.next(now, behind); id <= behind {
		t.Fatalf("id %s not above the floor %s", id, behind)
	}
}
