package store

import (
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

// Cursor encode/decode runs once per edge of every page (and once per after/before
// argument): keep it allocation-free but for the string it returns.

var (
	benchViewer = inbox.Viewer{TenantID: "acme", UserID: "alice"}
	benchStore  = &Store{cursors: newCursorKey([]byte("bench-cursor-key-0123456789abcdef"))}
	benchID     = ulid.Make().String()
	benchCursor = benchStore.EncodeCursor(benchViewer, IndexInbox, benchID)
	sinkString  string
)

func BenchmarkEncodeCursor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkString = benchStore.EncodeCursor(benchViewer, IndexInbox, benchID)
	}
}

// BenchmarkEncodeCursorPage100 is the cursors of a page of 100 edges (the largest page).
func BenchmarkEncodeCursorPage100(b *testing.B) {
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = ulid.Make().String()
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, id := range ids {
			sinkString = benchStore.EncodeCursor(benchViewer, IndexInbox, id)
		}
	}
}

func BenchmarkDecodeCursor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		id, err := benchStore.DecodeCursor(benchViewer, IndexInbox, benchCursor)
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
		if _, err := benchStore.DecodeCursor(benchViewer, IndexInbox, bad); err == nil {
			b.Fatal("accepted a malformed cursor")
		}
	}
}

// BenchmarkDecodeCursorForged is a well-formed cursor with a wrong tag (the MAC runs).
func BenchmarkDecodeCursorForged(b *testing.B) {
	b.ReportAllocs()
	other := benchStore.EncodeCursor(inbox.Viewer{TenantID: "acme", UserID: "bob"}, IndexInbox, benchID)
	for b.Loop() {
		if _, err := benchStore.DecodeCursor(benchViewer, IndexInbox, other); err == nil {
			b.Fatal("accepted another viewer's cursor")
		}
	}
}

func TestCursorAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts of pooled code mean nothing under the race detector")
	}
	if n := testing.AllocsPerRun(100, func() { sinkString = benchStore.EncodeCursor(benchViewer, IndexInbox, benchID) }); n > 1 {
		t.Errorf("EncodeCursor: %v allocations, want at most 1 (the result)", n)
	}
	if n := testing.AllocsPerRun(100, func() { sinkString, _ = benchStore.DecodeCursor(benchViewer, IndexInbox, benchCursor) }); n > 1 {
		t.Errorf("DecodeCursor: %v allocations, want at most 1 (the result)", n)
	}
}
