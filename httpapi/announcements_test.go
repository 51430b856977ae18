package httpapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
)

const sendAnnouncementMutation = `mutation($in: SendAnnouncementInput!) {
  sendAnnouncement(input: $in) { duplicate announcement { id title status createdAt expiresAt withdrawnAt } }
}`

// annPayload is sendAnnouncement's answer.
type annPayload struct {
	Duplicate    bool `json:"duplicate"`
	Announcement struct {
		ID          string     `json:"id"`
		Title       string     `json:"title"`
		Status      string     `json:"status"`
		WithdrawnAt *time.Time `json:"withdrawnAt"`
	} `json:"announcement"`
}

// sendAnnouncement announces title to svc's tenant under key.
func sendAnnouncement(t *testing.T, s *testgw.Server, svc, key, title string) annPayload {
	t.Helper()
	var d struct {
		SendAnnouncement annPayload `json:"sendAnnouncement"`
	}
	s.WithT(t).MustData(svc, sendAnnouncementMutation, map[string]any{"in": map[string]any{
		"idempotencyKey": key, "type": "product.update", "category": "news", "title": title, "body": "body of " + title}}, &d)
	return d.SendAnnouncement
}

// annNode is a notification of an inbox page.
type annNode struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Title string `json:"title"`
	Read  bool   `json:"read"`
}

// inboxOf reads the viewer's first page (archived as filter says) and their badge.
func inboxOf(t *testing.T, s *testgw.Server, token, archived string) (nodes []annNode, unread, unseen, unreadCount int) {
	t.Helper()
	var d struct {
		Viewer struct {
			Inbox struct {
				Edges []struct {
					Node annNode `json:"node"`
				} `json:"edges"`
			} `json:"inbox"`
			UnreadCount int `json:"unreadCount"`
			Badge       struct {
				Unread int `json:"unread"`
				Unseen int `json:"unseen"`
			} `json:"badge"`
		} `json:"viewer"`
	}
	s.WithT(t).MustData(token, `query($a: ArchivedFilter) { viewer { unreadCount badge { unread unseen }
	  inbox(first: 50, filter: {archived: $a}) { edges { node { id kind title read } } } } }`, map[string]any{"a": archived}, &d)
	for _, e := range d.Viewer.Inbox.Edges {
		nodes = append(nodes, e.Node)
	}
	return nodes, d.Viewer.Badge.Unread, d.Viewer.Badge.Unseen, d.Viewer.UnreadCount
}

// stateOp runs one state mutation (markRead, markUnread, markSeen, archive, unarchive)
// with ids and returns its notFound and the badge's unread after it.
func stateOp(t *testing.T, s *testgw.Server, token, op string, ids ...string) (notFound []string, unread int) {
	t.Helper()
	var d map[string]struct {
		NotFound []string `json:"notFound"`
		Badge    struct {
			Unread int `json:"unread"`
		} `json:"badge"`
	}
	s.WithT(t).MustData(token, fmt.Sprintf(`mutation($ids: [ID!]!) { r: %s(ids: $ids) { notFound badge { unread } } }`, op), map[string]any{"ids": ids}, &d)
	return d["r"].NotFound, d["r"].Badge.Unread
}

// annGlobalID is the Notification global id of tenant's announcement id in every inbox.
func annGlobalID(id string) string {
	return inbox.GlobalID(inbox.TypeNotification, inbox.AnnouncementRef+id)
}

