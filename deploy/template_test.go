package deploy

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// templatePath is the template under test, relative to this package.
const templatePath = "cloudformation.yaml"

// loadTemplate parses the template into plain values (see cfnValue).
func loadTemplate(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := parseTemplate(b)
	if err != nil {
		t.Fatalf("%s: %v", templatePath, err)
	}
	return tmpl
}

// parseTemplate parses a CloudFormation YAML template into plain values, short-form
// intrinsic functions included (cfnValue).
func parseTemplate(b []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	v, err := cfnValue(&doc)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the template is a %T, not a mapping", v)
	}
	return m, nil
}

// cfnValue converts a YAML node into maps, slices and scalars the way CloudFormation reads
// it: a short-form intrinsic function (a local tag such as !Ref, !GetAtt, !Sub, !If) becomes
// its long form, a one-key mapping ({"Ref": x}, {"Fn::GetAtt": [resource, attribute]},
// {"Fn::If": [...]}), so that a test can tell a literal from a computed value.
func cfnValue(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("line %d: %d documents, want 1", n.Line, len(n.Content))
		}
		return cfnValue(n.Content[0])
	case yaml.AliasNode:
		return cfnValue(n.Alias)
	case yaml.ScalarNode:
		if isIntrinsic(n.Tag) {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			cv, err := cfnValue(c)
			if err != nil {
				return nil, err
			}
			s = append(s, cv)
		}
		v = s
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a mapping key that is not a scalar", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q twice", k.Line, k.Value)
			}
			cv, err := cfnValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = cv
		}
		v = m
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	if !isIntrinsic(n.Tag) {
		return v, nil
	}
	name := strings.TrimPrefix(n.Tag, "!")
	if name == "GetAtt" {
		if s, ok := v.(string); ok {
			// !GetAtt Resource.Attribute is the long form's [Resource, Attribute].
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q has no attribute", n.Line, s)
			}
			v = []any{res, attr}
		}
	}
	switch name {
	case "Ref", "Condition":
	default:
		name = "Fn::" + name
	}
	return map[string]any{name: v}, nil
}

// isIntrinsic reports whether tag is a local tag (CloudFormation's short-form functions),
// not one of YAML's own (!!str, !!map, ...).
func isIntrinsic(tag string) bool {
	return strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!")
}

// resources returns the template's resources of type typ, by logical id.
func resources(t *testing.T, tmpl map[string]any, typ string) map[string]map[string]any {
	t.Helper()
	all, ok := tmpl["Resources"].(map[string]any)
	if !ok {
		t.Fatal("the template has no Resources mapping")
	}
	out := map[string]map[string]any{}
	for id, r := range all {
		m, ok := r.(map[string]any)
		if !ok {
			t.Fatalf("resource %s is a %T, not a mapping", id, r)
		}
		if m["Type"] == typ {
			out[id] = m
		}
	}
	return out
}

// oneResource returns the template's only resource of type typ and its logical id.
func oneResource(t *testing.T, tmpl map[string]any, typ string) (string, map[string]any) {
	t.Helper()
	rs := resources(t, tmpl, typ)
	if len(rs) != 1 {
		t.Fatalf("the template has %d resources of type %s, want 1", len(rs), typ)
	}
	for id, r := range rs {
		return id, r
	}
	panic("unreachable")
}

// get walks v through mapping keys and returns what it finds ("" in path's error when a
// step is missing or not a mapping).
func get(v any, path ...string) (any, error) {
	for i, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is a %T, not a mapping", strings.Join(path[:i], "."), v)
		}
		if v, ok = m[k]; !ok {
			return nil, fmt.Errorf("%s is missing", strings.Join(path[:i+1], "."))
		}
	}
	return v, nil
}

// literal returns the string at path: an intrinsic function or another type is an error
// (what a test compares with the code must be written out in the template).
func literal(v any, path ...string) (string, error) {
	x, err := get(v, path...)
	if err != nil {
		return "", err
	}
	s, ok := x.(string)
	if !ok {
		return "", fmt.Errorf("%s is %v (a %T), not a literal string", strings.Join(path, "."), x, x)
	}
	return s, nil
}

// list returns the sequence at path.
func list(v any, path ...string) ([]any, error) {
	x, err := get(v, path...)
	if err != nil {
		return nil, err
	}
	s, ok := x.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %v (a %T), not a list", strings.Join(path, "."), x, x)
	}
	return s, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestParseTemplateShortForms: the parser the other tests rely on reads every short form
// CloudFormation accepts as its long form (a scalar, a sequence or a mapping under a tag,
// nested), and keeps YAML's own tags and plain scalars as values.
func TestParseTemplateShortForms(t *testing.T) {
	t.Parallel()
	src := `
A: !Ref TableName
B: !GetAtt Table.Arn
C: !Sub "${Table.Arn}/index/*"
D: !If [HasX, !Ref X, !Ref AWS::NoValue]
E: !Not [!Equals [!Ref P, 0]]
F: !Or [!Condition HasA, !Condition HasB]
G: !GetAtt [Table, StreamArn]
H: !!str 12
I: 12
J: "true"
K: true
L: !Join
  - ""
  - - a
    - !Ref B
M: !Base64 {"Fn::Sub": x}
`
	got, err := parseTemplate([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"A": map[string]any{"Ref": "TableName"},
		"B": map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}},
		"C": map[string]any{"Fn::Sub": "${Table.Arn}/index/*"},
		"D": map[string]any{"Fn::If": []any{"HasX", map[string]any{"Ref": "X"}, map[string]any{"Ref": "AWS::NoValue"}}},
		"E": map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "P"}, 0}}}},
		"F": map[string]any{"Fn::Or": []any{map[string]any{"Condition": "HasA"}, map[string]any{"Condition": "HasB"}}},
		"G": map[string]any{"Fn::GetAtt": []any{"Table", "StreamArn"}},
		"H": "12",
		"I": 12,
		"J": "true",
		"K": true,
		"L": map[string]any{"Fn::Join": []any{"", []any{"a", map[string]any{"Ref": "B"}}}},
		"M": map[string]any{"Fn::Base64": map[string]any{"Fn::Sub": "x"}},
	}
	for _, k := range sortedKeys(want) {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s = %#v, want %#v", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("parsed %d keys, want %d", len(got), len(want))
	}
	for _, bad := range []string{"A: !GetAtt NoAttribute\n", "A: 1\nA: 2\n", "- a\n"} {
		if _, err := parseTemplate([]byte(bad)); err == nil {
			t.Errorf("parseTemplate(%q) accepted it", bad)
		}
	}
}
