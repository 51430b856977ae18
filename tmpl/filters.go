package tmpl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/osteele/liquid/filters"
	"github.com/osteele/liquid/values"
	"github.com/osteele/tuesday"

	"github.com/inboxgw/gateway/inbox"
)

// checkValue refuses a string over MaxValueBytes and an array or object (a map) that holds,
// nested arrays and objects included, more than MaxValueBytes bytes of strings (object
// keys counted) or more than MaxArrayItems items and entries in all. Every reference
// counts: an array of 65 536 references to one string of 256 KiB holds 16 GiB of text
// once a filter converts it (json, upcase, join, ...; Liquid converts a filter's
// arguments before the filter runs) or a comparison walks it, though it takes 4 MiB of
// memory. The walk stops as soon as a bound is passed, so it costs at most MaxArrayItems
// steps whatever the value; nothing is converted.
func checkValue(v any) error {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		if len(v) > MaxValueBytes {
			return errTooLong()
		}
		return nil
	case []byte:
		if len(v) > MaxValueBytes {
			return errTooLong()
		}
		return nil
	}
	s := valueSize{bytes: MaxValueBytes, items: MaxArrayItems}
	s.add(v)
	switch {
	case s.bytes < 0:
		return errTooLong()
	case s.items < 0:
		return errTooMany()
	}
	return nil
}

// valueSize is what a value may still hold while checkValue walks it: bytes of strings and
// items (array items, object entries). Either is negative once the value holds more.
type valueSize struct{ bytes, items int }

// over reports whether a bound is passed.
func (s *valueSize) over() bool { return s.bytes < 0 || s.items < 0 }

// add charges v, its nested arrays and objects included, and stops at the first bound
// passed. The types of a render's values (a send's data, Liquid's literals, our filters'
// results) are walked without reflection; any other slice, array or map with it. Other
// values (numbers, booleans, times) hold no string.
func (s *valueSize) add(v any) {
	switch v := v.(type) {
	case nil, bool, int, int64, float64:
	case string:
		s.bytes -= len(v)
	case []byte:
		s.bytes -= len(v)
	case []any:
		for _, item := range v {
			if s.items--; s.over() {
				return
			}
			s.add(item)
		}
	case []string:
		for _, item := range v {
			if s.items, s.bytes = s.items-1, s.bytes-len(item); s.over() {
				return
			}
		}
	case map[string]any:
		for k, item := range v {
			if s.items, s.bytes = s.items-1, s.bytes-len(k); s.over() {
				return
			}
			s.add(item)
		}
	default:
		s.addReflect(reflect.ValueOf(v))
	}
}

// addReflect is add for a value of any other type.
func (s *valueSize) addReflect(rv reflect.Value) {
	switch rv.Kind() {
	case reflect.String:
		s.bytes -= rv.Len()
	case reflect.Interface, reflect.Pointer:
		if !rv.IsNil() {
			s.addReflect(rv.Elem())
		}
	case reflect.Slice, reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			s.bytes -= rv.Len()
			return
		}
		for i := 0; i < rv.Len(); i++ {
			if s.items--; s.over() {
				return
			}
			s.addReflect(rv.Index(i))
		}
	case reflect.Map:
		for it := rv.MapRange(); it.Next(); {
			if s.items--; s.over() {
				return
			}
			s.addReflect(it.Key())
			s.addReflect(it.Value())
		}
	}
}

// errTooLong is the error of a value over MaxValueBytes (a string, or the strings an array
// or object holds).
func errTooLong() error {
	return fmt.Errorf("%w: a value over %d bytes", errBudget, MaxValueBytes)
}

// errTooMany is the error of an array over MaxArrayItems items (nested ones counted).
func errTooMany() error {
	return fmt.Errorf("%w: an array over %d items", errBudget, MaxArrayItems)
}

func boundedString(s string) (string, error) {
	if err := checkValue(s); err != nil {
		return "", err
	}
	return s, nil
}

// filterSet collects filters by name (it is a filters.FilterDictionary).
type filterSet map[string]any

// AddFilter adds or replaces the filter name.
func (s filterSet) AddFilter(name string, fn any) { s[name] = fn }