// An announcement sent through GraphQL by a service token is in the inbox and badge of
// every user of its tenant (one who never received anything included) as a Notification
// of kind ANNOUNCEMENT; each user's markRead, markUnread, archive, unarchive, delete and
// markAllRead apply to it for that user alone, through its node id; node(id:) resolves
// it for its tenant only; withdrawAnnouncement takes it out of every inbox and badge. A
// user token cannot announce (FORBIDDEN); a forged id or another tenant's announcement
// id is notFound in a mutation and changes nothing.
func TestAnnouncementThroughGraphQL(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.ServiceToken("acme", "svc")
	alice, carol := s.Token("acme", "alice"), s.Token("acme", "carol")
	globexSvc, globexBob := s.ServiceToken("globex", "svc"), s.Token("globex", "bob")
	personal := s.Seed(svc, "alice", 1)[0]

	ann := sendAnnouncement(t, s, svc, "launch", "We launched")
	if ann.Duplicate || ann.Announcement.Status != "active" || ann.Announcement.Title != "We launched" || ann.Announcement.WithdrawnAt != nil ||
		inbox.ULIDTime(ann.Announcement.ID).IsZero() {
		t.Fatalf("sendAnnouncement: %+v", ann)
	}
	if again := sendAnnouncement(t, s, svc, "launch", "We launched"); !again.Duplicate || again.Announcement.ID != ann.Announcement.ID {
		t.Fatalf("replay: %+v, first %+v", again, ann)
	}
	s.ExpectError(svc, sendAnnouncementMutation, map[string]any{"in": map[string]any{
		"idempotencyKey": "launch", "type": "product.update", "title": "Another"}}, "CONFLICT")
	node := annGlobalID(ann.Announcement.ID)

	// carol never received anything: the announcement is her inbox and her badge.
	nodes, unread, unseen, unreadCount := inboxOf(t, s, carol, "EXCLUDE")
	if len(nodes) != 1 || nodes[0].ID != node || nodes[0].Kind != "ANNOUNCEMENT" || nodes[0].Title != "We launched" || nodes[0].Read ||
		unread != 1 || unseen != 1 || unreadCount != 1 {
		t.Fatalf("carol: %+v unread %d unseen %d unreadCount %d", nodes, unread, unseen, unreadCount)
	}
	// alice: merged by time with her own (the announcement is newer).
	nodes, unread, _, _ = inboxOf(t, s, alice, "EXCLUDE")
	if len(nodes) != 2 || nodes[0].ID != node || nodes[1].Kind != "PERSONAL" || unread != 2 {
		t.Fatalf("alice: %+v unread %d", nodes, unread)
	}
	// node(id:) resolves it for the tenant's users, not for another tenant's.
	var nd struct {
		Node *annNode `json:"node"`
	}
	s.MustData(carol, `query($id: ID!) { node(id: $id) { ... on Notification { id kind title read } } }`, map[string]any{"id": node}, &nd)
	if nd.Node == nil || nd.Node.ID != node || nd.Node.Kind != "ANNOUNCEMENT" {
		t.Fatalf("node(id) for carol: %+v", nd.Node)
	}
	nd.Node = nil
	s.MustData(globexBob, `query($id: ID!) { node(id: $id) { ... on Notification { id kind title } } }`, map[string]any{"id": node}, &nd)
	if nd.Node != nil {
		t.Fatalf("node(id) of acme's announcement for globex's bob: %+v", nd.Node)
	}

	// carol's state changes, one by one; alice's badge does not move.
	for _, step := range []struct {
		op       string
		archived string // the filter under which it is listed after the op
		unread   int
	}{
		{"markRead", "EXCLUDE", 0},
		{"markUnread", "EXCLUDE", 1},
		{"markSeen", "EXCLUDE", 1},
		{"archive", "ONLY", 0},
		{"unarchive", "EXCLUDE", 1},
	} {
		notFound, u := stateOp(t, s, carol, step.op, node)
		if len(notFound) != 0 || u != step.unread {
			t.Fatalf("%s: notFound %v unread %d, want %d", step.op, notFound, u, step.unread)
		}
		nodes, unread, _, unreadCount := inboxOf(t, s, carol, step.archived)
		if len(nodes) != 1 || nodes[0].ID != node || nodes[0].Read != (step.unread == 0 && step.op == "markRead") ||
			unread != step.unread || unreadCount != step.unread {
			t.Fatalf("after %s: %+v unread %d unreadCount %d, want %d", step.op, nodes, unread, unreadCount, step.unread)
		}
		if step.op == "archive" {
			if listed, _, _, _ := inboxOf(t, s, carol, "EXCLUDE"); len(listed) != 0 {
				t.Fatalf("archived but listed: %+v", listed)
			}
		}
		if _, u, _, _ := inboxOf(t, s, alice, "EXCLUDE"); u != 2 {
			t.Fatalf("after carol's %s alice's unread is %d, want 2", step.op, u)
		}
	}

	// Forged ids (an announcement that does not exist, another tenant's) are notFound and
	// change nothing, for every state mutation.
	other := sendAnnouncement(t, s, globexSvc, "g1", "Globex news")
	otherNode := annGlobalID(other.Announcement.ID)
	forged := annGlobalID("01J00000000000000000000000")
	for _, op := range []string{"markRead", "markSeen", "archive"} {
		notFound, u := stateOp(t, s, carol, op, forged, otherNode)
		if !slices.Equal(notFound, []string{forged, otherNode}) || u != 1 {
			t.Fatalf("%s with foreign ids: notFound %v unread %d", op, notFound, u)
		}
	}
	var del struct {
		DeleteNotifications struct {
			DeletedIds []string `json:"deletedIds"`
			NotFound   []string `json:"notFound"`
			Badge      struct {
				Unread int `json:"unread"`
			} `json:"badge"`
		} `json:"deleteNotifications"`
	}
	const deleteMutation = `mutation($ids: [ID!]!) { deleteNotifications(ids: $ids) { deletedIds notFound badge { unread } } }`
	s.MustData(carol, deleteMutation, map[string]any{"ids": []string{forged, otherNode}}, &del)
	if len(del.DeleteNotifications.DeletedIds) != 0 || len(del.DeleteNotifications.NotFound) != 2 || del.DeleteNotifications.Badge.Unread != 1 {
		t.Fatalf("delete of foreign ids: %+v", del)
	}
	if nodes, u, _, _ := inboxOf(t, s, globexBob, "EXCLUDE"); len(nodes) != 1 || nodes[0].ID != otherNode || nodes[0].Read || u != 1 {
		t.Fatalf("globex's bob after acme's carol used his announcement's id: %+v unread %d", nodes, u)
	}
	if nodes, u, _, _ := inboxOf(t, s, carol, "EXCLUDE"); len(nodes) != 1 || nodes[0].ID != node || u != 1 {
		t.Fatalf("carol sees %+v unread %d", nodes, u)
	}

	// carol deletes it: gone from her inbox (every filter) and badge; alice keeps it.
	s.MustData(carol, deleteMutation, map[string]any{"ids": []string{node}}, &del)
	if !slices.Equal(del.DeleteNotifications.DeletedIds, []string{node}) || len(del.DeleteNotifications.NotFound) != 0 || del.DeleteNotifications.Badge.Unread != 0 {
		t.Fatalf("delete: %+v", del)
	}
	if nodes, u, _, n := inboxOf(t, s, carol, "INCLUDE"); len(nodes) != 0 || u != 0 || n != 0 {
		t.Fatalf("carol after delete: %+v unread %d/%d", nodes, u, n)
	}

	// alice's markAllRead reads it too; markUnread makes it unread again.
	var all struct {
		MarkAllRead struct {
			UnreadCount int `json:"unreadCount"`
		} `json:"markAllRead"`
	}
	s.MustData(alice, `mutation { markAllRead { unreadCount } }`, nil, &all)
	if all.MarkAllRead.UnreadCount != 0 {
		t.Fatalf("markAllRead: %+v", all)
	}
	if nodes, u, _, _ := inboxOf(t, s, alice, "EXCLUDE"); len(nodes) != 2 || !nodes[0].Read || !nodes[1].Read || u != 0 {
		t.Fatalf("alice after markAllRead: %+v unread %d", nodes, u)
	}
	if _, u := stateOp(t, s, alice, "markUnread", node); u != 1 {
		t.Fatalf("alice's markUnread after markAllRead: unread %d", u)
	}
	if _, u := stateOp(t, s, alice, "markUnread", personal); u != 2 {
		t.Fatalf("alice's markUnread of her own: unread %d", u)
	}

	// A user token cannot announce nor withdraw.
	s.ExpectError(alice, sendAnnouncementMutation, map[string]any{"in": map[string]any{
		"idempotencyKey": "u1", "type": "product.update", "title": "Mine"}}, "FORBIDDEN")
	s.ExpectError(alice, `mutation($id: ID!) { withdrawAnnouncement(id: $id) { id } }`, map[string]any{"id": ann.Announcement.ID}, "FORBIDDEN")
	// Another tenant's service cannot withdraw it.
	s.ExpectError(globexSvc, `mutation($id: ID!) { withdrawAnnouncement(id: $id) { id } }`, map[string]any{"id": ann.Announcement.ID}, "NOT_FOUND")
	if _, u, _, _ := inboxOf(t, s, alice, "EXCLUDE"); u != 2 {
		t.Fatalf("alice's unread after refused withdrawals: %d", u)
	}

	// Withdrawn: out of every inbox and badge of the tenant.
	var w struct {
		WithdrawAnnouncement struct {
			ID          string     `json:"id"`
			Status      string     `json:"status"`
			WithdrawnAt *time.Time `json:"withdrawnAt"`
		} `json:"withdrawAnnouncement"`
	}
	s.MustData(svc, `mutation($id: ID!) { withdrawAnnouncement(id: $id) { id status withdrawnAt } }`, map[string]any{"id": ann.Announcement.ID}, &w)
	if w.WithdrawAnnouncement.ID != ann.Announcement.ID || w.WithdrawAnnouncement.Status != "withdrawn" || w.WithdrawAnnouncement.WithdrawnAt == nil {
		t.Fatalf("withdrawAnnouncement: %+v", w)
	}
	if nodes, u, _, n := inboxOf(t, s, alice, "INCLUDE"); len(nodes) != 1 || nodes[0].ID == node || u != 1 || n != 1 {
		t.Fatalf("alice after the withdrawal: %+v unread %d/%d", nodes, u, n)
	}
	if nodes, u, _, _ := inboxOf(t, s, s.Token("acme", "dave"), "INCLUDE"); len(nodes) != 0 || u != 0 {
		t.Fatalf("dave after the withdrawal: %+v unread %d", nodes, u)
	}
	if notFound, _ := stateOp(t, s, alice, "markRead", node); !slices.Equal(notFound, []string{node}) {
		t.Fatalf("markRead of the withdrawn announcement: notFound %v", notFound)
	}
	nd.Node = nil
	s.MustData(alice, `query($id: ID!) { node(id: $id) { ... on Notification { id kind title } } }`, map[string]any{"id": node}, &nd)
	if nd.Node != nil {
		t.Fatalf("node(id) of a withdrawn announcement: %+v", nd.Node)
	}
	// globex's is untouched.
	if _, u, _, _ := inboxOf(t, s, globexBob, "EXCLUDE"); u != 1 {
		t.Fatalf("globex's bob after acme's withdrawal: unread %d", u)
	}
}

