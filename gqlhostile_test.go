package main

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
)

// Hostile GraphQL documents against one gateway with two tenants whose users share an id:
// another tenant's (or user's) notification id in node, nodes and aliased markRead
// resolves as one that does not exist and changes nothing; a cursor of another viewer, a
// tampered, truncated or oversized one is BAD_USER_INPUT; aliased sends with one
// idempotency key write one notification.
func TestHostileDocumentsStayInTheirViewer(t *testing.T) {
	t.Parallel()
	gw := testgw.New(t)
	s1, s2 := gw.Token("t1", "svc", auth.ScopeSend), gw.Token("t2", "svc", auth.ScopeSend)
	alice1, alice2, bob1 := gw.Token("t1", "alice"), gw.Token("t2", "alice"), gw.Token("t1", "bob")
	victim := gw.Seed(s1, "alice", 2)
	gw.Seed(s2, "alice", 1)
	gw.Seed(s1, "bob", 1)

	// Forged ids: the victim's own ids, and ids of the same ULIDs under other types.
	forged := []string{victim[0], victim[1],
		base64.RawURLEncoding.EncodeToString([]byte("Viewer:t1\x00alice")),
		base64.RawURLEncoding.EncodeToString([]byte("Actor:" + mustULID(t, victim[0]) + "\x00octocat")),
		base64.RawURLEncoding.EncodeToString([]byte("Target:" + mustULID(t, victim[0]) + "\x00repository\x00repo-1")),
	}
	for _, who := range []struct{ name, tok string }{{"t2/alice", alice2}, {"t1/bob", bob1}} {
		for _, id := range forged {
			var d struct {
				Node  map[string]any   `json:"node"`
				Nodes []map[string]any `json:"nodes"`
			}
			gw.MustData(who.tok, `query($id: ID!) { node(id: $id) { id } nodes(ids: [$id, $id]) { id } }`, map[string]any{"id": id}, &d)
			if d.Node != nil || len(d.Nodes) != 2 || d.Nodes[0] != nil || d.Nodes[1] != nil {
				t.Errorf("%s: node/nodes of forged %q answered %+v", who.name, id, d)
			}
		}
		var aliases strings.Builder
		aliases.WriteString("mutation($ids: [ID!]!) {")
		for i := range 20 {
			fmt.Fprintf(&aliases, " m%d: markRead(ids: $ids) { notifications { id } notFound }", i)
		}
		aliases.WriteString(" }")
		r := gw.Post(who.tok, aliases.String(), map[string]any{"ids": victim})
		var touched []string
		for _, line := range strings.Split(string(r.Data), "\"notifications\":[")[1:] {
			if !strings.HasPrefix(line, "]") {
				touched = append(touched, line)
			}
		}
		if len(touched) > 0 {
			t.Errorf("%s: aliased markRead of another's ids touched some: %s", who.name, r.Data)
		}
	}
	gw.ExpectUnread(alice1, 2, "t1/alice after the forged markReads")
	gw.ExpectUnread(alice2, 1, "t2/alice after the forged markReads")

	// Cursors: alice1's first page's cursor, then hostile variants of it.
	var pg struct {
		Viewer struct {
			Inbox struct {
				Edges []struct {
					Cursor string `json:"cursor"`
				} `json:"edges"`
			} `json:"inbox"`
		} `json:"viewer"`
	}
	gw.MustData(alice1, `{ viewer { inbox(first: 1) { edges { cursor } } } }`, nil, &pg)
	if len(pg.Viewer.Inbox.Edges) != 1 {
		t.Fatalf("first page: %+v", pg)
	}
	c := pg.Viewer.Inbox.Edges[0].Cursor
	flip := func(i int) string {
		b := []byte(c)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	page := `query($c: String) { viewer { inbox(first: 5, after: $c) { nodes { id } } } }`
	for _, v := range []struct {
		tok, c, what string
	}{
		{alice2, c, "another tenant's viewer of the same user id"},
		{bob1, c, "another user of the tenant"},
		{alice1, flip(0), "a changed version byte"},
		{alice1, flip(4), "a changed ULID"},
		{alice1, flip(len(c) - 1), "a changed tag"},
		{alice1, c[:len(c)-1], "a truncated one"},
		{alice1, c + "A", "one too long"},
		{alice1, strings.Repeat("A", 100000), "an oversized one"},
		{alice1, base64.RawURLEncoding.EncodeToString([]byte(mustULID(t, victim[0]))), "a bare ULID"},
	} {
		gw.ExpectError(v.tok, page, map[string]any{"c": v.c}, string(inbox.CodeBadUserInput))
	}
	// The cursor of the inbox is not one of the unread list either.
	gw.ExpectError(alice1, `query($c: String) { viewer { inbox(first: 5, after: $c, filter: {unreadOnly: true}) { nodes { id } } } }`,
		map[string]any{"c": c}, string(inbox.CodeBadUserInput))

	// Aliased sends of one idempotency key: one notification at most.
	in := gw.SendInput("dup", "carol")
	var sends strings.Builder
	sends.WriteString("mutation($in: SendNotificationInput!) {")
	for i := range 10 {
		fmt.Fprintf(&sends, " s%d: sendNotification(input: $in) { notificationIds duplicate }", i)
	}
	sends.WriteString(" }")
	r := gw.Post(s1, sends.String(), map[string]any{"in": in})
	carol := gw.Token("t1", "carol")
	if ids := gw.InboxIDs(carol); len(ids) > 1 {
		t.Fatalf("10 aliased sends of one key wrote %d notifications (%s)", len(ids), r.Data)
	}
	if u := gw.Unread(carol); u > 1 || !slices.Contains([]int{0, 1}, len(gw.InboxIDs(carol))) || u != len(gw.InboxIDs(carol)) {
		t.Fatalf("carol's badge %d against %d notifications", u, len(gw.InboxIDs(carol)))
	}
}

// mustULID returns the ULID a notification global id names.
func mustULID(t *testing.T, id string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(id)
	typ, key, ok := strings.Cut(string(b), ":")
	if err != nil || !ok || typ != inbox.TypeNotification {
		t.Fatalf("not a notification id: %q", id)
	}
	return key
}