// boundedFilters returns the filters of every render by name: Liquid's standard ones,
// ours replacing those of Liquid's where a result can be much larger than its input
// (append, prepend, replace, join, concat, split, ...) or take more than linear time (uniq
// compares arrays pairwise, truncate and truncatewords compile a regular expression of
// their arguments), and raw and the nil-preserving escapes of the channels' escapings (escapeFilter). A render calls
// them through budget.filter.
func boundedFilters() map[string]reflect.Value {
	fs := filterSet{}
	filters.AddStandardFilters(fs)
	fs.AddFilter("append", func(s, suffix string) (string, error) {
		if len(s)+len(suffix) > MaxValueBytes {
			return "", errTooLong()
		}
		return s + suffix, nil
	})
	fs.AddFilter("prepend", func(s, prefix string) (string, error) {
		if len(s)+len(prefix) > MaxValueBytes {
			return "", errTooLong()
		}
		return prefix + s, nil
	})
	fs.AddFilter("replace", func(s, old, n string) (string, error) {
		if len(n) > len(old) && len(s)+strings.Count(s, old)*(len(n)-len(old)) > MaxValueBytes {
			return "", errTooLong()
		}
		return strings.ReplaceAll(s, old, n), nil
	})
	fs.AddFilter("replace_first", func(s, old, n string) (string, error) {
		return boundedString(strings.Replace(s, old, n, 1))
	})
	fs.AddFilter("join", func(a []any, sep func(string) string) (string, error) {
		s := sep(" ")
		ss := make([]string, 0, len(a))
		total := 0
		for _, v := range a {
			if v != nil {
				ss = append(ss, fmt.Sprint(v))
				total += len(ss[len(ss)-1]) + len(s)
				if total > MaxValueBytes+len(s) {
					return "", errTooLong()
				}
			}
		}
		return strings.Join(ss, s), nil
	})
	fs.AddFilter("concat", func(a, b []any) ([]any, error) {
		if len(a)+len(b) > MaxArrayItems {
			return nil, errTooMany()
		}
		return append(append(make([]any, 0, len(a)+len(b)), a...), b...), nil
	})
	fs.AddFilter("split", splitFilter)
	fs.AddFilter("uniq", uniqFilter)
	fs.AddFilter("truncate", truncateFilter)
	fs.AddFilter("truncatewords", truncateWordsFilter)
	for _, e := range inbox.Escapings() {
		fs.AddFilter(e.Filter, escapeFilter(e.Func))
	}
	fs.AddFilter("newline_to_br", func(s string) (string, error) {
		return boundedString(strings.ReplaceAll(s, "\n", "<br />"))
	})
	fs.AddFilter("url_encode", func(s string) (string, error) {
		return boundedString(url.QueryEscape(s))
	})
	jsonFilter := func(v any) (string, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		return boundedString(string(b))
	}
	fs.AddFilter("json", jsonFilter)
	fs.AddFilter("inspect", jsonFilter)
	// date is Liquid's (strftime through tuesday) with each directive's width bounded
	// first: tuesday hands "%0999999d" to fmt, which pads it to a million bytes, so a
	// format of a hundred such directives allocated about 1 GiB before any check.
	fs.AddFilter("date", func(t time.Time, format func(string) string) (string, error) {
		f := format("%a, %b %d, %y")
		if err := checkStrftimeWidths(f); err != nil {
			return "", err
		}
		return tuesday.Strftime(f, t)
	})
	fs.AddFilter("slice", sliceFilter)
	// divided_by of two integers is integer division (Liquid's own, which it delegates to
	// for anything else), except MinInt64 / -1, which wrapped around to MinInt64.
	divided := reflect.ValueOf(fs["divided_by"])
	fs.AddFilter("divided_by", func(a, b any) (any, error) {
		if ia, aInt := toInt(a); aInt && a != nil {
			if ib, bInt := toInt(b); bInt && b != nil && ia == math.MinInt64 && ib == -1 {
				return -float64(ia), nil
			}
		}
		return values.Call(divided, []any{a, b})
	})
	fs.AddFilter("plus", func(a, b any) (any, error) { return arith('+', a, b) })
	fs.AddFilter("minus", func(a, b any) (any, error) { return arith('-', a, b) })
	fs.AddFilter("times", func(a, b any) (any, error) { return arith('*', a, b) })
	fs.AddFilter("modulo", func(a, b any) (any, error) { return arith('%', a, b) })
	// raw marks an output of an escaping part (inbox.Escaping) not to be escaped (prepare).
	fs.AddFilter("raw", func(v any) any { return v })
	out := make(map[string]reflect.Value, len(fs))
	for name, fn := range fs {
		out[name] = reflect.ValueOf(fn)
	}
	return out
}

