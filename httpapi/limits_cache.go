package httpapi

import (
	"context"
	"math"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vektah/gqlparser/v2/ast"
)

// Caches bounded by bytes (issue 8, item 2). gqlgen's lru.New bounds its caches by
// entries: 1,000 distinct 1 MB documents (padding in a comment) pinned 1.68 GB. These
// charge every entry for the text it holds and evict the least recently used entries until
// the total fits.

// DefaultQueryCacheBytes is the default budget of the parsed-query cache (16 MiB).
const DefaultQueryCacheBytes = 16 << 20

// DefaultAPQCacheBytes is the default budget of the automatic persisted queries cache
// (hash -> query text), 4 MiB.
const DefaultAPQCacheBytes = 4 << 20

// astNodeBytes is what one node of a parsed document (a field, an argument, a value, a
// directive, a variable definition...) costs in heap, with its share of the document's
// fixed overhead. The query text alone is not a fair proxy of the AST: measured with
// TestQueryCacheChargeCoversTheAST (live heap after parsing 200 distinct documents), the
// AST costs 10.7 bytes per byte of text for GraphiQL's introspection query, 17 for 300
// aliases of __typename and 29 for an inbox page query, but 1.1 for a document padded
// with a comment. Per node it is about 150-250 bytes; 320 covers every case measured.
const astNodeBytes = 320

// docBytes is a cached document's fixed cost besides its text and nodes: the document,
// its Source, the cache's list entry and map slot (measured about 300-400 bytes; the
// rest is margin for a document of few nodes and a long text).
const docBytes = 2048

// maxCachedFraction: a document whose charge is over this fraction of the budget is not
// cached at all (it would evict a useful share of the cache for one entry; a legitimate
// document is a few KiB).
const maxCachedFraction = 16

// byteCache is a graphql.Cache on a least-recently-used list (hashicorp/golang-lru's
// simplelru, under a mutex) bounded by the sum of its entries' charges in bytes.
type byteCache[T any] struct {
	mu       sync.Mutex
	lru      *simplelru.LRU[string, T]
	cost     func(key string, v T) int
	bytes    int // sum of the charges of the entries held
	max      int // the budget
	maxEntry int // entries charged more are not cached
}

// newByteCache returns a cache of at most maxBytes (charged by cost).
func newByteCache[T any](maxBytes int, cost func(key string, v T) int) *byteCache[T] {
	c := &byteCache[T]{cost: cost, max: maxBytes, maxEntry: maxBytes / maxCachedFraction}
	// The entry count is bounded by the bytes (every entry costs at least its key); the
	// LRU's own size limit is only a formality.
	c.lru, _ = simplelru.NewLRU[string, T](math.MaxInt32, func(key string, v T) { c.bytes -= c.cost(key, v) })
	return c
}

// Get returns the value of key and marks it recently used.
func (c *byteCache[T]) Get(_ context.Context, key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(key)
}

// Add caches v under key unless it costs more than the per-entry bound, then evicts the
// least recently used entries until the total is within the budget.
func (c *byteCache[T]) Add(_ context.Context, key string, v T) {
	n := c.cost(key, v)
	if n > c.maxEntry {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(key) // a replaced entry gives its charge back (the eviction callback)
	c.lru.Add(key, v)
	c.bytes += n
	for c.bytes > c.max {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// size returns the number of entries and their total charge in bytes.
func (c *byteCache[T]) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

// newQueryCache is the parsed-document cache: each document is charged docBytes, its
// text (the cache key, which the AST's Source shares) and astNodeBytes per node of its AST.
func newQueryCache(maxBytes int) *byteCache[*ast.QueryDocument] {
	return newByteCache(maxBytes, func(query string, doc *ast.QueryDocument) int {
		return docBytes + len(query) + astNodeBytes*astNodes(doc)
	})
}

// astNodes counts the nodes of a parsed document.
func astNodes(doc *ast.QueryDocument) int {
	if doc == nil {
		return 0
	}
	n := 1
	for _, op := range doc.Operations {
		n += 1 + directiveNodes(op.Directives) + selectionNodes(op.SelectionSet)
		for _, v := range op.VariableDefinitions {
			n += 2 + valueNodes(v.DefaultValue) + directiveNodes(v.Directives)
		}
	}
	for _, f := range doc.Fragments {
		n += 1 + directiveNodes(f.Directives) + selectionNodes(f.SelectionSet)
	}
	return n
}

func selectionNodes(set ast.SelectionSet) int {
	n := 0
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			n += 1 + directiveNodes(s.Directives) + selectionNodes(s.SelectionSet)
			for _, a := range s.Arguments {
				n += 1 + valueNodes(a.Value)
			}
		case *ast.InlineFragment:
			n += 1 + directiveNodes(s.Directives) + selectionNodes(s.SelectionSet)
		case *ast.FragmentSpread:
			n += 1 + directiveNodes(s.Directives)
		}
	}
	return n
}

func directiveNodes(list ast.DirectiveList) int {
	n := 0
	for _, d := range list {
		n++
		for _, a := range d.Arguments {
			n += 1 + valueNodes(a.Value)
		}
	}
	return n
}

func valueNodes(v *ast.Value) int {
	if v == nil {
		return 0
	}
	n := 1
	for _, c := range v.Children {
		n += valueNodes(c.Value)
	}
	return n
}

// newAPQCache is the persisted-query cache (sha256 hex -> query text): each entry is
// charged its hash and its text.
func newAPQCache(maxBytes int) *byteCache[string] {
	return newByteCache(maxBytes, func(hash, query string) int { return len(hash) + len(query) })
}

var (
	_ graphql.Cache[*ast.QueryDocument] = (*byteCache[*ast.QueryDocument])(nil)
	_ graphql.Cache[string]             = (*byteCache[string])(nil)
)
