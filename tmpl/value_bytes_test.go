package tmpl

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// bigString assigns s a string of MaxValueBytes bytes (16 bytes doubled 14 times), each
// step within the bounds.
const bigString = `{% assign s = "xxxxxxxxxxxxxxxx" %}{% for i in (1..14) %}{% assign s = s | append: s %}{% endfor %}`

// bigArray assigns a [s] and then doubles it 16 times with concat: 65 536 references to
// one string of MaxValueBytes, 4 MiB of memory but 16 GiB of text for any filter that
// converts it or comparison that walks it.
const bigArray = bigString + `{% assign a = s | split: "#" %}{% for i in (1..16) %}{% assign a = a | concat: a %}{% endfor %}`

// renderMeasured parses and renders src with vars and returns the time taken, the bytes
// allocated and the error.
func renderMeasured(t *testing.T, src string, vars map[string]any) (time.Duration, uint64, error) {
	t.Helper()
	c, err := newEngine().parse("body", src, nil)
	if err != nil {
		t.Fatalf("%s: does not parse: %v", src, err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err = c.render("body", vars)
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, after.TotalAlloc - before.TotalAlloc, err
}

// TestValueBytesAreBoundedInAll: strings and array items were bounded one by one, never an
// array's total, so 65 536 references to one 256 KiB string (4 MiB) were 16 GiB of text to
// json, inspect, upcase, join, append, remove, slice, date, escape, sort_natural, ... (the
// process died of memory) and to a comparison (seconds each). Now no assign or filter may
// hold or take more than MaxValueBytes bytes of strings in all: every variant ends at once
// with BAD_USER_INPUT, having allocated little. Run under `ulimit -v 4000000` the old code
// dies of memory here.
func TestValueBytesAreBoundedInAll(t *testing.T) {
	nested := map[string]any{
		"d": []any{[]any{strings.Repeat("y", 8<<10)}},
		"e": []any{map[string]any{"k": strings.Repeat("z", 8<<10)}},
	}
	cases := []struct {
		name, src string
		vars      map[string]any
	}{
		{"json", bigArray + `{{ a | json | size }}`, nil},
		{"inspect", bigArray + `{{ a | inspect | size }}`, nil},
		{"upcase", bigArray + `{{ a | upcase | size }}`, nil},
		{"join", bigArray + `{{ a | join: "," | size }}`, nil},
		{"join-param", bigArray + `{{ a | join: a | size }}`, nil},
		{"append-param", bigArray + `{{ "x" | append: a | size }}`, nil},
		{"remove-param", bigArray + `{{ s | remove: a | size }}`, nil},
		{"slice", bigArray + `{{ a | slice: 0, 5 | size }}`, nil},
		{"date", bigArray + `{{ a | date: "%Y" }}`, nil},
		{"escape", bigArray + `{{ a | escape | size }}`, nil},
		{"sort_natural", bigArray + `{{ a | sort_natural | size }}`, nil},
		{"output", bigArray + `{{ a }}`, nil},
		{"size", bigArray + `{{ a | size }}`, nil},
		{"compare-bomb", bigArray + `{% assign b = a | concat: a %}{% if a == b or a == b or a == b or a == b or a == b or a == b or a == b or a == b %}y{% endif %}`, nil},
		{"case-when", bigArray + `{% case a %}{% when a %}y{% endcase %}`, nil},
		{"concat-chain", bigString + `{% assign a = s | split: "#" %}{{ a | concat: a | concat: a | size }}`, nil},
		{"loop", bigArray + `{% for x in a limit: 2 %}{{ x | size }}{% endfor %}`, nil},
		// 65 536 items of 16 bytes: within MaxArrayItems, over MaxValueBytes in all.
		{"many-small-pieces", `{% assign a = "xxxxxxxxxxxxxxxx" | split: "#" %}{% for i in (1..16) %}{% assign a = a | concat: a %}{% endfor %}{{ a | size }}`, nil},
		{"nested-data", `{% assign a = d %}{% for i in (1..16) %}{% assign a = a | concat: a %}{% endfor %}{{ a | json | size }}`, nested},
		{"nested-data-map", `{% assign a = e %}{% for i in (1..16) %}{% assign a = a | concat: a %}{% endfor %}{% if a == a %}{{ a | inspect | size }}{% endif %}`, nested},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, alloc, err := renderMeasured(t, tc.src, tc.vars)
			var ie *inbox.Error
			if !errors.As(err, &ie) || ie.Code != inbox.CodeBadUserInput {
				t.Fatalf("want BAD_USER_INPUT, got %.300v (after %v, %d MiB allocated)", err, d, alloc>>20)
			}
			if d > 2*time.Second || alloc > 64<<20 {
				t.Fatalf("refused after %v having allocated %d MiB: %.300v", d, alloc>>20, err)
			}
			if !strings.Contains(err.Error(), "render budget exceeded") {
				t.Fatalf("refused, not for the budget: %.300v", err)
			}
		})
	}
}

