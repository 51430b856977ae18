package tmpl

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Parse-time checks of Liquid expressions (the arguments of tags and outputs), on tokens
// as Liquid's own scanner makes them (its lexer is not exported).

// checkExpr refuses, in the Liquid expression src, a range whose bounds are integers
// written in it (possibly in parentheses) and that has more than MaxArrayItems items, and
// a property or an index of a range ((1..5).AsArray, ((a..b))[k]): the library answers
// them by building the range's whole array. It returns how many comparisons src makes
// (comparisons).
func checkExpr(src string) (int, error) {
	toks := scanExpr(src)
	type group struct{ open, dotdot int }
	var open []group
	rangeAt := map[int]int{} // the ")" ending a range (maybe in parentheses) → its "("
	for i, t := range toks {
		switch {
		case t.is("|") && i+1 < len(toks) && (toks[i+1].kind == tkIdent || toks[i+1].kind == tkKeyword):
			if name := strings.TrimSuffix(toks[i+1].text, ":"); !isFilter(name) {
				return 0, fmt.Errorf("undefined filter %q", name)
			}
		case t.is("("):
			open = append(open, group{i, -1})
		case t.kind == tkDotDot && len(open) > 0:
			open[len(open)-1].dotdot = i
		case t.is(")") && len(open) > 0:
			g := open[len(open)-1]
			open = open[:len(open)-1]
			inner, ok := rangeAt[i-1]
			if g.dotdot < 0 && (!ok || inner != g.open+1) {
				continue
			}
			rangeAt[i] = g.open
			text := src[toks[g.open].pos:t.end]
			if g.dotdot >= 0 {
				first, ok1 := intConstant(toks[g.open+1 : g.dotdot])
				last, ok2 := intConstant(toks[g.dotdot+1 : i])
				if _, err := rangeItems(first, last); ok1 && ok2 && err != nil {
					return 0, fmt.Errorf("the range %s has more than %d items", text, MaxArrayItems)
				}
			}
			if i+1 < len(toks) && (toks[i+1].kind == tkProperty || toks[i+1].is("[")) {
				return 0, fmt.Errorf("the range %s has no properties or items (%s): use a filter (first, last, size) or a loop", text, toks[i+1].text)
			}
		}
	}
	return comparisons(toks), nil
}

// comparisons counts the comparisons of an expression: contains, ==, !=, <, >, <=, >=.
// Each costs up to the size of its operands (a data array's items one by one), and the
// conditions of a block run with no check of the deadline in between (MaxComparisons).
func comparisons(toks []token) int {
	n := 0
	for i, t := range toks {
		switch {
		case t.kind == tkIdent && t.text == "contains":
			n++
		case isRelation(t) && (i == 0 || !isRelation(toks[i-1]) || toks[i-1].end != t.pos):
			// One operator of one or two characters.
			n++
		}
	}
	return n
}

// isRelation reports whether t is a character of a relation operator (==, <=, ...).
func isRelation(t token) bool { return t.kind == tkOther && strings.Contains("=!<>", t.text) }

// intConstant returns the integer toks write, if they are one integer literal in any
// number of parentheses.
func intConstant(toks []token) (int, bool) {
	for len(toks) >= 3 && toks[0].is("(") && toks[len(toks)-1].is(")") {
		toks = toks[1 : len(toks)-1]
	}
	if len(toks) != 1 || toks[0].kind != tkNumber {
		return 0, false
	}
	n, err := strconv.ParseInt(toks[0].text, 10, 0)
	return int(n), err == nil
}

// tokKind is the kind of a token of a Liquid expression.
type tokKind int

const (
	tkOther    tokKind = iota // one byte of punctuation: ( ) [ ] | , : = < > ...
	tkString                  // '...' or "..." (Liquid has no escapes)
	tkNumber                  // -?digits, with .digits for a float
	tkIdent                   // a name (variables, filters, and, or, in, true, ...)
	tkKeyword                 // a name and ':' (a filter or a modifier with parameters)
	tkProperty                // '.' and a name
	tkDotDot                  // ..
)

// token is a token of an expression: src[pos:end].
type token struct {
	kind     tokKind
	text     string
	pos, end int
}

func (t token) is(punct string) bool { return t.kind == tkOther && t.text == punct }

// scanExpr splits a Liquid expression into tokens as Liquid's scanner does
// (expressions/scanner.rl), as far as ranges, properties, modifiers and strings go.
func scanExpr(src string) []token {
	var toks []token
	digits := func(i int) int {
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		return i
	}
	name := func(i int) int {
		for i < len(src) && (isAlpha(src[i]) || src[i] >= '0' && src[i] <= '9' || src[i] == '-') {
			i++
		}
		if i < len(src) && src[i] == '?' {
			i++
		}
		return i
	}
	for i := 0; i < len(src); {
		c, start, kind := src[i], i, tkOther
		switch {
		case isASCIISpace(c):
			i++
			continue
		case c == '"' || c == '\'':
			kind, i = tkString, len(src)
			if j := strings.IndexByte(src[start+1:], c); j >= 0 {
				i = start + j + 2
			}
		case strings.HasPrefix(src[i:], ".."):
			kind, i = tkDotDot, i+2
		case c >= '0' && c <= '9' || c == '-' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			kind, i = tkNumber, digits(i+1)
			if i+1 < len(src) && src[i] == '.' && src[i+1] >= '0' && src[i+1] <= '9' {
				i = digits(i + 1)
			}
		case c == '.' && i+1 < len(src) && isAlpha(src[i+1]):
			kind, i = tkProperty, name(i+1)
		case isAlpha(c):
			kind, i = tkIdent, name(i+1)
			if i < len(src) && src[i] == ':' {
				kind, i = tkKeyword, i+1
			}
		default:
			i++
		}
		toks = append(toks, token{kind, src[start:i], start, i})
	}
	return toks
}

// isAlpha reports whether c starts a Liquid name.
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

// filterNames are the names of the filters a render has (boundedFilters), and the loops'
// own (loopItemsFilter).
var filterNames = sync.OnceValue(func() map[string]bool {
	names := map[string]bool{loopItemsFilter: true}
	for name := range boundedFilters() {
		names[name] = true
	}
	return names
})

// isFilter reports whether name is a filter a render knows: an unknown one is refused at
// the template's PUT (Liquid itself only finds it when a render reaches it, so a template
// with a misspelt filter was stored and failed every send).
func isFilter(name string) bool { return filterNames()[name] }
