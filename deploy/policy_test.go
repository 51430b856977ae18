package deploy

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// How the policies are checked against the code: the DynamoDB and DynamoDB Streams
// operations the gateway calls are found in the source of every package the gateway
// binary links (go list -deps of the module's main package): each method call named as
// an operation of the SDK's clients with at least two arguments (ctx and the input; the
// store's own one-argument CreateTable is not one). A TransactWriteItems is authorised
// per item action, read from the transaction items the code builds (types.Put, Update,
// Delete, ConditionCheck). Calls made only by store.CreateTable (what INBOX_CREATE_TABLE=1
// runs) are the migrator's; every other call is the gateway's.

// notDeployed are the module's packages the gateway links but whose DynamoDB calls never
// reach AWS, and why.
var notDeployed = map[string]string{
	"dynlocal":  "drives DynamoDB Local, the engine of INBOX_STORE=local and of the tests",
	"datamodel": "the `model` command: builds the design note on a new table of its own (DynamoDB Local in make model), never the deployed table",
}

// localOnly are calls, in deployed packages, that only ever go to DynamoDB Local, and why.
var localOnly = []struct{ File, Func, API, Why string }{
	{"app/server.go", "answers", "ListTables", "asks whether the DynamoDB Local of an earlier run still answers (INBOX_STORE=local)"},
}

// migrationRoot is the function whose calls are table management (INBOX_CREATE_TABLE=1).
var migrationRoot = struct{ Pkg, Func string }{"store", "Store.CreateTable"}

// txItemActions are the IAM actions that authorise each kind of transaction item.
var txItemActions = map[string]string{
	"Put":            "dynamodb:PutItem",
	"Update":         "dynamodb:UpdateItem",
	"Delete":         "dynamodb:DeleteItem",
	"ConditionCheck": "dynamodb:ConditionCheckItem",
	"Get":            "dynamodb:GetItem",
}

// streamActions are the actions on a table's stream (resource .../stream/*).
var streamActions = map[string]bool{
	"dynamodb:DescribeStream": true, "dynamodb:GetRecords": true, "dynamodb:GetShardIterator": true,
}

// goPackage is a package's import path relative to the module ("" for the main package),
// its directory and its Go files.
type goPackage struct {
	Rel     string
	Dir     string
	GoFiles []string
}

// sdkOperations returns the operations of the DynamoDB and DynamoDB Streams clients: the
// methods taking (ctx, *<Name>Input, ...options).
func sdkOperations() map[string]bool {
	ops := map[string]bool{}
	for _, c := range []any{&dynamodb.Client{}, &dynamodbstreams.Client{}} {
		typ := reflect.TypeOf(c)
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			ft := m.Type
			if ft.NumIn() != 4 || !ft.IsVariadic() || ft.In(1) != reflect.TypeFor[context.Context]() {
				continue
			}
			if in := ft.In(2); in.Kind() == reflect.Pointer && in.Elem().Name() == m.Name+"Input" {
				ops[m.Name] = true
			}
		}
	}
	return ops
}

// moduleRoot returns the module's directory and path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return dir, strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod names no module")
	return "", ""
}

