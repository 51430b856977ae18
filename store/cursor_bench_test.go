package store

import (
	"testing"

	"github.com/oklog/ulid/v2"
)

// Cursor encode/decode runs once per edge of every page (and once per after/before
// argument): keep it allocation-free but for the string it returns.

var (
	benchID     = ulid.Make().String()
	benchCursor = EncodeCursor(benchID)
	sinkString  string
)

func BenchmarkEncodeCursor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkString = EncodeCursor(benchID)
	}
}

func BenchmarkDecodeCursor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		id, err := DecodeCursor(benchCursor)
		if err != nil || id != benchID {
			b.Fatal(id, err)
		}
		sinkString = id
	}
}

func BenchmarkDecodeCursorMalformed(b *testing.B) {
	b.ReportAllocs()
	bad := benchCursor[:len(benchCursor)-2] + "!!"
	for b.Loop() {
		if _, err := DecodeCursor(bad); err == nil {
			b.Fatal("accepted a malformed cursor")
		}
	}
}

func TestCursorAllocations(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { sinkString = EncodeCursor(benchID) }); n > 1 {
		t.Errorf("EncodeCursor: %v allocations, want at most 1 (the result)", n)
	}
	if n := testing.AllocsPerRun(100, func() { sinkString, _ = DecodeCursor(benchCursor) }); n > 1 {
		t.Errorf("DecodeCursor: %v allocations, want at most 1 (the result)", n)
	}
}
