package datamodel

import (
	"fmt"
	"sort"
)

// Violation is one rule of the data model a run broke.
type Violation struct {
	Pattern int
	What    string
}

func (v Violation) String() string { return fmt.Sprintf("pattern %d: %s", v.Pattern, v.What) }

// Check returns the rules the calls break, by pattern: a Scan (never allowed: every
// pattern is a GetItem, Query, batch or transaction on a named key), and a pattern whose
// FilterExpressions discarded more than half of what they read (ScannedCount against
// Count over the pattern's filtered Queries: the key design, not a filter, must select).
func Check(calls []Call) []Violation {
	var out []Violation
	type tally struct{ scanned, count, queries int }
	filtered := map[int]*tally{}
	scans := map[int]int{}
	for _, c := range calls {
		if c.Op == "Scan" {
			scans[c.Pattern]++
		}
		if c.Filter == "" {
			continue
		}
		t := filtered[c.Pattern]
		if t == nil {
			t = &tally{}
			filtered[c.Pattern] = t
		}
		t.scanned += c.Scanned
		t.count += c.Count
		t.queries++
	}
	for p, n := range scans {
		out = append(out, Violation{p, fmt.Sprintf("%d Scan call(s): every pattern must address a key or an index", n)})
	}
	for p, t := range filtered {
		if discarded := t.scanned - t.count; 2*discarded > t.scanned {
			out = append(out, Violation{p, fmt.Sprintf("its FilterExpression discarded %d of the %d items its %d Queries read (returned %d): more than half; select with a key or an index",
				discarded, t.scanned, t.queries, t.count)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pattern != out[j].Pattern {
			return out[i].Pattern < out[j].Pattern
		}
		return out[i].What < out[j].What
	})
	return out
}