// deployedPackages returns the module's packages the gateway binary links (go list -deps
// of the main package), without notDeployed's.
func deployedPackages(t *testing.T) []goPackage {
	t.Helper()
	root, module := moduleRoot(t)
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{"\t"}}{{.Dir}}{{"\t"}}{{join .GoFiles " "}} {{join .CgoFiles " "}}`, ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps .: %v", err)
	}
	var pkgs []goPackage
	seen := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimRight(line, "\n"), "\t", 3)
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		rel, ok := strings.CutPrefix(f[0], module)
		if !ok || (rel != "" && rel[0] != '/') {
			continue // another module's
		}
		rel = strings.TrimPrefix(rel, "/")
		seen[rel] = true
		if _, skip := notDeployed[rel]; skip {
			continue
		}
		pkgs = append(pkgs, goPackage{Rel: rel, Dir: f[1], GoFiles: strings.Fields(f[2])})
	}
	for _, rel := range sortedKeys(notDeployed) {
		if !seen[rel] {
			t.Errorf("notDeployed names %s, which the gateway no longer links: drop it", rel)
		}
	}
	if !seen[migrationRoot.Pkg] {
		t.Fatalf("the gateway does not link %s", migrationRoot.Pkg)
	}
	return pkgs
}

// deriveGateway derives what the gateway's code calls (derive over deployedPackages).
func deriveGateway(t *testing.T) derivation {
	t.Helper()
	root, _ := moduleRoot(t)
	d, err := derive(root, deployedPackages(t), sdkOperations())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// apiCall is one call of a DynamoDB operation in the source.
type apiCall struct {
	API  string
	Pos  string // file:line relative to the module root
	File string
	Func string // the enclosing function: "Recv.Name", "Name", or "" at package level
}

// funcInfo is what a function's body does, for the derivation.
type funcInfo struct {
	id      string    // "Recv.Name", "Name", or "" for package-level initialisers
	callees []string  // names of what it calls (f() and x.f(), not pkg.F())
	calls   []apiCall // its DynamoDB calls
	txItems []string  // kinds of transaction items it builds (Put, Update, ...), with positions
}

// derivation is the IAM actions each policy needs, with where the code needs them.
type derivation struct {
	Gateway  map[string][]string // action -> positions
	Migrator map[string][]string
	// GatewayOps are the operations the gateway calls (TransactWriteItems, not its items).
	GatewayOps map[string]bool
	Calls      []apiCall // every DynamoDB call found, local ones included
	Errors     []string  // calls no policy may or can authorise (Scan, PartiQL, ...)
}

// derive finds the DynamoDB calls of pkgs (rooted at root) and the IAM actions they need.
func derive(root string, pkgs []goPackage, ops map[string]bool) (derivation, error) {
	d := derivation{Gateway: map[string][]string{}, Migrator: map[string][]string{}, GatewayOps: map[string]bool{}}
	fset := token.NewFileSet()
	var txItems []string                        // kind@pos, anywhere
	txNeeds := map[string]map[string][]string{} // the classes that write transactions, by name
	for _, p := range pkgs {
		var funcs []*funcInfo
		for _, name := range p.GoFiles {
			file := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				return d, err
			}
			rel, err := filepath.Rel(root, file)
			if err != nil {
				return d, err
			}
			funcs = append(funcs, fileFuncs(fset, f, filepath.ToSlash(rel), ops)...)
		}
		// Reachability by name within the package: over-approximate (a call x.f() reaches
		// every function or method named f), so that a function errs toward counting in
		// both classes: a policy then needs more, which the policy test reports.
		byName := map[string][]*funcInfo{}
		for _, f := range funcs {
			_, name, _ := strings.Cut(f.id, ".")
			if name == "" {
				name = f.id
			}
			byName[name] = append(byName[name], f)
		}
		reach := func(roots []*funcInfo) map[*funcInfo]bool {
			seen := map[*funcInfo]bool{}
			stack := slices.Clone(roots)
			for len(stack) > 0 {
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if seen[f] {
					continue
				}
				seen[f] = true
				for _, c := range f.callees {
					stack = append(stack, byName[c]...)
				}
			}
			return seen
		}
		var migration map[*funcInfo]bool
		if p.Rel == migrationRoot.Pkg {
			var roots []*funcInfo
			for _, f := range funcs {
				if f.id == migrationRoot.Func {
					roots = append(roots, f)
				}
			}
			if len(roots) != 1 {
				return d, fmt.Errorf("package %s has %d functions %s", p.Rel, len(roots), migrationRoot.Func)
			}
			migration = reach(roots)
		}
		var others []*funcInfo
		for _, f := range funcs {
			if !migration[f] {
				others = append(others, f)
			}
		}
		gateway := reach(others)
		for _, f := range funcs {
			txItems = append(txItems, f.txItems...)
			for _, c := range f.calls {
				d.Calls = append(d.Calls, c)
				if isLocalOnly(c) {
					continue
				}
				if gateway[f] {
					d.GatewayOps[c.API] = true
				}
				actions, err := actionsOf(c.API)
				if err != nil {
					d.Errors = append(d.Errors, fmt.Sprintf("%s: %s: %v", c.Pos, c.API, err))
					continue
				}
				for _, class := range []struct {
					name string
					in   bool
					need map[string][]string
				}{{"gateway", gateway[f], d.Gateway}, {"migrator", migration[f], d.Migrator}} {
					if !class.in {
						continue
					}
					if c.API == "TransactWriteItems" || c.API == "TransactGetItems" {
						txNeeds[class.name] = class.need
					}
					for _, a := range actions {
						class.need[a] = append(class.need[a], c.Pos)
					}
				}
			}
		}
	}
	// A transaction is authorised per item: each kind of item the code builds needs its
	// item action wherever transactions are written.
	if len(txNeeds) > 0 && len(txItems) == 0 {
		d.Errors = append(d.Errors, "transactions are called but no transaction item (types.Put, Update, Delete, ConditionCheck, Get) is built")
	}
	for _, need := range txNeeds {
		for _, k := range txItems {
			kind, pos, _ := strings.Cut(k, "@")
			need[txItemActions[kind]] = append(need[txItemActions[kind]], pos)
		}
	}
	return d, nil
}

// isLocalOnly reports whether c is one of localOnly's calls.
func isLocalOnly(c apiCall) bool {
	for _, l := range localOnly {
		if c.File == l.File && c.Func == l.Func && c.API == l.API {
			return true
		}
	}
	return false
}

// actionsOf returns the IAM actions that authorise a call of operation api (the item
// actions of a transaction come from its items, see derive).
func actionsOf(api string) ([]string, error) {
	switch api {
	case "Scan":
		return nil, fmt.Errorf("the gateway never scans the table (use a Query on a key or an index)")
	case "TransactWriteItems", "TransactGetItems":
		return nil, nil
	case "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction":
		return nil, fmt.Errorf("PartiQL's IAM actions depend on the statement; this test cannot derive them")
	}
	return []string{"dynamodb:" + api}, nil
}

// fileFuncs returns what each function of f does (and its package-level initialisers, as
// a function named "").
func fileFuncs(fset *token.FileSet, f *ast.File, rel string, ops map[string]bool) []*funcInfo {
	imports := map[string]bool{}
	typesPkg := ""
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := path.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = true
		if p == "github.com/aws/aws-sdk-go-v2/service/dynamodb/types" {
			typesPkg = name
		}
	}
	// typesName returns T when e is the SDK's types.T ("" otherwise).
	typesName := func(e ast.Expr) string {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || typesPkg == "" {
			return ""
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != typesPkg {
			return ""
		}
		return sel.Sel.Name
	}
	isTxItemList := func(e ast.Expr) bool {
		a, ok := e.(*ast.ArrayType)
		if !ok {
			return false
		}
		n := typesName(a.Elt)
		return n == "TransactWriteItem" || n == "TransactGetItem"
	}
	inspect := func(fi *funcInfo, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				switch fun := n.Fun.(type) {
				case *ast.Ident:
					fi.callees = append(fi.callees, fun.Name)
				case *ast.SelectorExpr:
					if x, ok := fun.X.(*ast.Ident); ok && imports[x.Name] {
						break // pkg.F(): another package's
					}
					fi.callees = append(fi.callees, fun.Sel.Name)
					if ops[fun.Sel.Name] && len(n.Args) >= 2 {
						p := fset.Position(n.Pos())
						fi.calls = append(fi.calls, apiCall{API: fun.Sel.Name, Pos: fmt.Sprintf("%s:%d", rel, p.Line), File: rel, Func: fi.id})
					}
				}
			case *ast.CompositeLit:
				pos := fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line)
				name := typesName(n.Type)
				if _, ok := txItemActions[name]; ok {
					fi.txItems = append(fi.txItems, name+"@"+pos) // &types.Put{...}
				}
				switch {
				case name == "TransactWriteItem" || name == "TransactGetItem":
					fi.txItems = append(fi.txItems, itemFields(n, pos)...)
				case isTxItemList(n.Type):
					// []types.TransactWriteItem{{Put: p}, ...}: the items' type is elided.
					for _, e := range n.Elts {
						if el, ok := e.(*ast.CompositeLit); ok && el.Type == nil {
							fi.txItems = append(fi.txItems, itemFields(el, pos)...)
						}
					}
				}
			}
			return true
		})
	}
	var out []*funcInfo
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			fi := &funcInfo{id: decl.Name.Name}
			if decl.Recv != nil && len(decl.Recv.List) == 1 {
				fi.id = recvName(decl.Recv.List[0].Type) + "." + decl.Name.Name
			}
			if decl.Body != nil {
				inspect(fi, decl.Body)
			}
			out = append(out, fi)
		case *ast.GenDecl:
			fi := &funcInfo{}
			inspect(fi, decl)
			out = append(out, fi)
		}
	}
	return out
}

// itemFields returns the kinds of the fields a transaction item literal sets (Put,
// Update, ...), each with pos.
func itemFields(lit *ast.CompositeLit, pos string) []string {
	var out []string
	for _, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok {
				if _, ok := txItemActions[k.Name]; ok {
					out = append(out, k.Name+"@"+pos)
				}
			}
		}
	}
	return out
}

// recvName returns a receiver type's name (T for T, *T, T[P], *T[P]).
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// policy is a managed policy's statements, read from the template.
type policy struct {
	Actions   map[string][]string // action -> the resources it is allowed on
	Resources []string
}

// Resource forms a policy may name (anything else fails the policy test).
const (
	resTable  = "table"
	resIndex  = "table/index/*"
	resStream = "table/stream/*"
)

// readPolicies reads every managed policy of the template, checking that each statement
// allows literal actions on this table, its indexes or its stream only.
func readPolicies(t *testing.T, tmpl map[string]any) map[string]policy {
	t.Helper()
	tableID, _ := oneResource(t, tmpl, "AWS::DynamoDB::Table")
	allowed := map[string]string{
		fmt.Sprint(map[string]any{"Fn::GetAtt": []any{tableID, "Arn"}}):          resTable,
		fmt.Sprint(map[string]any{"Fn::Sub": "${" + tableID + ".Arn}/index/*"}):  resIndex,
		fmt.Sprint(map[string]any{"Fn::Sub": "${" + tableID + ".Arn}/stream/*"}): resStream,
	}
	out := map[string]policy{}
	for id, r := range resources(t, tmpl, "AWS::IAM::ManagedPolicy") {
		p := policy{Actions: map[string][]string{}}
		stmts, err := list(r, "Properties", "PolicyDocument", "Statement")
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for i, s := range stmts {
			m, ok := s.(map[string]any)
			if !ok {
				t.Fatalf("%s statement %d is not a mapping", id, i)
			}
			for k := range m {
				if k != "Sid" && k != "Effect" && k != "Action" && k != "Resource" {
					t.Errorf("%s statement %d has %s: only Sid, Effect, Action and Resource are expected", id, i, k)
				}
			}
			if m["Effect"] != "Allow" {
				t.Errorf("%s statement %d: Effect %v, want Allow", id, i, m["Effect"])
			}
			var res []string
			for _, rv := range oneOrMany(m["Resource"]) {
				form, ok := allowed[fmt.Sprint(rv)]
				if !ok {
					t.Errorf("%s statement %d: resource %v is not the table, its indexes or its stream", id, i, rv)
					continue
				}
				res = append(res, form)
				if !slices.Contains(p.Resources, form) {
					p.Resources = append(p.Resources, form)
				}
			}
			for _, av := range oneOrMany(m["Action"]) {
				a, ok := av.(string)
				if !ok || strings.ContainsAny(a, "*?") || !strings.HasPrefix(a, "dynamodb:") {
					t.Errorf("%s statement %d: action %v is not one literal DynamoDB action", id, i, av)
					continue
				}
				p.Actions[a] = append(p.Actions[a], res...)
			}
		}
		out[id] = p
	}
	return out
}

// oneOrMany returns v as a list (IAM takes a string or a list).
func oneOrMany(v any) []any {
	if s, ok := v.([]any); ok {
		return s
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// policyDiff lists what policy lacks of need and what it grants beyond it.
func policyDiff(name string, p policy, need map[string][]string) []string {
	var out []string
	for _, a := range sortedKeys(need) {
		if _, ok := p.Actions[a]; !ok {
			out = append(out, fmt.Sprintf("%s lacks %s, which the code needs at %s", name, a, strings.Join(firstFew(need[a]), ", ")))
		}
	}
	for _, a := range sortedKeys(p.Actions) {
		if _, ok := need[a]; !ok {
			out = append(out, fmt.Sprintf("%s grants %s, which the code never calls there", name, a))
		}
	}
	return out
}

func firstFew(s []string) []string {
	s = slices.Compact(slices.Sorted(slices.Values(s)))
	if len(s) > 3 {
		return append(s[:3:3], fmt.Sprintf("and %d more", len(s)-3))
	}
	return s
}

// resourceProblems lists actions allowed on resources they do not act on: the stream's
// actions only on the stream, Query on the table and its indexes, the rest on the table.
func resourceProblems(name string, p policy) []string {
	var out []string
	for _, a := range sortedKeys(p.Actions) {
		want := []string{resTable}
		switch {
		case streamActions[a]:
			want = []string{resStream}
		case a == "dynamodb:Query":
			want = []string{resTable, resIndex}
		}
		got := slices.Compact(slices.Sorted(slices.Values(p.Actions[a])))
		if !slices.Equal(got, want) {
			out = append(out, fmt.Sprintf("%s allows %s on %v, want %v", name, a, got, want))
		}
	}
	return out
}

// TestPoliciesGrantWhatTheCodeCalls: GatewayPolicy grants exactly the DynamoDB actions the
// gateway's code calls (outside store.CreateTable) and MigratorPolicy exactly those
// store.CreateTable calls, derived from the source of every package the gateway links; each
// on the resources it acts on (the table, Query also its indexes, the stream's reads its
// stream); no policy grants Scan. A new DynamoDB call without its permission fails here.
func TestPoliciesGrantWhatTheCodeCalls(t *testing.T) {
	t.Parallel()
	d := deriveGateway(t)
	for _, e := range d.Errors {
		t.Errorf("the code: %s", e)
	}
	for _, l := range localOnly {
		if !slices.ContainsFunc(d.Calls, func(c apiCall) bool { return c.File == l.File && c.Func == l.Func && c.API == l.API }) {
			t.Errorf("localOnly names %s in %s of %s, which is no longer called there: drop it", l.API, l.Func, l.File)
		}
	}
	if len(d.Gateway) == 0 || len(d.Migrator) == 0 {
		t.Fatalf("derived nothing: gateway %v, migrator %v", sortedKeys(d.Gateway), sortedKeys(d.Migrator))
	}
	t.Logf("gateway: %v", sortedKeys(d.Gateway))
	t.Logf("migrator: %v", sortedKeys(d.Migrator))

	policies := readPolicies(t, loadTemplate(t))
	for id, p := range policies {
		for _, problem := range resourceProblems(id, p) {
			t.Error(problem)
		}
		for a := range p.Actions {
			if strings.EqualFold(a, "dynamodb:Scan") {
				t.Errorf("%s grants Scan", id)
			}
		}
	}
	for id, need := range map[string]map[string][]string{"GatewayPolicy": d.Gateway, "MigratorPolicy": d.Migrator} {
		p, ok := policies[id]
		if !ok {
			t.Errorf("the template has no managed policy %s", id)
			continue
		}
		for _, problem := range policyDiff(id, p, need) {
			t.Error(problem)
		}
	}
	if ids := sortedKeys(policies); !slices.Equal(ids, []string{"GatewayPolicy", "MigratorPolicy"}) {
		t.Errorf("managed policies %v, want GatewayPolicy and MigratorPolicy (a new one needs its derivation here)", ids)
	}
}

// TestDeriveFindsEveryKindOfCall: the derivation the policy test relies on finds each way
// code calls DynamoDB (a new operation, an input in a variable, a Streams call, another
// import name for the SDK's types, transaction items written inline or built apart),
// reports a Scan or a PartiQL statement, ignores the store's one-argument CreateTable and
// calls of other packages' functions, and splits store.CreateTable's calls from the rest.
func TestDeriveFindsEveryKindOfCall(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"store/store.go": `package store
import (
	"context"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)
