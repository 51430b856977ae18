package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/metrics"
)

// Limits of one GraphQL request (issue 8, items 1, 3, 7 and 9).

// ParserTokenLimit is how many lexical tokens a document may have (names, punctuators,
// values; comments are not tokens). The largest legitimate documents are GraphiQL's
// introspection query (181 tokens, counted with graphql-js's lexer) and an inbox page
// query with every field (about 80); 5,000 is over 25 times the largest, room for
// documents that batch several pages or fragments. A 1 MiB document of 100,000 unknown
// directives has 200,000 tokens: the parser stops at the limit with one
// GRAPHQL_PARSE_FAILED error instead of building the AST and then 200,000 validation
// errors (31 MB of response, 365 MiB allocated, measured by
// TestDirectiveFloodGetsASmallCodedError without the limit).
const ParserTokenLimit = 5000

// MaxErrors is how many errors a response carries: the first MaxErrors-1, then one entry
// saying how many more there were.
const MaxErrors = 50

// maxErrorMessage bounds one error message in bytes (a validation message quotes the
// names of the document, which may be long).
const maxErrorMessage = 512

// MaxResponseBytes is the default bound of the "data" of a response (8 MiB,
// Options.MaxResponseBytes). The largest legitimate answer, an inbox page of 100
// notifications with 16 KiB payloads each, is about 1.7 MiB. A response over it is
// replaced by one BAD_USER_INPUT error.
const MaxResponseBytes = 8 << 20

// DefaultQueryTimeout and DefaultMutationTimeout are the deadlines of a query and of a
// mutation. Subscriptions have none; each of their events' fields is bounded by the query
// timeout.
const (
	DefaultQueryTimeout    = 10 * time.Second
	DefaultMutationTimeout = 30 * time.Second
)

// boundResponse caps a response's errors (MaxErrors, maxErrorMessage) and its data
// (maxData bytes). It runs around every response: each query, mutation, subscription
// event, and the request errors of a document that does not parse or validate.
func boundResponse(maxData int) graphql.ResponseMiddleware {
	return func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		return bound(next(ctx), maxData)
	}
}

func bound(resp *graphql.Response, maxData int) *graphql.Response {
	if resp == nil {
		return nil
	}
	if len(resp.Data) > maxData {
		resp.Data = nil
		resp.Errors = append(resp.Errors, &gqlerror.Error{
			Message:    fmt.Sprintf("the response would be over %d KiB: ask for fewer fields or a smaller page", maxData>>10),
			Extensions: map[string]any{"code": inbox.CodeBadUserInput},
		})
	}
	if n := len(resp.Errors); n > MaxErrors {
		var code any = inbox.CodeBadUserInput
		if c, ok := resp.Errors[0].Extensions["code"]; ok {
			code = c
		}
		kept := resp.Errors[: MaxErrors-1 : MaxErrors-1]
		resp.Errors = append(kept, &gqlerror.Error{
			Message:    fmt.Sprintf("too many errors: %d more not shown", n-len(kept)),
			Extensions: map[string]any{"code": code},
		})
	}
	for _, e := range resp.Errors {
		if len(e.Message) > maxErrorMessage {
			cut := maxErrorMessage
			for cut > 0 && !utf8.RuneStart(e.Message[cut]) {
				cut-- // not inside a character
			}
			e.Message = e.Message[:cut] + "…"
		}
	}
	return resp
}

// deadlines gives every query and mutation its deadline (around the response: the
// execution of the operation's fields). A mutation's writes keep it when the client goes
// away (resolvers' committing). Subscriptions have no deadline as a whole.
func deadlines(query, mutation time.Duration) graphql.ResponseMiddleware {
	return func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		if !graphql.HasOperationContext(ctx) {
			return next(ctx)
		}
		op := graphql.GetOperationContext(ctx).Operation
		if op == nil {
			return next(ctx)
		}
		var d time.Duration
		switch op.Operation {
		case ast.Query:
			d = query
		case ast.Mutation:
			d = mutation
		case ast.Subscription:
			// Over SSE and WebSockets a subscription is a stream (each event's fields
			// are bounded by eventDeadline). Sent as a plain POST it answers one event,
			// and notificationAdded has none until a notification arrives: without a
			// deadline the request stayed open indefinitely, past the write timeout.
			if metrics.TransportOf(ctx) != metrics.TransportHTTP {
				return next(ctx)
			}
			d = query
		default:
			return next(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		resp := next(ctx)
		if resp == nil && op.Operation == ast.Subscription && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			te, _ := timeoutError(ctx.Err())
			err := &gqlerror.Error{Message: te.Message, Extensions: map[string]any{"code": te.Code}}
			return &graphql.Response{Errors: gqlerror.List{err}}
		}
		return resp
	}
}

