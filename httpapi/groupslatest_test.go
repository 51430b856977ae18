package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestGroupsPageKeepsLatest: a groups page that renders of latest only the fields the
// group item keeps reads no notification (its BatchGetItem holds one key fewer per group
// than the same page asking for latest's seen state), and renders exactly what the
// notifications would: a newest member marked read, and a group whose newest member was
// archived (its item keeps the archived one's fields: that group's newest is read).
func TestGroupsPageKeepsLatest(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.rec.KeepInputs()
	g.sendGroup(t, "comment", "7", "cy")
	archived := g.sendGroup(t, "comment", "7", "di")
	g.sendGroup(t, "comment", "42", "al")
	read := g.sendGroup(t, "comment", "42", "bo")
	g.sendGroup(t, "like", "9", "ed")
	g.ops(t, `mutation($ids: [ID!]!) { archive(ids: $ids) { unreadCount } }`, map[string]any{"ids": []string{archived}})
	g.ops(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }`, map[string]any{"ids": []string{read}})

	const sel = `groupKey count unreadCount read updatedAt latest { id title createdAt read type category }`
	keys := func(query string) (int, string) {
		t.Helper()
		ops, data := g.ops(t, query, nil)
		want(t, query, ops, "Query", "BatchGetItem")
		n := 0
		for _, r := range g.rec.Requests() {
			if in, ok := r.Input.(*dynamodb.BatchGetItemInput); ok {
				for _, ka := range in.RequestItems {
					n += len(ka.Keys)
				}
			}
		}
		var rendered string
		for _, node := range path(data, "viewer", "groups", "nodes").([]any) {
			m := node.(map[string]any)
			l := m["latest"].(map[string]any)
			delete(l, "seen")
			rendered += fmt.Sprintln(m)
		}
		return n, rendered
	}
	kept, keptPage := keys(`{ viewer { groups(first: 10) { nodes { ` + sel + ` } } } }`)
	full, fullPage := keys(`{ viewer { groups(first: 10) { nodes { ` + sel + ` latest { seen } } } } }`)
	// Groups 42 and 9 keep their newest member; group 7's newest (cy's) is read in both.
	if full-kept != 2 {
		t.Errorf("BatchGetItem keys: %d with kept fields, %d reading every newest notification", kept, full)
	}
	if keptPage != fullPage {
		t.Errorf("kept fields render\n%s\nthe notifications render\n%s", keptPage, fullPage)
	}
	for _, want := range []string{"comment by bo", "read:true", "comment by cy", "like by ed"} {
		if !strings.Contains(keptPage, want) {
			t.Errorf("page %s lacks %q", keptPage, want)
		}
	}
}
