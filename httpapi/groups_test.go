package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
)

const groupSel = `edges { cursor node { id groupKey type count unreadCount read actorCount
	actors { actorId name } target { title } latest { id title } updatedAt } } pageInfo { hasNextPage endCursor }`

// sendGroup sends alice a notification of typ about issue target by actor and returns its
// global id.
func (g *gateway) sendGroup(t *testing.T, typ, target, actor string) string {
	t.Helper()
	res, err := g.send(context.Background(), "acme", inbox.SendInput{
		IdempotencyKey: fmt.Sprintf("g-%s-%s-%d", typ, actor, time.Now().UnixNano()), Recipients: []string{"alice"}, Type: typ,
		Title: typ + " by " + actor, Actor: &inbox.Actor{ActorID: actor, Name: "Name " + actor},
		Target: &inbox.Target{Kind: "issue", TargetID: target, Title: "Issue " + target},
	})
	if err != nil {
		t.Fatal(err)
	}
	return inbox.GlobalID(inbox.TypeNotification, res.NotificationIDs[0])
}

func groupNodes(t *testing.T, data map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range path(data, "viewer", "groups", "edges").([]any) {
		out = append(out, e.(map[string]any)["node"].(map[string]any))
	}
	return out
}

func TestGroupsThroughGraphQL(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for _, a := range []string{"alice2", "bo", "cy", "di", "bo"} {
		g.sendGroup(t, "comment", "42", a)
	}
	g.sendGroup(t, "comment", "7", "ed")
	like := g.sendGroup(t, "like", "7", "fay")
	g.sendGroup(t, "comment", "42", "gus") // issue 42's group moves to the top

	// A page of groups: one Query plus one BatchGetItem (META, latest notifications,
	// actors and targets), like an inbox page.
	ops, data := g.ops(t, `{ viewer { groups(first: 2) { `+groupSel+` } } }`, nil)
	want(t, "groups page", ops, "Query", "BatchGetItem")
	nodes := groupNodes(t, data)
	if len(nodes) != 2 || nodes[0]["groupKey"] != "comment|issue:42" || nodes[1]["groupKey"] != "like|issue:7" {
		t.Fatalf("groups %v", nodes)
	}
	top := nodes[0]
	var actors []string
	for _, a := range top["actors"].([]any) {
		actors = append(actors, a.(map[string]any)["actorId"].(string))
	}
	// "Gus and 4 others": the newest three distinct actors, five in all.
	if top["count"] != 6.0 || top["unreadCount"] != 6.0 || top["read"] != false || top["actorCount"] != 5.0 ||
		!slices.Equal(actors, []string{"gus", "bo", "di"}) || path(top, "target", "title") != "Issue 42" ||
		path(top, "latest", "title") != "comment by gus" || top["type"] != "comment" {
		t.Fatalf("top group %v", top)
	}
	if top["id"] != inbox.GlobalID(inbox.TypeNotificationGroup, "comment|issue:42") {
		t.Fatalf("group id %v", top["id"])
	}
	end := path(data, "viewer", "groups", "pageInfo", "endCursor").(string)
	data, codes := g.gql(t, `query($c: String) { viewer { groups(first: 2, after: $c) { `+groupSel+` } } }`, map[string]any{"c": end})
	if len(codes) > 0 || len(groupNodes(t, data)) != 1 || groupNodes(t, data)[0]["groupKey"] != "comment|issue:7" ||
		path(data, "viewer", "groups", "pageInfo", "hasNextPage") != false {
		t.Fatalf("second page %v %v", data, codes)
	}
	// Filters.
	data, _ = g.gql(t, `{ viewer { groups(filter: {types: ["like"]}) { nodes { groupKey actors(first: 10) { actorId } } } } }`, nil)
	if ns := path(data, "viewer", "groups", "nodes").([]any); len(ns) != 1 || ns[0].(map[string]any)["groupKey"] != "like|issue:7" {
		t.Fatalf("type filter %v", data)
	}
	if _, codes := g.gql(t, `{ viewer { groups(filter: {archived: ONLY}) { nodes { id } } } }`, nil); !slices.Equal(codes, []string{"BAD_USER_INPUT"}) {
		t.Fatalf("archived ONLY: %v", codes)
	}
	if _, codes := g.gql(t, `{ viewer { groups { nodes { actors(first: 11) { actorId } } } } }`, nil); !slices.Contains(codes, "BAD_USER_INPUT") {
		t.Fatalf("actors(first: 11): %v", codes)
	}

	// markRead(groupId) marks every member; the group turns read and leaves the
	// unread-only list.
	gid := top["id"].(string)
	data, codes = g.gql(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { notFound notifications { id read } `+badgeSel+` } }`,
		map[string]any{"ids": []string{gid, like}})
	if len(codes) > 0 || len(strs(path(data, "markRead", "notFound"))) != 0 || len(path(data, "markRead", "notifications").([]any)) != 7 ||
		path(data, "markRead", "badge", "unread") != 1.0 {
		t.Fatalf("markRead(group): %v %v", data, codes)
	}
	data, _ = g.gql(t, `{ viewer { groups(filter: {unreadOnly: true}) { nodes { groupKey unreadCount } } } }`, nil)
	if ns := path(data, "viewer", "groups", "nodes").([]any); len(ns) != 1 || ns[0].(map[string]any)["groupKey"] != "comment|issue:7" {
		t.Fatalf("unread only after markRead(group): %v", data)
	}
	// node(groupId) refetches the group.
	data, codes = g.gql(t, `query($id: ID!) { node(id: $id) { ... on NotificationGroup { groupKey unreadCount count } } }`, map[string]any{"id": gid})
	if len(codes) > 0 || path(data, "node", "groupKey") != "comment|issue:42" || path(data, "node", "unreadCount") != 0.0 {
		t.Fatalf("node(group): %v %v", data, codes)
	}
	// archive(groupId) empties the group: it leaves the list.
	data, codes = g.gql(t, `mutation($ids: [ID!]!) { archive(ids: $ids) { notFound } }`, map[string]any{"ids": []string{gid}})
	if len(codes) > 0 || len(strs(path(data, "archive", "notFound"))) != 0 {
		t.Fatalf("archive(group): %v %v", data, codes)
	}
	data, _ = g.gql(t, `{ viewer { groups { nodes { groupKey } } } }`, nil)
	if ns := path(data, "viewer", "groups", "nodes").([]any); len(ns) != 2 {
		t.Fatalf("after archive(group): %v", data)
	}

	// Another user's group, and a group that does not exist, are notFound as given.
	bobTok, err := g.v.Sign(auth.Claims{TenantID: "acme", UserID: "bob"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice := g.token
	g.token = bobTok
	other := inbox.GlobalID(inbox.TypeNotificationGroup, "comment|issue:7")
	missing := inbox.GlobalID(inbox.TypeNotificationGroup, "nothing")
	data, codes = g.gql(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { notFound } deleteNotifications(ids: $ids) { deletedIds notFound } }`,
		map[string]any{"ids": []string{other, missing}})
	if len(codes) > 0 || !slices.Equal(strs(path(data, "markRead", "notFound")), []string{other, missing}) ||
		!slices.Equal(strs(path(data, "deleteNotifications", "notFound")), []string{other, missing}) {
		t.Fatalf("bob's marks of alice's group: %v %v", data, codes)
	}
	data, _ = g.gql(t, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": other})
	if path(data, "node") != nil {
		t.Fatalf("bob's node(alice's group): %v", data)
	}
	g.token = alice
	// deleteNotifications(groupId) deletes the members and lists them as deleted.
	data, codes = g.gql(t, `mutation($ids: [ID!]!) { deleteNotifications(ids: $ids) { deletedIds notFound } }`, map[string]any{"ids": []string{other}})
	if len(codes) > 0 || len(strs(path(data, "deleteNotifications", "deletedIds"))) != 1 {
		t.Fatalf("delete(group): %v %v", data, codes)
	}
}