// eventDeadline bounds each field resolution of a subscription event by d (the
// subscription's root field, the stream itself, is exempt).
func eventDeadline(d time.Duration) graphql.FieldMiddleware {
	return func(ctx context.Context, next graphql.Resolver) (any, error) {
		fc := graphql.GetFieldContext(ctx)
		if fc == nil || fc.Object == "Subscription" || !graphql.HasOperationContext(ctx) {
			return next(ctx)
		}
		if op := graphql.GetOperationContext(ctx).Operation; op == nil || op.Operation != ast.Subscription {
			return next(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return next(ctx)
	}
}

// timeoutError is what a resolver that ran out of its request's deadline reports: a
// retryable UNAVAILABLE (the storage did not answer in time), never INTERNAL.
func timeoutError(err error) (*inbox.Error, bool) {
	if !errors.Is(err, context.DeadlineExceeded) {
		return nil, false
	}
	return inbox.Errorf(inbox.CodeUnavailable, "the request did not finish within its deadline: retry later"), true
}

// rulesWithoutSuggestions is gqlparser's default validation rules with the variants that
// suggest no schema names for misspelt arguments, input fields and types (gqlgen's
// SetDisableSuggestion swaps only the rules for fields and leaf selections, so
// "Unknown argument \"frist\" ... Did you mean \"first\" or \"last\"?" still listed the
// schema to a client without a token in production).
func rulesWithoutSuggestions() *rules.Rules {
	r := rules.NewDefaultRules()
	for _, swap := range []struct {
		name string
		rule core.Rule
	}{
		{"KnownArgumentNames", rules.KnownArgumentNamesRuleWithoutSuggestions},
		{"ValuesOfCorrectType", rules.ValuesOfCorrectTypeRuleWithoutSuggestions},
		{"KnownTypeNames", rules.KnownTypeNamesRuleWithoutSuggestions},
	} {
		r.RemoveRule(swap.name)
		r.AddRule(swap.rule.Name, swap.rule.RuleFunc)
	}
	return r
}

// introspectionGate refuses operations that select __schema or __type (introspection)
// with a coded GRAPHQL_VALIDATION_FAILED error, as Apollo Server does in production.
// gqlgen, without its Introspection extension, would answer "introspection disabled" as
// an uncoded resolver error (INTERNAL_SERVER_ERROR).
type introspectionGate struct{}

// ExtensionName names the extension in gqlgen's stats.
func (introspectionGate) ExtensionName() string { return "IntrospectionGate" }

// Validate accepts every schema.
func (introspectionGate) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext refuses an operation that introspects.
func (introspectionGate) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || !introspects(oc.Operation.SelectionSet, map[string]bool{}) {
		return nil
	}
	err := gqlerror.Errorf("introspection is disabled on this server")
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// introspects reports whether a root selection set selects __schema or __type (both exist
// only on the query root), through inline fragments and fragment spreads.
func introspects(set ast.SelectionSet, seen map[string]bool) bool {
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			if s.Name == "__schema" || s.Name == "__type" {
				return true
			}
		case *ast.InlineFragment:
			if introspects(s.SelectionSet, seen) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && !seen[s.Name] {
				seen[s.Name] = true
				if introspects(s.Definition.SelectionSet, seen) {
					return true
				}
			}
		}
	}
	return false
}

// persistedQueries is gqlgen's automatic persisted queries extension with coded errors:
// a hash that does not match its query, an unsupported version or a malformed extension
// is the client's mistake (BAD_USER_INPUT), not an INTERNAL error logged at ERROR. An
// unknown hash keeps gqlgen's PERSISTED_QUERY_NOT_FOUND, which tells an APQ client to
// send the query with its hash (the Apollo APQ protocol).
type persistedQueries struct {
	extension.AutomaticPersistedQuery
}