// filter returns the filter fn bound to b. It takes its input and arguments as they come
// (Liquid would convert them to fn's parameter types first, building the whole array of a
// range: a range of 10^7 items cost hundreds of MiB, one ending at math.MaxInt never
// ended) and, before calling fn as Liquid would (values.Call: conversions, defaults of
// optional parameters, errors), checks b's deadline, turns a range into its array only if
// it has at most MaxArrayItems items (rangeArray) and refuses any other value past the
// bounds of checkValue; it refuses a result past them too.
func (b *budget) filter(fn reflect.Value) func(any, ...any) (any, error) {
	return func(in any, params ...any) (any, error) {
		if err := b.clock(); err != nil {
			return nil, err
		}
		args := make([]any, 0, 1+len(params))
		for _, v := range append([]any{in}, params...) {
			if r, ok := v.(values.Range); ok {
				arr, err := rangeArray(r)
				if err != nil {
					return nil, err
				}
				v = arr
			} else if err := checkValue(v); err != nil {
				return nil, err
			}
			args = append(args, v)
		}
		out, err := values.Call(fn, args)
		if err != nil {
			return nil, err
		}
		if err := checkValue(out); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// escapeFilter returns the filter of an inbox.Escaping whose Func is escape: it escapes
// text, and keeps nil nil so that an undefined variable stays an error in strict mode
// even behind the automatic escape of an escaping part. Numbers and booleans need no
// escaping and keep their type.
func escapeFilter(escape func(string) string) func(any) (any, error) {
	return func(v any) (any, error) {
		switch v := v.(type) {
		case nil:
			return nil, nil
		case string:
			return boundedString(escape(v))
		case int, int64, float64, bool:
			return v, nil
		default:
			return boundedString(escape(fmt.Sprint(v)))
		}
	}
}

// spaceRE is what split: " " splits on (as Liquid's own filter).
var spaceRE = regexp.MustCompile(`[[:space:]]+`)

// splitFilter is Liquid's split (on " ": on runs of white space; trailing empty items
// dropped), counting the items before it makes them: more than MaxArrayItems is refused.
func splitFilter(s, sep string) ([]string, error) {
	var n int
	switch sep {
	case "":
		n = utf8.RuneCountInString(s)
	case " ":
		n = 1
		for i := 0; i < len(s); i++ {
			if isASCIISpace(s[i]) && (i == 0 || !isASCIISpace(s[i-1])) {
				n++
			}
		}
	default:
		n = strings.Count(s, sep) + 1
	}
	if n > MaxArrayItems {
		return nil, errTooMany()
	}
	var out []string
	if sep == " " {
		out = spaceRE.Split(s, -1)
	} else {
		out = strings.Split(s, sep)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out, nil
}

// isASCIISpace reports whether c is in [[:space:]].
func isASCIISpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// uniqKey stands for an item of uniq that is not comparable (an array or an object of the
// data): its JSON (objects' keys sorted; Go syntax if it has none), in a type of its own
// so that it equals no string item.
type uniqKey struct{ s string }

// uniqFilter is Liquid's uniq in linear time: Liquid's own compares every array or object
// item with every item kept (20 000 distinct ones cost minutes).
func uniqFilter(a []any) []any {
	seen := make(map[any]bool, len(a))
	out := make([]any, 0, len(a))
	for _, item := range a {
		var k any = item
		if item != nil && !reflect.TypeOf(item).Comparable() {
			b, err := json.Marshal(item)
			if err != nil {
				b = fmt.Appendf(nil, "%#v", item)
			}
			k = uniqKey{string(b)}
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, item)
		}
	}
	return out
}

// truncateFilter is Liquid's truncate (Shopify's meaning: a string of more than length
// characters becomes its first length-len(ellipsis) characters and the ellipsis, "..."
// by default), in linear time: Liquid's own compiles a regular expression of length,
// which panics past 1000 and does not count line breaks.
func truncateFilter(s string, length func(int) int, ellipsis func(string) string) string {
	n, el := length(50), ellipsis("...")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return firstRunes(s, n-utf8.RuneCountInString(el)) + el
}

// truncateWordsFilter is Liquid's truncatewords (Shopify's meaning: a string of more than
// n words, at least 1, becomes its first n words joined by spaces and the ellipsis), in
// linear time: Liquid's own matches ^(?:\s*\S+){n}, which takes seconds on a long word.
func truncateWordsFilter(s string, length func(int) int, ellipsis func(string) string) string {
	n, el := max(length(15), 1), ellipsis("...")
	var words []string
	rest := s
	for len(words) <= n {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			return s
		}
		end := strings.IndexFunc(rest, unicode.IsSpace)
		if end < 0 {
			end = len(rest)
		}
		words = append(words, rest[:end])
		rest = rest[end:]
	}
	return strings.Join(words[:n], " ") + el
}

// firstRunes returns the first n runes of s (none for n <= 0).
func firstRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// arith is plus, minus, times and modulo as Shopify's Liquid computes them: integers when
// both operands are integers (Go integer kinds, or strings that parse as one), so that
// `{% assign m = n | minus: 1 %}{% for i in (1..m) %}` has an int bound (Liquid's own
// filters answer float64, which a range refuses: "can't convert float64 to type int");
// float64 otherwise, and on an integer result that would overflow int64. Errors: an
// operand that is not a number (nil counts as 0, as in Liquid), modulo by zero.
func arith(op byte, a, b any) (any, error) {
	ia, aInt := toInt(a)
	ib, bInt := toInt(b)
	if aInt && bInt {
		switch op {
		case '+':
			if r := ia + ib; (r > ia) == (ib > 0) {
				return int(r), nil
			}
		case '-':
			if r := ia - ib; (r < ia) == (ib > 0) {
				return int(r), nil
			}
		case '*':
			if ia == 0 || ib == 0 {
				return 0, nil
			}
			if r := ia * ib; r/ib == ia && !(ia == -1 && ib == math.MinInt64) && !(ib == -1 && ia == math.MinInt64) {
				return int(r), nil
			}
		case '%':
			if ib == 0 {
				return nil, errors.New("modulo by zero")
			}
			if ib == -1 {
				return 0, nil
			}
			return int(ia % ib), nil
		}
	}
	fa, err := toFloat(a)
	if err != nil {
		return nil, err
	}
	fb, err := toFloat(b)
	if err != nil {
		return nil, err
	}
	switch op {
	case '+':
		return fa + fb, nil
	case '-':
		return fa - fb, nil
	case '*':
		return fa * fb, nil
	}
	if fb == 0 {
		return nil, errors.New("modulo by zero")
	}
	return math.Mod(fa, fb), nil
}

// toInt returns v as an int64 when it is an integer: a Go integer kind (a uint above
// MaxInt64 is not), or a string that parses as a base-10 int64.
func toInt(v any) (int64, bool) {
	switch v := v.(type) {
	case nil:
		return 0, true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
	}
	return 0, false
}

// toFloat returns v as a float64: any Go number, or a string that parses as one.
func toFloat(v any) (float64, error) {
	if s, ok := v.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	}
	return 0, fmt.Errorf("%v is not a number", v)
}

