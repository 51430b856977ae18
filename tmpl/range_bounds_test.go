package tmpl

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Bounds near the int64 limits, as a template writes them.
const (
	maxI    = "9223372036854775807"
	minI    = "-9223372036854775808"
	nearMax = "9223372036854775800"
)

// guardTimeout ends a render that does not finish: Liquid's own range materialisation
// (values.Range.AsArray) never ends for an upper bound of math.MaxInt, and no budget of
// ours runs inside it. The guard turns that hang into a failure (run the old code with a
// short -timeout and a ulimit -v: it allocates as fast as it can). It is a hang detector,
// not a speed bound: the renders of these tests run on a virtual clock (stillClock,
// steppingClock), so a render that ends does a fixed amount of work whatever the
// machine's load, and no green run waits for the guard. (On the wall clock the renders
// that end at their deadline took 1 s, up to 6.4 s beside other jobs.)
const guardTimeout = 30 * time.Second

// stillClock sets en's clock to one that never moves: a render ends by its item, size and
// iteration budgets only, never by its deadline, however slow the machine.
func stillClock(en *engine) {
	t0 := time.Now()
	en.now = func() time.Time { return t0 }
}

// steppingClock sets en's clock to a virtual one that moves RenderTimeout/looks at each
// look, so a render's deadline passes at its looks-th check of the clock after the
// budget's start, whatever the work between checks costs on this machine. It returns the
// count of looks.
func steppingClock(en *engine, looks int64) *atomic.Int64 {
	var n atomic.Int64
	t0 := time.Now()
	step := RenderTimeout / time.Duration(looks)
	en.now = func() time.Time { return t0.Add(time.Duration(n.Add(1)) * step) }
	return &n
}

// maxRenderAlloc is the most one hostile render may allocate in all (TotalAlloc, not the
// live heap): the bound per request.
const maxRenderAlloc = 64 << 20

type guardedRender struct {
	out   string
	err   error
	took  time.Duration
	alloc uint64
}

// renderGuarded renders c with vars within guardTimeout, measuring its time and
// allocations. The test is not parallel, so the allocations are the render's.
func renderGuarded(t *testing.T, name string, c *compiled, vars map[string]any) guardedRender {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	done := make(chan guardedRender, 1)
	go func() {
		out, err := c.render("body", vars)
		done <- guardedRender{out: out, err: err}
	}()
	select {
	case r := <-done:
		r.took = time.Since(start)
		runtime.ReadMemStats(&after)
		r.alloc = after.TotalAlloc - before.TotalAlloc
		return r
	case <-time.After(guardTimeout):
		t.Fatalf("%s: the render did not finish within %v", name, guardTimeout)
		return guardedRender{}
	}
}

// bombVars are the data of the hostile templates: integers as decodeData makes them.
func bombVars() map[string]any {
	distinct := make([]any, 20_000)
	for i := range distinct {
		distinct[i] = []any{i}
	}
	big := make([]any, 300_000)
	for i := range big {
		big[i] = len(big) - i
	}
	ints, objects := make([]any, 20_000), make([]any, 20_000)
	for i := range ints {
		ints[i], objects[i] = i, map[string]any{"a": len(ints) - i}
	}
	return map[string]any{
		"ints": ints, "objects": objects,
		"max": math.MaxInt64, "min": math.MinInt64, "near": math.MaxInt64 - 7,
		"ten_million": 10_000_000, "fifty_million": 50_000_000, "k": "AsArray",
		"a": []any{1, 2}, "distinct": distinct, "big": big,
		"word": strings.Repeat("a", 200<<10), "mib": strings.Repeat("a", 1<<20),
	}
}

