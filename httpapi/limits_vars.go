package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/inboxgw/gateway/inbox"
)

// Strict variable coercion (issue 8, item 9). gqlparser's validator.VariableValues is
// looser than the GraphQL spec's input coercion: it accepts a string of digits for an
// Int ("10"), any 64-bit integer for an Int (GraphQL Int is signed 32-bit, so
// 99999999999 reached the resolvers), a string for a Float, a number for an enum and an
// enum name in any case; and it reports 1.5 for an Int as "cannot use value 0 as Int".
// strictVariables checks the raw variables against the operation's definitions first,
// per the spec's rules (https://spec.graphql.org/October2021/#sec-Input-Values), and
// answers the first mistake as BAD_USER_INPUT naming the variable, the value and what
// the type takes. The error leaves CreateOperationContext as gqlparser's own would, so
// every mistake gets the same HTTP status (see statusWriter).

// strictTransport hands its transport an executor that coerces variables strictly.
type strictTransport struct {
	graphql.Transport
	schema *ast.Schema
}

// Do serves the request with the strict executor.
func (t strictTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	t.Transport.Do(w, r, strictExecutor{GraphExecutor: exec, schema: t.schema})
}

// strictExecutor checks the variables of every operation it creates (strictVariables).
type strictExecutor struct {
	graphql.GraphExecutor
	schema *ast.Schema
}

// CreateOperationContext creates the operation as gqlgen does; a variable that does not
// coerce strictly replaces whatever gqlgen answered with one BAD_USER_INPUT error.
func (e strictExecutor) CreateOperationContext(ctx context.Context, params *graphql.RawParams) (*graphql.OperationContext, gqlerror.List) {
	// gqlparser coerces input objects' fields in place: check a copy of what was sent.
	sent := cloneJSON(params.Variables)
	oc, errs := e.GraphExecutor.CreateOperationContext(ctx, params)
	if oc != nil && oc.Operation != nil {
		if err := strictVariables(e.schema, oc.Operation.VariableDefinitions, sent); err != nil {
			return oc, gqlerror.List{err}
		}
	}
	return oc, errs
}

// cloneJSON copies the maps and lists of a decoded JSON value.
func cloneJSON(v map[string]any) map[string]any {
	if v == nil {
		return nil
	}
	out := make(map[string]any, len(v))
	for k, e := range v {
		out[k] = cloneValue(e)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneJSON(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

func init() {
	// A BAD_USER_INPUT from CreateOperationContext (a variable, a persisted query) is a
	// request error like gqlparser's own: gqlgen's transports answer it 400 for
	// application/graphql-response+json (and 422, which statusWriter makes 200, for
	// application/json), as the GraphQL-over-HTTP spec asks of a variable that does not
	// coerce. Errors of a running operation are not affected (always 200).
	errcode.RegisterErrorType(inbox.CodeBadUserInput, errcode.KindProtocol)
}

// strictVariables returns the first variable of vars that does not coerce to its
// definition's type, nil when all do (absent and null values are left to gqlparser, which
// reports them well).
func strictVariables(schema *ast.Schema, defs ast.VariableDefinitionList, vars map[string]any) *gqlerror.Error {
	for _, d := range defs {
		v, ok := vars[d.Variable]
		if !ok {
			continue
		}
		if msg := coerceMessage(schema, d.Type, v, "$"+d.Variable); msg != "" {
			return &gqlerror.Error{
				Message:    msg,
				Path:       ast.Path{ast.PathName("variable"), ast.PathName(d.Variable)},
				Extensions: map[string]any{"code": inbox.CodeBadUserInput},
			}
		}
	}
	return nil
}

// coerceMessage returns why v does not coerce to typ ("" when it does); at names the
// value ($var, $var.field, $var[2]).
func coerceMessage(schema *ast.Schema, typ *ast.Type, v any, at string) string {
	if v == nil {
		return ""
	}
	if typ.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			// A single value is coerced to a list of one (the spec's list input coercion).
			return coerceMessage(schema, typ.Elem, v, at)
		}
		for i, e := range list {
			if msg := coerceMessage(schema, typ.Elem, e, fmt.Sprintf("%s[%d]", at, i)); msg != "" {
				return msg
			}
		}
		return ""
	}
	def := schema.Types[typ.NamedType]
	if def == nil {
		return ""
	}
	switch def.Kind {
	case ast.Scalar:
		return scalarMessage(typ.NamedType, v, at)
	case ast.Enum:
		s, ok := v.(string)
		if ok && def.EnumValues.ForName(s) != nil {
			return ""
		}
		names := make([]string, len(def.EnumValues))
		for i, ev := range def.EnumValues {
			names[i] = ev.Name
		}
		return fmt.Sprintf("variable %s: got %s, want a %s: one of %v", at, describe(v), def.Name, names)
	case ast.InputObject:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("variable %s: got %s, want a %s object", at, describe(v), def.Name)
		}
		for _, f := range def.Fields {
			if fv, ok := m[f.Name]; ok {
				if msg := coerceMessage(schema, f.Type, fv, at+"."+f.Name); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}

// int32Range is what a GraphQL Int takes.
const int32Range = "a whole number from -2147483648 to 2147483647"

// scalarMessage checks the built-in scalars (custom scalars check their own input).
func scalarMessage(name string, v any, at string) string {
	wrong := func(want string) string {
		return fmt.Sprintf("variable %s: got %s, want %s", at, describe(v), want)
	}
	switch name {
	case "Int":
		if f, ok := number(v); !ok || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
			return wrong("an Int: " + int32Range)
		}
	case "Float":
		if f, ok := number(v); !ok || math.IsInf(f, 0) {
			return wrong("a Float: a finite number")
		}
	case "String":
		if _, ok := v.(string); !ok {
			return wrong("a String")
		}
	case "Boolean":
		if _, ok := v.(bool); !ok {
			return wrong("a Boolean: true or false")
		}
	case "ID":
		if _, ok := v.(string); ok {
			return ""
		}
		if f, ok := number(v); !ok || f != math.Trunc(f) {
			return wrong("an ID: a string or a whole number")
		}
	}
	return ""
}

// number returns v as a float64 when v is a JSON number (json.Number with UseNumber, or a
// Go number), false for anything else (a string of digits is not a number).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// describe shows a value in a message: its JSON text (cut at 40 bytes) and its JSON kind.
func describe(v any) string {
	kind := "an object"
	switch v.(type) {
	case string:
		kind = "a string"
	case json.Number, float64, float32, int, int32, int64:
		kind = "a number"
	case bool:
		kind = "a boolean"
	case []any:
		kind = "a list"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return kind
	}
	if len(b) > 40 {
		b = append(b[:40:40], "…"...)
	}
	return fmt.Sprintf("%s (%s)", b, kind)
}
