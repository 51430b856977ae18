//go:build race

package store

// raceEnabled: the race detector's sync.Pool drops a quarter of what is put back, so
// allocation counts of pooled code are not meaningful under it.
const raceEnabled = true
