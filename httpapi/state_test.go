package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// gql posts a GraphQL request as alice and returns data and the error codes.
func (g *gateway) gql(t *testing.T, query string, vars map[string]any) (map[string]any, []string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []struct {
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, e := range out.Errors {
		codes = append(codes, e.Extensions.Code)
	}
	return out.Data, codes
}

// sendTo sends n notifications of category to user and returns their global ids.
func (g *gateway) sendTo(t *testing.T, user, category string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		res, err := g.send(context.Background(), "acme", inbox.SendInput{IdempotencyKey: fmt.Sprintf("s-%s-%d-%d", user, i, time.Now().UnixNano()),
			Recipients: []string{user}, Type: "t", Category: category})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inbox.GlobalID(inbox.TypeNotification, res.NotificationIDs[0]))
	}
	return ids
}

func path(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		cur = cur.(map[string]any)[k]
	}
	return cur
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

const badgeSel = `badge { unread unseen categories { category unread unseen } }`

func TestStateMutationsThroughGraphQL(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	work := g.sendTo(t, "alice", "work", 3)
	news := g.sendTo(t, "alice", "news", 2)
	bobs := g.sendTo(t, "bob", "", 1)
	junk := base64.RawURLEncoding.EncodeToString([]byte("Notification:nope"))

	data, errs := g.gql(t, `mutation($ids: [ID!]!) { markSeen(ids: $ids) { notFound unreadCount notifications { id seen seenAt read } `+badgeSel+` } }`,
		map[string]any{"ids": []string{work[0], bobs[0], junk}})
	if len(errs) > 0 {
		t.Fatalf("markSeen: %v", errs)
	}
	if nf := strs(path(data, "markSeen", "notFound")); !slices.Equal(nf, []string{bobs[0], junk}) {
		t.Fatalf("notFound = %v", nf)
	}
	if b := path(data, "markSeen", "badge").(map[string]any); b["unread"] != 5.0 || b["unseen"] != 4.0 || len(b["categories"].([]any)) != 2 {
		t.Fatalf("badge after markSeen = %v", b)
	}

	data, errs = g.gql(t, `mutation($ids: [ID!]!) { archive(ids: $ids) { notifications { archived archivedAt } badge { unread } } }`, map[string]any{"ids": work[1:2]})
	if len(errs) > 0 || path(data, "archive", "badge", "unread") != 4.0 {
		t.Fatalf("archive: %v %v", data, errs)
	}
	data, _ = g.gql(t, `{ viewer { inbox(filter: {archived: ONLY}) { nodes { id archived } } all: inbox(filter: {archived: INCLUDE}) { nodes { id } } work: inbox(filter: {categories: ["work"]}) { nodes { id } } } }`, nil)
	if n := path(data, "viewer", "inbox", "nodes").([]any); len(n) != 1 || n[0].(map[string]any)["id"] != work[1] {
		t.Fatalf("archived ONLY = %v", n)
	}
	if n := path(data, "viewer", "all", "nodes").([]any); len(n) != 5 {
		t.Fatalf("archived INCLUDE = %v", n)
	}
	if n := path(data, "viewer", "work", "nodes").([]any); len(n) != 2 {
		t.Fatalf("categories [work] = %v", n)
	}
	g.gql(t, `mutation($ids: [ID!]!) { unarchive(ids: $ids) { badge { unread } } }`, map[string]any{"ids": work[1:2]})

	_, errs = g.gql(t, `mutation($ids: [ID!]!, $u: Time!) { snooze(ids: $ids, until: $u) { badge { unread } } }`,
		map[string]any{"ids": news, "u": time.Now().Add(-time.Hour).Format(time.RFC3339)})
	if !slices.Equal(errs, []string{"BAD_USER_INPUT"}) {
		t.Fatalf("snooze into the past: %v", errs)
	}
	until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	data, errs = g.gql(t, `mutation($ids: [ID!]!, $u: Time!) { snooze(ids: $ids, until: $u) { notifications { snoozedUntil } badge { unread } } }`,
		map[string]any{"ids": news, "u": until.Format(time.RFC3339)})
	if len(errs) > 0 || path(data, "snooze", "badge", "unread") != 3.0 {
		t.Fatalf("snooze: %v %v", data, errs)
	}
	if got := path(data, "snooze", "notifications").([]any)[0].(map[string]any)["snoozedUntil"]; got != until.Format(time.RFC3339) {
		t.Fatalf("snoozedUntil = %v, want %v", got, until.Format(time.RFC3339))
	}
	data, _ = g.gql(t, `mutation($ids: [ID!]!) { unsnooze(ids: $ids) { badge { unread } } }`, map[string]any{"ids": news[:1]})
	if path(data, "unsnooze", "badge", "unread") != 4.0 {
		t.Fatalf("unsnooze: %v", data)
	}

	data, errs = g.gql(t, `mutation($ids: [ID!]!) { deleteNotifications(ids: $ids) { deletedIds notFound badge { unread } } }`,
		map[string]any{"ids": []string{work[2], bobs[0]}})
	if len(errs) > 0 || !slices.Equal(strs(path(data, "deleteNotifications", "deletedIds")), work[2:3]) ||
		!slices.Equal(strs(path(data, "deleteNotifications", "notFound")), bobs) || path(data, "deleteNotifications", "badge", "unread") != 3.0 {
		t.Fatalf("delete: %v %v", data, errs)
	}

	data, errs = g.gql(t, `mutation { markAllRead(filter: {categories: ["work"]}) { unreadCount readAllBefore `+badgeSel+` } }`, nil)
	if len(errs) > 0 || path(data, "markAllRead", "unreadCount") != 1.0 {
		t.Fatalf("markAllRead(work): %v %v", data, errs)
	}
	_, errs = g.gql(t, `mutation { markAllRead(filter: {categories: ["a#b"]}) { unreadCount } }`, nil)
	if !slices.Equal(errs, []string{"BAD_USER_INPUT"}) {
		t.Fatalf("markAllRead of a bad category: %v", errs)
	}
	data, errs = g.gql(t, `mutation { markAllSeen { unread unseen } }`, nil)
	if len(errs) > 0 || path(data, "markAllSeen", "unseen") != 0.0 || path(data, "markAllSeen", "unread") != 1.0 {
		t.Fatalf("markAllSeen: %v %v", data, errs)
	}
	data, _ = g.gql(t, `{ viewer { unreadCount unseenCount `+badgeSel+` } }`, nil)
	if path(data, "viewer", "unreadCount") != 1.0 || path(data, "viewer", "unseenCount") != 0.0 || path(data, "viewer", "badge", "unread") != 1.0 {
		t.Fatalf("viewer counts: %v", data)
	}
}

