package deploy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/store"
)

// schema is what the template and the code must agree on about the table.
type schema struct {
	Keys       []string          // "name HASH", "name RANGE", in the key schema's order
	Attributes map[string]string // attribute definitions: name -> S, N or B
	Indexes    map[string]index  // GSIs by name
	TTL        string            // the TTL attribute ("" for none)
	Stream     string            // the stream view type ("" for none)
}

// index is a GSI as far as the schema goes.
type index struct {
	Keys       []string // as schema.Keys
	Projection string   // ALL, KEYS_ONLY or INCLUDE
	NonKey     []string // INCLUDE's attributes, sorted
}

// diff lists every difference between the template's schema and the code's.
func (tmpl schema) diff(code schema) []string {
	var out []string
	if !slices.Equal(tmpl.Keys, code.Keys) {
		out = append(out, fmt.Sprintf("key schema: template %v, code %v", tmpl.Keys, code.Keys))
	}
	for _, n := range union(tmpl.Attributes, code.Attributes) {
		if a, b := tmpl.Attributes[n], code.Attributes[n]; a != b {
			out = append(out, fmt.Sprintf("attribute %s: template %q, code %q", n, a, b))
		}
	}
	for _, n := range union(tmpl.Indexes, code.Indexes) {
		a, inT := tmpl.Indexes[n]
		b, inC := code.Indexes[n]
		switch {
		case !inT:
			out = append(out, fmt.Sprintf("index %s: the code creates it (keys %v, projection %s %v), the template lacks it", n, b.Keys, b.Projection, b.NonKey))
		case !inC:
			out = append(out, fmt.Sprintf("index %s: in the template, the code does not create it", n))
		case !reflect.DeepEqual(a, b):
			out = append(out, fmt.Sprintf("index %s: template %+v, code %+v", n, a, b))
		}
	}
	if tmpl.TTL != code.TTL {
		out = append(out, fmt.Sprintf("TTL attribute: template %q, code %q", tmpl.TTL, code.TTL))
	}
	if tmpl.Stream != code.Stream {
		out = append(out, fmt.Sprintf("stream view type: template %q, code %q", tmpl.Stream, code.Stream))
	}
	return out
}

// union returns the keys of a and b, sorted.
func union[V any](a, b map[string]V) []string {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return sortedKeys(m)
}

// templateSchema reads the schema of the template's table. Every value it reads must be
// written out (no !Ref or other function): the template states the table.
func templateSchema(t *testing.T, tmpl map[string]any) schema {
	t.Helper()
	id, table := oneResource(t, tmpl, "AWS::DynamoDB::Table")
	props, err := get(table, "Properties")
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	s, err := schemaOfProperties(props)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return s
}

func schemaOfProperties(props any) (schema, error) {
	s := schema{Attributes: map[string]string{}, Indexes: map[string]index{}}
	var err error
	if s.Keys, err = keysOf(props, "KeySchema"); err != nil {
		return s, err
	}
	defs, err := list(props, "AttributeDefinitions")
	if err != nil {
		return s, err
	}
	for _, d := range defs {
		n, err := literal(d, "AttributeName")
		if err != nil {
			return s, err
		}
		if s.Attributes[n], err = literal(d, "AttributeType"); err != nil {
			return s, err
		}
	}
	if _, err := get(props, "GlobalSecondaryIndexes"); err == nil {
		gsis, err := list(props, "GlobalSecondaryIndexes")
		if err != nil {
			return s, err
		}
		for _, g := range gsis {
			n, err := literal(g, "IndexName")
			if err != nil {
				return s, err
			}
			var ix index
			if ix.Keys, err = keysOf(g, "KeySchema"); err != nil {
				return s, fmt.Errorf("index %s: %w", n, err)
			}
			if ix.Projection, err = literal(g, "Projection", "ProjectionType"); err != nil {
				return s, fmt.Errorf("index %s: %w", n, err)
			}
			if _, err := get(g, "Projection", "NonKeyAttributes"); err == nil {
				attrs, err := list(g, "Projection", "NonKeyAttributes")
				if err != nil {
					return s, fmt.Errorf("index %s: %w", n, err)
				}
				for _, a := range attrs {
					as, ok := a.(string)
					if !ok {
						return s, fmt.Errorf("index %s: a non-key attribute %v is not a literal string", n, a)
					}
					ix.NonKey = append(ix.NonKey, as)
				}
				slices.Sort(ix.NonKey)
			}
			if _, dup := s.Indexes[n]; dup {
				return s, fmt.Errorf("index %s twice", n)
			}
			s.Indexes[n] = ix
		}
	}
	if _, err := get(props, "TimeToLiveSpecification"); err == nil {
		on, err := get(props, "TimeToLiveSpecification", "Enabled")
		if err != nil {
			return s, err
		}
		if on == true {
			if s.TTL, err = literal(props, "TimeToLiveSpecification", "AttributeName"); err != nil {
				return s, err
			}
		} else if on != false {
			return s, fmt.Errorf("TimeToLiveSpecification.Enabled is %v, not a literal boolean", on)
		}
	}
	if _, err := get(props, "StreamSpecification"); err == nil {
		if s.Stream, err = literal(props, "StreamSpecification", "StreamViewType"); err != nil {
			return s, err
		}
	}
	return s, nil
}

