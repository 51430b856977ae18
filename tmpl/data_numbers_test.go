package tmpl

import (
	"runtime"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// TestDataNumbersAreRangeBounds: whole numbers of a send's data were int64, which
// Liquid's range bounds and loop limits refuse ("can't convert int64 to type int"); they
// are ints now, written 3, 4.0 or 1e1, and print as written; others stay float64.
func TestDataNumbersAreRangeBounds(t *testing.T) {
	vars, err := decodeData(inbox.JSON(`{"m": -2, "n": 3, "f": 4.0, "e": 1e1, "one": 1, "big": 12345678901, "half": 2.5, "huge": 1e300, "list": [2, 3.0]}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"m": -2, "n": 3, "f": 4, "e": 10, "big": 12345678901, "half": 2.5, "huge": 1e300} {
		if vars[k] != want {
			t.Errorf("%s = %T %v; want %T %v", k, vars[k], vars[k], want, want)
		}
	}
	if l := vars["list"].([]any); l[0] != 2 || l[1] != 3 {
		t.Errorf("list = %#v; want ints", l)
	}
	for src, want := range map[string]string{
		"{% for i in (m..n) %}{{ i }}{% endfor %}":                                 "-2-10123",
		"{% for i in (1..f) limit: n offset: one %}{{ i }}{% endfor %}":            "234",
		"{% for i in (1..e) reversed %}{{ i }}{% endfor %}":                        "10987654321",
		"{% for i in list %}{% for j in (1..i) %}{{ j }}{% endfor %};{% endfor %}": "12;123;",
		"{{ big }} {{ half }} {{ huge }} {{ n | plus: 1 }}":                        "12345678901 2.5 1e+300 4",
		"{% tablerow i in (1..n) cols: one %}{{ i }}{% endtablerow %}":             `<tr class="row1"><td class="col1">1</td></tr><tr class="row2"><td class="col1">2</td></tr><tr class="row3"><td class="col1">3</td></tr>`,
	} {
		if got, err := renderPart(t, src, false, vars); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
}

// TestArithmeticKeepsIntegers: plus, minus, times and modulo of integers are integers (as
// in Shopify's Liquid), so a bound computed from data is a range bound; a float operand,
// or an integer result past int64, gives a float.
func TestArithmeticKeepsIntegers(t *testing.T) {
	vars, err := decodeData(inbox.JSON(`{"n": 4, "half": 2.5, "s": "3", "max": 9223372036854775807}`))
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		"{% assign m = n | minus: 1 %}{% for i in (1..m) %}{{ i }}{% endfor %}":  "123",
		"{% assign m = n | plus: 1 %}{% for i in (m..6) %}{{ i }}{% endfor %}":   "56",
		"{% assign m = n | times: 2 %}{% for i in (7..m) %}{{ i }}{% endfor %}":  "78",
		"{% assign m = 7 | modulo: n %}{% for i in (1..m) %}{{ i }}{% endfor %}": "123",
		"{{ s | plus: 1 }} {{ n | minus: 10 }} {{ -7 | modulo: 3 }}":             "4 -6 -1",
		"{{ n | plus: half }} {{ n | times: 0.5 }} {{ 7.5 | modulo: 2 }}":        "6.5 2 1.5",
		"{{ max | plus: 1 }} {{ max | times: 2 }}":                               "9.223372036854776e+18 1.8446744073709552e+19",
	} {
		if got, err := renderPart(t, src, false, vars); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
	for _, src := range []string{"{{ n | modulo: 0 }}", "{{ n | plus: 'x' }}"} {
		if got, err := renderPart(t, src, false, vars); err == nil {
			t.Errorf("%s = %q; want an error", src, got)
		}
	}
}

// TestDateSliceDivideBounded: the filters an attack on the budget found outside it: date's
// width (%0999999d padded each directive to a megabyte inside the filter, before any
// check: 100 of them allocated about 1 GiB), slice's overflowing end (a panic whose
// runtime text reached the client) and divided_by's MinInt64 / -1 (wrapped around).
func TestDateSliceDivideBounded(t *testing.T) {
	vars := map[string]any{}
	for _, src := range []string{
		`{{ "2020-01-01" | date: "%0999999d" }}`,
		`{{ "2020-01-01" | date: "` + strings.Repeat("%0999999d", 100) + `" }}`,
		`{{ "2020-01-01" | date: "%-_0999Y" }}`,
		`{{ "2020-01-01" | date: "%99999999999999999999N" }}`,
		`{{ "2020-01-01" | date: "x %65d" }}`,
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := renderPart(t, src, false, vars)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "width") {
			t.Errorf("%.60s = %.40q, %v; want an error about the width", src, got, err)
		}
		if alloc := (after.TotalAlloc - before.TotalAlloc) >> 20; alloc > 16 {
			t.Errorf("%.60s: %d MiB allocated", src, alloc)
		}
	}
	for src, want := range map[string]string{
		`{{ "2020-01-02" | date: "%Y-%m-%d %010d %%" }}`:              "2020-01-02 0000000002 %",
		`{{ "abcdef" | slice: 2, 9223372036854775807 }}`:              "cdef",
		`{{ "abcdef" | slice: -2 }}|{{ "abcdef" | slice: 9, 2 }}`:     "e|",
		`{{ "abcdef" | slice: 1, 3 }}|{{ "abcdef" | slice: 1, -3 }}|`: "bcd||",
		`{{ -9223372036854775807 | minus: 1 | divided_by: -1 }}`:      "9.223372036854776e+18",
		`{{ 7 | divided_by: 2 }} {{ 7.0 | divided_by: 2.0 }}`:         "3 3.5",
	} {
		if got, err := renderPart(t, src, false, vars); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
}
