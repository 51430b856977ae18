package httpapi

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

func TestByteCacheEvictsByBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A budget of 1,600 bytes: entries up to 100 bytes (1/16) are cached.
	c := newByteCache(1600, func(k, v string) int { return len(k) + len(v) })
	for i := range 20 {
		c.Add(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", 97)) // 100 bytes each
		if _, bytes := c.size(); bytes > 1600 {
			t.Fatalf("after %d adds: %d bytes, over the 1600 budget", i+1, bytes)
		}
	}
	if n, bytes := c.size(); n != 16 || bytes != 1600 {
		t.Errorf("%d entries, %d bytes; want the last 16, 1600 bytes", n, bytes)
	}
	if _, ok := c.Get(ctx, "k03"); ok {
		t.Error("the least recently used entry was kept")
	}
	if _, ok := c.Get(ctx, "k04"); !ok {
		t.Error("a recent entry was evicted")
	}
	// k04 was just used: adding one more evicts k05, not k04.
	c.Add(ctx, "new", strings.Repeat("v", 97))
	if _, ok := c.Get(ctx, "k04"); !ok {
		t.Error("the entry used last was evicted")
	}
	if _, ok := c.Get(ctx, "k05"); ok {
		t.Error("the least recently used entry was kept")
	}
	// Replacing an entry charges it once.
	c.Add(ctx, "new", strings.Repeat("w", 97))
	if n, bytes := c.size(); n != 16 || bytes != 1600 {
		t.Errorf("after a replace: %d entries, %d bytes, want 16, 1600", n, bytes)
	}
	// An entry over 1/16 of the budget is not cached at all (and evicts nothing).
	c.Add(ctx, "big", strings.Repeat("v", 98))
	if _, ok := c.Get(ctx, "big"); ok {
		t.Error("an entry over the per-entry bound was cached")
	}
	if n, _ := c.size(); n != 16 {
		t.Errorf("%d entries after the refused one, want 16", n)
	}
}

// TestQueryCacheChargeCoversTheAST measures what a parsed document costs in heap (its
// text and its AST, live heap after a collection) and checks that the query cache's
// charge covers it.
func TestQueryCacheChargeCoversTheAST(t *testing.T) {
	introspection, err := os.ReadFile("testdata/introspection.graphql")
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"GraphiQL introspection": string(introspection),
		"inbox page":             `query Page($first: Int, $after: String) { viewer { id unreadCount unseenCount badge { unread unseen categories { category unread unseen } } inbox(first: $first, after: $after) { edges { cursor node { id type category title body read readAt seen createdAt payload actor { id name avatarUrl url } target { id kind title url } } } pageInfo { hasNextPage endCursor } } } }`,
		"aliases":                "{" + strings.Repeat(" a: __typename", 300) + " }",
		"comment padding":        "{ __typename }\n#" + strings.Repeat("p", 20000),
	} {
		const n = 200
		docs := make([]*ast.QueryDocument, n)
		var text, charged int
		cost := newQueryCache(1 << 30).cost
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range docs {
			q := fmt.Sprintf("# %d\n%s", i, doc) // distinct texts, as distinct cache keys are
			text += len(q)
			if docs[i], err = parser.ParseQuery(&ast.Source{Input: q}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			charged += cost(q, docs[i])
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(docs)
		heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
		t.Logf("%s: %d bytes of text, %d nodes; heap %.1f bytes per byte of text, %.0f per node; charged %.2f of the heap",
			name, text/n, astNodes(docs[0]), heap/float64(text), (heap-float64(text))/float64(n*astNodes(docs[0])), float64(charged)/heap)
		if float64(charged) < 0.95*heap { // 5%: the heap measure's noise

			t.Errorf("%s: charged %d bytes for %.0f bytes of heap", name, charged, heap)
		}
	}
}
