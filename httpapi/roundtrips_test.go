package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// gateway is the real HTTP surface over a fresh table, with every DynamoDB call recorded.
type gateway struct {
	srv    *httptest.Server
	h      *httpapi.Handler
	st     *store.Store
	rec    *ddbtrace.Recorder
	token  string
	v      *auth.Verifier
	broker *live.Local
	db     *dynamodb.Client
	table  string
	srv2   *testgw.Server
}

// send writes in through the send loop over the gateway's store, publishing to its
// broker, as the gateway's own sends do.
func (g *gateway) send(ctx context.Context, tenant string, in inbox.SendInput) (inbox.SendResult, error) {
	return service.Writer{Store: g.st, Publisher: g.broker}.Send(ctx, tenant, in)
}

// gatewaySetup varies the test gateway; the zero value is newGateway's.
type gatewaySetup struct {
	// options changes the handler's Options (ComplexityLimit 100000 unless set here).
	options func(*httpapi.Options)
	// ddb are more DynamoDB client options: each call is also seen by them.
	ddb []func(*dynamodb.Options)
	// timeouts, when set, serve the handler with httpapi.NewServer, as server.go does.
	timeouts *httpapi.Timeouts
	// listener, when set, wraps the test server's listener.
	listener func(net.Listener) net.Listener
	// store are more store options.
	store []store.Option
	// clock, when set, is the verifier's clock, and so the WebSocket connections' (token
	// expiry, keep-alive): the test advances it.
	clock clockwork.Clock
}

func newGateway(t *testing.T) *gateway { return newGatewayWith(t, gatewaySetup{}) }

// newGatewayWith is the one constructor of the HTTP tests' gateway, on the shared harness
// (testgw): a fresh table on DynamoDB Local, the local broker, a real verifier and alice's
// token in tenant acme; no sweep workers, every DynamoDB call recorded.
func newGatewayWith(t *testing.T, s gatewaySetup) *gateway {
	t.Helper()
	rec := &ddbtrace.Recorder{}
	// No leeway: the expiry tests measure when a token's stream ends.
	v, err := auth.NewVerifier(auth.Config{Secret: []byte("round-trip-test-secret-0123456789abcdef"), Clock: s.clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := testgw.NewWith(t, testgw.Options{
		Verifier: v,
		// An hour: a slow run must not see the cached announcement set expire (one more
		// Query) in the middle of a count of calls.
		Config:   func(c *app.Config) { c.ComplexityLimit, c.AnnouncementCacheMaxAge = 100000, time.Hour },
		Handler:  s.options,
		DynamoDB: append([]func(*dynamodb.Options){rec.Option()}, s.ddb...),
		Store:    append([]store.Option{store.WithSweepWorkers(0)}, s.store...),
		Timeouts: s.timeouts,
		Listener: s.listener,
	})
	// Announcements are cached per instance: the first read of a tenant's set is its one
	// Query, which every later page and badge of the tenant's users is spared. The tests
	// count the calls of a warm instance's requests.
	if _, err := srv.Announcements.Announcements(context.Background(), "acme", false); err != nil {
		t.Fatal(err)
	}
	tok := srv.Token("acme", "alice")
	return &gateway{srv: srv.HTTP, h: srv.Handler, st: srv.Store, rec: rec, token: tok, v: srv.Verifier, broker: srv.Broker, db: srv.DB, table: srv.Table, srv2: srv}
}

// ops runs a GraphQL request and returns the DynamoDB operations it caused, sorted.
func (g *gateway) ops(t *testing.T, query string, vars map[string]any) ([]string, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.token)
	g.rec.Reset()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) > 0 {
		t.Fatalf("errors: %v", out.Errors)
	}
	ops := g.rec.Ops()
	slices.Sort(ops)
	return ops, out.Data
}

