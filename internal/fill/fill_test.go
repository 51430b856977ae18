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
	if err := Fill(&struct{ M map[string]int }{}); err == nil {
		t.Fatal("Fill of a map field did not fail")
	}
}
