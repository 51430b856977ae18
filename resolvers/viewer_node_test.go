package resolvers_test

import (
	"testing"

	"github.com/inboxgw/gateway/internal/testgw"
)

// The viewer is refetchable as a Node (Relay object identification): node(viewer.id)
// answers the viewer itself, and another user's viewer id answers null, like any id that
// names nothing of the caller's.
func TestViewerIsRefetchableAsNode(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	alice := s.Token("t1", "alice")
	bob := s.Token("t1", "bob")
	var v struct {
		Viewer struct {
			ID string `json:"id"`
		} `json:"viewer"`
	}
	s.MustData(alice, `{ viewer { id } }`, nil, &v)
	type viewerNode struct {
		Typename string `json:"__typename"`
		ID       string `json:"id"`
		UserID   string `json:"userId"`
		TenantID string `json:"tenantId"`
	}
	var d struct {
		Node  *viewerNode   `json:"node"`
		Nodes []*viewerNode `json:"nodes"`
	}
	const q = `query($id: ID!) { node(id: $id) { __typename id ... on Viewer { userId tenantId } }
	  nodes(ids: [$id]) { __typename id ... on Viewer { userId } } }`
	s.MustData(alice, q, map[string]any{"id": v.Viewer.ID}, &d)
	if d.Node == nil || d.Node.Typename != "Viewer" || d.Node.ID != v.Viewer.ID || d.Node.UserID != "alice" || d.Node.TenantID != "t1" {
		t.Fatalf("node(viewer id) = %+v", d.Node)
	}
	if len(d.Nodes) != 1 || d.Nodes[0] == nil || d.Nodes[0].UserID != "alice" {
		t.Fatalf("nodes([viewer id]) = %+v", d.Nodes)
	}
	var other struct {
		Node *viewerNode `json:"node"`
	}
	s.MustData(bob, `query($id: ID!) { node(id: $id) { __typename id } }`, map[string]any{"id": v.Viewer.ID}, &other)
	if other.Node != nil {
		t.Fatalf("bob's node(alice's viewer id) = %+v, want null", other.Node)
	}
}
