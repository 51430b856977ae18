package datamodel

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// normalizers turn the seed's concrete values in keys and expressions into what they
// stand for, so the note reads as key templates and does not change with ids, clock or
// shard choice. Applied in order.
var normalizers = []struct {
	re *regexp.Regexp
	to string
}{
	{regexp.MustCompile(`bc[0-9a-f]{32}(:\d+:\d+)?`), "{broadcast}"},
	{regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`), "{ulid}"},
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "{sha256}"},
	{regexp.MustCompile(`\b[0-9a-f]{32}\b`), "{hash}"},
	{regexp.MustCompile(`\b[0-9a-f]{16}\b`), "{deviceId}"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?Z`), "{time}"},
	{regexp.MustCompile(`\b\d{13}\b`), "{ms}"},
	{regexp.MustCompile(`\b\d{10}\b`), "{epoch}"},
	{regexp.MustCompile(`user\d{4}`), "{user}"},
	{regexp.MustCompile(`actor\d{4}`), "{actor}"},
	{regexp.MustCompile(`post\d{4}`), "{target}"},
	{regexp.MustCompile(`task-0011-[a-z]`), "{task}"},
	{regexp.MustCompile(`T#` + tenant + `#`), "T#{t}#"},
	{regexp.MustCompile(`SCHED#\d+#`), "SCHED#{shard}#"},
	{regexp.MustCompile(`#S#\d\d\b`), "#S#{nn}"},
	{regexp.MustCompile(`\bSH#\d\d\b`), "SH#{nn}"},
	{regexp.MustCompile(`\bSHARD#\d+\b`), "SHARD#{n}"},
	{regexp.MustCompile(`#SEG#` + segment + `\b`), "#SEG#{segment}"},
	{regexp.MustCompile(`#TPL#` + template + `\b`), "#TPL#{template}"},
	{regexp.MustCompile(`#IDEM#[a-z]+-\d{4}`), "#IDEM#{key}"},
	{regexp.MustCompile(`#REQ#[a-z]+-\d{4}`), "#REQ#{key}"},
}

// normalize applies normalizers to s.
func normalize(s string) string {
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.to)
	}
	return s
}

// collapse writes a list of keys ("; "-separated) with repeats counted: "A ×3; B".
func collapse(keys string) string {
	if keys == "" {
		return ""
	}
	parts := strings.Split(keys, "; ")
	var order []string
	n := map[string]int{}
	for _, p := range parts {
		if n[p] == 0 {
			order = append(order, p)
		}
		n[p]++
	}
	for i, p := range order {
		if n[p] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", p, n[p])
		}
	}
	return strings.Join(order, "; ")
}

// group is the calls of one pattern with one signature (operation, index, key, filter,
// outcome).
type group struct {
	op, index, key, filter, err string
	calls                       []Call
}

func (g *group) sig() string {
	return g.op + "\x00" + g.index + "\x00" + g.key + "\x00" + g.filter + "\x00" + g.err
}

// groups returns pattern p's calls grouped by signature, in signature order (calls sent
// concurrently arrive in any order; the groups do not).
func groups(calls []Call, p int) []*group {
	by := map[string]*group{}
	var out []*group
	for _, c := range calls {
		if c.Pattern != p {
			continue
		}
		g := &group{op: c.Op, index: c.Index, key: collapse(normalize(c.Key)), filter: normalize(c.Filter), err: c.Err}
		if have, ok := by[g.sig()]; ok {
			g = have
		} else {
			by[g.sig()] = g
			out = append(out, g)
		}
		g.calls = append(g.calls, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sig() < out[j].sig() })
	return out
}

