package tmpl

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/osteele/liquid/expressions"
	"github.com/osteele/liquid/parser"
	"github.com/osteele/liquid/render"
	"github.com/osteele/liquid/tags"
	"github.com/osteele/liquid/values"

	"github.com/inboxgw/gateway/inbox"
)

// Limits of one template part (a title, a body, an email's HTML, ...) and of one render.
const (
	// MaxPartBytes is the largest source of one part, in bytes (store.MaxTemplatePartBytes
	// bounds what is stored; this is the same figure).
	MaxPartBytes = 64 << 10
	// MaxOutputBytes is the most one render of one part may write, in bytes; more is
	// BAD_USER_INPUT.
	MaxOutputBytes = 256 << 10
	// MaxValueBytes bounds every string a filter takes or produces, an assign stores or a
	// capture produces, and the bytes of strings (object keys included) an array or object
	// a filter takes or produces or an assign stores holds in all, nested ones included and
	// each reference counted (checkValue), so no expression can grow memory without bound
	// before anything is written and no variable, filter argument or comparison operand
	// is more than this much text.
	MaxValueBytes = 256 << 10
	// MaxArrayItems bounds every array a filter takes or produces or an assign stores (its
	// items and those of the arrays and objects it holds, in all), and
	// every range ((a..b), wherever it is written: a loop, an assign, a filter's input or
	// parameter), counted from its bounds before any item is made. A range written with
	// integer bounds over it is refused when the template is put.
	MaxArrayItems = 100_000
	// MaxIterations is the most loop iterations ({% for %}, {% tablerow %}) one render of
	// one part may run, nested loops counted by their innermost iterations.
	MaxIterations = 100_000
	// MaxClauses is the most clauses (elsif, when, else) of one block: their conditions
	// are evaluated one after the other with no check of the deadline in between.
	MaxClauses = 64
	// MaxComparisons is the most comparisons (contains, ==, !=, <, >, <=, >=; each value
	// of a when) of one output, tag, or block with its clauses: each costs up to the size
	// of its operands (MaxArrayItems items), with no check of the deadline in between.
	MaxComparisons = 64
	// MaxExprTokens is the most tokens of one tag's or output's expression, checked before
	// Liquid parses it: the library's grammar copies a list at each of its commas (a when or
	// a cycle of 32,000 values, 64 KiB of source, took gigabytes to parse).
	MaxExprTokens = 512
	// MaxMarkups is the most tags and outputs of one part, checked before Liquid parses it
	// (each output of an HTML part is compiled twice, to escape it: 13,000 {{1}} cost 337 MiB
	// and a second to parse).
	MaxMarkups = 4_000
	// RenderTimeout bounds one render of a template: all of its parts, which share the
	// budget (MaxIterations too). It is checked at every loop iteration, write, assign,
	// filter and block, so one single filter or operator (its values bounded by
	// MaxValueBytes and MaxArrayItems) is never cut short.
	RenderTimeout = time.Second
	// PinTimeout bounds Pin's check of a template: the renders of all of its locales
	// together (each within RenderTimeout too), so an accept costs at most this much
	// rendering however many locales the template has.
	PinTimeout = 3 * time.Second
)

// budgetKey is the binding that carries a render's budget to the engine's own tags. It is
// not a Liquid identifier, so no template can name it.
const budgetKey = " budget"

// captureBlock replaces every {% capture %} of a parsed template (Liquid's own renders into
// an unbounded buffer, and the engine cannot redefine it): same syntax and meaning.
const captureBlock = "inbox_capture"

// tickTag is the tag put at the start of every loop body to charge an iteration to the
// render's budget. A template that writes it itself only charges one more iteration.
const tickTag = "inbox_loop_tick"

// clockTag is the tag put before every block that is not a loop (if, unless, case) to
// check the render's deadline; harmless where a template writes it itself.
const clockTag = "inbox_clock"

// errBudget is the cause of every render error a budget ends.
var errBudget = errors.New("render budget exceeded")

// budget is the state of one render of one template (all of its parts): loop iterations
// run, the deadline and the configuration the render runs with (config).
type budget struct {
	iterations int
	deadline   time.Time
	// now reads the clock the deadline is checked against (nil: time.Now; a test's
	// engine may advance a virtual clock at each check instead: engine.now).
	now func() time.Time
	cfg *render.Config
}

