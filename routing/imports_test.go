package routing_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package's non-test files import only the standard library, package inbox and
// golang.org/x/text (DESIGN.md "The shape (v3)"): decisions never reach for the store
// or an AWS package.
func TestImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			std := !strings.Contains(first, ".")
			if !std && path != "github.com/inboxgw/gateway/inbox" && !strings.HasPrefix(path, "golang.org/x/text/") {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
