package resolvers_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
)

// pageQuery reads one inbox page with everything the connection offers.
const pageQuery = `query($first: Int, $after: String, $last: Int, $before: String, $unreadOnly: Boolean) {
  viewer {
    id userId tenantId unreadCount
    inbox(first: $first, after: $after, last: $last, before: $before, filter: {unreadOnly: $unreadOnly}) {
      edges { cursor node { id title read } }
      nodes { id }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      unreadCount
    }
  }
}`

type pageData struct {
	Viewer struct {
		ID          string `json:"id"`
		UserID      string `json:"userId"`
		TenantID    string `json:"tenantId"`
		UnreadCount int    `json:"unreadCount"`
		Inbox       struct {
			Edges []struct {
				Cursor string `json:"cursor"`
				Node   struct {
					ID    string `json:"id"`
					Title string `json:"title"`
					Read  bool   `json:"read"`
				} `json:"node"`
			} `json:"edges"`
			Nodes []struct {
				ID string `json:"id"`
			} `json:"nodes"`
			PageInfo struct {
				HasNextPage     bool    `json:"hasNextPage"`
				HasPreviousPage bool    `json:"hasPreviousPage"`
				StartCursor     *string `json:"startCursor"`
				EndCursor       *string `json:"endCursor"`
			} `json:"pageInfo"`
			UnreadCount int `json:"unreadCount"`
		} `json:"inbox"`
	} `json:"viewer"`
}

func (p pageData) ids() []string {
	var out []string
	for _, e := range p.Viewer.Inbox.Edges {
		out = append(out, e.Node.ID)
	}
	return out
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// unknownNotificationID is a well-formed Notification global id that names nothing.
var unknownNotificationID = base64.RawURLEncoding.EncodeToString([]byte("Notification:01ARZ3NDEKTSV4RRFFQ69G5FAV"))

func TestViewerInboxPaging(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	sent := s.Seed(sender, "alice", 5)
	newestFirst := reversed(sent)

	var got []string
	var after any
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("paging does not end")
		}
		var p pageData
		s.MustData(alice, pageQuery, map[string]any{"first": 2, "after": after}, &p)
		v := p.Viewer
		if v.UserID != "alice" || v.TenantID != "t1" || v.ID == "" {
			t.Fatalf("viewer = %+v", v)
		}
		if v.UnreadCount != 5 || v.Inbox.UnreadCount != 5 {
			t.Fatalf("page %d: unreadCount = %d / connection %d, want 5", page, v.UnreadCount, v.Inbox.UnreadCount)
		}
		ids := p.ids()
		if len(v.Inbox.Nodes) != len(ids) {
			t.Fatalf("page %d: %d nodes but %d edges", page, len(v.Inbox.Nodes), len(ids))
		}
		for i, n := range v.Inbox.Nodes {
			if n.ID != ids[i] {
				t.Fatalf("page %d: nodes and edges differ: %v vs %v", page, v.Inbox.Nodes, ids)
			}
		}
		for _, e := range v.Inbox.Edges {
			if e.Cursor == "" || e.Node.Read {
				t.Fatalf("page %d: edge %+v: want a cursor and an unread node", page, e)
			}
		}
		pi := v.Inbox.PageInfo
		if len(ids) > 0 && (pi.StartCursor == nil || *pi.StartCursor != v.Inbox.Edges[0].Cursor ||
			pi.EndCursor == nil || *pi.EndCursor != v.Inbox.Edges[len(ids)-1].Cursor) {
			t.Fatalf("page %d: pageInfo cursors %+v do not match the edges", page, pi)
		}
		if page == 0 && pi.HasPreviousPage {
			t.Fatalf("first page: hasPreviousPage = true")
		}
		got = append(got, ids...)
		wantNext := len(got) < len(sent)
		if pi.HasNextPage != wantNext {
			t.Fatalf("page %d (%d seen): hasNextPage = %v, want %v", page, len(got), pi.HasNextPage, wantNext)
		}
		if !pi.HasNextPage {
			break
		}
		after = *pi.EndCursor
	}
	if !slices.Equal(got, newestFirst) {
		t.Fatalf("paged ids = %v\nwant newest first %v", got, newestFirst)
	}

	// last: the oldest two, still newest first; before: the page above them.
	var p pageData
	s.MustData(alice, pageQuery, map[string]any{"last": 2}, &p)
	if ids := p.ids(); !slices.Equal(ids, newestFirst[3:]) {
		t.Fatalf("inbox(last: 2) = %v, want %v", ids, newestFirst[3:])
	}
	if !p.Viewer.Inbox.PageInfo.HasPreviousPage {
		t.Fatalf("inbox(last: 2): hasPreviousPage = false")
	}
	start := *p.Viewer.Inbox.PageInfo.StartCursor
	s.MustData(alice, pageQuery, map[string]any{"last": 2, "before": start}, &p)
	if ids := p.ids(); !slices.Equal(ids, newestFirst[1:3]) {
		t.Fatalf("inbox(last: 2, before) = %v, want %v", ids, newestFirst[1:3])
	}

	// Default page size and first: 0.
	s.MustData(alice, pageQuery, map[string]any{}, &p)
	if ids := p.ids(); !slices.Equal(ids, newestFirst) {
		t.Fatalf("inbox() = %v, want %v", ids, newestFirst)
	}
	s.MustData(alice, pageQuery, map[string]any{"first": 0}, &p)
	if ids := p.ids(); len(ids) != 0 || p.Viewer.Inbox.UnreadCount != 5 {
		t.Fatalf("inbox(first: 0) = %v (unreadCount %d), want no edges and 5", ids, p.Viewer.Inbox.UnreadCount)
	}
}

