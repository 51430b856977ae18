package httpapi

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// TestLeanOperationContextKeepsEveryField: leanOperationContext rebuilds gqlgen's
// OperationContext from its exported fields; one that a gqlgen upgrade adds would be lost
// silently, so every exported field but Stats must come through, and Stats' timings.
func TestLeanOperationContextKeepsEveryField(t *testing.T) {
	now := time.Now()
	rc := &graphql.OperationContext{
		RawQuery: "subscription { unreadCount }", Variables: map[string]any{"a": 1}, OperationName: "op",
		Doc: &ast.QueryDocument{}, Extensions: map[string]any{"e": 2}, Headers: http.Header{"X": {"y"}},
		Operation: &ast.OperationDefinition{Operation: ast.Subscription}, DisableIntrospection: true,
		RecoverFunc:            func(context.Context, any) error { return nil },
		ResolverMiddleware:     func(context.Context, graphql.Resolver) (any, error) { return nil, nil },
		RootResolverMiddleware: func(context.Context, graphql.RootResolver) graphql.Marshaler { return nil },
		Stats: graphql.Stats{OperationStart: now, Read: graphql.TraceTiming{Start: now, End: now.Add(1)},
			Parsing: graphql.TraceTiming{Start: now.Add(2)}, Validation: graphql.TraceTiming{End: now.Add(3)}},
	}
	rc.Stats.SetExtension("ComplexityLimit", 7)
	before := reflect.ValueOf(*rc)
	leanOperationContext(rc)
	after := reflect.ValueOf(*rc)
	typ := before.Type()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() || f.Name == "Stats" {
			continue
		}
		b, a := before.Field(i), after.Field(i)
		if b.IsZero() {
			t.Errorf("the test leaves OperationContext.%s zero: set it", f.Name)
			continue
		}
		same := b.Kind() == reflect.Func && a.Pointer() == b.Pointer() ||
			b.Kind() != reflect.Func && reflect.DeepEqual(a.Interface(), b.Interface())
		if !same {
			t.Errorf("OperationContext.%s not kept", f.Name)
		}
	}
	s := rc.Stats
	if !s.OperationStart.Equal(now) || !s.Read.End.Equal(now.Add(1)) || !s.Parsing.Start.Equal(now.Add(2)) || !s.Validation.End.Equal(now.Add(3)) {
		t.Errorf("Stats' timings not kept: %+v", s)
	}
	if s.GetExtension("ComplexityLimit") != nil {
		t.Error("Stats' extensions kept")
	}
}
