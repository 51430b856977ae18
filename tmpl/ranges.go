package tmpl

import (
	"fmt"
	"strings"

	"github.com/osteele/liquid/expressions"
	"github.com/osteele/liquid/render"
	"github.com/osteele/liquid/values"

	"github.com/inboxgw/gateway/inbox"
)

// Ranges. Liquid's (a..b) is a values.Range: two ints, whose array is built whole by any
// filter that takes it (values.Convert calls Range.AsArray), by its AsArray property
// ({{ r.AsArray }}, {{ r[k] }} with k = "AsArray"), and whose length wraps around for
// bounds more than math.MaxInt apart; AsArray never ends when b is math.MaxInt. Every
// range has at most MaxArrayItems items, counted from its bounds before anything is built:
//   - at parse time (a template's PUT), a range whose bounds are integers written in the
//     template (checkExpr), and any property or index of a range;
//   - at render time, a range a filter takes (budget.filter), an assign stores (assignTag)
//     or a loop walks (loopItems, which boundedLoop puts at the end of every loop's
//     expression).

// rangeBounds returns the first and last items of r. values.Range keeps them unexported;
// its Len (last+1-first) may wrap around, but first+Len-1 is last in int's wrapping
// arithmetic whatever the bounds.
func rangeBounds(r values.Range) (first, last int) {
	first, _ = r.Index(0).(int)
	return first, first + r.Len() - 1
}

// rangeItems returns how many items the range first..last has (0 when last < first), or a
// budget error past MaxArrayItems, without overflow whatever the bounds.
func rangeItems(first, last int) (int, error) {
	if last < first {
		return 0, nil
	}
	// The unsigned difference of last >= first is exact, up to 2^64-1.
	if uint64(last)-uint64(first) >= MaxArrayItems {
		return 0, fmt.Errorf("%w: the range (%d..%d) has more than %d items", errBudget, first, last, MaxArrayItems)
	}
	return last - first + 1, nil
}

// rangeArray returns the items of r, or a budget error past MaxArrayItems before building
// anything. A reversed range is empty (Liquid's AsArray panicked).
func rangeArray(r values.Range) ([]any, error) {
	first, last := rangeBounds(r)
	n, err := rangeItems(first, last)
	if err != nil {
		return nil, err
	}
	a := make([]any, n)
	for i := range a {
		a[i] = first + i
	}
	return a, nil
}

// loopItemsFilter is the filter boundedLoop puts at the end of every loop's expression. It
// is not a name a template can write usefully: it only bounds a range.
const loopItemsFilter = "inbox_loop_items"

// loopRange is a bounded range a loop walks, an item at a time (the loop tags take any
// value with Len and Index).
type loopRange struct{ first, n int }

// Len is the number of items.
func (r loopRange) Len() int { return r.n }

// Index is the item i, 0 <= i < Len.
func (r loopRange) Index(i int) any { return r.first + i }

// loopItems is loopItemsFilter: a range of at most MaxArrayItems items becomes a
// loopRange (walked without building its array, and of its true length: a reversed range
// is empty, so the loop's else clause runs); a longer one is refused; anything else is
// the loop's as it is. Its refusal is a values.TypeError, which Liquid reports as it is
// (a filter's error would name this internal filter).
func loopItems(v any) any {
	r, ok := v.(values.Range)
	if !ok {
		return v
	}
	first, last := rangeBounds(r)
	n, err := rangeItems(first, last)
	if err != nil {
		panic(values.TypeError(err.Error()))
	}
	return loopRange{first, n}
}

// boundedLoop returns the loop n ({% for %} or {% tablerow %}) with loopItemsFilter at the
// end of its expression, n's body and clauses, and n's source (which errors quote). The
// loop tags compile their statement at parse time, so the node is parsed anew.
func (en *engine) boundedLoop(part string, n *render.BlockNode) (*render.BlockNode, error) {
	fail := func() error {
		return inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: the loop %s cannot be bounded", part, n.SourceLoc.LineNo, n.Source)
	}
	args, ok := loopArgs(n.Args)
	if !ok {
		return nil, fail()
	}
	// The statement must mean what n's meant, a filter added: same variable and modifiers.
	was, err1 := expressions.ParseStatement(expressions.LoopStatementSelector, n.Args)
	now, err2 := expressions.ParseStatement(expressions.LoopStatementSelector, args)
	if err1 != nil || err2 != nil || was.Loop.Variable != now.Loop.Variable || was.Loop.Reversed != now.Loop.Reversed ||
		(was.Loop.Limit == nil) != (now.Loop.Limit == nil) || (was.Loop.Offset == nil) != (now.Loop.Offset == nil) ||
		(was.Loop.Cols == nil) != (now.Loop.Cols == nil) {
		return nil, fail()
	}
	src := "{% " + n.Name + " " + args + " %}"
	for _, c := range n.Clauses {
		src += "{% " + c.Name + " " + c.Args + " %}"
	}
	src += "{% end" + n.Name + " %}"
	root, err := en.compile(src, n.SourceLoc.LineNo)
	if err != nil {
		return nil, fail()
	}
	l := firstNode[*render.BlockNode](root)
	if l == nil || len(l.Clauses) != len(n.Clauses) {
		return nil, fail()
	}
	// The compiled loop holds the clauses by pointer and renders the node's body as it is
	// at render time: both are n's.
	l.Token, l.Body = n.Token, n.Body
	for i, c := range l.Clauses {
		c.Body = n.Clauses[i].Body
	}
	return l, nil
}

// loopArgs returns the arguments of a loop tag ("i in EXPR MODIFIERS") with
// loopItemsFilter applied to EXPR: the filter goes before the first modifier (reversed,
// limit:, offset:, cols:), the first identifier or keyword that follows a complete operand
// outside any parentheses or brackets (a filter's name follows "|", its parameters ":" or
// ","). ok is false for arguments that are not of that shape.
func loopArgs(args string) (string, bool) {
	toks := scanExpr(args)
	if len(toks) < 3 || toks[0].kind != tkIdent || toks[1].kind != tkIdent || toks[1].text != "in" {
		return "", false
	}
	end, depth := len(args), 0
	for i := 2; i < len(toks); i++ {
		switch t := toks[i]; {
		case t.is("(") || t.is("["):
			depth++
		case t.is(")") || t.is("]"):
			depth--
		case depth == 0 && i > 2 && (t.kind == tkIdent || t.kind == tkKeyword) && endsOperand(toks[i-1]):
			end = t.pos
			i = len(toks)
		}
	}
	return strings.TrimRight(args[:end], " \t\r\n") + " | " + loopItemsFilter + " " + args[end:], true
}

// endsOperand reports whether t can end an operand (a literal, a variable, a property, a
// filter's name, a closing parenthesis or bracket).
func endsOperand(t token) bool {
	switch t.kind {
	case tkString, tkNumber, tkIdent, tkProperty:
		return true
	}
	return t.is(")") || t.is("]")
}