type Store struct{ db *dynamodb.Client }
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.db.CreateTable(ctx, &dynamodb.CreateTableInput{})
	if err == nil {
		err = s.ensure(ctx)
	}
	return err
}
func (s *Store) ensure(ctx context.Context) error {
	_, err := s.describe(ctx)
	s.db.UpdateTimeToLive(ctx, nil)
	return err
}
func (s *Store) describe(ctx context.Context) (*dynamodb.DescribeTableOutput, error) {
	return s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{})
}
func (s *Store) Send(ctx context.Context, in *dynamodb.BatchWriteItemInput) {
	s.db.BatchWriteItem(ctx, in)
	s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: put()}}})
	s.describe(ctx)
}
func put() *types.Put { return nil }
func check() types.TransactWriteItem { return types.TransactWriteItem{ConditionCheck: nil} }
`,
		"relay/relay.go": `package relay
import (
	"context"
	streams "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)
type R struct{ s *streams.Client }
var _ = ddb.Delete{}
func (r *R) Read(ctx context.Context) {
	r.s.GetRecords(ctx, &streams.GetRecordsInput{})
	r.s.ListStreams(ctx, nil)
}
`,
		"app/app.go": `package app
import (
	"context"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)
type st interface{ CreateTable(context.Context) error; Query(context.Context) error }
func run(ctx context.Context, s st, c *dynamodb.Client) {
	s.CreateTable(ctx)
	s.Query(ctx)
	c.Scan(ctx, nil)
	c.ExecuteStatement(ctx, nil)
	dynamodb.NewFromConfig(nil, nil)
}
`,
	}
	root := t.TempDir()
	var pkgs []goPackage
	for _, rel := range sortedKeys(files) {
		dir := filepath.Join(root, filepath.Dir(rel))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(files[rel]), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, goPackage{Rel: filepath.Dir(rel), Dir: dir, GoFiles: []string{filepath.Base(rel)}})
	}
	d, err := derive(root, pkgs, sdkOperations())
	if err != nil {
		t.Fatal(err)
	}
	wantGateway := []string{"dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem", "dynamodb:DeleteItem", "dynamodb:DescribeTable",
		"dynamodb:GetRecords", "dynamodb:ListStreams", "dynamodb:PutItem"}
	if got := sortedKeys(d.Gateway); !slices.Equal(got, wantGateway) {
		t.Errorf("gateway actions %v, want %v", got, wantGateway)
	}
	wantMigrator := []string{"dynamodb:CreateTable", "dynamodb:DescribeTable", "dynamodb:UpdateTimeToLive"}
	if got := sortedKeys(d.Migrator); !slices.Equal(got, wantMigrator) {
		t.Errorf("migrator actions %v, want %v", got, wantMigrator)
	}
	if len(d.Errors) != 2 || !strings.Contains(d.Errors[0]+d.Errors[1], "Scan") || !strings.Contains(d.Errors[0]+d.Errors[1], "ExecuteStatement") {
		t.Errorf("errors %q, want one for the Scan and one for the PartiQL statement", d.Errors)
	}

	// And the comparison with a policy: what the code gained fails, what it lost too.
	p := policy{Actions: map[string][]string{"dynamodb:PutItem": {resTable}, "dynamodb:GetItem": {resTable}}}
	problems := policyDiff("P", p, map[string][]string{"dynamodb:PutItem": {"a.go:1"}, "dynamodb:BatchWriteItem": {"b.go:2"}})
	if len(problems) != 2 || !strings.Contains(problems[0], "lacks dynamodb:BatchWriteItem") || !strings.Contains(problems[1], "grants dynamodb:GetItem") {
		t.Errorf("policyDiff = %q", problems)
	}
	for _, c := range []struct {
		action string
		res    []string
		ok     bool
	}{
		{"dynamodb:GetRecords", []string{resStream}, true},
		{"dynamodb:GetRecords", []string{resTable}, false},
		{"dynamodb:Query", []string{resTable, resIndex}, true},
		{"dynamodb:Query", []string{resTable}, false},
		{"dynamodb:GetItem", []string{resTable, resIndex}, false},
		{"dynamodb:PutItem", []string{resTable}, true},
	} {
		got := resourceProblems("P", policy{Actions: map[string][]string{c.action: c.res}})
		if (len(got) == 0) != c.ok {
			t.Errorf("%s on %v: problems %q, want ok=%v", c.action, c.res, got, c.ok)
		}
	}
}