// seed sends n notifications to alice; actor and target of the i-th come from the funcs.
func (g *gateway) seed(t *testing.T, n int, typ string, actor, target func(i int) string) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := g.send(context.Background(), "acme", inbox.SendInput{
			IdempotencyKey: fmt.Sprintf("%s-%d-%d", typ, i, time.Now().UnixNano()), Recipients: []string{"alice"}, Type: typ,
			Title:  fmt.Sprintf("n%d", i),
			Actor:  &inbox.Actor{ActorID: actor(i), Name: "Actor " + actor(i), AvatarURL: "https://a.example/" + actor(i)},
			Target: &inbox.Target{Kind: "issue", TargetID: target(i), Title: "Issue " + target(i), URL: "https://t.example/" + target(i)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

const firstLoad = `{ viewer { unreadCount inbox(first: 20) { edges { node { actor { name avatarUrl } target { title url } } } pageInfo { hasNextPage endCursor } } } }`

func each(i int) string { return fmt.Sprintf("x%d", i) }
func mod(n int) func(int) string {
	return func(i int) string { return fmt.Sprintf("x%d", i%n) }
}

func want(t *testing.T, name string, got []string, expected ...string) {
	t.Helper()
	slices.Sort(expected)
	if !slices.Equal(got, expected) {
		t.Errorf("%s: DynamoDB calls = %v, want %v", name, got, expected)
	}
}

func TestRoundTripsPerQueryShape(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.seed(t, 30, "issues.opened", mod(7), mod(5))
	g.seed(t, 10, "push", mod(3), mod(2))

	ops, data := g.ops(t, firstLoad, nil)
	want(t, "first page: one Query (page and badge) and one BatchGetItem (actors and targets together)", ops, "Query", "BatchGetItem")
	page := data["viewer"].(map[string]any)["inbox"].(map[string]any)
	end := page["pageInfo"].(map[string]any)["endCursor"].(string)

	ops, _ = g.ops(t, `query($c: String) { viewer { inbox(first: 20, after: $c) { edges { node { actor { name } target { title } } } } } }`, map[string]any{"c": end})
	want(t, "later page: its Query, then META with the profiles in one BatchGetItem", ops, "Query", "BatchGetItem")

	ops, _ = g.ops(t, `{ viewer { unreadCount inbox(first: 20, filter: {unreadOnly: true}) { edges { node { actor { name } } } } } }`, nil)
	want(t, "unread filter", ops, "Query", "BatchGetItem")

	ops, _ = g.ops(t, `{ viewer { unreadCount inbox(first: 5, filter: {types: ["push"]}) { edges { node { actor { name } target { url } } } } } }`, nil)
	want(t, "type filter: its GSI2 Query, then META with the profiles in one BatchGetItem", ops, "Query", "BatchGetItem")

	ops, _ = g.ops(t, `{ viewer { inbox(first: 5, filter: {types: ["push", "issues.opened", "none", "push"]}) { nodes { id } } } }`, nil)
	// Each type's first Query asks for ⌈6/3⌉+1 = 3; the newest type holds the whole page,
	// so its stream is read once more.
	want(t, "three distinct types: one GSI2 Query each, a second for the type that fills the page, and META's GetItem",
		ops, "Query", "Query", "Query", "Query", "GetItem")

	ops, _ = g.ops(t, `{ viewer { unreadCount } }`, nil)
	want(t, "badge alone", ops, "GetItem")

	_, data = g.ops(t, `{ viewer { inbox(first: 2) { nodes { id actor { id } target { id } } } } }`, nil)
	nodes := data["viewer"].(map[string]any)["inbox"].(map[string]any)["nodes"].([]any)
	n0 := nodes[0].(map[string]any)
	ids := []any{n0["id"], nodes[1].(map[string]any)["id"], n0["actor"].(map[string]any)["id"], n0["target"].(map[string]any)["id"]}
	ops, data = g.ops(t, `query($ids: [ID!]!) { nodes(ids: $ids) { id ... on Notification { title actor { name } target { title } } ... on Actor { name } ... on Target { title } } }`, map[string]any{"ids": ids})
	// A target id carries the viewer's tag, not a notification (issue 20 item 9): the
	// targets asked are read in a BatchGetItem of their own.
	want(t, "nodes of mixed types: the targets asked in one BatchGetItem, notifications (with META) and the actors anchored on them in another, the notifications' profiles in a third", ops, "BatchGetItem", "BatchGetItem", "BatchGetItem")
	if got := data["nodes"].([]any); len(got) != 4 || got[2] == nil || got[3] == nil {
		t.Fatalf("nodes = %v", got)
	}

	ops, _ = g.ops(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount notifications { read actor { name } target { title } } } }`, map[string]any{"ids": ids[:2]})
	want(t, "markRead returning notifications with actors: snapshot, transaction, badge, profiles", ops, "BatchGetItem", "TransactWriteItems", "GetItem", "BatchGetItem")
}

func TestRoundTripsDuplicatedActors(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.seed(t, 5, "t", mod(1), mod(1))
	ops, _ := g.ops(t, firstLoad, nil)
	want(t, "5 notifications by one actor about one target", ops, "Query", "BatchGetItem")
}

func TestRoundTrips101DistinctProfiles(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const n = 51
	g.seed(t, n, "t", each, each) // 51 actors + 51 targets = 102 distinct profiles
	ops, data := g.ops(t, `{ viewer { unreadCount inbox(first: 100) { edges { node { actor { name } target { title } } } } } }`, nil)
	want(t, "102 distinct profiles: ceil(102/100) BatchGetItem calls", ops, "Query", "BatchGetItem", "BatchGetItem")
	edges := data["viewer"].(map[string]any)["inbox"].(map[string]any)["edges"].([]any)
	seen := map[string]bool{}
	for _, e := range edges {
		node := e.(map[string]any)["node"].(map[string]any)
		seen[node["actor"].(map[string]any)["name"].(string)] = true
		seen[node["target"].(map[string]any)["title"].(string)] = true
	}
	if len(edges) != n || len(seen) != 2*n {
		t.Fatalf("%d edges, %d distinct actors and targets", len(edges), len(seen))
	}
}

// A page with announcements costs what one without does: the announcements carry their
// actor and target (Notification.Embedded), so the page's profile prefetch leaves them
// out instead of reading profiles that are never written (issue 21 item 7: that read was
// a second BatchGetItem, after the page's, on every page that showed an announcement).
func TestRoundTripsPageWithAnnouncements(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.seed(t, 5, "issues.opened", mod(3), mod(2))
	for i := range 3 {
		_, _, err := g.srv2.Announcements.Create(context.Background(), "acme", service.CreateRequest{Input: inbox.AnnouncementInput{
			IdempotencyKey: fmt.Sprintf("ann-%d", i), Type: "announcement", Title: fmt.Sprintf("a%d", i),
			Actor:  &inbox.Actor{ActorID: "team", Name: "The team", AvatarURL: "https://a.example/team"},
			Target: &inbox.Target{Kind: "release", TargetID: fmt.Sprintf("r%d", i), Title: fmt.Sprintf("Release %d", i), URL: "https://t.example/r"},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	g.seed(t, 5, "issues.opened", mod(3), mod(2))
	g.srv2.WarmAnnouncements("acme")

	ops, data := g.ops(t, `{ viewer { unreadCount inbox(first: 20) { edges { node { kind title actor { name avatarUrl } target { title url } } } } } }`, nil)
	want(t, "first page with 3 announcements: one Query and one BatchGetItem, as without", ops, "Query", "BatchGetItem")
	edges := data["viewer"].(map[string]any)["inbox"].(map[string]any)["edges"].([]any)
	anns := 0
	for _, e := range edges {
		n := e.(map[string]any)["node"].(map[string]any)
		if n["kind"] != inbox.KindAnnouncement {
			continue
		}
		anns++
		a, tg := n["actor"].(map[string]any), n["target"].(map[string]any)
		if a["name"] != "The team" || a["avatarUrl"] != "https://a.example/team" || tg["title"] != "Release "+n["title"].(string)[1:] {
			t.Fatalf("announcement %v: its own actor and target were not rendered", n)
		}
	}
	if len(edges) != 13 || anns != 3 {
		t.Fatalf("%d edges, %d announcements; want 13 and 3", len(edges), anns)
	}
}

// A first page's BatchGetItem reads the profiles of the notifications the page shows, not
// of those the announcements merged in pushed off it (issue 21 item 7): 3 announcements
// on top of a page of 5 leave 2 notifications, 4 profiles (each its own actor and target).
func TestRoundTripsPageWithAnnouncementsReadsShownProfiles(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.seed(t, 10, "issues.opened", each, each)
	for i := range 3 {
		_, _, err := g.srv2.Announcements.Create(context.Background(), "acme", service.CreateRequest{Input: inbox.AnnouncementInput{
			IdempotencyKey: fmt.Sprintf("ann-%d", i), Type: "announcement", Title: fmt.Sprintf("a%d", i),
			Actor: &inbox.Actor{ActorID: "team", Name: "The team"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	g.srv2.WarmAnnouncements("acme")
	g.rec.KeepInputs()

	ops, data := g.ops(t, `{ viewer { unreadCount inbox(first: 5) { edges { node { kind actor { name } target { title } } } } } }`, nil)
	want(t, "first page of 5 with 3 announcements", ops, "Query", "BatchGetItem")
	var keys []string
	for _, r := range g.rec.Requests() {
		if in, ok := r.Input.(*dynamodb.BatchGetItemInput); ok {
			for _, ka := range in.RequestItems {
				for _, k := range ka.Keys {
					keys = append(keys, fmt.Sprint(k["pk"]))
				}
			}
		}
	}
	if len(keys) != 4 {
		t.Errorf("the page's BatchGetItem read %d profiles, want the 4 of the 2 notifications shown", len(keys))
	}
	edges := data["viewer"].(map[string]any)["inbox"].(map[string]any)["edges"].([]any)
	var names []string
	for _, e := range edges {
		n := e.(map[string]any)["node"].(map[string]any)
		names = append(names, fmt.Sprint(n["kind"], " ", n["actor"].(map[string]any)["name"]))
	}
	if wantNames := []string{"ANNOUNCEMENT The team", "ANNOUNCEMENT The team", "ANNOUNCEMENT The team", "PERSONAL Actor x9", "PERSONAL Actor x8"}; !slices.Equal(names, wantNames) {
		t.Fatalf("page = %v, want %v", names, wantNames)
	}
}
