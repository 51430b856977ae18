package rest_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// graphQLPage reads one page of the viewer's inbox through GraphQL on s: its ids and
// endCursor.
func graphQLPage(t *testing.T, s *testgw.Server, token, after string) ([]string, string) {
	t.Helper()
	vars := map[string]any{}
	if after != "" {
		vars["after"] = after
	}
	var d struct {
		Viewer struct {
			Inbox struct {
				Nodes    []struct{ ID string }
				PageInfo struct{ EndCursor string }
			}
		}
	}
	s.WithT(t).MustData(token, `query($after: String) { viewer { inbox(first: 2, after: $after) { nodes { id } pageInfo { endCursor } } } }`, vars, &d)
	var ids []string
	for _, n := range d.Viewer.Inbox.Nodes {
		ids = append(ids, n.ID)
	}
	return ids, d.Viewer.Inbox.PageInfo.EndCursor
}

// restPage reads one page (2) of user's feed through GET /v1/notifications on s.
func restPage(t *testing.T, s *testgw.Server, token, user, cursor string) answer {
	t.Helper()
	q := url.Values{"userId": {user}, "limit": {"2"}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return call(t, s, http.MethodGet, "/v1/notifications?"+q.Encode(), token, nil, nil)
}

// Two instances of one configuration (the same table, the same secrets: what a load
// balancer spreads a client's requests over) share their cursors: a page read on one
// continues on the other, through GraphQL and the service API alike. A cursor changed,
// forged, truncated, of the earlier format, or given to another user or tenant is
// BAD_USER_INPUT on either instance.
func TestCursorsMoveBetweenInstancesAndForeignOnesAreRefused(t *testing.T) {
	t.Parallel()
	a := testgw.New(t)
	b := testgw.NewWith(t, testgw.Options{Peer: a})
	const tenantB = "tenant-b"
	svcA, svcB := a.Token(tenant, "svc", rest.ScopeSend), a.Token(tenantB, "svc", rest.ScopeSend)
	for _, tn := range []string{tenant, tenantB} {
		send := a.ServiceToken(tn, "svc")
		a.Seed(send, "alice", 5)
		a.Seed(send, "bob", 3)
	}
	alice, bob, aliceB := a.Token(tenant, "alice"), a.Token(tenant, "bob"), a.Token(tenantB, "alice")

	// GraphQL: page 1 on a, page 2 on b, page 3 on a with b's cursor.
	first, c1 := graphQLPage(t, a, alice, "")
	second, c2 := graphQLPage(t, b, alice, c1)
	third, _ := graphQLPage(t, a, alice, c2)
	if len(first) != 2 || len(second) != 2 || len(third) != 1 || slices.Contains(second, first[0]) || slices.Contains(third, second[0]) {
		t.Fatalf("GraphQL pages across instances: %v %v %v", first, second, third)
	}

	// The service API: the same, with a service token for alice's feed.
	p1 := decode[gen.Feed](t, restPage(t, a, svcA, "alice", ""), 200)
	if p1.NextCursor == nil || len(p1.Items) != 2 {
		t.Fatalf("REST page 1: %s", mustJSON(t, p1))
	}
	p2 := decode[gen.Feed](t, restPage(t, b, svcA, "alice", *p1.NextCursor), 200)
	if len(p2.Items) != 2 || p2.Items[0].Id == p1.Items[0].Id || p2.NextCursor == nil {
		t.Fatalf("REST page 2 on the other instance: %s", mustJSON(t, p2))
	}
	if p3 := decode[gen.Feed](t, restPage(t, a, svcA, "alice", *p2.NextCursor), 200); len(p3.Items) != 1 {
		t.Fatalf("REST page 3 back on the first instance: %s", mustJSON(t, p3))
	}

	// Foreign cursors, on both instances and both surfaces.
	_, bobCursor := graphQLPage(t, a, bob, "")
	_, tenantBCursor := graphQLPage(t, b, aliceB, "")
	raw, err := base64.RawURLEncoding.DecodeString(c1)
	if err != nil {
		t.Fatalf("cursor %q: %v", c1, err)
	}
	flipped := func(i int) string {
		r := slices.Clone(raw)
		r[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(r)
	}
	forged := base64.RawURLEncoding.EncodeToString(append([]byte{raw[0], raw[1]}, make([]byte, len(raw)-2)...))
	bad := map[string]string{
		"another user's":             bobCursor,
		"another tenant's same user": tenantBCursor,
		"its ULID changed":           flipped(5),
		"its list changed":           flipped(1),
		"its tag changed":            flipped(len(raw) - 1),
		"forged with a zero tag":     forged,
		"truncated":                  c1[:len(c1)-1],
		"padded":                     c1 + "=",
		"the earlier format":         base64.StdEncoding.EncodeToString([]byte("n1:" + strings.Repeat("0", 26))),
		"not base64":                 strings.Repeat("!", 40),
		"huge":                       strings.Repeat("A", 4096),
	}
	if std := strings.NewReplacer("-", "+", "_", "/").Replace(c1); std != c1 {
		bad["standard base64"] = std // the same bytes in the other alphabet
	}
	for name, c := range bad {
		for _, s := range []*testgw.Server{a, b} {
			s.WithT(t).ExpectError(alice, `query($after: String) { viewer { inbox(first: 2, after: $after) { nodes { id } } } }`,
				map[string]any{"after": c}, "BAD_USER_INPUT")
			if a := restPage(t, s, svcA, "alice", c); a.Status != 400 || string(a.problem(t).Code) != "BAD_USER_INPUT" {
				t.Errorf("REST with %s cursor: %d %s", name, a.Status, a.Body)
			}
		}
		// A tenant's service token with another tenant's cursor of the same user id.
		if name == "another tenant's same user" {
			continue
		}
		if a := restPage(t, b, svcB, "alice", c); a.Status != 400 {
			t.Errorf("REST of tenant b with %s cursor: %d %s", name, a.Status, a.Body)
		}
	}
}