// num formats a unit count: as few digits as it needs.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// thousands formats n with a comma every three digits.
func thousands(n float64) string {
	s := strconv.FormatFloat(n, 'f', -1, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}

// span is "a" when every value is a, else "a–b".
func span(vals []float64) string {
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo == hi {
		return num(lo)
	}
	return num(lo) + "–" + num(hi)
}

// unitsText is the units per call of a group: the total's span and, when more than one
// place (the table, an index) consumed some, each place's span.
func unitsText(calls []Call, read bool) string {
	if allFailed(calls) {
		return "not reported"
	}
	pick := func(u Units) float64 {
		if read {
			return u.RCU
		}
		return u.WCU
	}
	totals := make([]float64, len(calls))
	where := map[string][]float64{}
	used := map[string]bool{}
	for i, c := range calls {
		totals[i] = pick(c.Total())
		for w, u := range c.Capacity {
			where[w] = append(where[w], pick(u))
			used[w] = used[w] || pick(u) != 0
		}
	}
	out := span(totals)
	if len(used) < 2 {
		return out
	}
	names := make([]string, 0, len(where))
	for w := range where {
		if used[w] {
			names = append(names, w)
		}
	}
	if len(names) < 2 {
		return out
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, w := range names {
		parts = append(parts, w+" "+span(where[w]))
	}
	return out + " (" + strings.Join(parts, ", ") + ")"
}

func allFailed(calls []Call) bool {
	for _, c := range calls {
		if c.Err == "" {
			return false
		}
	}
	return true
}

// cell escapes s for a Markdown table cell and wraps it as code ("" stays empty).
func cell(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// Render returns the design note (docs/data-model.md) of a run: the same bytes for
// the same run, whatever its ids, clock or call order.
func Render(res Result) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("<!-- Generated by `go run . model` (package datamodel): do not edit; change the code and run it again. -->\n\n")
	p("# Data model: the inbox table, measured\n\n")
	p("Seed 002's design note, generated: every access pattern of the README's table (\"Key design\") run\n")
	p("through the gateway's own code (store, service, templates, scheduler) against DynamoDB Local, with\n")
	p("`ReturnConsumedCapacity: INDEXES` on every call. `make test` fails when this file differs from a fresh\n")
	p("run, when a pattern Scans, or when a pattern's FilterExpression discards more than half of what it reads.\n\n")

	renderTable(p, res.Table)
	renderMethod(p, res.Calls)
	renderSummary(p, res.Calls)
	renderPatterns(p, res.Calls)
	renderPeak(p, res.Calls)
	renderInvariants(p)
	renderHotKeys(p)
	renderDeferred(p)
	renderChecks(p, Check(res.Calls))
	return b.Bytes()
}

type printer func(format string, args ...any)

func renderTable(p printer, t TableInfo) {
	p("## Table\n\n")
	p("As the store's CreateTable made it (read back with DescribeTable and DescribeTimeToLive):\n\n")
	p("| | |\n| --- | --- |\n")
	p("| keys | %s |\n", t.Keys)
	p("| billing | %s |\n", t.Billing)
	for _, g := range t.Indexes {
		p("| index %s | %s |\n", g.Name, g.Desc)
	}
	p("| stream | %s |\n", t.Stream)
	p("| TTL | %s |\n\n", t.TTL)
}

func renderMethod(p printer, calls []Call) {
	// The largest transaction measured, as the example of DynamoDB Local's figure.
	var big Call
	for _, c := range calls {
		if c.Op != "TransactWriteItems" || c.Err != "" {
			continue
		}
		// Ties broken by pattern and units, so the call order (concurrent calls) does not matter.
		if c.Items > big.Items || c.Items == big.Items && (c.Pattern < big.Pattern ||
			c.Pattern == big.Pattern && c.Total().WCU < big.Total().WCU) {
			big = c
		}
	}
	p("## How it was measured\n\n")
	p("- The data set: tenant `{t}`; user A's inbox holds %d notifications (one in %d in a group, 4 actors, one\n", readerCount, groupEvery)
	p("  target); user B's holds %d of type `%s` and %d of type `%s` (the type filter's case); a segment of\n", commonCount, commonType, rareCount, rareType)
	p("  %d members over the default 16 shards; a template with an email part; four users with an email address.\n", segmentSize)
	p("- Every id has a fixed length and the clock stands still, so every item, and so every measured unit, is the\n")
	p("  same on every run. Keys show what their parts stand for (`{user}`, `{ulid}`, `{shard}`, ...).\n")
	p("- Units are DynamoDB Local's: a read unit per 4 KB (half for an eventually consistent read), a write unit\n")
	p("  per 1 KB, per table and per index. Where it departs from DynamoDB's billing: a transaction, which DynamoDB\n")
	p("  charges 2 WCU per KB of each item, is reported lower (pattern %d's largest writes %d items for %s WCU), so\n",
		big.Pattern, big.Items, num(big.Total().WCU))
	p("  the peak figures below count a transaction at twice its measured units and at least 2 WCU an item; a read\n")
	p("  of an absent item reports 0, which DynamoDB charges as a small item's read; a write refused by its\n")
	p("  condition reports nothing, which DynamoDB charges (1 WCU an item).\n")
	p("- \"read → returned\" is a Query's ScannedCount → Count: what its FilterExpression discarded is the difference.\n\n")
}

// opsText is the operations of calls: "Query ×2, GetItem".
func opsText(calls []Call) string {
	var order []string
	n := map[string]int{}
	for _, c := range calls {
		if n[c.Op] == 0 {
			order = append(order, c.Op)
		}
		n[c.Op]++
	}
	sort.Strings(order)
	for i, op := range order {
		if n[op] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", op, n[op])
		}
	}
	return strings.Join(order, ", ")
}

func patternCalls(calls []Call, n int) []Call {
	var out []Call
	for _, c := range calls {
		if c.Pattern == n {
			out = append(out, c)
		}
	}
	return out
}

func renderSummary(p printer, calls []Call) {
	p("## Patterns at a glance\n\n")
	p("| # | pattern | calls | operations | RCU | WCU | filtered: read → returned |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, pt := range Patterns {
		cs := patternCalls(calls, pt.N)
		var u Units
		scanned, count, filtered := 0, 0, false
		for _, c := range cs {
			t := c.Total()
			u.RCU += t.RCU
			u.WCU += t.WCU
			if c.Filter != "" {
				filtered = true
				scanned += c.Scanned
				count += c.Count
			}
		}
		f := "—"
		if filtered {
			f = fmt.Sprintf("%d → %d", scanned, count)
		}
		p("| %d | %s | %d | %s | %s | %s | %s |\n", pt.N, pt.Name, len(cs), opsText(cs), num(u.RCU), num(u.WCU), f)
	}
	p("\n")
}

func renderPatterns(p printer, calls []Call) {
	p("## Every pattern's calls\n\n")
	p("Calls with the same operation, index, keys and filter are one row; units are per call (a range when the\n")
	p("calls differ; the table's and each index's share in brackets when both consumed some). \"index\" is the\n")
	p("index a Query read.\n\n")
	for _, pt := range Patterns {
		p("### %d. %s\n\n", pt.N, pt.Name)
		p("%s\n\n", pt.What)
		p("| calls | operation | index | key condition / keys | filter | read → returned | RCU per call | WCU per call |\n")
		p("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, g := range groups(calls, pt.N) {
			index, rr := "—", ""
			if g.op == "Query" || g.op == "Scan" {
				index = g.index
				if index == "" {
					index = "table"
				}
				s, c := 0, 0
				for _, x := range g.calls {
					s += x.Scanned
					c += x.Count
				}
				rr = fmt.Sprintf("%d → %d", s, c)
			}
			op := g.op
			if g.err != "" {
				op += " (refused: " + g.err + ")"
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", len(g.calls), op, index, cell(g.key), cell(g.filter), rr,
				unitsText(g.calls, true), unitsText(g.calls, false))
		}
		p("\n")
	}
}

func renderChecks(p printer, vs []Violation) {
	p("## Checks\n\n")
	if len(vs) == 0 {
		p("No pattern Scans; no pattern's FilterExpression discards more than half of what it reads.\n")
		return
	}
	p("These break seed 002's rules (`make test` fails on them):\n\n")
	for _, v := range vs {
		p("- %s\n", v)
	}
}
