package httpapi_test

import (
	"fmt"
	"testing"
)

// TestEveryPageInTwoCalls records the DynamoDB calls of inbox pages whose selection
// renders actors and targets: the first page (one Query bringing META, then the
// profiles), a page after it and a page before a cursor (a Query, then META and the
// profiles in ONE BatchGetItem), and a later page filtered by type. Each costs exactly two
// calls, and the read and seen states of the deferred-META pages are exactly those of the
// same pages read without profiles (META by GetItem alongside the Query): a markAllRead
// watermark, an explicit unread mark below it, an explicit read mark above it and a seen
// mark.
func TestEveryPageInTwoCalls(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.seed(t, 20, "issues.opened", mod(7), mod(5))
	g.ops(t, `mutation { markAllRead { unreadCount } }`, nil)
	g.seed(t, 10, "push", mod(3), mod(2))
	ids := nodeIDs(t, g, `{ viewer { inbox(first: 30) { nodes { id } } } }`)
	if len(ids) != 30 {
		t.Fatalf("seeded inbox has %d notifications", len(ids))
	}
	// ids[12] was read by the watermark, then marked unread; ids[3] is unread, marked read;
	// ids[5] is unread and seen.
	g.ops(t, `mutation($ids: [ID!]!) { markUnread(ids: $ids) { unreadCount } }`, map[string]any{"ids": []any{ids[12]}})
	g.ops(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }`, map[string]any{"ids": []any{ids[3]}})
	g.ops(t, `mutation($ids: [ID!]!) { markSeen(ids: $ids) { unreadCount } }`, map[string]any{"ids": []any{ids[5]}})

	const withProfiles = `edges { node { id read seen actor { name } target { title } } } pageInfo { startCursor endCursor }`
	const plain = `edges { node { id read seen } }`
	page := func(name, args string, vars map[string]any) map[string]any {
		t.Helper()
		ops, data := g.ops(t, `query($c: String) { viewer { inbox(`+args+`) { `+withProfiles+` } } }`, vars)
		want(t, name, ops, "Query", "BatchGetItem")
		return path(data, "viewer", "inbox").(map[string]any)
	}
	first := page("first page", "first: 10, after: $c", map[string]any{"c": nil})
	end := path(first, "pageInfo", "endCursor").(string)
	second := page("second page", "first: 10, after: $c", map[string]any{"c": end})
	third := page("third page", "first: 10, after: $c", map[string]any{"c": path(second, "pageInfo", "endCursor")})
	back := page("a page before a cursor", "last: 5, before: $c", map[string]any{"c": path(second, "pageInfo", "endCursor")})
	typed := page("a later page filtered by type", `first: 5, after: $c, filter: {types: ["issues.opened"]}`, map[string]any{"c": end})

	states := func(p map[string]any) []string {
		var out []string
		for _, e := range p["edges"].([]any) {
			n := e.(map[string]any)["node"].(map[string]any)
			if n["actor"] != nil && path(n, "actor", "name") == nil || n["target"] != nil && path(n, "target", "title") == nil {
				t.Errorf("profiles of %v", n)
			}
			out = append(out, fmt.Sprintf("%v read=%v seen=%v", n["id"], n["read"], n["seen"]))
		}
		return out
	}
	check := func(name string, got map[string]any, args string, vars map[string]any) {
		t.Helper()
		ops, data := g.ops(t, `query($c: String) { viewer { inbox(`+args+`) { `+plain+` } } }`, vars)
		if len(ops) != 2 {
			t.Errorf("%s without profiles: calls %v", name, ops)
		}
		a, b := fmt.Sprint(states(got)), fmt.Sprint(states(path(data, "viewer", "inbox").(map[string]any)))
		if a != b {
			t.Errorf("%s: states with profiles %s, without %s", name, a, b)
		}
	}
	check("second page", second, "first: 10, after: $c", map[string]any{"c": end})
	check("third page", third, "first: 10, after: $c", map[string]any{"c": path(second, "pageInfo", "endCursor")})
	check("page before", back, "last: 5, before: $c", map[string]any{"c": path(second, "pageInfo", "endCursor")})
	check("typed page", typed, `first: 5, after: $c, filter: {types: ["issues.opened"]}`, map[string]any{"c": end})

	// The states themselves: the first page holds the ten sends after the watermark, the
	// second and third the twenty before it.
	wantStates := func(name string, p map[string]any, from int, read map[int]bool, seen map[int]bool) {
		t.Helper()
		var exp []string
		for i := from; i < from+10; i++ {
			exp = append(exp, fmt.Sprintf("%v read=%v seen=%v", ids[i], read[i], seen[i]))
		}
		if got := states(p); fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Errorf("%s states\n got %v\nwant %v", name, got, exp)
		}
	}
	wantStates("first page", first, 0, map[int]bool{3: true}, map[int]bool{3: true, 5: true})
	allRead := map[int]bool{}
	for i := 10; i < 30; i++ {
		allRead[i] = i != 12
	}
	seenOld := map[int]bool{}
	for i := 10; i < 30; i++ {
		seenOld[i] = true // markAllRead marks seen, and unread marks keep seen
	}
	wantStates("second page", second, 10, allRead, seenOld)
	wantStates("third page", third, 20, allRead, seenOld)
}

// nodeIDs returns the ids of the inbox nodes of query, newest first.
func nodeIDs(t *testing.T, g *gateway, query string) []any {
	t.Helper()
	_, data := g.ops(t, query, nil)
	var ids []any
	for _, n := range path(data, "viewer", "inbox", "nodes").([]any) {
		ids = append(ids, n.(map[string]any)["id"])
	}
	return ids
}