// TestMarkAllReadOfNoCategoryIsRefused: markAllRead(filter: {categories: []}) (a UI's empty
// selection) is BAD_USER_INPUT and changes nothing; it used to mark every notification of
// every category read, as markAllRead without a filter does. A filter without categories
// ({}) still means every category.
func TestMarkAllReadOfNoCategoryIsRefused(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.sendTo(t, "alice", "work", 2)
	g.sendTo(t, "alice", "news", 1)
	for _, tc := range []struct {
		query string
		vars  map[string]any
	}{
		{`mutation { markAllRead(filter: {categories: []}) { unreadCount } }`, nil},
		{`mutation($c: [String!]) { markAllRead(filter: {categories: $c}) { unreadCount } }`, map[string]any{"c": []string{}}},
		{`mutation($f: MarkAllFilter) { markAllRead(filter: $f) { unreadCount } }`, map[string]any{"f": map[string]any{"categories": []string{}}}},
	} {
		if data, errs := g.gql(t, tc.query, tc.vars); !slices.Equal(errs, []string{"BAD_USER_INPUT"}) {
			t.Errorf("%s %v: %v %v, want BAD_USER_INPUT", tc.query, tc.vars, data, errs)
		}
	}
	if data, _ := g.gql(t, `{ viewer { `+badgeSel+` } }`, nil); path(data, "viewer", "badge", "unread") != 3.0 || path(data, "viewer", "badge", "unseen") != 3.0 {
		t.Fatalf("badge after the refused calls = %v, want 3 unread and unseen", path(data, "viewer", "badge"))
	}
	if data, errs := g.gql(t, `mutation { markAllRead(filter: {}) { unreadCount } }`, nil); len(errs) > 0 || path(data, "markAllRead", "unreadCount") != 0.0 {
		t.Fatalf("markAllRead(filter: {}): %v %v, want every category read", data, errs)
	}
}

