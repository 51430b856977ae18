package fill

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

type inner struct {
	S string
	T time.Time
}

type sample struct {
	S   string
	B   bool
	I   int64
	P   *time.Time
	J   json.RawMessage
	In  inner
	PIn *inner
	L   []string
	u   string // unexported: left alone
}

func TestFillSetsEveryFieldDistinctly(t *testing.T) {
	var s sample
	if err := Fill(&s); err != nil {
		t.Fatal(err)
	}
	if z := Zero(&s); len(z) != 0 {
		t.Fatalf("zero after Fill: %v (%+v)", z, s)
	}
	if s.u != "" {
		t.Fatal("Fill set an unexported field")
	}
	if s.S == s.In.S || s.In.T.Equal(*s.P) || !json.Valid(s.J) {
		t.Fatalf("values not distinct or invalid: %+v", s)
	}
	if z := Zero(&sample{S: "x"}); !slices.Contains(z, "PIn") || !slices.Contains(z, "In.S") || slices.Contains(z, "S") {
		t.Fatalf("Zero = %v", z)
	}
	var m struct{ M map[string]int }
	if err := Fill(&m); err != nil || len(m.M) != 1 {
		t.Fatalf("Fill of a map field: %v %v", m.M, err)
	}
	if err := Fill(&struct{ C chan int }{}); err == nil {
		t.Fatal("Fill of a channel field did not fail")
	}
	// A recursive type: its inner pointer is left nil, and not reported.
	var r rec
	if err := Fill(&r); err != nil || r.Next != nil || r.S == "" || len(Zero(&r)) != 0 {
		t.Fatalf("recursive: %+v %v %v", r, err, Zero(&r))
	}
}

type rec struct {
	S    string
	Next *rec
}