// TestRangeBombsEndWithinBudget: a range is an array Liquid builds on demand, of any
// size its bounds say; a filter, an assign or a property (.AsArray) built it whole before
// any budget of ours ran (hundreds of MiB for ten million items; forever for an upper bound
// of math.MaxInt, where its loop's i <= max never ends). Every range, whatever its bounds
// and wherever it is used, now has at most MaxArrayItems items, checked before anything is
// built; these all end quickly, with little memory, in a budget error. Filters whose time
// was more than linear (uniq, truncatewords) now answer quickly (want).
func TestRangeBombsEndWithinBudget(t *testing.T) {
	en := newEngine()
	stillClock(en) // what ends them is the range's bound, not the deadline
	vars := bombVars()
	for _, c := range []struct{ name, src, want string }{
		{"join to int64 max", "{{ (1..max) | join }}", ""},
		{"join over the whole int64 range", "{{ (min..max) | join }}", ""},
		{"join of ten million", "{{ (1..ten_million) | join }}", ""},
		{"first to int64 max", "{{ (1..max) | first }}", ""},
		{"sort of fifty million", "{{ (1..fifty_million) | sort | last }}", ""},
		{"reverse of an assigned range", "{% assign r = (1..fifty_million) %}{{ r | reverse | first }}", ""},
		{"range as a filter parameter", "{{ a | concat: (1..fifty_million) | size }}", ""},
		{"range as a default", "{{ nothing | default: (1..fifty_million) | size }}", ""},
		{"AsArray of an assigned range", "{% assign r = (min..max) %}{{ r.AsArray | size }}", ""},
		{"AsArray by an index from data", "{% assign r = (1..fifty_million) %}{{ r[k] | size }}", ""},
		{"filtered loop expression", "{% for i in (1..fifty_million) | reverse %}{{ i }}{% endfor %}", ""},
		{"assign in nested loops", "{% for i in (1..3) %}{% for j in (1..2) %}{% assign s = (j..ten_million) | join %}{% endfor %}{% endfor %}", ""},
		{"loop over the whole int64 range", "{% for i in (min..max) %}x{% endfor %}", ""},
		{"reversed loop to int64 max", "{% for i in (near..max) reversed %}{% for j in (1..max) %}{% endfor %}{% endfor %}", ""},
		{"tablerow to int64 max", "{% tablerow i in (0..max) cols: 3 %}{% endtablerow %}", ""},
		{"split into a million items", "{% for i in (1..20) %}{% assign s = mib | split: '' | reverse %}{% endfor %}", ""},
		{"split into 200 000 items", "{% for i in (1..20) %}{% assign s = word | split: '' | reverse %}{% endfor %}", ""},
		{"sort of an array over the bound", "{% for i in (1..20) %}{% assign s = big | sort %}{% endfor %}", ""},
		{"uniq of distinct arrays", "{{ distinct | uniq | size }}", "20000"},
		{"truncatewords of a long word", "{% for i in (1..20) %}{% assign s = word | truncatewords: 1000 %}{% endfor %}{{ s | size }}", "204800"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := en.parse("body", c.src, nil)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			r := renderGuarded(t, c.name, p, vars)
			t.Logf("%v, %d KiB allocated: %.120v", r.took.Round(time.Millisecond), r.alloc>>10, r.err)
			switch {
			case c.want != "" && (r.err != nil || r.out != c.want):
				t.Errorf("out %.40q, err = %.200v; want %q", r.out, r.err, c.want)
			case c.want == "" && (inbox.ErrorCode(r.err) != inbox.CodeBadUserInput || !strings.Contains(r.err.Error(), "render budget exceeded")):
				t.Errorf("out %.40q, err = %.200v; want BAD_USER_INPUT render budget exceeded", r.out, r.err)
			}
			// A render that loops over its range never ends (the guard fails it); one that
			// builds it whole allocates far more than this.
			if r.alloc > maxRenderAlloc {
				t.Errorf("allocated %d MiB; want under %d MiB", r.alloc>>20, maxRenderAlloc>>20)
			}
		})
	}
}

// repeat is n copies of s.
func repeat(s string, n int) string { return strings.Repeat(s, n) }