// keysOf reads a KeySchema list as "name TYPE" strings.
func keysOf(v any, path ...string) ([]string, error) {
	ks, err := list(v, path...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range ks {
		n, err := literal(k, "AttributeName")
		if err != nil {
			return nil, err
		}
		typ, err := literal(k, "KeyType")
		if err != nil {
			return nil, err
		}
		out = append(out, n+" "+typ)
	}
	return out, nil
}

// describedSchema is the schema of a table as DynamoDB describes it.
func describedSchema(d *types.TableDescription, ttl *types.TimeToLiveDescription) schema {
	s := schema{Keys: describedKeys(d.KeySchema), Attributes: map[string]string{}, Indexes: map[string]index{}}
	for _, a := range d.AttributeDefinitions {
		s.Attributes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	for _, g := range d.GlobalSecondaryIndexes {
		ix := index{Keys: describedKeys(g.KeySchema)}
		if p := g.Projection; p != nil {
			ix.Projection = string(p.ProjectionType)
			ix.NonKey = slices.Sorted(slices.Values(p.NonKeyAttributes))
		}
		s.Indexes[aws.ToString(g.IndexName)] = ix
	}
	if ttl != nil {
		switch ttl.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			s.TTL = aws.ToString(ttl.AttributeName)
		}
	}
	if sp := d.StreamSpecification; sp != nil && aws.ToBool(sp.StreamEnabled) {
		s.Stream = string(sp.StreamViewType)
	}
	return s
}

func describedKeys(ks []types.KeySchemaElement) []string {
	var out []string
	for _, k := range ks {
		out = append(out, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return out
}

// TestTemplateDeclaresTheCodesTable creates the table as the gateway does
// (store.CreateTable, with its stream: KeepStreams) on DynamoDB Local and checks that the
// template declares the same keys, attribute definitions, indexes (keys, projection,
// non-key attributes), TTL attribute and stream view type. An index added to the code and
// not to the template fails it.
func TestTemplateDeclaresTheCodesTable(t *testing.T) {
	t.Parallel()
	dynlocaltest.KeepStreams(t)
	client := dynlocaltest.Client(t)
	table := dynlocaltest.TableName(t)
	st := store.New(client, table, store.WithSweepWorkers(0))
	t.Cleanup(st.Close)
	// CreateTable returns once the index is ACTIVE (DynamoDB Local builds it in the
	// background: store/migrate.go); go test's -timeout bounds a hang.
	ctx := t.Context()
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	code := describedSchema(desc.Table, ttl.TimeToLiveDescription)
	if code.Stream == "" || code.TTL == "" || len(code.Indexes) == 0 {
		t.Fatalf("the created table lacks what the comparison is about: %+v", code)
	}
	tmpl := templateSchema(t, loadTemplate(t))
	for _, d := range tmpl.diff(code) {
		t.Errorf("%s: %s", templatePath, d)
	}
}

// TestSchemaDiffSeesEveryKindOfDifference: the comparison above reports each way a
// template can drift from the code (an index added, dropped or renamed; its keys, key
// order (a multi-attribute key's too), projection or non-key attributes; the table's keys and attribute definitions;
// TTL; the stream), and nothing when they agree.
func TestSchemaDiffSeesEveryKindOfDifference(t *testing.T) {
	t.Parallel()
	base := func() schema {
		return schema{
			Keys:       []string{"pk HASH", "sk RANGE"},
			Attributes: map[string]string{"pk": "S", "sk": "S", "gsi1pk": "S", "gsi1sk": "S", "type": "S", "id": "S"},
			Indexes: map[string]index{
				"GSI1": {Keys: []string{"gsi1pk HASH", "gsi1sk RANGE"}, Projection: "ALL"},
				"GSI2": {Keys: []string{"pk HASH", "type HASH", "id RANGE"}, Projection: "ALL"},
			},
			TTL:    "expiresAt",
			Stream: "NEW_AND_OLD_IMAGES",
		}
	}
	if d := base().diff(base()); len(d) != 0 {
		t.Fatalf("equal schemas differ: %v", d)
	}
	for name, change := range map[string]func(*schema){
		"an index added": func(s *schema) {
			s.Indexes["GSI3"] = index{Keys: []string{"gsi3pk HASH", "gsi3sk RANGE"}, Projection: "ALL"}
			s.Attributes["gsi3pk"], s.Attributes["gsi3sk"] = "S", "S"
		},
		// A multi-attribute key's order is part of it: DynamoDB hashes the partition
		// attributes in order, and a Query names them all.
		"a multi-attribute key's attributes swapped": func(s *schema) {
			s.Indexes["GSI2"] = index{Keys: []string{"type HASH", "pk HASH", "id RANGE"}, Projection: "ALL"}
		},
		"a multi-attribute key's attribute dropped": func(s *schema) {
			s.Indexes["GSI2"] = index{Keys: []string{"pk HASH", "id RANGE"}, Projection: "ALL"}
		},
		"a sort attribute added to a multi-attribute key": func(s *schema) {
			s.Indexes["GSI2"] = index{Keys: []string{"pk HASH", "type HASH", "id RANGE", "sk RANGE"}, Projection: "ALL"}
		},
		"an index dropped": func(s *schema) { delete(s.Indexes, "GSI1") },
		"an index renamed": func(s *schema) {
			s.Indexes["Unread"] = s.Indexes["GSI1"]
			delete(s.Indexes, "GSI1")
		},
		"an index's sort key dropped": func(s *schema) { s.Indexes["GSI1"] = index{Keys: []string{"gsi1pk HASH"}, Projection: "ALL"} },
		"an index's keys swapped": func(s *schema) {
			s.Indexes["GSI1"] = index{Keys: []string{"gsi1sk HASH", "gsi1pk RANGE"}, Projection: "ALL"}
		},
		"an index's projection": func(s *schema) { s.Indexes["GSI1"] = index{Keys: s.Indexes["GSI1"].Keys, Projection: "KEYS_ONLY"} },
		"an index's non-key attribute": func(s *schema) {
			s.Indexes["GSI1"] = index{Keys: s.Indexes["GSI1"].Keys, Projection: "INCLUDE", NonKey: []string{"title"}}
		},
		"the table's sort key":     func(s *schema) { s.Keys = []string{"pk HASH"} },
		"an attribute's type":      func(s *schema) { s.Attributes["sk"] = "N" },
		"an attribute added":       func(s *schema) { s.Attributes["lsi"] = "S" },
		"TTL off":                  func(s *schema) { s.TTL = "" },
		"TTL on another attribute": func(s *schema) { s.TTL = "ttl" },
		"the stream off":           func(s *schema) { s.Stream = "" },
		"the stream's view":        func(s *schema) { s.Stream = "NEW_IMAGE" },
	} {
		code := base()
		change(&code)
		if d := base().diff(code); len(d) == 0 {
			t.Errorf("%s: no difference reported", name)
		}
		if d := code.diff(base()); len(d) == 0 {
			t.Errorf("%s (the other way round): no difference reported", name)
		}
	}
}

// TestTemplateSchemaReadsWhatItCompares: the template reader takes each compared value
// from the template (a change there is a change of the schema) and refuses a computed
// value where the table must be written out.
func TestTemplateSchemaReadsWhatItCompares(t *testing.T) {
	t.Parallel()
	const src = `
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions:
        - {AttributeName: pk, AttributeType: S}
        - {AttributeName: sk, AttributeType: S}
        - {AttributeName: g, AttributeType: S}
      KeySchema:
        - {AttributeName: pk, KeyType: HASH}
        - {AttributeName: sk, KeyType: RANGE}
      GlobalSecondaryIndexes:
        - IndexName: G
          KeySchema: [{AttributeName: g, KeyType: HASH}]
          Projection: {ProjectionType: INCLUDE, NonKeyAttributes: [b, a]}
      TimeToLiveSpecification: {AttributeName: exp, Enabled: true}
      StreamSpecification: {StreamViewType: KEYS_ONLY}
`
	tmpl, err := parseTemplate([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := templateSchema(t, tmpl)
	want := schema{
		Keys:       []string{"pk HASH", "sk RANGE"},
		Attributes: map[string]string{"pk": "S", "sk": "S", "g": "S"},
		Indexes:    map[string]index{"G": {Keys: []string{"g HASH"}, Projection: "INCLUDE", NonKey: []string{"a", "b"}}},
		TTL:        "exp",
		Stream:     "KEYS_ONLY",
	}
	if d := got.diff(want); len(d) != 0 {
		t.Errorf("read %+v: %v", got, d)
	}
	for name, edit := range map[string][2]string{
		"a computed index name": {"IndexName: G", "IndexName: !Ref IndexParam"},
		"a computed TTL switch": {"Enabled: true", "Enabled: !If [C, true, false]"},
		"a computed stream":     {"StreamViewType: KEYS_ONLY", "StreamViewType: !Ref View"},
		"a computed key":        {"{AttributeName: pk, KeyType: HASH}", "{AttributeName: !Ref K, KeyType: HASH}"},
		"an index twice": {"      TimeToLiveSpecification", "        - IndexName: G\n          KeySchema: [{AttributeName: g, KeyType: HASH}]\n" +
			"          Projection: {ProjectionType: ALL}\n      TimeToLiveSpecification"},
	} {
		tmpl, err := parseTemplate([]byte(replaceOnce(t, src, edit[0], edit[1])))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, table := oneResource(t, tmpl, "AWS::DynamoDB::Table")
		if s, err := schemaOfProperties(table["Properties"]); err == nil {
			t.Errorf("%s: read as %+v, want an error", name, s)
		}
	}
}

// replaceOnce replaces the one occurrence of old in s.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%q is in the source %d times, want once", old, n)
	}
	return strings.Replace(s, old, new, 1)
}