// TestRoundTripsGroupsVersusInbox: a page of groups costs what an inbox page costs: one
// Query and one BatchGetItem.
func TestRoundTripsGroupsVersusInbox(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.seed(t, 18, "issues.opened", mod(7), mod(9)) // 9 groups of 2, by target
	ops, _ := g.ops(t, `{ viewer { groups(first: 5) { nodes { count unreadCount actorCount actors { name } target { title } latest { title } } } } }`, nil)
	want(t, "groups page", ops, "Query", "BatchGetItem")
	ops, _ = g.ops(t, `{ viewer { groups(first: 5, filter: {types: ["issues.opened"]}) { nodes { count latest { title } } } } }`, nil)
	want(t, "groups page, type filter", ops, "Query", "BatchGetItem")
	ops, _ = g.ops(t, `{ viewer { groups(first: 5, filter: {unreadOnly: true}) { nodes { unreadCount latest { title } } } } }`, nil)
	want(t, "groups page, unread only: META's GetItem alongside the Query", ops, "GetItem", "Query", "BatchGetItem")
	ops, _ = g.ops(t, firstLoad, nil)
	want(t, "inbox page", ops, "Query", "BatchGetItem")
}

// A state mutation's group ids expand to at most 500 notifications: five full groups and
// one member of a sixth (501 active members) in one markRead is BAD_USER_INPUT, and
// nothing is written; the five full groups (500) are within the bound.
func TestGroupIDsExpandToABoundedNumberOfNotifications(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("sends 501 notifications")
	}
	g := newGateway(t)
	ctx := context.Background()
	const sends = 5*inbox.MaxGroupMembers + 1
	var groups []string
	work := make(chan int)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for i := range work {
				if err == nil {
					key := fmt.Sprintf("bulk-%d", i/inbox.MaxGroupMembers)
					_, err = g.send(ctx, "acme", inbox.SendInput{IdempotencyKey: fmt.Sprintf("bound-%d", i),
						Recipients: []string{"alice"}, Type: "comment", GroupKey: key})
				}
			}
			errs <- err
		}()
	}
	for i := range sends {
		work <- i
	}
	close(work)
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		groups = append(groups, inbox.GlobalID(inbox.TypeNotificationGroup, fmt.Sprintf("bulk-%d", i)))
	}
	unread := func() float64 {
		data, codes := g.gql(t, `{ viewer { unreadCount } }`, nil)
		if len(codes) > 0 {
			t.Fatalf("unreadCount: %v", codes)
		}
		return path(data, "viewer", "unreadCount").(float64)
	}
	before := unread()
	_, codes := g.gql(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }`, map[string]any{"ids": groups})
	if !slices.Equal(codes, []string{"BAD_USER_INPUT"}) {
		t.Fatalf("markRead of five full groups and one more member: codes %v, want BAD_USER_INPUT", codes)
	}
	if after := unread(); after != before || before != sends {
		t.Fatalf("unread %v -> %v, want %d unchanged", before, after, sends)
	}
	// Five full groups (500) are within the bound.
	data, codes := g.gql(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }`, map[string]any{"ids": groups[:5]})
	if len(codes) > 0 || path(data, "markRead", "unreadCount") != 1.0 {
		t.Fatalf("markRead of five full groups: %v %v", data, codes)
	}
}
