package metrics

import (
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// TestRootField: the label is the schema's field name whatever the aliases and
// fragments, "several" for more than one distinct root field.
func TestRootField(t *testing.T) {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `type Query { viewer: V! node(id: ID!): V } type V { id: ID! n: Int! }`})
	for _, c := range []struct{ query, want string }{
		{`{ viewer { n } }`, "viewer"},
		{`query ClientName { a: viewer { n } b: viewer { id } }`, "viewer"},
		{`{ ...F } fragment F on Query { x: viewer { n } }`, "viewer"},
		{`{ ... on Query { node(id: "1") { id } } }`, "node"},
		{`{ viewer { n } node(id: "1") { id } }`, "several"},
		{`{ viewer { n } ...F } fragment F on Query { node(id: "1") { id } }`, "several"},
	} {
		doc, errs := gqlparser.LoadQueryWithRules(schema, c.query, nil)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", c.query, errs)
		}
		if got := rootField(doc.Operations[0].SelectionSet); got != c.want {
			t.Errorf("rootField(%s) = %q, want %q", c.query, got, c.want)
		}
	}
}

// TestCodeOf: the first error's code, "ok" without errors, OTHER for anything that is
// not an upper-case identifier (so that no error text can become a label).
func TestCodeOf(t *testing.T) {
	withCode := func(code any) *graphql.Response {
		return &graphql.Response{Errors: gqlerror.List{{Message: "m", Extensions: map[string]any{"code": code}}}}
	}
	for _, c := range []struct {
		resp *graphql.Response
		want string
	}{
		{nil, "ok"},
		{&graphql.Response{}, "ok"},
		{withCode("BAD_USER_INPUT"), "BAD_USER_INPUT"},
		{withCode("user-42"), "OTHER"},
		{withCode("A_VERY_LONG_CODE_THAT_GOES_ON_AND_ON_AND_ON"), "OTHER"},
		{withCode(42), "OTHER"},
		{&graphql.Response{Errors: gqlerror.List{{Message: "no code"}}}, "OTHER"},
	} {
		if got := codeOf(c.resp); got != c.want {
			t.Errorf("codeOf(%+v) = %q, want %q", c.resp, got, c.want)
		}
	}
}