// MaxStrftimeWidth is the widest padding a date directive may ask for (%010d is 10).
const MaxStrftimeWidth = 64

// checkStrftimeWidths refuses a strftime format with a directive wider than
// MaxStrftimeWidth: %, then flags (-_0^#:), then a width of digits.
func checkStrftimeWidths(f string) error {
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("-_0^#:", f[j]) >= 0 {
			j++
		}
		k := j
		for k < len(f) && f[k] >= '0' && f[k] <= '9' {
			k++
		}
		if k > j {
			if w, err := strconv.Atoi(f[j:k]); err != nil || w > MaxStrftimeWidth {
				return fmt.Errorf("the date format's width %s is over %d", f[j:k], MaxStrftimeWidth)
			}
		}
		i = k - 1
	}
	return nil
}

// sliceFilter is Liquid's slice of a string (runes from start, negative from the end, n of
// them; n defaults to 1) without its overflow: start + n past MaxInt wrapped around and
// panicked ("slice bounds out of range").
func sliceFilter(s string, start int, length func(int) int) string {
	rs := []rune(s)
	n := length(1)
	if start < 0 {
		start += len(rs)
	}
	if start < 0 || start >= len(rs) || n <= 0 {
		return ""
	}
	return string(rs[start : start+min(n, len(rs)-start)])
}
