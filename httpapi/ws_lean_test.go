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
	fields := func() map[string]any {
		v := reflect.ValueOf(rc).Elem()
		m := map[string]any{}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && f.Name != "Stats" {
				if v.Field(i).IsZero() {
					t.Errorf("the test leaves OperationContext.%s zero: set it", f.Name)
				}
				m[f.Name] = v.Field(i).Interface()
			}
		}
		return m
	}
	before := fields()
	leanOperationContext(rc)
	after := fields()
	for name, b := range before {
		a := after[name]
		same := reflect.ValueOf(b).Kind() == reflect.Func && reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() ||
			reflect.ValueOf(b).Kind() != reflect.Func && reflect.DeepEqual(a, b)
		if !same {
			t.Errorf("OperationContext.%s not kept", name)
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
