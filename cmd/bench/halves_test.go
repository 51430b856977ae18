package main

import "testing"

// Each side gets its own windows: before, a's third window (run by b) was given to a and
// b's fourth (run by a) to b, so every "side" of a comparison was half the other.
func TestInHalvesKeepsEachSidesWindows(t *testing.T) {
	side := func(name string) func() (window, error) {
		return func() (window, error) { return window{firstErr: name}, nil }
	}
	as, bs, err := inHalves(side("a"), side("b"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range as {
		if w.firstErr != "a" {
			t.Fatalf("a's windows = %+v", as)
		}
	}
	for _, w := range bs {
		if w.firstErr != "b" {
			t.Fatalf("b's windows = %+v", bs)
		}
	}
	if len(as) != 2 || len(bs) != 2 {
		t.Fatalf("%d and %d windows, want 2 each", len(as), len(bs))
	}
}
