package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Values of the "field" label besides the schema's root field names.
const (
	fieldNone    = "none"    // the document did not parse or validate: no trusted field
	fieldSeveral = "several" // the operation selects more than one root field
	codeOK       = "ok"
	codeOther    = "OTHER" // an extensions.code that is not an upper-case identifier
	typeNone     = "none"
)

// GraphQL returns the gqlgen extension that counts and times operations (register it
// with handler.Server.Use). Labels come from the validated document and the schema only:
// the operation type and its root field name (an alias counts under its field's name;
// the client-chosen operation name is never used), so their number is bounded by the
// schema whatever clients send. A nil Registry returns an extension that does nothing.
func (r *Registry) GraphQL() graphql.HandlerExtension {
	return graphqlExtension{r: r}
}

type graphqlExtension struct{ r *Registry }

var (
	_ graphql.OperationInterceptor = graphqlExtension{}
	_ graphql.ResponseInterceptor  = graphqlExtension{}
)

// ExtensionName names the extension in gqlgen's list.
func (graphqlExtension) ExtensionName() string { return "PrometheusMetrics" }

// Validate accepts every schema.
func (graphqlExtension) Validate(graphql.ExecutableSchema) error { return nil }

func opStateFrom(ctx context.Context) *opState {
	s, _ := ctx.Value(opStateKey{}).(*opState)
	return s
}

func withOpState(ctx context.Context, s *opState) context.Context {
	return context.WithValue(ctx, opStateKey{}, s)
}

type opStateKey struct{}

// opState marks the responses of a dispatched operation, so that InterceptResponse
// leaves them to InterceptOperation's wrapper.
type opState struct{}

// InterceptOperation counts a dispatched (parsed, validated, within limits) operation:
// a query or mutation at its response, a subscription at its first response; it also
// keeps the open-subscriptions gauge.
func (e graphqlExtension) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if e.r == nil {
		return next(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	typ, field := string(oc.Operation.Operation), rootField(oc.Operation.SelectionSet)
	transport := TransportOf(ctx)
	start := oc.Stats.OperationStart
	state := &opState{}
	h := next(withOpState(ctx, state))
	if oc.Operation.Operation != ast.Subscription {
		return func(ctx context.Context) *graphql.Response {
			resp := h(withOpState(ctx, state))
			e.r.observeRequest(transport, typ, field, codeOf(resp), start, true)
			return resp
		}
	}
	g := e.r.subscriptions.WithLabelValues(transport)
	g.Inc()
	var once, first sync.Once
	ended := func() { once.Do(g.Dec) }
	stop := context.AfterFunc(ctx, ended)
	return func(ctx context.Context) *graphql.Response {
		resp := h(withOpState(ctx, state))
		first.Do(func() { e.r.observeRequest(transport, typ, field, codeOf(resp), start, false) })
		if resp == nil || ctx.Err() != nil {
			stop()
			ended()
		}
		return resp
	}
}

// InterceptResponse counts the responses that no operation produced: documents that did
// not parse, validate or pass the complexity limit (gqlgen answers them with
// DispatchError, which runs the response interceptors only).
func (e graphqlExtension) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if e.r == nil || opStateFrom(ctx) != nil {
		return resp
	}
	// The operation type of a document that failed validation is not trusted either.
	e.r.observeRequest(TransportOf(ctx), typeNone, fieldNone, codeOf(resp), startOf(ctx), true)
	return resp
}

// startOf is when the transport started reading the request (zero when unknown).
func startOf(ctx context.Context) time.Time {
	if graphql.HasOperationContext(ctx) {
		if oc := graphql.GetOperationContext(ctx); oc != nil && !oc.Stats.OperationStart.IsZero() {
			return oc.Stats.OperationStart
		}
	}
	return graphql.GetStartTime(ctx)
}

func (r *Registry) observeRequest(transport, typ, field, code string, start time.Time, timed bool) {
	r.requests.WithLabelValues(transport, typ, field, code).Inc()
	if timed && !start.IsZero() {
		r.requestDuration.WithLabelValues(transport, typ, field).Observe(time.Since(start).Seconds())
	}
}

// rootField is the root field name an operation selects (through fragments too), or
// fieldSeveral. The document is validated, so every name is the schema's.
func rootField(set ast.SelectionSet) string {
	name := ""
	var walk func(ast.SelectionSet) bool
	walk = func(set ast.SelectionSet) bool {
		for _, s := range set {
			switch s := s.(type) {
			case *ast.Field:
				if name != "" && name != s.Name {
					return false
				}
				name = s.Name
			case *ast.InlineFragment:
				if !walk(s.SelectionSet) {
					return false
				}
			case *ast.FragmentSpread:
				if s.Definition != nil && !walk(s.Definition.SelectionSet) {
					return false
				}
			}
		}
		return true
	}
	if !walk(set) {
		return fieldSeveral
	}
	if name == "" {
		return fieldNone
	}
	return name
}

// codeOf is the first error's extensions.code, codeOK without errors. Codes are set by
// the gateway's error presenter and gqlgen (never by a client); anything that is not an
// upper-case identifier of at most 40 characters counts as codeOther all the same.
func codeOf(resp *graphql.Response) string {
	if resp == nil || len(resp.Errors) == 0 {
		return codeOK
	}
	return codeOfError(resp.Errors[0])
}

func codeOfError(err *gqlerror.Error) string {
	c, _ := err.Extensions["code"].(string)
	if c == "" {
		return codeOther
	}
	if len(c) > 40 {
		return codeOther
	}
	for _, ch := range c {
		if (ch < 'A' || ch > 'Z') && ch != '_' {
			return codeOther
		}
	}
	return c
}