// TestLongChainsEndWithinBudget: the deadline was checked at loop iterations and writes
// only, so the work between two of them had no bound: a chain of filters in one output
// (thousands fit in a part), conditions (which write nothing: a chain of ifs, of elsifs,
// of comparisons) each costing up to the size of a data array. Every filter, assign and
// block now checks it, and a block's comparisons are bounded (MaxComparisons, checked
// at PUT), so these end at their deadline, at the first check past it. The clock moves
// only when the render looks at it (steppingClock): the deadline passes at the tenth look
// (every case checks it at least 31 times in all, once a block or filter), so the test
// tells a render that checks its deadline throughout from one that runs the whole chain
// (tens of seconds here) without depending on how fast the machine is.
func TestLongChainsEndWithinBudget(t *testing.T) {
	const deadlineLooks = 10
	en := newEngine()
	vars := bombVars()
	contains := "ints contains -1" + repeat(" or ints contains -1", MaxComparisons-1)
	// The costliest step between two checks of the deadline, measured in this build (the
	// race detector's allocates about twice the plain one's): one block of MaxComparisons
	// contains over 20,000 items, on a clock that never moves. A render checking its
	// deadline at every block and filter allocates about one step a look; one checking
	// only at writes, about fifteen (a whole output's 150 sorts).
	stillClock(en)
	step, err := en.parse("body", "{% if "+contains+" %}{% endif %}", nil)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	sr := renderGuarded(t, "one step", step, vars)
	if sr.err != nil {
		t.Fatalf("one step: %v", sr.err)
	}
	maxLookAlloc := 2 * sr.alloc
	t.Logf("one step allocates %d KiB", sr.alloc>>10)
	looks := steppingClock(en, deadlineLooks)
	for _, c := range []struct{ name, src string }{
		// 150 filters an expression (MaxExprTokens refuses 2,000 at PUT), 14 expressions.
		{"filters in outputs", repeat("{{ objects"+repeat(` | sort: "a"`, 150)+" | size }}", 14)},
		{"filters in conditions", repeat("{% if objects"+repeat(` | sort: "a"`, 150)+" %}{% endif %}", 14)},
		{"filters in assigns", repeat("{% assign s = objects | sort: 'a' %}", 1700)},
		{"ifs", repeat("{% if "+contains+" %}{% endif %}", 40)},
		{"elsifs", repeat("{% if ints contains -1 %}"+repeat("{% elsif ints contains -1 %}", MaxClauses-1)+"{% endif %}", 30)},
		{"unless and case", repeat("{% unless "+contains+" %}{% endunless %}{% case ints %}{% when objects %}{% endcase %}", 40)},
		{"in a loop body", "{% for i in (1..3) %}" + repeat("{% if "+contains+" %}{% endif %}", 40) + "{% endfor %}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := en.parse("body", c.src, nil)
			if err != nil {
				t.Fatalf("parse: %.200v", err)
			}
			looks.Store(0)
			r := renderGuarded(t, c.name, p, vars)
			t.Logf("%v, %d looks at the clock, %d KiB allocated: %.120v", r.took.Round(time.Millisecond), looks.Load(), r.alloc>>10, r.err)
			if inbox.ErrorCode(r.err) != inbox.CodeBadUserInput || !strings.Contains(r.err.Error(), "render budget exceeded: rendering took longer") {
				t.Errorf("out %.40q, err = %.200v; want BAD_USER_INPUT render budget exceeded", r.out, r.err)
			}
			if r.err != nil && strings.Contains(r.err.Error(), "inbox_") {
				t.Errorf("%v names an internal tag", r.err)
			}
			// The budget's start is one look and the deadline passes one step after
			// deadlineLooks more: the render stops at that check, not a clause later.
			n := looks.Load()
			if n > deadlineLooks+2 {
				t.Errorf("stopped after %d looks at the clock; want at the first past its deadline (%d)", n, deadlineLooks+2)
			}
			// The work between two looks is bounded (a filter, a block's clauses): a
			// render that checks its deadline only at writes runs a whole output's 150
			// sorts between two, gigabytes before the deadline passes.
			if r.alloc > uint64(n)*maxLookAlloc {
				t.Errorf("allocated %d MiB in %d looks at the clock; want at most %d MiB a look (two steps)", r.alloc>>20, n, maxLookAlloc>>20)
			}
		})
	}
}

