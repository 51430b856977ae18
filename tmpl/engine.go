package tmpl

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/osteele/liquid"
	"github.com/osteele/liquid/expressions"
	"github.com/osteele/liquid/render"

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
	// MaxValueBytes bounds every string a filter, an assign or a capture produces (and the
	// items of an array a filter or an assign produces), so no expression can grow memory
	// without bound before anything is written.
	MaxValueBytes = 256 << 10
	// MaxIterations is the most loop iterations ({% for %}, {% tablerow %}) one render of
	// one part may run, nested loops counted by their innermost iterations.
	MaxIterations = 100_000
	// RenderTimeout bounds one render of a template: all of its parts, which share the
	// budget (MaxIterations too). It is checked at every loop iteration and every write, so
	// one single expression (bounded by MaxValueBytes) is never cut short.
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

// errBudget is the cause of every render error a budget ends.
var errBudget = errors.New("render budget exceeded")

// budget is the state of one render of one part: loop iterations run and the deadline.
type budget struct {
	iterations int
	deadline   time.Time
}

func (b *budget) tick() error {
	b.iterations++
	if b.iterations > MaxIterations {
		return fmt.Errorf("%w: more than %d loop iterations", errBudget, MaxIterations)
	}
	return b.clock()
}

func (b *budget) clock() error {
	if time.Now().After(b.deadline) {
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
// includes, bounded filters, loops that charge the render's budget.
type engine struct {
	e    *liquid.Engine
	tick *render.TagNode
}

// includeTags are the tags that read other templates (files): refused at parse time.
var includeTags = map[string]bool{"include": true, "render": true}

func newEngine() *engine {
	e := liquid.NewEngine()
	e.StrictVariables()
	e.RegisterTag(tickTag, func(ctx render.Context) (string, error) {
		if b, ok := ctx.Get(budgetKey).(*budget); ok {
			return "", b.tick()
		}
		return "", nil
	})
	e.RegisterTag("include", func(render.Context) (string, error) {
		return "", errors.New("include is not supported")
	})
	e.RegisterTag("assign", assignTag)
	e.RegisterBlock(captureBlock, captureTag)
	registerBoundedFilters(e)
	root, err := e.ParseString("{% " + tickTag + " %}")
	if err != nil {
		panic(fmt.Sprintf("tmpl: the tick tag does not parse: %v", err))
	}
	tick := firstNode[*render.TagNode](root.GetRoot())
	if tick == nil {
		panic("tmpl: the tick tag has no tag node")
	}
	return &engine{e: e, tick: tick}
}

// assignTag is Liquid's assign with its value bounded (MaxValueBytes).
func assignTag(ctx render.Context) (string, error) {
	stmt, err := expressions.ParseStatement(expressions.AssignStatementSelector, ctx.TagArgs())
	if err != nil {
		return "", err
	}
	v, err := ctx.Evaluate(stmt.Assignment.ValueFn)
	if err != nil {
		return "", err
	}
	if err := checkValue(v); err != nil {
		return "", err
	}
	ctx.Set(stmt.Assignment.Variable, v)
	return "", nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][\w-]*$`)

// captureTag is Liquid's capture, rendering its body into a bounded buffer.
func captureTag(ctx render.Context) (string, error) {
	name := strings.TrimSpace(ctx.TagArgs())
	if !identRE.MatchString(name) {
		return "", errors.New("capture needs a variable name")
	}
	b, _ := ctx.Get(budgetKey).(*budget)
	if b == nil {
		b = &budget{deadline: time.Now().Add(RenderTimeout)}
	}
	w := &boundedWriter{max: MaxValueBytes, b: b}
	if err := ctx.RenderChildren(w); err != nil {
		return "", err
	}
	ctx.Set(name, w.buf.String())
	return "", nil
}

// checkValue refuses strings over MaxValueBytes and arrays over MaxValueBytes items.
func checkValue(v any) error {
	switch v := v.(type) {
	case string:
		if len(v) > MaxValueBytes {
			return fmt.Errorf("%w: a value over %d bytes", errBudget, MaxValueBytes)
		}
	case []byte:
		if len(v) > MaxValueBytes {
			return fmt.Errorf("%w: a value over %d bytes", errBudget, MaxValueBytes)
		}
	case []any:
		if len(v) > MaxValueBytes {
			return fmt.Errorf("%w: an array over %d items", errBudget, MaxValueBytes)
		}
	case []string:
		if len(v) > MaxValueBytes {
			return fmt.Errorf("%w: an array over %d items", errBudget, MaxValueBytes)
		}
	}
	return nil
}

// errTooLong is the error of a filter whose result would be over MaxValueBytes.
func errTooLong() error {
	return fmt.Errorf("%w: a value over %d bytes", errBudget, MaxValueBytes)
}

func boundedString(s string) (string, error) {
	if err := checkValue(s); err != nil {
		return "", err
	}
	return s, nil
}

// registerBoundedFilters replaces every standard filter whose result can be much larger
// than its input (and so could grow without bound in a chain) with one that fails past
// MaxValueBytes, and adds raw and a nil-preserving escape (see htmlEscape).
func registerBoundedFilters(e *liquid.Engine) {
	e.RegisterFilter("append", func(s, suffix string) (string, error) {
		if len(s)+len(suffix) > MaxValueBytes {
			return "", errTooLong()
		}
		return s + suffix, nil
	})
	e.RegisterFilter("prepend", func(s, prefix string) (string, error) {
		if len(s)+len(prefix) > MaxValueBytes {
			return "", errTooLong()
		}
		return prefix + s, nil
	})
	e.RegisterFilter("replace", func(s, old, n string) (string, error) {
		if len(n) > len(old) && len(s)+strings.Count(s, old)*(len(n)-len(old)) > MaxValueBytes {
			return "", errTooLong()
		}
		return strings.ReplaceAll(s, old, n), nil
	})
	e.RegisterFilter("replace_first", func(s, old, n string) (string, error) {
		return boundedString(strings.Replace(s, old, n, 1))
	})
	e.RegisterFilter("join", func(a []any, sep func(string) string) (string, error) {
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
	e.RegisterFilter("concat", func(a, b []any) ([]any, error) {
		if len(a)+len(b) > MaxValueBytes {
			return nil, fmt.Errorf("%w: an array over %d items", errBudget, MaxValueBytes)
		}
		return append(append(make([]any, 0, len(a)+len(b)), a...), b...), nil
	})
	e.RegisterFilter("escape", htmlEscape)
	e.RegisterFilter("newline_to_br", func(s string) (string, error) {
		return boundedString(strings.ReplaceAll(s, "\n", "<br />"))
	})
	e.RegisterFilter("url_encode", func(s string) (string, error) {
		return boundedString(url.QueryEscape(s))
	})
	jsonFilter := func(v any) (string, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		return boundedString(string(b))
	}
	e.RegisterFilter("json", jsonFilter)
	e.RegisterFilter("inspect", jsonFilter)
	// raw marks an output of an HTML part that is not to be escaped (see escapeOutputs).
	e.RegisterFilter("raw", func(v any) any { return v })
}

// htmlEscape is the escape filter: HTML-escapes text, and keeps nil nil so that an
// undefined variable stays an error in strict mode even behind the automatic escape of
// HTML parts. Numbers and booleans need no escaping and keep their type.
func htmlEscape(v any) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return boundedString(html.EscapeString(v))
	case int, int64, float64, bool:
		return v, nil
	default:
		return boundedString(html.EscapeString(fmt.Sprint(v)))
	}
}

// compiled is one parsed part.
type compiled struct {
	t *liquid.Template
}

// parse parses src as the part named part (for messages); html parts get their outputs
// escaped (escapeOutputs). The error is BAD_USER_INPUT with the line.
func (en *engine) parse(part, src string, htmlPart bool) (*compiled, error) {
	if len(src) > MaxPartBytes {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s is over %d bytes", part, MaxPartBytes)
	}
	t, err := en.e.ParseTemplateLocation([]byte(src), "", 1)
	if err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s does not parse: %s", part, sourceMessage(err))
	}
	root := t.GetRoot()
	if err := en.prepare(part, root, htmlPart); err != nil {
		return nil, err
	}
	return &compiled{t: t}, nil
}

// prepare walks the tree: it refuses include tags, puts the tick first in every loop body
// and, in HTML parts, escapes every output (escapeOutputs).
func (en *engine) prepare(part string, n render.Node, htmlPart bool) error {
	var walk func(nodes []render.Node) error
	walk = func(nodes []render.Node) error {
		for i, n := range nodes {
			switch n := n.(type) {
			case *render.SeqNode:
				if err := walk(n.Children); err != nil {
					return err
				}
			case *render.TagNode:
				if n.Name == "assign" {
					if _, err := expressions.ParseStatement(expressions.AssignStatementSelector, n.Args); err != nil {
						return inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: %s", part, n.SourceLoc.LineNo, err)
					}
				}
				if includeTags[n.Name] {
					return inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: {%% %s %%} is not supported (templates cannot include others)", part, n.SourceLoc.LineNo, n.Name)
				}
			case *render.ObjectNode:
				if htmlPart && !unescapedRE.MatchString(n.Args) {
					esc, err := en.escaped(part, n)
					if err != nil {
						return err
					}
					nodes[i] = esc
				}
			case *render.BlockNode:
				if err := walk(n.Body); err != nil {
					return err
				}
				for _, c := range n.Clauses {
					if err := walk(c.Body); err != nil {
						return err
					}
				}
				switch n.Name {
				case "for", "tablerow":
					n.Body = append([]render.Node{en.tick}, n.Body...)
				case "capture":
					c, err := en.boundedCapture(part, n)
					if err != nil {
						return err
					}
					nodes[i] = c
				}
			}
		}
		return nil
	}
	return walk([]render.Node{n})
}

// boundedCapture returns a captureBlock node with the body of n, a {% capture %}.
func (en *engine) boundedCapture(part string, n *render.BlockNode) (render.Node, error) {
	if !identRE.MatchString(strings.TrimSpace(n.Args)) {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s line %d: capture needs a variable name", part, n.SourceLoc.LineNo)
	}
	src := "{% " + captureBlock + " " + n.Args + " %}{% end" + captureBlock + " %}"
	t, err := en.e.ParseTemplateLocation([]byte(src), "", n.SourceLoc.LineNo)
	if err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s does not parse: %s", part, sourceMessage(err))
	}
	c := firstNode[*render.BlockNode](t.GetRoot())
	if c == nil {
		return nil, fmt.Errorf("tmpl: %s has no block node", src)
	}
	c.Body = n.Body
	return c, nil
}

// autoEscape ends the source of an output escaped by an HTML part; messages show the
// output as written (sourceMessage).
const autoEscape = "|escape}}"

// unescapedRE matches an output expression whose last filter is raw, escape or
// escape_once: an HTML part leaves those as they are.
var unescapedRE = regexp.MustCompile(`\|\s*(raw|escape|escape_once)\s*$`)

// escaped returns the output node of "{{ expr | escape }}" for n = "{{ expr }}", at n's line.
func (en *engine) escaped(part string, n *render.ObjectNode) (render.Node, error) {
	t, err := en.e.ParseTemplateLocation([]byte("{{"+n.Args+autoEscape), "", n.SourceLoc.LineNo)
	if err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "template part %s does not parse: %s", part, sourceMessage(err))
	}
	o := firstNode[*render.ObjectNode](t.GetRoot())
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
	return c.renderWithin(part, vars, &budget{deadline: time.Now().Add(RenderTimeout)})
}

// renderWithin is render charging b, which the caller may share between the parts of one
// template, so that the whole template's render is bounded, not each part's.
func (c *compiled) renderWithin(part string, vars map[string]any, b *budget) (out string, err error) {
	bindings := make(liquid.Bindings, len(vars)+1)
	for k, v := range vars {
		bindings[k] = v
	}
	bindings[budgetKey] = b
	w := &boundedWriter{max: MaxOutputBytes, b: b}
	defer func() {
		// The engine panics on a failed final flush (a write past the bounds) and on
		// internal errors; neither may take the process down.
		if r := recover(); r != nil {
			e, _ := r.(error)
			if e != nil && errors.Is(e, errBudget) {
				out, err = "", inbox.Errorf(inbox.CodeBadUserInput, "template part %s: %s", part, e.Error())
				return
			}
			out, err = "", inbox.Errorf(inbox.CodeBadUserInput, "template part %s failed to render: %v", part, r)
		}
	}()
	if rerr := c.t.FRender(w, bindings); rerr != nil {
		return "", inbox.Errorf(inbox.CodeBadUserInput, "template part %s: %s", part, sourceMessage(rerr))
	}
	return w.buf.String(), nil
}

// sourceMessage is the client-safe text of a Liquid error: its cause, line and source
// ("undefined variable in {{ user.name }}", line 2).
func sourceMessage(err liquid.SourceError) string {
	// Liquid's text is "Liquid error (line N): cause in SOURCE".
	msg := strings.TrimSpace(strings.TrimPrefix(err.Error(), "Liquid error"))
	return strings.ReplaceAll(msg, autoEscape, "}}")
}
