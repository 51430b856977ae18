package datamodel

import (
	"bytes"
	"strings"
	"testing"
)

// Check flags a Scan in any pattern and a pattern whose filters discarded more than half
// of what its Queries read, summed over the pattern's filtered Queries; a filter that
// discards half or less, and a Query without a filter, pass.
func TestCheck(t *testing.T) {
	q := func(p, scanned, count int, filter string) Call {
		return Call{Pattern: p, Op: "Query", Filter: filter, Scanned: scanned, Count: count}
	}
	for _, c := range []struct {
		name  string
		calls []Call
		want  []int // patterns flagged, in order
	}{
		{"no filter", []Call{q(1, 100, 100, ""), {Pattern: 2, Op: "GetItem"}}, nil},
		{"a filter keeping everything", []Call{q(1, 12, 12, "a")}, nil},
		{"exactly half discarded", []Call{q(1, 10, 5, "a")}, nil},
		{"more than half discarded", []Call{q(5, 306, 6, "type IN ('m')")}, []int{5}},
		{"summed over the pattern's pages", []Call{q(5, 10, 1, "f"), q(5, 10, 8, "f")}, []int{5}},
		{"a good page offsets a bad one", []Call{q(5, 10, 1, "f"), q(5, 30, 30, "f")}, nil},
		{"unfiltered calls do not dilute", []Call{q(5, 10, 1, "f"), q(5, 100, 100, "")}, []int{5}},
		{"patterns apart", []Call{q(4, 10, 1, "f"), q(5, 30, 30, "f")}, []int{4}},
		{"a Scan", []Call{{Pattern: 3, Op: "Scan", Scanned: 5, Count: 5}}, []int{3}},
		{"a Scan and a filter", []Call{{Pattern: 9, Op: "Scan"}, q(2, 9, 1, "f")}, []int{2, 9}},
	} {
		var got []int
		for _, v := range Check(c.calls) {
			got = append(got, v.Pattern)
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: flagged %v; want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: flagged %v; want %v", c.name, got, c.want)
			}
		}
	}
}

// The note does not depend on the seed's concrete ids, the clock, shard choices or the
// order calls arrived in: two runs that differ only there render the same bytes.
func TestRenderIgnoresIdsAndOrder(t *testing.T) {
	a := []Call{
		{Pattern: 2, Op: "GetItem", Key: "pk=T#acme#U#user0001 sk=N~META", Capacity: map[string]Units{"table": {RCU: 0.5}}},
		{Pattern: 2, Op: "Query", Key: "pk = 'T#acme#U#user0001' AND sk < 'N#01KE6SJT80GTPGBQ4RFY064C51'", Scanned: 3, Count: 3,
			Capacity: map[string]Units{"table": {RCU: 0.5}}},
		{Pattern: 11, Op: "Query", Key: "pk = 'SCHED#3#2026-01-05T10:00Z' AND sk < '1767607200001'", Capacity: map[string]Units{"table": {RCU: 1}}},
		{Pattern: 20, Op: "TransactWriteItems", Key: "Put pk=T#acme#BCAST#bcb7f30ab4156acde84b3459df3f26dc22 sk=SH#00; Put pk=T#acme#BCAST#bcb7f30ab4156acde84b3459df3f26dc22 sk=SH#01",
			Items: 2, Capacity: map[string]Units{"table": {WCU: 2}}},
	}
	b := []Call{
		{Pattern: 20, Op: "TransactWriteItems", Key: "Put pk=T#acme#BCAST#bc00000000000000000000000000000000 sk=SH#07; Put pk=T#acme#BCAST#bc00000000000000000000000000000000 sk=SH#11",
			Items: 2, Capacity: map[string]Units{"table": {WCU: 2}}},
		{Pattern: 11, Op: "Query", Key: "pk = 'SCHED#12#2030-12-31T23:59Z' AND sk < '1900000000000'", Capacity: map[string]Units{"table": {RCU: 1}}},
		{Pattern: 2, Op: "Query", Key: "pk = 'T#acme#U#user0042' AND sk < 'N#01ARZ3NDEKTSV4RRFFQ69G5FAV'", Scanned: 3, Count: 3,
			Capacity: map[string]Units{"table": {RCU: 0.5}}},
		{Pattern: 2, Op: "GetItem", Key: "pk=T#acme#U#user0042 sk=N~META", Capacity: map[string]Units{"table": {RCU: 0.5}}},
	}
	ra, rb := Render(Result{Calls: a}), Render(Result{Calls: b})
	if !bytes.Equal(ra, rb) {
		t.Fatalf("the notes differ:\n%s", firstDifference(ra, rb))
	}
	for _, want := range []string{"`pk = 'T#{t}#U#{user}' AND sk < 'N#{ulid}'`", "`pk = 'SCHED#{shard}#{time}' AND sk < '{ms}'`",
		"`Put pk=T#{t}#BCAST#{broadcast} sk=SH#{nn} ×2`"} {
		if !strings.Contains(string(ra), want) {
			t.Errorf("the note lacks %s", want)
		}
	}
}