// notificationFields selects every field of a Notification.
const notificationFields = `id type category title body read readAt createdAt payload
  actor { __typename id actorId name avatarUrl url }
  target { __typename id targetId kind title url }`

type notificationData struct {
	Typename  string          `json:"__typename"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Category  *string         `json:"category"`
	Title     *string         `json:"title"`
	Body      *string         `json:"body"`
	Read      bool            `json:"read"`
	ReadAt    *string         `json:"readAt"`
	CreatedAt string          `json:"createdAt"`
	Payload   json.RawMessage `json:"payload"`
	Actor     *struct {
		Typename string  `json:"__typename"`
		ID       string  `json:"id"`
		ActorID  string  `json:"actorId"`
		Name     *string `json:"name"`
		URL      *string `json:"url"`
	} `json:"actor"`
	Target *struct {
		Typename string  `json:"__typename"`
		ID       string  `json:"id"`
		TargetID string  `json:"targetId"`
		Kind     string  `json:"kind"`
		Title    *string `json:"title"`
	} `json:"target"`
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestNodeAndNotificationLookups(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	ids := s.Seed(sender, "alice", 2)

	// viewer.notification(id): every field, as sent.
	var d struct {
		Viewer struct {
			Notification *notificationData `json:"notification"`
			Missing      *notificationData `json:"missing"`
		} `json:"viewer"`
	}
	s.MustData(alice, `query($id: ID!, $missing: ID!) { viewer {
	  notification(id: $id) { __typename `+notificationFields+` }
	  missing: notification(id: $missing) { id } } }`,
		map[string]any{"id": ids[1], "missing": unknownNotificationID}, &d)
	n := d.Viewer.Notification
	if n == nil {
		t.Fatal("viewer.notification(id) = null for the viewer's own notification")
	}
	if d.Viewer.Missing != nil {
		t.Fatalf("viewer.notification(unknown id) = %+v, want null", d.Viewer.Missing)
	}
	if n.ID != ids[1] || n.Type != "issue_comment.created" || str(n.Category) != "issues" || str(n.Title) != "n1" ||
		str(n.Body) != "body of n1" || n.Read || n.ReadAt != nil {
		t.Fatalf("notification = %+v", n)
	}
	if ts, err := time.Parse(time.RFC3339Nano, n.CreatedAt); err != nil || time.Since(ts) > time.Minute || time.Since(ts) < -time.Minute {
		t.Fatalf("createdAt = %q (%v), want RFC 3339 of about now", n.CreatedAt, err)
	}
	var payload map[string]any
	if err := json.Unmarshal(n.Payload, &payload); err != nil || payload["n"] != float64(1) {
		t.Fatalf("payload = %s, want {\"n\":1,...}", n.Payload)
	}
	if n.Actor == nil || n.Actor.Typename != "Actor" || n.Actor.ActorID != "octocat" || str(n.Actor.Name) != "The Octocat" || n.Actor.ID == "" {
		t.Fatalf("actor = %+v", n.Actor)
	}
	if n.Target == nil || n.Target.Typename != "Target" || n.Target.TargetID != "repo-1" || n.Target.Kind != "repository" || str(n.Target.Title) != "hello-world" {
		t.Fatalf("target = %+v", n.Target)
	}
	actorID, targetID := n.Actor.ID, n.Target.ID

	// node(id) for each type returned by the API.
	const nodeQuery = `query($id: ID!) { node(id: $id) { __typename id
	  ... on Notification { title read }
	  ... on Actor { actorId name }
	  ... on Target { targetId kind } } }`
	type nodeData struct {
		Typename string  `json:"__typename"`
		ID       string  `json:"id"`
		Title    *string `json:"title"`
		ActorID  string  `json:"actorId"`
		Name     *string `json:"name"`
		TargetID string  `json:"targetId"`
		Kind     string  `json:"kind"`
	}
	for _, tc := range []struct {
		id, typename string
		check        func(nodeData) bool
	}{
		{ids[0], "Notification", func(n nodeData) bool { return str(n.Title) == "n0" }},
		{actorID, "Actor", func(n nodeData) bool { return n.ActorID == "octocat" && str(n.Name) == "The Octocat" }},
		{targetID, "Target", func(n nodeData) bool { return n.TargetID == "repo-1" && n.Kind == "repository" }},
	} {
		var nd struct {
			Node *nodeData `json:"node"`
		}
		s.MustData(alice, nodeQuery, map[string]any{"id": tc.id}, &nd)
		if nd.Node == nil || nd.Node.Typename != tc.typename || nd.Node.ID != tc.id || !tc.check(*nd.Node) {
			t.Fatalf("node(%s id) = %+v", tc.typename, nd.Node)
		}
	}

	// nodes(ids): aligned with ids, null for an unknown one, repeats allowed.
	var nd struct {
		Nodes []*nodeData `json:"nodes"`
	}
	ask := []string{targetID, ids[1], unknownNotificationID, actorID, ids[0], ids[1]}
	s.MustData(alice, `query($ids: [ID!]!) { nodes(ids: $ids) { __typename id
	  ... on Notification { title } ... on Actor { actorId } ... on Target { targetId } } }`,
		map[string]any{"ids": ask}, &nd)
	if len(nd.Nodes) != len(ask) {
		t.Fatalf("nodes returned %d entries for %d ids", len(nd.Nodes), len(ask))
	}
	for i, id := range ask {
		got := nd.Nodes[i]
		if id == unknownNotificationID {
			if got != nil {
				t.Fatalf("nodes[%d] (unknown id) = %+v, want null", i, got)
			}
			continue
		}
		if got == nil || got.ID != id {
			t.Fatalf("nodes[%d] = %+v, want id %s", i, got, id)
		}
	}
	if nd.Nodes[0].Typename != "Target" || nd.Nodes[1].Typename != "Notification" || nd.Nodes[3].Typename != "Actor" {
		t.Fatalf("nodes typenames: %+v %+v %+v", nd.Nodes[0], nd.Nodes[1], nd.Nodes[3])
	}
}

func TestMarkReadUnreadAllExactCounts(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	bob := s.Token("t1", "bob")
	ids := s.Seed(sender, "alice", 4)
	s.Seed(sender, "bob", 1)
	a, b, c := ids[0], ids[1], ids[2]
	s.ExpectUnread(alice, 4, "after seeding")

	step := func(what string, token string, read bool, want int, markIDs ...string) {
		t.Helper()
		got, notifs := s.Mark(token, read, markIDs...)
		if got != want {
			t.Fatalf("%s: payload unreadCount = %d, want %d", what, got, want)
		}
		s.ExpectUnread(token, want, what)
		distinct := slices.Compact(slices.Sorted(slices.Values(markIDs)))
		if len(notifs) != len(distinct) {
			t.Fatalf("%s: payload has %d notifications, want %d (one per distinct id)", what, len(notifs), len(distinct))
		}
		for _, n := range notifs {
			if n.Read != read || (read && n.ReadAt == nil) || (!read && n.ReadAt != nil) {
				t.Fatalf("%s: notification %+v, want read=%v", what, n, read)
			}
		}
	}
	step("markRead a,a,b (repeat counts once)", alice, true, 2, a, a, b)
	step("markRead a again (no change)", alice, true, 2, a)
	step("markUnread a,a", alice, false, 3, a, a)
	step("markUnread a again (no change)", alice, false, 3, a)

	var d struct {
		MarkAllRead struct {
			UnreadCount   int     `json:"unreadCount"`
			ReadAllBefore *string `json:"readAllBefore"`
		} `json:"markAllRead"`
	}
	s.MustData(alice, `mutation { markAllRead { unreadCount readAllBefore } }`, nil, &d)
	if d.MarkAllRead.UnreadCount != 0 || d.MarkAllRead.ReadAllBefore == nil {
		t.Fatalf("markAllRead = %+v, want 0 and a watermark", d.MarkAllRead)
	}
	s.ExpectUnread(alice, 0, "after markAllRead")
	var p pageData
	s.MustData(alice, pageQuery, map[string]any{"unreadOnly": true}, &p)
	if len(p.ids()) != 0 {
		t.Fatalf("unread-only inbox after markAllRead = %v", p.ids())
	}

	// The latest action wins: markUnread below the watermark makes it unread again.
	step("markUnread c,c after markAllRead", alice, false, 1, c, c)
	s.MustData(alice, pageQuery, map[string]any{"unreadOnly": true}, &p)
	if ids := p.ids(); !slices.Equal(ids, []string{c}) {
		t.Fatalf("unread-only inbox = %v, want [%s]", ids, c)
	}
	step("markRead a,b,c after markAllRead", alice, true, 0, a, b, c)

	// A new notification after the watermark counts.
	s.Seed(sender, "alice", 1)
	s.ExpectUnread(alice, 1, "after a send following markAllRead")
	s.MustData(alice, `mutation { markAllRead { unreadCount } }`, nil, &d)
	if d.MarkAllRead.UnreadCount != 0 {
		t.Fatalf("second markAllRead = %+v", d.MarkAllRead)
	}
	s.ExpectUnread(alice, 0, "after the second markAllRead")
	s.ExpectUnread(bob, 1, "bob, untouched by alice's marks")
}

func TestSendNotificationReplayIsDuplicate(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	bob := s.Token("t1", "bob")

	in := s.SendInput("once", "alice", "bob", "alice")
	first := s.Send(sender, in)
	if first.Duplicate || first.Accepted != 2 || len(first.NotificationIds) != 2 {
		t.Fatalf("first send = %+v, want 2 accepted (a repeated recipient counts once), not duplicate", first)
	}
	for i := range 2 {
		replay := s.Send(sender, in)
		if !replay.Duplicate || replay.Accepted != first.Accepted || !slices.Equal(replay.NotificationIds, first.NotificationIds) {
			t.Fatalf("replay %d = %+v, want duplicate with the first result %+v", i, replay, first)
		}
	}
	s.ExpectUnread(alice, 1, "alice after replays")
	s.ExpectUnread(bob, 1, "bob after replays")
	s.ExpectInboxLen(alice, 1, "alice after replays")
	if got := s.InboxIDs(alice); got[0] != first.NotificationIds[0] {
		t.Fatalf("alice's notification = %s, want %s", got[0], first.NotificationIds[0])
	}

	// The same key for different content is refused (CONFLICT, REST's 409), and writes
	// nothing.
	changed := s.SendInput("other", "alice", "bob")
	changed["idempotencyKey"] = in["idempotencyKey"]
	s.ExpectError(sender, testgw.SendMutation, map[string]any{"in": changed}, "CONFLICT")
	s.ExpectUnread(alice, 1, "alice after a reused key")
	s.ExpectInboxLen(bob, 1, "bob after a reused key")
}

// isolationFixture is alice's inbox in tenant t1 with one read and one unread notification.
type isolationFixture struct {
	s                               *testgw.Server
	aliceT1, bobT1, aliceT2, sender string
	readID, unreadID, bobOwnID      string
	actorID, targetID               string
}

func newIsolationFixture(t *testing.T) *isolationFixture {
	s := testgw.New(t)
	f := &isolationFixture{
		s:       s,
		aliceT1: s.Token("t1", "alice"),
		bobT1:   s.Token("t1", "bob"),
		aliceT2: s.Token("t2", "alice"),
		sender:  s.Token("t1", "svc", auth.ScopeSend),
	}
	ids := s.Seed(f.sender, "alice", 2)
	f.readID, f.unreadID = ids[0], ids[1]
	f.bobOwnID = s.Seed(f.sender, "bob", 1)[0]
	// alice in t2 has an inbox of her own, with an actor and a target of t2.
	t2in := s.SendInput("t2 news", "alice")
	t2in["actor"] = map[string]any{"id": "hubot", "name": "Hubot"}
	t2in["target"] = map[string]any{"id": "repo-2", "kind": "repository"}
	s.Send(s.Token("t2", "svc", auth.ScopeSend), t2in)
	s.Mark(f.aliceT1, true, f.readID)
	var d struct {
		Viewer struct {
			Notification notificationData `json:"notification"`
		} `json:"viewer"`
	}
	s.MustData(f.aliceT1, `query($id: ID!) { viewer { notification(id: $id) { `+notificationFields+` } } }`, map[string]any{"id": f.unreadID}, &d)
	f.actorID, f.targetID = d.Viewer.Notification.Actor.ID, d.Viewer.Notification.Target.ID
	return f
}

// expectAliceUnchanged checks that alice's t1 inbox is as the fixture left it.
func (f *isolationFixture) expectAliceUnchanged(s *testgw.Server, what string) {
	s.T.Helper()
	s.ExpectUnread(f.aliceT1, 1, what)
	var d struct {
		Nodes []*struct {
			ID   string `json:"id"`
			Read bool   `json:"read"`
		} `json:"nodes"`
	}
	s.MustData(f.aliceT1, `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Notification { id read } } }`,
		map[string]any{"ids": []string{f.readID, f.unreadID}}, &d)
	if len(d.Nodes) != 2 || d.Nodes[0] == nil || d.Nodes[1] == nil || !d.Nodes[0].Read || d.Nodes[1].Read {
		s.T.Fatalf("%s: alice's notifications changed: %+v", what, d.Nodes)
	}
}

func TestIsolationAcrossUsersAndTenants(t *testing.T) {
	t.Parallel()
	f := newIsolationFixture(t)
	s := f.s
	f.expectAliceUnchanged(s, "fixture")

	for _, intruder := range []struct{ name, token string }{
		{"cross-user bob@t1", f.bobT1},
		{"cross-tenant alice@t2", f.aliceT2},
	} {
		t.Run(strings.NewReplacer(" ", "_", "@", "_at_").Replace(intruder.name), func(t *testing.T) {
			s := s.WithT(t)
			before := s.Unread(intruder.token)
			for _, id := range []string{f.readID, f.unreadID} {
				var nd struct {
					Node *struct {
						ID string `json:"id"`
					} `json:"node"`
				}
				r := s.Post(intruder.token, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": id})
				if len(r.Errors) > 0 {
					t.Fatalf("node(alice's id): errors %+v, want null", r.Errors)
				}
				_ = json.Unmarshal(r.Data, &nd)
				if nd.Node != nil {
					t.Fatalf("node(alice's id) = %+v, want null", nd.Node)
				}

				var vd struct {
					Viewer struct {
						Notification *struct {
							ID string `json:"id"`
						} `json:"notification"`
					} `json:"viewer"`
				}
				s.MustData(intruder.token, `query($id: ID!) { viewer { notification(id: $id) { id title } } }`, map[string]any{"id": id}, &vd)
				if vd.Viewer.Notification != nil {
					t.Fatalf("viewer.notification(alice's id) = %+v, want null", vd.Viewer.Notification)
				}
			}
			var nd struct {
				Nodes []*struct {
					ID string `json:"id"`
				} `json:"nodes"`
			}
			s.MustData(intruder.token, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`,
				map[string]any{"ids": []string{f.readID, f.unreadID}}, &nd)
			if len(nd.Nodes) != 2 || nd.Nodes[0] != nil || nd.Nodes[1] != nil {
				t.Fatalf("nodes(alice's ids) = %+v, want [null, null]", nd.Nodes)
			}

			// Another user's ids are listed in notFound (v2: no whole-call NOT_FOUND).
			const markQ = `mutation($ids: [ID!]!) { %s(ids: $ids) { unreadCount notFound notifications { id read } } }`
			for _, c := range []struct {
				field string
				ids   []string
			}{{"markRead", []string{f.unreadID}}, {"markUnread", []string{f.readID}}, {"markRead", []string{f.unreadID, f.readID}}} {
				var d map[string]struct {
					NotFound      []string `json:"notFound"`
					Notifications []any    `json:"notifications"`
				}
				s.MustData(intruder.token, fmt.Sprintf(markQ, c.field), map[string]any{"ids": c.ids}, &d)
				if got := d[c.field]; !slices.Equal(got.NotFound, c.ids) || len(got.Notifications) != 0 {
					t.Fatalf("%s of alice's ids by %s = %+v, want all in notFound", c.field, intruder.name, got)
				}
			}
			f.expectAliceUnchanged(s, "after "+intruder.name+"'s attempts")
			if after := s.Unread(intruder.token); after != before {
				t.Fatalf("intruder's own unreadCount moved from %d to %d", before, after)
			}
		})
	}

	// bob mixing his own id with alice's: alice's is listed in notFound, his own is marked.
	var mixed struct {
		MarkRead struct {
			NotFound []string `json:"notFound"`
		} `json:"markRead"`
	}
	s.MustData(f.bobT1, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount notFound } }`,
		map[string]any{"ids": []string{f.bobOwnID, f.unreadID}}, &mixed)
	if !slices.Equal(mixed.MarkRead.NotFound, []string{f.unreadID}) {
		t.Fatalf("bob's mixed markRead: notFound %v", mixed.MarkRead.NotFound)
	}
	s.ExpectUnread(f.bobT1, 0, "bob after a mixed markRead")
	f.expectAliceUnchanged(s, "after bob's mixed markRead")

	// An actor or target is visible only through a notification of the viewer (issue 8,
	// item 6): alice sees hers, bob in t1 and everybody in t2 get null, as for no such id.
	const profQ = `query($a: ID!, $t: ID!, $ids: [ID!]!) {
	  a: node(id: $a) { id ... on Actor { name } }
	  t: node(id: $t) { id ... on Target { title } }
	  nodes(ids: $ids) { id } }`
	type profData struct {
		A     *struct{ ID string } `json:"a"`
		T     *struct{ ID string } `json:"t"`
		Nodes []*struct{ ID string }
	}
	vars := map[string]any{"a": f.actorID, "t": f.targetID, "ids": []string{f.actorID, f.targetID}}
	var pd profData
	s.MustData(f.aliceT1, profQ, vars, &pd)
	if pd.A == nil || pd.T == nil || len(pd.Nodes) != 2 || pd.Nodes[0] == nil || pd.Nodes[1] == nil {
		t.Fatalf("alice@t1: her actor/target = %+v, want visible", pd)
	}
	for _, tok := range []string{f.bobT1, f.aliceT2, s.Token("t2", "carol")} {
		pd = profData{}
		s.MustData(tok, profQ, vars, &pd)
		if pd.A != nil || pd.T != nil || len(pd.Nodes) != 2 || pd.Nodes[0] != nil || pd.Nodes[1] != nil {
			t.Fatalf("actor/target of alice@t1 for another viewer = %+v, want null", pd)
		}
	}
	// alice@t2 sees only her own inbox, and hers is untouched by everything above.
	s.ExpectUnread(f.aliceT2, 1, "alice@t2")
	for _, id := range s.InboxIDs(f.aliceT2) {
		if id == f.readID || id == f.unreadID {
			t.Fatalf("alice@t2's inbox holds alice@t1's notification %s", id)
		}
	}
}

func TestAuthErrors(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	bob := s.Token("t1", "bob")
	ids := s.Seed(sender, "alice", 1)

	// No token: the request runs, every viewer field answers UNAUTHENTICATED.
	for _, q := range []string{
		`{ viewer { unreadCount } }`,
		`{ node(id: "` + ids[0] + `") { id } }`,
		`mutation { markAllRead { unreadCount } }`,
		`mutation { markRead(ids: ["` + ids[0] + `"]) { unreadCount } }`,
	} {
		s.ExpectError("", q, nil, "UNAUTHENTICATED")
	}
	s.ExpectError("", testgw.SendMutation, map[string]any{"in": s.SendInput("x", "bob")}, "UNAUTHENTICATED")
	s.ExpectUnread(alice, 1, "alice after unauthenticated mutations")
	s.ExpectUnread(bob, 0, "bob after an unauthenticated send")

	// Invalid and expired tokens: HTTP 401 and UNAUTHENTICATED, nothing runs.
	other, err := auth.NewVerifier(auth.Config{Secret: []byte(strings.Repeat("k", 40))})
	if err != nil {
		t.Fatal(err)
	}
	wrongKey, err := other.Sign(auth.Claims{TenantID: "t1", UserID: "alice", Scopes: []string{auth.ScopeSend}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	past, err := auth.NewVerifier(auth.Config{Secret: testgw.Secret, Clock: clockwork.NewFakeClockAt(time.Now().Add(-3 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := past.Sign(auth.Claims{TenantID: "t1", UserID: "svc", Scopes: []string{auth.ScopeSend}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"garbage": "not.a.jwt", "wrong key": wrongKey, "expired": expired} {
		for _, q := range []struct {
			query string
			vars  map[string]any
		}{
			{`{ viewer { unreadCount } }`, nil},
			{`mutation { markAllRead { unreadCount } }`, nil},
			{testgw.SendMutation, map[string]any{"in": s.SendInput("x", "bob", "alice")}},
		} {
			r := s.ExpectError(tok, q.query, q.vars, "UNAUTHENTICATED")
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("%s token: HTTP %d, want 401", name, r.Status)
			}
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s token: WWW-Authenticate = %q", name, r.Header.Get("WWW-Authenticate"))
			}
		}
	}
	s.ExpectUnread(alice, 1, "alice after invalid tokens")
	s.ExpectUnread(bob, 0, "bob after invalid tokens")

	// A valid token without the scope cannot send.
	s.ExpectError(alice, testgw.SendMutation, map[string]any{"in": s.SendInput("x", "bob")}, "FORBIDDEN")
	s.ExpectError(s.Token("t1", "svc", "notifications:read", "Notifications:Send"), testgw.SendMutation, map[string]any{"in": s.SendInput("x", "bob")}, "FORBIDDEN")
	s.ExpectUnread(bob, 0, "bob after forbidden sends")
	s.ExpectInboxLen(bob, 0, "bob after forbidden sends")
}

func TestBadPageArguments(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	s.Seed(sender, "alice", 2)
	cursorOf := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	for name, vars := range map[string]map[string]any{
		"malformed cursor":      {"first": 1, "after": "garbage!"},
		"base64 non-cursor":     {"first": 1, "after": cursorOf("hello world")},
		"cursor of another ver": {"first": 1, "after": cursorOf("n9:01ARZ3NDEKTSV4RRFFQ69G5FAV")},
		"cursor not a ULID":     {"first": 1, "after": cursorOf("n1:01ARZ3NDEKTSV4RRFFQ69G5F#V")},
		"malformed before":      {"last": 1, "before": "%%%"},
		"first > 100":           {"first": 101},
		"first < 0":             {"first": -1},
		"last > 100":            {"last": 101},
		"last < 0":              {"last": -1},
		"first and last":        {"first": 1, "last": 1},
	} {
		r := s.Post(alice, pageQuery, vars)
		if len(r.Errors) == 0 || slices.ContainsFunc(r.Codes(), func(c string) bool { return c != "BAD_USER_INPUT" }) {
			t.Errorf("%s: errors %+v (codes %v), want BAD_USER_INPUT", name, r.Errors, r.Codes())
		}
	}
	s.ExpectUnread(alice, 2, "after bad page arguments")
}

func TestBadIDs(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice := s.Token("t1", "alice")
	ids := s.Seed(sender, "alice", 2)
	s.Mark(alice, true, ids[0])

	long := strings.Repeat("A", 300)
	bad := map[string]string{
		"hash":     "Tm90aWZp#Y2F0aW9u",
		"control":  "abc\x01def",
		"newline":  "abc\ndef",
		"300 byte": long,
		"empty":    "",
	}
	for name, id := range bad {
		// A state mutation lists an id that names nothing in notFound, as given.
		for _, field := range []string{"markRead", "markUnread"} {
			var d map[string]struct {
				NotFound []string `json:"notFound"`
			}
			s.MustData(alice, `mutation($ids: [ID!]!) { `+field+`(ids: $ids) { unreadCount notFound } }`, map[string]any{"ids": []string{ids[1], id}}, &d)
			if !slices.Equal(d[field].NotFound, []string{id}) {
				t.Errorf("id %s: %s notFound = %q, want it", name, field, d[field].NotFound)
			}
		}
		for _, q := range []struct {
			query string
			vars  map[string]any
		}{
			{`query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": id}},
			{`query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": []string{ids[1], id}}},
			{`query($id: ID!) { viewer { notification(id: $id) { id } } }`, map[string]any{"id": id}},
		} {
			r := s.Post(alice, q.query, q.vars)
			if len(r.Errors) == 0 || slices.ContainsFunc(r.Codes(), func(c string) bool { return c != "BAD_USER_INPUT" }) {
				t.Errorf("id %s: %s: errors %+v, want BAD_USER_INPUT", name, q.query, r.Errors)
			}
		}
	}
	// Well-formed global ids whose key could not be a key segment: they name nothing. The
	// API lists them in notFound for a mutation and answers null or BAD_USER_INPUT for a
	// lookup (never an internal error), and writes nothing for them.
	enc := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	for name, id := range map[string]string{
		"notification key with #":       enc("Notification:01ARZ3NDEKTSV4RR#FQ69G5FAV"),
		"notification key with control": enc("Notification:01ARZ3NDEKTSV4RR\x01FQ69G5FAV"),
		"notification key of 300 bytes": enc("Notification:" + strings.Repeat("0", 300)),
		"actor key with #":              enc("Actor:octo#cat"),
		"actor key with control":        enc("Actor:octo\x00cat\x01"),
		"actor key of 300 bytes":        enc("Actor:" + strings.Repeat("a", 300)),
		"target key with #":             enc("Target:repository\x00repo#1"),
		"target kind of 300 bytes":      enc("Target:" + strings.Repeat("k", 300) + "\x00repo-1"),
		"unknown type":                  enc("Tenant:t1"),
	} {
		for _, field := range []string{"markRead", "markUnread"} {
			var d map[string]struct {
				NotFound []string `json:"notFound"`
			}
			s.MustData(alice, `mutation($ids: [ID!]!) { `+field+`(ids: $ids) { unreadCount notFound } }`, map[string]any{"ids": []string{ids[1], id}}, &d)
			if !slices.Equal(d[field].NotFound, []string{id}) {
				t.Errorf("%s(%s): notFound %q, want the id", field, name, d[field].NotFound)
			}
		}
		r := s.Post(alice, `query($id: ID!) { node(id: $id) { id } nodes(ids: [$id]) { id } viewer { notification(id: $id) { id } } }`, map[string]any{"id": id})
		for _, e := range r.Errors {
			if e.Code() != "BAD_USER_INPUT" {
				t.Errorf("lookups of %s: error %+v, want null or BAD_USER_INPUT", name, e)
			}
		}
		if len(r.Errors) == 0 {
			var d struct {
				Node   *struct{ ID string }   `json:"node"`
				Nodes  []*struct{ ID string } `json:"nodes"`
				Viewer struct {
					Notification *struct{ ID string } `json:"notification"`
				} `json:"viewer"`
			}
			_ = json.Unmarshal(r.Data, &d)
			if d.Node != nil || len(d.Nodes) != 1 || d.Nodes[0] != nil || d.Viewer.Notification != nil {
				t.Errorf("lookups of %s = %s, want nulls", name, r.Data)
			}
		}
	}

	// No ids, and more than 100 distinct ids, in one mark.
	s.ExpectError(alice, `mutation { markRead(ids: []) { unreadCount } }`, nil, "BAD_USER_INPUT")
	s.ExpectError(alice, `mutation { markUnread(ids: []) { unreadCount } }`, nil, "BAD_USER_INPUT")
	many := []string{ids[1]}
	for i := range 100 {
		many = append(many, base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "Notification:01ARZ3NDEKTSV4RRFFQ69G5F%02d", i)))
	}
	s.ExpectError(alice, `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }`, map[string]any{"ids": many}, "BAD_USER_INPUT")
	// More than 100 ids in nodes.
	hundredOne := make([]string, 1001) // one over the send service's 1,000
	for i := range hundredOne {
		hundredOne[i] = ids[1]
	}
	s.ExpectError(alice, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": hundredOne}, "BAD_USER_INPUT")

	s.ExpectUnread(alice, 1, "after bad ids")
	var d struct {
		Nodes []*struct{ Read bool } `json:"nodes"`
	}
	s.MustData(alice, `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Notification { read } } }`, map[string]any{"ids": ids}, &d)
	if !d.Nodes[0].Read || d.Nodes[1].Read {
		t.Fatalf("read states changed: %+v %+v", d.Nodes[0], d.Nodes[1])
	}
}

func TestBadSendInput(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	carol := s.Token("t1", "carol")
	const key = "bad-input-key"

	long := strings.Repeat("x", 257)
	badIDs := map[string]string{"hash": "a#b", "control": "a\x01b", "newline": "a\nb", "257 bytes": long, "empty": ""}
	hundredOne := make([]string, 1001) // one over the send service's 1,000
	for i := range hundredOne {
		hundredOne[i] = fmt.Sprintf("user%d", i)
	}
	hundredOne[0] = "carol"

	cases := map[string]func(in map[string]any){
		"empty recipients":       func(in map[string]any) { in["recipients"] = []string{} },
		"1001 recipients":        func(in map[string]any) { in["recipients"] = hundredOne },
		"empty idempotencyKey":   func(in map[string]any) { in["idempotencyKey"] = "" },
		"idempotencyKey with #":  func(in map[string]any) { in["idempotencyKey"] = "k#1" },
		"payload over 16 KiB":    func(in map[string]any) { in["payload"] = map[string]any{"blob": strings.Repeat("p", 16<<10)} },
		"empty type":             func(in map[string]any) { in["type"] = "" },
		"target kind with #":     func(in map[string]any) { in["target"] = map[string]any{"id": "r", "kind": "repo#x"} },
		"title and body too big": func(in map[string]any) { in["body"] = strings.Repeat("b", 16<<10+1) },
	}
	for name, id := range badIDs {
		cases["recipient "+name] = func(in map[string]any) { in["recipients"] = []string{"carol", id} }
		cases["actor id "+name] = func(in map[string]any) { in["actor"] = map[string]any{"id": id, "name": "A"} }
		cases["target id "+name] = func(in map[string]any) { in["target"] = map[string]any{"id": id, "kind": "repository"} }
	}
	for name, mutate := range cases {
		in := s.SendInput(name, "carol")
		in["idempotencyKey"] = key
		mutate(in)
		r := s.Post(sender, testgw.SendMutation, map[string]any{"in": in})
		if len(r.Errors) == 0 || slices.ContainsFunc(r.Codes(), func(c string) bool { return c != "BAD_USER_INPUT" }) {
			t.Errorf("%s: errors %+v (codes %v), want BAD_USER_INPUT", name, r.Errors, r.Codes())
		}
	}
	s.ExpectUnread(carol, 0, "carol after bad sends")
	s.ExpectInboxLen(carol, 0, "carol after bad sends")
	s.ExpectUnread(s.Token("t1", "user1"), 0, "user1 after 1001 recipients")

	// The key was not consumed: a valid send with it goes through, once.
	in := s.SendInput("good", "carol")
	in["idempotencyKey"] = key
	res := s.Send(sender, in)
	if res.Duplicate || res.Accepted != 1 {
		t.Fatalf("valid send with the key used by bad ones = %+v, want accepted 1, not duplicate", res)
	}
	// The actor of the good send exists; no actor named by a bad one does.
	s.ExpectUnread(carol, 1, "carol after the good send")

	// A payload of exactly 16 KiB is fine, for each recipient (two: each gets a copy).
	okIn := s.SendInput("full payload", "carol", "user1")
	okIn["payload"] = strings.Repeat("q", 16<<10-2) // a JSON string of 16 KiB with its quotes
	res = s.Send(sender, okIn)
	if res.Accepted != 2 || len(res.NotificationIds) != 2 {
		t.Fatalf("send of a 16 KiB payload to 2 recipients = %d accepted", res.Accepted)
	}
	s.ExpectUnread(carol, 2, "carol after the 16 KiB send")
}
