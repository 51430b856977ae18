package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
)

// cursorPage is one page read through the HTTP API: the edges' node ids and cursors, or
// the first error's code.
type cursorPage struct {
	ids, cursors []string
	code         string
}

func (g *gateway) pageAs(t *testing.T, token, args string, vars map[string]any) cursorPage {
	t.Helper()
	decl := ""
	if strings.Contains(args, "$c") {
		decl = "($c: String)"
	}
	q := fmt.Sprintf(`query%s { viewer { inbox(%s) { edges { cursor node { id } } } } }`, decl, args)
	body, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data *struct {
			Viewer struct {
				Inbox struct {
					Edges []struct {
						Cursor string
						Node   struct{ ID string }
					}
				}
			}
		}
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var p cursorPage
	if len(out.Errors) > 0 {
		p.code, _ = out.Errors[0].Extensions["code"].(string)
		if p.code == inbox.CodeBadUserInput && out.Errors[0].Message != "invalid cursor" {
			t.Errorf("message %q, want \"invalid cursor\"", out.Errors[0].Message)
		}
		return p
	}
	for _, e := range out.Data.Viewer.Inbox.Edges {
		p.ids = append(p.ids, e.Node.ID)
		p.cursors = append(p.cursors, e.Cursor)
	}
	return p
}

// Cursors are tamper-evident and bound to their list and viewer (issue 8, item 9): another
// user's cursor, one from the unread list used on the full list, a changed one and one
// of the earlier format are BAD_USER_INPUT; the viewer's own pages on.
func TestCursorsBoundToViewerAndList(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for _, user := range []string{"alice", "bob"} {
		for i := range 3 {
			if _, err := g.send(context.Background(), "acme", inbox.SendInput{IdempotencyKey: fmt.Sprintf("c-%s-%d", user, i),
				Recipients: []string{user}, Type: "cursor", Title: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	bob, err := g.v.Sign(auth.Claims{TenantID: "acme", UserID: "bob"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice := g.token

	first := g.pageAs(t, alice, "first: 1", nil)
	if first.code != "" || len(first.ids) != 1 {
		t.Fatalf("first page: %+v", first)
	}
	// A valid cursor pages, forward and back.
	next := g.pageAs(t, alice, "first: 1, after: $c", map[string]any{"c": first.cursors[0]})
	if next.code != "" || len(next.ids) != 1 || next.ids[0] == first.ids[0] {
		t.Fatalf("page after %v: %+v", first.ids, next)
	}
	back := g.pageAs(t, alice, "last: 1, before: $c", map[string]any{"c": next.cursors[0]})
	if back.code != "" || len(back.ids) != 1 || back.ids[0] != first.ids[0] {
		t.Fatalf("page before %v: %+v, want %v", next.ids, back, first.ids)
	}

	rejected := func(what, args, cursor string) {
		t.Helper()
		if p := g.pageAs(t, alice, args, map[string]any{"c": cursor}); p.code != inbox.CodeBadUserInput {
			t.Errorf("%s: got %+v, want BAD_USER_INPUT", what, p)
		}
	}
	bobs := g.pageAs(t, bob, "first: 1", nil)
	if len(bobs.cursors) != 1 {
		t.Fatalf("bob's page: %+v", bobs)
	}
	rejected("bob's cursor (after)", "first: 1, after: $c", bobs.cursors[0])
	rejected("bob's cursor (before)", "last: 1, before: $c", bobs.cursors[0])
	unread := g.pageAs(t, alice, "first: 1, filter: {unreadOnly: true}", nil)
	if len(unread.cursors) != 1 {
		t.Fatalf("unread page: %+v", unread)
	}
	rejected("an unread-list cursor on the full list", "first: 1, after: $c", unread.cursors[0])
	rejected("a full-list cursor on the unread list", "first: 1, after: $c, filter: {unreadOnly: true}", first.cursors[0])
	// The earlier format: base64url of "n1:" and the notification's ULID (the last 26
	// characters of the global id "Notification:<ULID>").
	id, err := base64.RawURLEncoding.DecodeString(next.ids[0])
	if err != nil || len(id) < 26 {
		t.Fatalf("notification id %q: %v", next.ids[0], err)
	}
	ulid := string(id[len(id)-26:])
	rejected("the earlier format", "first: 1, after: $c", base64.RawURLEncoding.EncodeToString([]byte("n1:"+ulid)))
	// Every single-bit change of the cursor's bytes.
	raw, err := base64.RawURLEncoding.DecodeString(first.cursors[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(raw) * 8 {
		flipped := bytes.Clone(raw)
		flipped[i/8] ^= 1 << (i % 8)
		rejected(fmt.Sprintf("bit %d flipped", i), "first: 1, after: $c", base64.RawURLEncoding.EncodeToString(flipped))
	}
}