// TestLongConditionsRefusedAtPut: the conditions of a block run with no check of the
// deadline in between, so a block has at most MaxClauses clauses and MaxComparisons
// comparisons (with its clauses); an output or a tag too.
func TestLongConditionsRefusedAtPut(t *testing.T) {
	en := newEngine()
	for _, c := range []struct{ src, want string }{
		{"{% if a %}" + repeat("{% elsif a %}", MaxClauses) + "{% else %}{% endif %}", "clauses"},
		{"{% case a %}" + repeat("{% when 1 %}", MaxClauses+1) + "{% endcase %}", "clauses"},
		{"{% if a contains 1" + repeat(" or a contains 1", MaxComparisons) + " %}{% endif %}", "comparisons"},
		{"{% if a == 1 %}" + repeat("{% elsif a != 1 %}", MaxComparisons/2) + repeat("{% elsif a >= 1 %}", MaxComparisons/2) + "{% endif %}", "comparisons"},
		{"{% unless a < 1" + repeat(" and a <= 1", MaxComparisons) + " %}{% endunless %}", "comparisons"},
		{"{% case a %}{% when 1" + repeat(", 1", MaxComparisons) + " %}{% endcase %}", "comparisons"},
		{"{{ a > 1" + repeat(" or a contains 1", MaxComparisons) + " }}", "comparisons"},
		{"{% assign b = a > 1" + repeat(" or a contains 1", MaxComparisons) + " %}", "comparisons"},
	} {
		_, err := en.parse("body", "x\n"+c.src, nil)
		if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "template part body line 2") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: err = %.200v; want BAD_USER_INPUT about %s", c.src, err, c.want)
		}
	}
	for _, src := range []string{
		"{% if a %}" + repeat("{% elsif a %}", MaxClauses-1) + "{% else %}{% endif %}",
		"{% if a contains 1" + repeat(" or a contains 1", MaxComparisons-1) + " %}{% endif %}",
		"{% case a %}{% when 1" + repeat(", 1", MaxComparisons-1) + " %}{% endcase %}",
		"{{ '==' }} {{ 'a contains b' }} {% if a == '<=' %}{% endif %}" + repeat("{% if a == 1 %}{% endif %}", 2*MaxComparisons),
	} {
		if _, err := en.parse("body", src, nil); err != nil {
			t.Errorf("%.60s: %v", src, err)
		}
	}
}

// TestDataCollectionsBounded: a comparison costs up to the size of a data array (or
// object), so data has none over MaxArrayItems items.
func TestDataCollectionsBounded(t *testing.T) {
	items := strings.TrimSuffix(repeat("0,", MaxArrayItems+1), ",")
	var keys strings.Builder
	for i := range MaxArrayItems + 1 {
		fmt.Fprintf(&keys, `"k%d":0,`, i)
	}
	for _, data := range []string{
		`{"a": [` + items + `]}`,
		`{"a": {"b": [[` + items + `]]}}`,
		`{"a": {` + strings.TrimSuffix(keys.String(), ",") + `}}`,
	} {
		if _, err := decodeData(inbox.JSON(data)); inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "items") {
			t.Errorf("data of %d bytes: err = %v; want BAD_USER_INPUT about the items", len(data), err)
		}
	}
	ok := `{"a": [` + strings.TrimSuffix(repeat("0,", MaxArrayItems), ",") + `]}`
	if _, err := decodeData(inbox.JSON(ok)); err != nil {
		t.Errorf("an array of MaxArrayItems: %v", err)
	}
}

