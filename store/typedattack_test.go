package store_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// A typed page (GSI2) refuses every cursor that is not one the store gave this viewer
// for this list, before any read: another user's, another tenant's, one of the unread
// list or of the groups, one with a character changed, the earlier format, a forged
// one of the right length, a long one. A cursor the viewer was given for the list with
// another type filter is a position of the same list and is accepted.
func TestTypedPageRefusesForgedCursors(t *testing.T) {
	t.Parallel()
	st, c, table := countedStore(t)
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	written := putNotifications(t, c.Client, table, v, []string{"a", "b", "a", "b", "a", "b"}, "b")
	ctx := context.Background()
	p, err := st.Inbox(ctx, v, inbox.PageQuery{First: ptr(1), Types: []string{"a"}})
	if err != nil || p.PageInfo.EndCursor == nil {
		t.Fatalf("first typed page: %v %+v", err, p)
	}
	good := *p.PageInfo.EndCursor
	newest := written[len(written)-1]
	flip := []byte(good)
	if flip[10] == 'A' {
		flip[10] = 'B'
	} else {
		flip[10] = 'A'
	}
	for name, cur := range map[string]string{
		"another user's":   st.EncodeCursor(inbox.Viewer{TenantID: "acme", UserID: "bob"}, store.IndexInbox, newest),
		"another tenant's": st.EncodeCursor(inbox.Viewer{TenantID: "other", UserID: "alice"}, store.IndexInbox, newest),
		"the unread list":  st.EncodeCursor(v, store.IndexUnread, newest),
		"the groups":       st.EncodeCursor(v, store.IndexGroups, newest),
		"a changed char":   string(flip),
		"earlier format":   base64.StdEncoding.EncodeToString([]byte("n1:" + newest)),
		"forged length":    strings.Repeat("A", len(good)),
		"long":             strings.Repeat(good, 1000),
		"padded":           good + "=",
	} {
		for _, q := range []inbox.PageQuery{
			{First: ptr(2), Types: []string{"a"}, After: cur},
			{Last: ptr(2), Types: []string{"a", "b"}, Before: cur},
		} {
			c.take()
			_, err := st.Inbox(ctx, v, q)
			if inbox.ErrorCode(err) != inbox.CodeBadUserInput {
				t.Errorf("%s: %v, want BAD_USER_INPUT", name, err)
			}
			if n := c.queries.Load(); n != 0 {
				t.Errorf("%s: %d Queries for a refused cursor", name, n)
			}
		}
	}
	// The typed list's cursor positions the list with another type filter.
	p, err = st.Inbox(ctx, v, inbox.PageQuery{First: ptr(10), Types: []string{"b"}, After: good})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Edges {
		if e.Node.Type != "b" || e.Node.ID >= newest {
			t.Errorf("after the typed cursor: %s of type %s", e.Node.ID, e.Node.Type)
		}
	}
}