// config returns en's configuration with en's filters bound to b (filter), made on the
// first call. Liquid calls a filter with its arguments only, so a filter can check a
// render's deadline only if it is that render's own: a chain of filters in one expression
// ({{ items | sort | sort | ... }}, thousands in a part) or in a condition, which writes
// nothing, would otherwise run on past the deadline for minutes.
func (b *budget) config(en *engine) render.Config {
	if b.cfg == nil {
		cfg := en.cfg // no filters: AddFilter makes the copy a map of its own
		for name, fn := range en.filters {
			cfg.AddFilter(name, b.filter(fn))
		}
		cfg.AddFilter(loopItemsFilter, loopItems)
		b.cfg = &cfg
	}
	return *b.cfg
}

func (b *budget) tick() error {
	b.iterations++
	if b.iterations > MaxIterations {
		return fmt.Errorf("%w: more than %d loop iterations", errBudget, MaxIterations)
	}
	return b.clock()
}

func (b *budget) clock() error {
	now := time.Now
	if b.now != nil {
		now = b.now
	}
	if now().After(b.deadline) {
		return fmt.Errorf("%w: rendering took longer than %v", errBudget, RenderTimeout)
	}
	return nil
}

// boundedWriter collects at most max bytes; a write past them, or past the deadline, fails.
type boundedWriter struct {
	buf strings.Builder
	max int
	b   *budget
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, fmt.Errorf("%w: output over %d bytes", errBudget, w.max)
	}
	if err := w.b.clock(); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// engine is the Liquid engine every template is parsed with: strict variables, no file
// includes, bounded filters, loops that charge the render's budget. It is Liquid's own
// configuration (render.Config) without its Engine, whose filters are one set for every
// render: ours are bound to each render's budget (budget.config).
type engine struct {
	// cfg has the tags and blocks, and no filter: a copy of it gets a filter set of its
	// own (budget.config).
	cfg render.Config
	// filters are the filters (boundedFilters), by name.
	filters map[string]reflect.Value
	// tick and clock are the nodes of tickTag and clockTag.
	tick, clock *render.TagNode
	// now is the clock of this engine's renders (nil: time.Now); tests set a virtual one,
	// so that what they tell apart (a render that stops at its deadline from one that
	// does not) never depends on how fast this machine is at the moment.
	now func() time.Time
}

// newBudget is a render's budget that ends RenderTimeout from now on en's clock.
func (en *engine) newBudget() *budget {
	return en.budgetUntil(en.clockNow().Add(RenderTimeout))
}

// budgetUntil is a render's budget that ends at deadline on en's clock.
func (en *engine) budgetUntil(deadline time.Time) *budget {
	return &budget{deadline: deadline, now: en.now}
}

// clockNow is the time on en's clock.
func (en *engine) clockNow() time.Time {
	if en.now != nil {
		return en.now()
	}
	return time.Now()
}

// includeTags are the tags that read other templates (files): refused at parse time.
var includeTags = map[string]bool{"include": true, "render": true}

func newEngine() *engine {
	en := &engine{cfg: render.NewConfig(), filters: boundedFilters()}
	tags.AddStandardTags(en.cfg)
	en.cfg.StrictVariables = true
	en.addTag(tickTag, func(b *budget) error { return b.tick() })
	en.addTag(clockTag, func(b *budget) error { return b.clock() })
	// include parses, so that prepare refuses it with its own message.
	en.cfg.AddTag("include", func(string) (func(io.Writer, render.Context) error, error) {
		return func(io.Writer, render.Context) error { return errors.New("include is not supported") }, nil
	})
	en.cfg.AddTag("assign", assignTag)
	en.cfg.AddBlock(captureBlock).Renderer(captureTag)
	en.tick = en.tagNode(tickTag)
	en.clock = en.tagNode(clockTag)
	return en
}

// addTag adds the tag name, which runs fn with the render's budget.
func (en *engine) addTag(name string, fn func(*budget) error) {
	en.cfg.AddTag(name, func(string) (func(io.Writer, render.Context) error, error) {
		return func(_ io.Writer, ctx render.Context) error {
			if b, ok := ctx.Get(budgetKey).(*budget); ok {
				return fn(b)
			}
			return nil
		}, nil
	})
}

// tagNode returns the node of {% name %}.
func (en *engine) tagNode(name string) *render.TagNode {
	root, err := en.compile("{% "+name+" %}", 1)
	if err != nil {
		panic(fmt.Sprintf("tmpl: the tag %s does not parse: %v", name, err))
	}
	n := firstNode[*render.TagNode](root)
	if n == nil {
		panic("tmpl: the tag " + name + " has no tag node")
	}
	return n
}