// TestHundredIDsThroughGraphQL: a mutation takes 100 ids (10 of alice's notifications and
// 90 ids of none, answered as notFound in their order) and refuses 101.
func TestHundredIDsThroughGraphQL(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const found = 10
	ids := g.sendTo(t, "alice", "", found)
	for i := range inbox.MaxStateIDs - found {
		ids = append(ids, base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "Notification:01ARZ3NDEKTSV4RRFFQ69G5%03d", i)))
	}
	data, errs := g.gql(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount notFound notifications { read } badge { unread unseen } } }`, map[string]any{"ids": ids})
	if len(errs) > 0 || path(data, "markRead", "unreadCount") != 0.0 || len(path(data, "markRead", "notifications").([]any)) != found ||
		!slices.Equal(strs(path(data, "markRead", "notFound")), ids[found:]) || path(data, "markRead", "badge", "unseen") != 0.0 {
		t.Fatalf("markRead of 100 ids: %v %v", data, errs)
	}
	_, errs = g.gql(t, `mutation($ids: [ID!]!) { archive(ids: $ids) { unreadCount } }`,
		map[string]any{"ids": append(ids, base64.RawURLEncoding.EncodeToString([]byte("Notification:x")))})
	if !slices.Equal(errs, []string{"BAD_USER_INPUT"}) {
		t.Fatalf("101 ids: %v", errs)
	}
}

// Round trips of the v2 query shapes: a badge is one GetItem however many counts are
// asked; the first page of every filter is one Query (plus the profiles) on data where
// the filter matches.
func TestRoundTripsV2Shapes(t *testing.T) {
	g := newGateway(t)
	g.seed(t, 10, "t", mod(3), mod(2))
	work := g.sendTo(t, "alice", "work", 10)
	g.gql(t, `mutation($ids: [ID!]!) { archive(ids: $ids) { unreadCount } }`, map[string]any{"ids": work[5:8]})

	ops, _ := g.ops(t, `{ viewer { unreadCount unseenCount `+badgeSel+` } }`, nil)
	want(t, "badge, unreadCount and unseenCount", ops, "GetItem")
	for _, filter := range []string{`{categories: ["work"]}`, `{archived: ONLY}`, `{archived: INCLUDE}`,
		`{unreadOnly: true, archived: INCLUDE}`, `{unreadOnly: true, categories: ["work"]}`, `{types: ["t"], archived: EXCLUDE}`} {
		ops, data := g.ops(t, `{ viewer { inbox(first: 2, filter: `+filter+`) { nodes { id } } } }`, nil)
		// A typed page reads GSI2, where META is not: its GetItem goes with the Query.
		queries := slices.DeleteFunc(slices.Clone(ops), func(op string) bool { return op == "GetItem" && strings.Contains(filter, "types") })
		if len(queries) > 2 || slices.ContainsFunc(queries, func(op string) bool { return op != "Query" }) {
			t.Errorf("first page of %s: DynamoDB calls = %v, want at most 2 Query (and META's GetItem for a type)", filter, ops)
		}
		if n := path(data, "viewer", "inbox", "nodes").([]any); len(n) != 2 {
			t.Errorf("%s: %d nodes", filter, len(n))
		}
	}
	const filtered = `{categories: ["work"], archived: INCLUDE}`
	_, data := g.ops(t, `{ viewer { inbox(first: 2, filter: `+filtered+`) { pageInfo { endCursor } } } }`, nil)
	ops, _ = g.ops(t, `query($c: String) { viewer { inbox(first: 2, after: $c, filter: `+filtered+`) { nodes { id } } } }`,
		map[string]any{"c": path(data, "viewer", "inbox", "pageInfo", "endCursor")})
	want(t, "a later filtered page: its Query and the META GetItem", ops, "Query", "GetItem")
	ops, _ = g.ops(t, `mutation { markAllSeen { unseen } }`, nil)
	want(t, "markAllSeen", ops, "GetItem", "UpdateItem")
	ops, _ = g.ops(t, `mutation { markAllRead(filter: {categories: ["work"]}) { badge { unread } } }`, nil)
	want(t, "markAllRead(categories)", ops, "GetItem", "UpdateItem")
}