// MutateOperationParameters resolves or registers the persisted query (see gqlgen's).
func (p persistedQueries) MutateOperationParameters(ctx context.Context, raw *graphql.RawParams) *gqlerror.Error {
	err := p.AutomaticPersistedQuery.MutateOperationParameters(ctx, raw)
	if err != nil && err.Extensions["code"] == nil {
		if err.Message == "provided APQ hash does not match query" {
			err.Message = "persistedQuery.sha256Hash is not the SHA-256 of the query"
		}
		if err.Extensions == nil {
			err.Extensions = map[string]any{}
		}
		err.Extensions["code"] = inbox.CodeBadUserInput
	}
	return err
}

// MaxRepeatedResponseKey bounds how often one response key (an alias, or a field's name)
// may appear in one selection set (with its inline fragments and the fragments it
// spreads). gqlparser's OverlappingFieldsCanBeMerged rule compares every pair of fields
// that share a response key in a selection set (fragments included), so a
// 20 KB document of 1,660 "a: __typename" took 100 ms of CPU to validate without a token
// (1,600 distinct aliases: 7 ms), and eight such clients at once raised a normal client's
// p50 from 5 ms to 257 ms. No sensible document repeats a key 200 times: the same key
// must select the same field with the same arguments, so repeats add nothing.
const MaxRepeatedResponseKey = 200

// repeatedKeyLimit refuses, before gqlgen parses and validates it, a document that
// repeats a response key more than Max times in a selection set (GRAPHQL_VALIDATION_FAILED). It runs after
// the persisted-query extension, on the query text that will be validated; documents too
// short to repeat a key Max times are not looked at, and one that does not parse is left
// to gqlgen to report.
type repeatedKeyLimit struct{ Max int }

func (repeatedKeyLimit) ExtensionName() string { return "RepeatedKeyLimit" }

func (repeatedKeyLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (l repeatedKeyLimit) MutateOperationParameters(_ context.Context, p *graphql.RawParams) *gqlerror.Error {
	if len(p.Query) < 4*l.Max { // a repeat is at least "a " and a separator
		return nil
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: p.Query}, ParserTokenLimit)
	if err != nil {
		return nil
	}
	// Each selection set counts its own keys with its inline fragments and the fragments
	// it spreads (each once, as the rule compares them), not its fields' sub-selections:
	// those are sets of their own, walked where they are written.
	var count func(set ast.SelectionSet, counts map[string]int, spread map[string]bool) bool
	count = func(set ast.SelectionSet, counts map[string]int, spread map[string]bool) bool {
		for _, s := range set {
			switch s := s.(type) {
			case *ast.Field:
				key := cmp.Or(s.Alias, s.Name)
				if counts[key]++; counts[key] > l.Max {
					return false
				}
			case *ast.InlineFragment:
				if !count(s.SelectionSet, counts, spread) {
					return false
				}
			case *ast.FragmentSpread:
				if f := doc.Fragments.ForName(s.Name); f != nil && !spread[s.Name] {
					spread[s.Name] = true
					if !count(f.SelectionSet, counts, spread) {
						return false
					}
				}
			}
		}
		return true
	}
	var walk, children func(ast.SelectionSet) bool
	walk = func(set ast.SelectionSet) bool {
		return count(set, map[string]int{}, map[string]bool{}) && children(set)
	}
	children = func(set ast.SelectionSet) bool {
		for _, s := range set {
			switch s := s.(type) {
			case *ast.Field:
				if len(s.SelectionSet) > 0 && !walk(s.SelectionSet) {
					return false
				}
			case *ast.InlineFragment:
				if !children(s.SelectionSet) {
					return false
				}
			}
		}
		return true
	}
	ok := true
	for _, op := range doc.Operations {
		ok = ok && walk(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		ok = ok && walk(f.SelectionSet)
	}
	if ok {
		return nil
	}
	e := gqlerror.Errorf("a response key (alias or field name) appears more than %d times in one selection set", l.Max)
	errcode.Set(e, errcode.ValidationFailed)
	return e
}