// compile parses src, whose first line is line. Before Liquid parses anything it counts
// src's tags and outputs (at most MaxMarkups) and the tokens of each one's expression (at
// most MaxExprTokens), so a parse costs time and memory linear in a bounded source; a
// panic of the library's parser (its number literals: {{ 99999999999999999999 }}) is an
// error, not a dropped connection or a dead worker.
func (en *engine) compile(src string, line int) (root render.Node, err error) {
	loc := parser.SourceLoc{LineNo: line}
	markups := 0
	for _, tok := range parser.Scan(src, loc, nil) {
		if tok.Type != parser.TagTokenType && tok.Type != parser.ObjTokenType {
			continue
		}
		if markups++; markups > MaxMarkups {
			return nil, fmt.Errorf("more than %d tags and outputs", MaxMarkups)
		}
		if n := len(scanExpr(tok.Args)); n > MaxExprTokens {
			return nil, fmt.Errorf("line %d: more than %d tokens in %.40s", tok.SourceLoc.LineNo, MaxExprTokens, tok.Source)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return en.cfg.Compile(src, loc)
}

// assignTag is Liquid's assign with its value bounded (MaxValueBytes, MaxArrayItems) and
// the render's clock checked (an assign writes nothing, so no write checks it).
func assignTag(args string) (func(io.Writer, render.Context) error, error) {
	stmt, err := expressions.ParseStatement(expressions.AssignStatementSelector, args)
	if err != nil {
		return nil, err
	}
	return func(_ io.Writer, ctx render.Context) error {
		v, err := ctx.Evaluate(stmt.Assignment.ValueFn)
		if err != nil {
			return err
		}
		// A range is stored as its array: a variable holding a values.Range would answer
		// .AsArray (or [k], k = "AsArray") by building it whole, whatever its size.
		if r, ok := v.(values.Range); ok {
			if v, err = rangeArray(r); err != nil {
				return err
			}
		}
		if err := checkValue(v); err != nil {
			return err
		}
		if b, ok := ctx.Get(budgetKey).(*budget); ok {
			if err := b.clock(); err != nil {
				return err
			}
		}
		ctx.Set(stmt.Assignment.Variable, v)
		return nil
	}, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][\w-]*$`)

// captureTag is Liquid's capture, rendering its body into a bounded buffer.
func captureTag(_ io.Writer, ctx render.Context) error {
	name := strings.TrimSpace(ctx.TagArgs())
	if !identRE.MatchString(name) {
		return errors.New("capture needs a variable name")
	}
	b, _ := ctx.Get(budgetKey).(*budget)
	if b == nil {
		b = &budget{deadline: time.Now().Add(RenderTimeout)}
	}
	w := &boundedWriter{max: MaxValueBytes, b: b}
	if err := ctx.RenderChildren(w); err != nil {
		return err
	}
	ctx.Set(name, w.buf.String())
	return nil
}

// compiled is one parsed part.
type compiled struct {
	en   *engine
	root render.Node
}

// parse parses src as the part named part (for messages), its outputs escaped as esc
// says (see prepare). The error is BAD_USER_INPUT with the line.
func (en *engine) parse(part, src string, esc *inbox.Escaping) (*compiled, error) {
	if len(src) > MaxPartBytes {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s is over %d bytes", part, MaxPartBytes)
	}
	root, err := en.compile(src, 1)
	if err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s does not parse: %s", part, sourceMessage(err))
	}
	if root, err = en.prepare(part, root, esc); err != nil {
		return nil, err
	}
	return &compiled{en: en, root: root}, nil
}

// prepare walks the tree n and returns it prepared: it refuses include tags, ranges over
// MaxArrayItems items written with integer bounds and properties of ranges (checkExpr),
// blocks of more than MaxClauses clauses; it bounds the range of every loop (boundedLoop)
// and puts the tick first in its body, puts the clock before every other block (a
// condition writes nothing, so no write checks its time) and, in parts with an escaping
// (esc: a field with an inbox.Escaping, as an email's HTML), escapes every output the
// author did not end with raw or an escape of the same kind (escapings).
func (en *engine) prepare(part string, n render.Node, esc *inbox.Escaping) (render.Node, error) {
	var how escaping
	escapes := esc != nil
	if escapes {
		var known bool
		if how, known = escapings[esc.Filter]; !known {
			return nil, fmt.Errorf("tmpl: part %s has an escaping %q this engine does not know", part, esc.Filter)
		}
	}
	// check checks the expressions of n (a tag, an output, a block and its clauses).
	check := func(n render.Node, total int, args ...string) error {
		line := n.SourceLocation().LineNo
		for _, a := range args {
			c, err := checkExpr(a)
			if err != nil {
				return inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: %s", part, line, err)
			}
			total += c
		}
		if total > MaxComparisons {
			return inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: more than %d comparisons in %.80s", part, line, MaxComparisons, n.SourceText())
		}
		return nil
	}
	var walk func(nodes []render.Node) ([]render.Node, error)
	// walk prepares nodes in place: each node is replaced by exactly one (a block with
	// its clock is one sequence), written into nodes' own array. Liquid compiled the
	// tags before this walk, and an if or unless keeps a copy of its block whose body is
	// the same array: a new slice would leave those bodies as parsed (their outputs not
	// escaped, their loops not bounded).
	walk = func(nodes []render.Node) ([]render.Node, error) {
		out := nodes[:0]
		for _, n := range nodes {
			var err error
			switch n := n.(type) {
			case *render.SeqNode:
				if n.Children, err = walk(n.Children); err != nil {
					return nil, err
				}
				out = append(out, n)
			case *render.TagNode:
				if includeTags[n.Name] {
					return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: {%% %s %%} is not supported (templates cannot include others)", part, n.SourceLoc.LineNo, n.Name)
				}
				if err := check(n, 0, n.Args); err != nil {
					return nil, err
				}
				out = append(out, n)
			case *render.ObjectNode:
				if err := check(n, 0, n.Args); err != nil {
					return nil, err
				}
				if escapes && !how.asWritten.MatchString(n.Args) {
					esc, err := en.escaped(part, n, how.filter)
					if err != nil {
						return nil, err
					}
					out = append(out, esc)
				} else {
					out = append(out, n)
				}
			case *render.BlockNode:
				if len(n.Clauses) > MaxClauses {
					return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: {%% %s %%} has more than %d clauses", part, n.SourceLoc.LineNo, n.Name, MaxClauses)
				}
				// The conditions of a block and of its clauses run one after the other.
				args, whens := []string{n.Args}, 0
				for _, c := range n.Clauses {
					args = append(args, c.Args)
					if c.Name == "when" {
						// Each value of a when is compared with the case's.
						whens += 1 + strings.Count(c.Args, ",")
					}
				}
				if err := check(n, whens, args...); err != nil {
					return nil, err
				}
				if n.Body, err = walk(n.Body); err != nil {
					return nil, err
				}
				for _, c := range n.Clauses {
					if c.Body, err = walk(c.Body); err != nil {
						return nil, err
					}
				}
				switch n.Name {
				case "for", "tablerow":
					l, err := en.boundedLoop(part, n)
					if err != nil {
						return nil, err
					}
					l.Body = append([]render.Node{en.tick}, l.Body...)
					out = append(out, l)
				case "capture":
					c, err := en.boundedCapture(part, n)
					if err != nil {
						return nil, err
					}
					out = append(out, c)
				default:
					// The clock's errors quote the block.
					clock := *en.clock
					clock.Token = n.Token
					out = append(out, &render.SeqNode{Children: []render.Node{&clock, n}})
				}
			default:
				out = append(out, n)
			}
		}
		return out, nil
	}
	nodes, err := walk([]render.Node{n})
	if err != nil {
		return nil, err
	}
	if len(nodes) == 1 {
		return nodes[0], nil
	}
	return &render.SeqNode{Children: nodes}, nil
}

// boundedCapture returns a captureBlock node with the body of n, a {% capture %}.
func (en *engine) boundedCapture(part string, n *render.BlockNode) (render.Node, error) {
	if !identRE.MatchString(strings.TrimSpace(n.Args)) {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: capture needs a variable name", part, n.SourceLoc.LineNo)
	}
	src := "{% " + captureBlock + " " + n.Args + " %}{% end" + captureBlock + " %}"
	root, err := en.compile(src, n.SourceLoc.LineNo)
	if err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s does not parse: %s", part, sourceMessage(err))
	}
	c := firstNode[*render.BlockNode](root)
	if c == nil {
		return nil, fmt.Errorf("tmpl: %s has no block node", src)
	}
	c.Body = n.Body
	return c, nil
}

// escaping is how a part of one inbox.Escaping escapes its outputs: filter is appended
// to each output's expression, unless asWritten matches the expression (its last filter
// is raw, the escaping's own or one of its AsWritten).
type escaping struct {
	filter    string
	asWritten *regexp.Regexp
}

// autoEscape ends the source of an output that filter escapes automatically; messages
// show the output as written (sourceMessage).
func autoEscape(filter string) string { return "|" + filter + "}}" }

// escapings are the engine's escapings, by filter name: one per escaping of the
// registered channels' fields (inbox.Escapings).
var escapings = func() map[string]escaping {
	out := map[string]escaping{}
	for _, e := range inbox.Escapings() {
		names := []string{"raw", regexp.QuoteMeta(e.Filter)}
		for _, a := range e.AsWritten {
			names = append(names, regexp.QuoteMeta(a))
		}
		out[e.Filter] = escaping{filter: e.Filter,
			asWritten: regexp.MustCompile(`\|\s*(` + strings.Join(names, "|") + `)\s*$`)}
	}
	return out
}()

// escaped returns the output node of "{{ expr | filter }}" for n = "{{ expr }}", at n's
// line.
func (en *engine) escaped(part string, n *render.ObjectNode, filter string) (render.Node, error) {
	root, err := en.compile("{{"+n.Args+autoEscape(filter), n.SourceLoc.LineNo)
	if err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s does not parse: %s", part, sourceMessage(err))
	}
	o := firstNode[*render.ObjectNode](root)
	if o == nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: %s is not an output", part, n.SourceLoc.LineNo, n.Source)
	}
	return o, nil
}

// firstNode returns the first node of type T in a depth-first walk of n's sequences.
func firstNode[T render.Node](n render.Node) T {
	var zero T
	switch v := n.(type) {
	case T:
		return v
	case *render.SeqNode:
		for _, c := range v.Children {
			if f := firstNode[T](c); any(f) != any(zero) {
				return f
			}
		}
	}
	return zero
}

// render renders c with vars (which it does not modify) within the budget of one part.
// An undefined variable, a budget exceeded, a filter's failure: BAD_USER_INPUT naming the
// part and line (and the variable's output expression).
func (c *compiled) render(part string, vars map[string]any) (out string, err error) {
	return c.renderWithin(part, vars, c.en.newBudget())
}

// renderWithin is render charging b, which the caller may share between the parts of one
// template, so that the whole template's render is bounded, not each part's.
func (c *compiled) renderWithin(part string, vars map[string]any, b *budget) (out string, err error) {
	bindings := make(map[string]any, len(vars)+1)
	for k, v := range vars {
		bindings[k] = v
	}
	bindings[budgetKey] = b
	w := &boundedWriter{max: MaxOutputBytes, b: b}
	defer func() {
		// The engine panics on a failed final flush (a write past the bounds) and on
		// internal errors; neither may take the process down.
		if r := recover(); r != nil {
			// Liquid re-panics a filter's panic with the goroutine's stack in its text:
			// the client gets the cause only.
			if c, ok := r.(interface{ Cause() error }); ok && c.Cause() != nil {
				r = c.Cause()
			}
			e, _ := r.(error)
			if e != nil && errors.Is(e, errBudget) {
				out, err = "", inbox.Errorf(inbox.CodeBadUserInput, "template part %s: %s", part, e.Error())
				return
			}
			out, err = "", inbox.Errorf(inbox.CodeBadUserInput, "template part %s failed to render: %v", part, r)
		}
	}()
	if rerr := render.Render(c.root, w, bindings, b.config(c.en)); rerr != nil {
		return "", inbox.Errorf(inbox.CodeBadUserInput, "template part %s: %s", part, sourceMessage(rerr))
	}
	return w.buf.String(), nil
}

// sourceMessage is the client-safe text of a Liquid error: its cause, line and source
// ("undefined variable in {{ user.name }}", line 2).
func sourceMessage(err error) string {
	// Liquid's text is "Liquid error (line N): cause in SOURCE".
	msg := strings.TrimSpace(strings.TrimPrefix(err.Error(), "Liquid error"))
	for _, e := range escapings {
		msg = strings.ReplaceAll(msg, autoEscape(e.filter), "}}")
	}
	return msg
}