// TestPanicsAnswerWithoutStack: Liquid re-panics a filter's panic with the goroutine's
// stack in the error's text, which reached the client. (slice's overflow was such a
// panic; it is fixed, so a filter of this engine is made to panic.)
func TestPanicsAnswerWithoutStack(t *testing.T) {
	en := newEngine()
	en.filters["upcase"] = reflect.ValueOf(func(s string) string { panic("index out of range " + s) })
	p, err := en.parse("body", "{{ 'abc' | upcase }}", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.render("body", nil)
	if inbox.ErrorCode(err) != inbox.CodeBadUserInput || strings.Contains(err.Error(), "goroutine") || strings.Contains(err.Error(), "stacktrace") {
		t.Errorf("err = %v; want BAD_USER_INPUT without a stack", err)
	}
}

// TestRangesStillWork: ranges within the bounds keep Liquid's meaning, including those
// the library got wrong (a reversed range in a filter panicked, size of a range was 0, a
// range ending at math.MaxInt never ended), and loops keep their modifiers, else clause,
// cycle, break and trims.
func TestRangesStillWork(t *testing.T) {
	en := newEngine()
	vars := bombVars()
	vars["n"], vars["items"] = 3, []any{"b", "a", "c"}
	for _, c := range []struct{ src, want string }{
		{"{{ (near..max) | join: ',' }}", "9223372036854775800,9223372036854775801,9223372036854775802,9223372036854775803,9223372036854775804,9223372036854775805,9223372036854775806,9223372036854775807"},
		{"{{ (min..-9223372036854775807) | join: ',' }}", "-9223372036854775808,-9223372036854775807"},
		{"[{{ (5..1) | join }}]", "[]"},
		{"{{ (1..5) | size }} {{ (-2..2) | join: ',' }}", "5 -2,-1,0,1,2"},
		{"{% assign r = (1..n) %}{% for i in r %}{{ i }}{% endfor %}{{ r | join: '-' }}", "1231-2-3"},
		{"{% for i in (1..n) reversed %}{{ i }}{% endfor %}", "321"},
		{"{% for i in (1..10) limit: 2 offset: 1 %}{{ i }}{% endfor %}", "23"},
		{"{% for i in (1..10) limit:n %}{{ i }}{% endfor %}", "123"},
		{"{% for i in (3..1) %}x{% else %}empty{% endfor %}", "empty"},
		{"{% for i in items | sort %}{{ i }}{{ forloop.index }}{% endfor %}", "a1b2c3"},
		{"{% for i in items | sort: 'x' limit: 1 %}{{ i }}{% endfor %}", "b"},
		{"{% for i in (1..n) %}{% cycle 'a', 'b' %}{% endfor %}", "aba"},
		{"{% for i in (1..10) %}{% if i > 2 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}", "2"},
		{"{%- for i in (1..2) -%} {{ i }} {%- endfor -%}", "12"},
		{"{% tablerow i in (1..n) cols: 2 %}{{ i }}{% endtablerow %}", `<tr class="row1"><td class="col1">1</td><td class="col2">2</td></tr><tr class="row2"><td class="col1">3</td></tr>`},
		{"{% for i in (1..2) %}{% for j in (i..n) %}{{ j }}{% endfor %};{% endfor %}", "123;23;"},
		{"{{ (1..3) | reverse | join }} {{ a | concat: (3..4) | join: ',' }}", "3 2 1 1,2,3,4"},
		{"{{ 'Ground control to Major Tom.' | truncate: 20 }}|{{ 'Ground' | truncate: 20 }}|{{ 'abcdef' | truncate: 4, '' }}", "Ground control to...|Ground|abcd"},
		{"{{ 'Ground control to Major Tom.' | truncatewords: 3 }}|{{ 'a b' | truncatewords: 2 }}|{{ ' a  b c' | truncatewords: 2, '--' }}", "Ground control to...|a b|a b--"},
		{"{{ 'a,b,,c,,' | split: ',' | join: '|' }} {{ 'a b  c' | split: ' ' | size }} {{ 'héllo' | split: '' | size }}", "a|b||c 3 5"},
		{"{{ items | concat: items | uniq | join }}", "b a c"},
	} {
		p, err := en.parse("body", c.src, nil)
		if err != nil {
			t.Errorf("%s: parse: %v", c.src, err)
			continue
		}
		r := renderGuarded(t, c.src, p, vars)
		if r.err != nil || r.out != c.want {
			t.Errorf("%s = %q, %v; want %q", c.src, r.out, r.err, c.want)
		}
	}
	dup := []any{[]any{1}, []any{1}, map[string]any{"a": 1}, map[string]any{"a": 1}, nil, nil, "x"}
	p, _ := en.parse("body", "{{ d | uniq | size }}", nil)
	if r := renderGuarded(t, "uniq", p, map[string]any{"d": dup}); r.err != nil || r.out != "4" {
		t.Errorf("uniq of %v = %q, %v; want 4", dup, r.out, r.err)
	}
}

// TestConstantRangesRefusedAtPut: a range whose bounds are written in the template is
// known when it is put: over MaxArrayItems items it is refused then, naming the part and
// the line, wherever it is (a loop, an assign, an output, a filter's parameter, a
// condition, inside parentheses), and so is a property or an index of a range (Liquid
// answers .AsArray by building the whole array).
func TestConstantRangesRefusedAtPut(t *testing.T) {
	s := &Service{en: newEngine()}
	for _, src := range []string{
		"{% for i in (1.." + maxI + ") %}{{ i }}{% endfor %}",
		"{% for i in (" + minI + ".." + maxI + ") %}{% endfor %}",
		"{% for i in (-5..100000000) reversed %}{% endfor %}",
		"{% for i in ( 1 .. 100001 ) limit: 3 %}{% endfor %}",
		"{% tablerow i in (0..1000000) cols: 2 %}{% endtablerow %}",
		"{% assign r = (1.." + maxI + ") %}",
		"{% assign r = (" + nearMax + ".." + maxI + ") | concat: (0..100000) %}",
		"{{ (0..100000) | join }}",
		"{{ ((1.." + maxI + ")) | size }}",
		"{{ (1..(" + maxI + ")) | size }}",
		"{% if (1..200000) contains 5 %}{% endif %}",
		"{% case x %}{% when (1..200000) %}{% endcase %}",
		"{% if x %}{% elsif (1..200000) == x %}{% endif %}",
		"{% for i in (1..3) %}{% for j in (1..3) %}{{ (1..200000) | size }}{% endfor %}{% endfor %}",
		"{{ (1..5).AsArray }}",
		"{{ (1..n)['AsArray'] }}",
		"{{ ((near..max)).AsArray | size }}",
		"{% for i in (1..5).AsArray %}{% endfor %}",
	} {
		for _, part := range []string{"body", "email.html"} {
			in := inbox.TemplateInput{Locale: "en", Title: "t", Body: "b"}
			if part == "body" {
				in.Body = "line one\n" + src
			} else {
				in.Parts = map[string]inbox.Content{inbox.ChannelEmail: {Subject: "s", HTML: "line one\n" + src, Text: "x"}}
			}
			start := time.Now()
			_, err := s.parse(in)
			if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "template part "+part+" line 2") || !strings.Contains(err.Error(), "range") {
				t.Errorf("%s in %s: err = %v; want BAD_USER_INPUT naming the part, line 2 and the range", src, part, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("%s: took %v", src, d)
			}
		}
	}
	// Ranges within the bound, unknown ones and text that only looks like a range parse.
	for _, src := range []string{
		"{% for i in (1..100000) %}{% endfor %}",
		"{% for i in (" + maxI + "..1) %}{% endfor %}",
		"{% for i in (" + minI + ".." + minI + ") %}{% endfor %}",
		"{% for i in (-50000..49999) %}{% endfor %}",
		"{% for i in (1..n) %}{% endfor %}{% for i in (m..100000000) %}{% endfor %}",
		"{{ '(1..100000000)' }} {{ \"(1..99999999).AsArray\" }} (1..100000000)",
		"{% comment %}{{ (1..100000000) | join }}{% endcomment %}{% raw %}{{ (1..100000000) | join }}{% endraw %}",
		"{{ r.AsArray }} {{ x.first }} {{ (x).size }} {{ (1..3) | first }}",
	} {
		if _, err := s.parse(inbox.TemplateInput{Locale: "en", Title: "t", Body: src}); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// oneTemplateStore is a Store of one template, one locale, in memory.
type oneTemplateStore struct {
	in      inbox.TemplateInput
	version int
}

func (m *oneTemplateStore) PutTemplate(_ context.Context, _, _ string, in inbox.TemplateInput) (int, error) {
	m.version++
	m.in = in
	return m.version, nil
}

func (m *oneTemplateStore) GetTemplate(_ context.Context, _, id, _ string, _ int) (inbox.Template, error) {
	if m.version == 0 {
		return inbox.Template{}, inbox.Errorf(inbox.CodeNotFound, "unknown template")
	}
	return inbox.Template{ID: id, Version: m.version, Locale: "en", TemplateInput: m.in}, nil
}

func (m *oneTemplateStore) GetTemplateHead(context.Context, string, string) (inbox.TemplateHead, error) {
	if m.version == 0 {
		return inbox.TemplateHead{}, inbox.Errorf(inbox.CodeNotFound, "unknown template")
	}
	return inbox.TemplateHead{Version: m.version, DefaultLocale: "en", Locales: []string{"en"}}, nil
}

func (m *oneTemplateStore) GetTemplateLocale(ctx context.Context, tenantID, id, locale string, _ int) (inbox.Template, error) {
	if locale != "en" {
		return inbox.Template{}, inbox.Errorf(inbox.CodeNotFound, "no version")
	}
	return m.GetTemplate(ctx, tenantID, id, locale, 0)
}

// TestDataBoundsAsRangeBounds: numbers of a send's data are range bounds, loop limits and
// offsets (they were int64, which Liquid's range refused: "can't convert int64 to type
// int"); integral numbers written as 4.0 or 1e1 too. A range they make is bounded as any
// other, at accept (Pin) and at render.
func TestDataBoundsAsRangeBounds(t *testing.T) {
	ctx := context.Background()
	st := &oneTemplateStore{}
	s := New(st)
	src := "{% for i in (m..n) %}{{ i }}{% endfor %}|{% for i in (1..f) limit: n offset: one %}{{ i }}{% endfor %}|{{ (1..e) | size }}|{{ big }} {{ half }} {{ huge }}"
	if _, err := s.Put(ctx, tenant, "loop", inbox.TemplateInput{Locale: "en", Title: "t", Body: src}); err != nil {
		t.Fatal(err)
	}
	data := inbox.JSON(`{"m": -2, "n": 3, "f": 4.0, "one": 1, "e": 1e1, "big": 12345678901, "half": 2.5, "huge": 1e300}`)
	if _, err := s.Pin(ctx, tenant, "loop", "", data); err != nil {
		t.Fatalf("pin: %v", err)
	}
	r, err := s.Render(ctx, tenant, "loop", 0, "en", data)
	if want := "-2-10123|234|10|12345678901 2.5 1e+300"; err != nil || r.Body != want {
		t.Fatalf("render = %q, %v; want %q", r.Body, err, want)
	}
	for _, n := range []string{maxI, "1e18", "100001", "200000.0"} {
		d := inbox.JSON(fmt.Sprintf(`{"m": 1, "n": %s, "f": 1, "one": 0, "e": 1, "big": 1, "half": 1, "huge": 1}`, n))
		start := time.Now()
		_, err := s.Pin(ctx, tenant, "loop", "", d)
		if inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "range") || time.Since(start) > 5*time.Second {
			t.Errorf("pin with n = %s: %v after %v; want BAD_USER_INPUT about the range", n, err, time.Since(start))
		}
	}
}

const tenant = "acme"

// TestUnknownFiltersRefusedAtPut: a filter no render has is refused when the template is
// stored, wherever it is written (an output, a tag's expression, a filter with
// parameters, an HTML part); Liquid itself found it only when a render reached it, so such
// a template was stored and every send of it failed. Known filters, and text that only
// looks like a filter, parse.
func TestUnknownFiltersRefusedAtPut(t *testing.T) {
	s := &Service{en: newEngine()}
	for _, src := range []string{
		"{{ x | nosuchfilter }}",
		"{{ x | upcase | nosuchfilter: 1, 2 }}",
		"{% assign y = x | frobnicate %}",
		"{% for i in list | sort | shuffle %}{% endfor %}",
		"{% if x | bogus %}{% endif %}",
		"{{x|nope}}",
	} {
		for _, part := range []string{"body", "email.html"} {
			in := inbox.TemplateInput{Locale: "en", Title: "t", Body: "b"}
			if part == "body" {
				in.Body = src
			} else {
				in.Parts = map[string]inbox.Content{inbox.ChannelEmail: {Subject: "s", HTML: src, Text: "x"}}
			}
			if _, err := s.parse(in); inbox.ErrorCode(err) != inbox.CodeBadUserInput || !strings.Contains(err.Error(), "undefined filter") {
				t.Errorf("%s in %s: err = %v; want BAD_USER_INPUT undefined filter", src, part, err)
			}
		}
	}
	for _, src := range []string{
		"{{ x | upcase | append: 'a|b' | default: 'none' }}",
		"{{ 'a | nosuchfilter' }} a | nosuchfilter",
		"{% assign y = x | split: ',' | sort | join: '-' %}{{ n | plus: 1 | minus: 2 | times: 3 | modulo: 2 }}",
		"{{ x | escape | raw }}{{ d | date: '%Y' }}",
	} {
		if _, err := s.parse(inbox.TemplateInput{Locale: "en", Title: "t", Body: src}); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// TestParseCostBounded: what Liquid's parser does before any of our checks is bounded by
// counting first: a when or a cycle of thousands of values (its grammar copies the list at
// each comma: 32,000 values took gigabytes), thousands of outputs (each compiled twice in
// an HTML part), and number literals its parser panics on are refused with
// BAD_USER_INPUT, quickly and in little memory, at the template's PUT.
func TestParseCostBounded(t *testing.T) {
	list := func(n int, v string) string { return strings.TrimSuffix(strings.Repeat(v+",", n), ",") }
	s := &Service{en: newEngine()}
	for name, src := range map[string]string{
		"when of 32,000 values":   "{% case 1 %}{% when " + list(32000, "1") + " %}y{% endcase %}",
		"when of 600 values":      "{% case x %}{% when " + list(600, "'a'") + " %}y{% endcase %}",
		"cycle of 16,000 values":  "{% for i in (1..3) %}{% cycle " + list(16000, `"a"`) + " %}{% endfor %}",
		"output of 2,000 filters": "{{ x" + strings.Repeat(" | upcase", 2000) + " }}",
		"13,000 outputs":          strings.Repeat("{{1}}", 13000),
		"5,000 empty loops":       strings.Repeat("{% for i in (1..2) %}{% endfor %}", 5000)[:MaxPartBytes-10],
		"a 20-digit number":       "{{ 99999999999999999999 }}",
		"a 20-digit range bound":  "{% for i in (1..99999999999999999999) %}{% endfor %}",
		"a 20-digit date":         "{{ 99999999999999999999 | date: '%Y' }}",
	} {
		for _, part := range []string{"body", "email.html"} {
			in := inbox.TemplateInput{Locale: "en", Title: "t", Body: "b"}
			if len(src) > MaxPartBytes {
				t.Fatalf("%s: %d bytes, over a part's limit", name, len(src))
			}
			if part == "body" {
				in.Body = src
			} else {
				in.Parts = map[string]inbox.Content{inbox.ChannelEmail: {Subject: "s", HTML: src, Text: "x"}}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := s.parse(in)
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if inbox.ErrorCode(err) != inbox.CodeBadUserInput {
				t.Errorf("%s in %s: err = %v; want BAD_USER_INPUT", name, part, err)
			}
			// The parser's cost is its allocation here (gigabytes before the counts, a few
			// MiB now); the time is logged, not bounded: a loaded machine under -race took
			// over 2 s for the same 27 MiB (a fresh clone's make test beside other jobs).
			if alloc := (after.TotalAlloc - before.TotalAlloc) >> 20; alloc > 64 {
				t.Errorf("%s in %s: %d MiB allocated, %v; want little", name, part, alloc, d)
			}
			t.Logf("%s in %s: %v", name, part, d)
		}
	}
	// At the limits, templates still parse.
	for name, src := range map[string]string{
		"when of 60 values":   "{% case x %}{% when " + list(60, "'a'") + " %}y{% endcase %}",
		"a cycle of 50":       "{% for i in (1..3) %}{% cycle " + list(50, `"a"`) + " %}{% endfor %}",
		"3,000 outputs":       strings.Repeat("{{ x }}", 3000),
		"a 19-digit number":   "{{ 999999999999999999 }}",
		"100 chained filters": "{{ x" + strings.Repeat(" | upcase", 100) + " }}",
	} {
		if _, err := s.parse(inbox.TemplateInput{Locale: "en", Title: "t", Body: src}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