// On a warm instance (the tenant's set cached), a badge with an announcement active is one
// DynamoDB call (META) and a page of the inbox at most two (the first, and the second with
// the announcement on it), for a user who never received anything and for one with
// notifications.
func TestAnnouncementReadsStayCheap(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	svc, err := g.v.Sign(auth.Claims{TenantID: "acme", Subject: "svc", Scopes: []string{auth.ScopeSend}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g.seed(t, 3, "push", each, each)
	alice := g.token
	g.token = svc
	if _, data := g.ops(t, `mutation { sendAnnouncement(input: {idempotencyKey: "k", type: "news", title: "Hello"}) { announcement { id } } }`, nil); data == nil {
		t.Fatal("no data")
	}
	g.seed(t, 20, "push", each, each) // newer than the announcement: it is on alice's second page
	for _, user := range []string{"alice", "newcomer"} {
		g.token = alice
		if user != "alice" {
			if g.token, err = g.v.Sign(auth.Claims{TenantID: "acme", UserID: user}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		// The first read after the announcement reads the set again (the invalidation).
		g.ops(t, `{ viewer { badge { unread } } }`, nil)
		ops, data := g.ops(t, `{ viewer { badge { unread unseen } } }`, nil)
		want(t, user+": badge", ops, "GetItem")
		if b, _ := json.Marshal(data); user == "newcomer" && string(b) != `{"viewer":{"badge":{"unread":1,"unseen":1}}}` {
			t.Errorf("%s's badge: %s", user, b)
		}
		ops, data = g.ops(t, `{ viewer { unreadCount inbox(first: 20) { edges { node { id kind title actor { name } } } pageInfo { hasNextPage endCursor } } } }`, nil)
		if len(ops) > 2 {
			t.Errorf("%s: first page: DynamoDB calls %v, want at most 2", user, ops)
		}
		b, _ := json.Marshal(data)
		if strings.Contains(string(b), `"kind":"ANNOUNCEMENT"`) != (user == "newcomer") {
			t.Errorf("%s's first page: %s", user, b)
		}
		ops, _ = g.ops(t, `{ viewer { unreadCount } }`, nil)
		want(t, user+": unreadCount", ops, "GetItem")
		// The second page of alice's (the announcement is on it: it is older than 20 of hers).
		if user == "alice" {
			var end string
			if pi, ok := data["viewer"].(map[string]any)["inbox"].(map[string]any)["pageInfo"].(map[string]any); ok {
				end, _ = pi["endCursor"].(string)
			}
			ops, data = g.ops(t, `query($c: String) { viewer { inbox(first: 20, after: $c) { edges { node { id kind title actor { name } } } } } }`, map[string]any{"c": end})
			if len(ops) > 2 {
				t.Errorf("alice: second page: DynamoDB calls %v, want at most 2", ops)
			}
			if b, _ := json.Marshal(data); !strings.Contains(string(b), `"kind":"ANNOUNCEMENT"`) {
				t.Errorf("alice's second page has no announcement: %s", b)
			}
		}
	}
}

// The edges of an announcement in one user's inbox: one created after the user's
// markAllRead is unread; markAllRead by category leaves another category's announcement
// unread; markAllSeen clears its unseen; the badge's categories count it; unreadOnly,
// types and categories filter it as a notification; pages of a long inbox list it once;
// snoozing one is refused (BAD_USER_INPUT) and changes nothing; a deleted one stays
// deleted whatever state change names it later.
func TestAnnouncementEdgesInOneInbox(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.ServiceToken("acme", "svc")
	alice := s.Token("acme", "alice")
	s.Seed(svc, "alice", 12) // category issues
	var all struct {
		MarkAllRead struct {
			UnreadCount int `json:"unreadCount"`
		} `json:"markAllRead"`
	}
	s.MustData(alice, `mutation { markAllRead { unreadCount } }`, nil, &all)
	if all.MarkAllRead.UnreadCount != 0 {
		t.Fatalf("markAllRead: %+v", all)
	}
	ann := sendAnnouncement(t, s, svc, "after-all-read", "After") // category news
	node := annGlobalID(ann.Announcement.ID)
	s.Seed(svc, "alice", 12)
	// unread: 12 own + the announcement, created after the watermark.
	type badge struct {
		Unread     int `json:"unread"`
		Unseen     int `json:"unseen"`
		Categories []struct {
			Category string `json:"category"`
			Unread   int    `json:"unread"`
			Unseen   int    `json:"unseen"`
		} `json:"categories"`
	}
	readBadge := func() badge {
		t.Helper()
		var d struct {
			Viewer struct {
				Badge       badge `json:"badge"`
				UnreadCount int   `json:"unreadCount"`
				UnseenCount int   `json:"unseenCount"`
			} `json:"viewer"`
		}
		s.MustData(alice, `{ viewer { unreadCount unseenCount badge { unread unseen categories { category unread unseen } } } }`, nil, &d)
		if d.Viewer.UnreadCount != d.Viewer.Badge.Unread || d.Viewer.UnseenCount != d.Viewer.Badge.Unseen {
			t.Fatalf("unreadCount %d unseenCount %d, badge %+v", d.Viewer.UnreadCount, d.Viewer.UnseenCount, d.Viewer.Badge)
		}
		return d.Viewer.Badge
	}
	b := readBadge()
	if b.Unread != 13 || len(b.Categories) != 2 || b.Categories[0].Category != "issues" || b.Categories[0].Unread != 12 ||
		b.Categories[1].Category != "news" || b.Categories[1].Unread != 1 || b.Categories[1].Unseen != 1 {
		t.Fatalf("badge after the announcement that followed markAllRead: %+v", b)
	}
	// Filters treat it as a notification of type product.update, category news.
	filtered := func(filter string) []string {
		t.Helper()
		var d struct {
			Viewer struct {
				Inbox struct {
					Nodes []struct {
						ID string `json:"id"`
					} `json:"nodes"`
				} `json:"inbox"`
			} `json:"viewer"`
		}
		s.MustData(alice, `{ viewer { inbox(first: 100, filter: `+filter+`) { nodes { id } } } }`, nil, &d)
		var ids []string
		for _, n := range d.Viewer.Inbox.Nodes {
			ids = append(ids, n.ID)
		}
		return ids
	}
	if ids := filtered(`{categories: ["news"]}`); !slices.Equal(ids, []string{node}) {
		t.Fatalf("categories news: %v", ids)
	}
	if ids := filtered(`{types: ["product.update"]}`); !slices.Equal(ids, []string{node}) {
		t.Fatalf("types product.update: %v", ids)
	}
	if ids := filtered(`{categories: ["issues"]}`); len(ids) != 24 || slices.Contains(ids, node) {
		t.Fatalf("categories issues: %d ids, announcement listed %v", len(ids), slices.Contains(ids, node))
	}
	if ids := filtered(`{unreadOnly: true}`); len(ids) != 13 || !slices.Contains(ids, node) {
		t.Fatalf("unreadOnly: %d ids, announcement listed %v", len(ids), slices.Contains(ids, node))
	}
	// Pages of 5, forward: every notification once, the announcement among them.
	var seen []string
	after := ""
	for range 10 {
		var d struct {
			Viewer struct {
				Inbox struct {
					Nodes []struct {
						ID string `json:"id"`
					} `json:"nodes"`
					PageInfo struct {
						HasNextPage bool   `json:"hasNextPage"`
						EndCursor   string `json:"endCursor"`
					} `json:"pageInfo"`
				} `json:"inbox"`
			} `json:"viewer"`
		}
		vars := map[string]any{}
		if after != "" {
			vars["after"] = after
		}
		s.MustData(alice, `query($after: String) { viewer { inbox(first: 5, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } } }`, vars, &d)
		for _, n := range d.Viewer.Inbox.Nodes {
			seen = append(seen, n.ID)
		}
		if !d.Viewer.Inbox.PageInfo.HasNextPage {
			break
		}
		after = d.Viewer.Inbox.PageInfo.EndCursor
	}
	if full := filtered(`{}`); len(seen) != 25 || !slices.Equal(seen, full) {
		t.Fatalf("pages of 5 listed %d (%v), one page of 100 %d (%v)", len(seen), seen, len(full), full)
	}
	if idx := slices.Index(seen, node); idx != 12 {
		t.Fatalf("the announcement is at %d of the merged inbox, want 12 (after the 12 newer own)", idx)
	}
	// markAllRead of category issues leaves the news announcement unread.
	s.MustData(alice, `mutation { markAllRead(filter: {categories: ["issues"]}) { unreadCount } }`, nil, &all)
	if all.MarkAllRead.UnreadCount != 1 {
		t.Fatalf("markAllRead of issues: unreadCount %d, want 1 (the announcement)", all.MarkAllRead.UnreadCount)
	}
	// markAllSeen clears its unseen, keeps it unread.
	var seenB struct {
		MarkAllSeen badge `json:"markAllSeen"`
	}
	s.MustData(alice, `mutation { markAllSeen { unread unseen categories { category unread unseen } } }`, nil, &seenB)
	if seenB.MarkAllSeen.Unread != 1 || seenB.MarkAllSeen.Unseen != 0 {
		t.Fatalf("markAllSeen: %+v", seenB.MarkAllSeen)
	}
	if b := readBadge(); b.Unread != 1 || b.Unseen != 0 {
		t.Fatalf("badge after markAllSeen: %+v", b)
	}
	// Snoozing one is refused (archive it instead), and changes nothing.
	s.ExpectError(alice, `mutation($ids: [ID!]!, $u: Time!) { snooze(ids: $ids, until: $u) { notFound } }`,
		map[string]any{"ids": []string{node}, "u": time.Now().Add(time.Hour).Format(time.RFC3339)}, "BAD_USER_INPUT")
	if b := readBadge(); b.Unread != 1 || b.Unseen != 0 {
		t.Fatalf("badge after a refused snooze: %+v", b)
	}
	// Deleted stays deleted: later state changes of it are notFound and do not bring it back.
	s.MustData(alice, `mutation($ids: [ID!]!) { deleteNotifications(ids: $ids) { deletedIds } }`, map[string]any{"ids": []string{node}}, nil)
	for _, op := range []string{"markUnread", "unarchive", "markRead", "markSeen", "archive"} {
		notFound, u := stateOp(t, s, alice, op, node)
		if !slices.Equal(notFound, []string{node}) || u != 0 {
			t.Fatalf("%s of a deleted announcement: notFound %v unread %d", op, notFound, u)
		}
	}
	if b := readBadge(); b.Unread != 0 || b.Unseen != 0 || len(b.Categories) != 0 {
		t.Fatalf("badge after the delete: %+v", b)
	}
	if ids := filtered(`{archived: INCLUDE}`); slices.Contains(ids, node) {
		t.Fatalf("a deleted announcement is listed")
	}
}

// An announcement with an actor and a target: its actor and target resolve by node(id)
// for the tenant's users only; groups answer beside it; one markRead of an own notification and
// the announcement applies both.
func TestAnnouncementActorGroupsAndMixedIDs(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.ServiceToken("acme", "svc")
	alice := s.Token("acme", "alice")
	own := s.Seed(svc, "alice", 1)[0]
	var d struct {
		SendAnnouncement annPayload `json:"sendAnnouncement"`
	}
	s.MustData(svc, sendAnnouncementMutation, map[string]any{"in": map[string]any{"idempotencyKey": "actor", "type": "news", "title": "From the CEO",
		"actor":  map[string]any{"id": "ceo", "name": "The CEO"},
		"target": map[string]any{"id": "blog-1", "kind": "post", "title": "Our year"}}}, &d)
	node := annGlobalID(d.SendAnnouncement.Announcement.ID)
	var page struct {
		Viewer struct {
			Inbox struct {
				Nodes []struct {
					ID         string `json:"id"`
					Actor      *struct{ ID, Name string }
					Target     *struct{ ID, Title string }
					Activities []struct {
						Actor *struct{ ID, Name string }
					} `json:"activities"`
				} `json:"nodes"`
			} `json:"inbox"`
		} `json:"viewer"`
	}
	s.MustData(alice, `{ viewer { inbox(first: 10) { nodes { id actor { id name } target { id title } activities { actor { id name } } } } } }`, nil, &page)
	n := page.Viewer.Inbox.Nodes
	if len(n) != 2 || n[0].ID != node || n[0].Actor == nil || n[0].Actor.Name != "The CEO" || n[0].Target == nil || n[0].Target.Title != "Our year" {
		t.Fatalf("alice's inbox: %+v", n)
	}
	// Its one activity is itself: the same actor, by the same id (no profile item exists
	// for an announcement's actor; it came back null before).
	if a := n[0].Activities; len(a) != 1 || a[0].Actor == nil || *a[0].Actor != *n[0].Actor {
		t.Fatalf("the announcement's activities: %+v, want one with actor %+v", a, *n[0].Actor)
	}
	for _, who := range []struct {
		token string
		found bool
	}{{alice, true}, {s.Token("acme", "carol"), true}, {s.Token("globex", "alice"), false}} {
		var nd struct {
			A *struct{ Name string }  `json:"a"`
			T *struct{ Title string } `json:"t"`
		}
		s.MustData(who.token, `query($a: ID!, $t: ID!) { a: node(id: $a) { ... on Actor { name } } t: node(id: $t) { ... on Target { title } } }`,
			map[string]any{"a": n[0].Actor.ID, "t": n[0].Target.ID}, &nd)
		if (nd.A != nil) != who.found || (who.found && nd.A.Name != "The CEO") {
			t.Errorf("node(actor id) found %+v, want found %v", nd.A, who.found)
		}
		_ = nd.T // a target id is anchored on its viewer: another user's may not resolve
	}
	// groups answers beside it (an announcement has no groupKey: it is in no group).
	var groups struct {
		Viewer struct {
			Groups struct {
				Nodes []struct {
					Latest annNode `json:"latest"`
				} `json:"nodes"`
			} `json:"groups"`
		} `json:"viewer"`
	}
	s.MustData(alice, `{ viewer { groups(first: 10) { nodes { latest { id kind } } } } }`, nil, &groups)
	if g := groups.Viewer.Groups.Nodes; len(g) != 1 || g[0].Latest.Kind != "PERSONAL" {
		t.Fatalf("groups: %+v", g)
	}

	notFound, u := stateOp(t, s, alice, "markRead", own, node)
	if len(notFound) != 0 || u != 0 {
		t.Fatalf("markRead of own and announcement: notFound %v unread %d", notFound, u)
	}
	if notFound, u = stateOp(t, s, alice, "markUnread", node, own, node); len(notFound) != 0 || u != 2 {
		t.Fatalf("markUnread of both (one twice): notFound %v unread %d", notFound, u)
	}
}

// Backward pages (last/before) through an inbox with announcements among the user's own
// notifications list every item once, in the order of one long page.
func TestAnnouncementBackwardPages(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	svc := s.ServiceToken("acme", "svc")
	alice := s.Token("acme", "alice")
	s.Seed(svc, "alice", 4)
	sendAnnouncement(t, s, svc, "b1", "First")
	s.Seed(svc, "alice", 3)
	sendAnnouncement(t, s, svc, "b2", "Second")
	s.Seed(svc, "alice", 2)
	full := s.InboxIDs(alice)
	if len(full) != 11 {
		t.Fatalf("one page: %d items", len(full))
	}
	type page struct {
		Viewer struct {
			Inbox struct {
				Nodes []struct {
					ID string `json:"id"`
				} `json:"nodes"`
				PageInfo struct {
					HasPreviousPage bool   `json:"hasPreviousPage"`
					StartCursor     string `json:"startCursor"`
				} `json:"pageInfo"`
			} `json:"inbox"`
		} `json:"viewer"`
	}
	// From the end: the oldest 3, then the 3 before them, ...
	var back []string
	before := ""
	for range 10 {
		var p page
		vars := map[string]any{}
		if before != "" {
			vars["before"] = before
		}
		s.MustData(alice, `query($before: String) { viewer { inbox(last: 3, before: $before) { nodes { id } pageInfo { hasPreviousPage startCursor } } } }`, vars, &p)
		var ids []string
		for _, n := range p.Viewer.Inbox.Nodes {
			ids = append(ids, n.ID)
		}
		back = append(ids, back...)
		if !p.Viewer.Inbox.PageInfo.HasPreviousPage {
			break
		}
		before = p.Viewer.Inbox.PageInfo.StartCursor
	}
	if !slices.Equal(back, full) {
		t.Fatalf("backward pages of 3: %v\none page: %v", back, full)
	}
}