// TestValueBytesBoundLetsTheLimitsThrough: the bound is on the text held in all, so a
// string of MaxValueBytes in an array, an array of MaxArrayItems numbers, and two arrays
// at the bound compared MaxComparisons times in one condition still render (each
// comparison walks at most MaxValueBytes).
func TestValueBytesBoundLetsTheLimitsThrough(t *testing.T) {
	cmp := strings.Repeat(" or a == b", MaxComparisons-1)
	half := `{% assign h = s | slice: 0, 131072 %}`
	for _, src := range []string{
		bigString + `{% assign a = s | split: "#" %}{{ a | size }}{{ a | first | size }}`,
		`{% assign r = (1..100000) %}{% assign r = r | reverse %}{{ r | size }}`,
		bigString + half + `{% assign a = h | split: "#" %}{% assign a = a | concat: a %}{{ a | join: "" | size }}`,
		// Many small pieces: 32 768 items of 1 byte, doubled once by concat.
		bigString + `{% assign a = s | slice: 0, 32768 | split: "" %}{% assign b = a | concat: a %}{{ b | size }}`,
		bigString + half + `{% assign a = h | split: "#" %}{% assign a = a | concat: a %}{% assign b = h | split: "#" %}{% assign b = b | concat: b %}{% if a == b` + cmp + ` %}y{% endif %}`,
	} {
		// On a clock that stands still: what this tells is that the size bounds let the
		// limits through, whatever this machine's speed (under -race beside DynamoDB Local
		// the concat of 32 768 items once took more than RenderTimeout on the wall clock;
		// how long a render takes is the bench's to measure).
		en := newEngine()
		t0 := time.Now()
		en.now = func() time.Time { return t0 }
		c, err := en.parse("body", src, nil)
		if err != nil {
			t.Fatalf("%s: does not parse: %v", src, err)
		}
		start := time.Now()
		if _, err := c.render("body", nil); err != nil {
			t.Fatalf("%.200s: %.300v", src, err)
		}
		t.Logf("%.80s: %v", src, time.Since(start))
	}
}

// TestCheckValueCountsEveryReference: checkValue counts strings (keys too) and items
// through nested arrays and objects of any type, every reference again, and stops at the
// first bound passed: a value of 10^10 references checks at once.
func TestCheckValueCountsEveryReference(t *testing.T) {
	kib := strings.Repeat("k", 1<<10)
	inner := make([]any, MaxArrayItems)
	for i := range inner {
		inner[i] = i
	}
	outer := make([]any, MaxArrayItems)
	for i := range outer {
		outer[i] = inner
	}
	big := make([]any, 300)
	for i := range big {
		big[i] = kib
	}
	keys := map[string]any{}
	for i := range 300 {
		keys[strings.Repeat("k", 1<<10-4)+itoa(1000+i)] = nil
	}
	typed := make([][]string, 300)
	for i := range typed {
		typed[i] = []string{kib}
	}
	for _, tc := range []struct {
		name string
		v    any
		want error
	}{
		{"string at the bound", strings.Repeat("x", MaxValueBytes), nil},
		{"string over", strings.Repeat("x", MaxValueBytes+1), errTooLong()},
		{"array of a string at the bound", []any{strings.Repeat("x", MaxValueBytes)}, nil},
		{"strings over in all", big, errTooLong()},
		{"strings under in all", big[:256], nil},
		{"object keys over", keys, errTooLong()},
		{"object values over", map[string]any{"a": big[:200], "b": []any{map[string]any{"c": big[:100]}}}, errTooLong()},
		{"typed nested slices over", typed, errTooLong()},
		{"typed map over", map[string][]string{"a": {strings.Repeat("x", MaxValueBytes)}, "b": {"y"}}, errTooLong()},
		{"pointer to strings over", &big, errTooLong()},
		{"items at the bound", inner, nil},
		{"items over", append(inner[:MaxArrayItems:MaxArrayItems], 0), errTooMany()},
		{"nested items over", outer[:2], errTooMany()},
		{"10^10 references", outer, errTooMany()},
		{"time", time.Now(), nil},
	} {
		start := time.Now()
		got := checkValue(tc.v)
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("%s: checked in %v", tc.name, d)
		}
		if (got == nil) != (tc.want == nil) || (got != nil && got.Error() != tc.want.Error()) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDataIsBoundedInAll: no variable of a send's data can hold more than a variable may.
func TestDataIsBoundedInAll(t *testing.T) {
	piece := `"` + strings.Repeat("d", 60<<10) + `"`
	for _, over := range []string{
		`{"a":[` + piece + `],"b":{"c":[` + piece + `,` + piece + `],"d":{"e":[` + piece + `,` + piece + `,` + piece + `]}}}`,
		`{"b":[[` + piece + `,` + piece + `],[` + piece + `],[` + piece + `,` + piece + `]]}`,
	} {
		if _, err := decodeData(inbox.JSON(over)); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("data of %d KiB of strings: err = %v", len(over)>>10, err)
		}
	}
	// Each variable within the bound, though not all together.
	under := inbox.JSON(`{"a":[` + piece + `,` + piece + `],"b":{"c":[` + piece + `,` + piece + `]}}`)
	if _, err := decodeData(under); err != nil {
		t.Fatal(err)
	}
}
