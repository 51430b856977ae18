package resolvers_test

import (
	"testing"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
)

// A target has one id for its viewer (issue 20, item 9): the id the inbox shows for it
// in every notification about it is the id Viewer.preferences.mutedTargets lists once it
// is muted, so a client cache keeps one object and can show "muted" on the items; node()
// resolves that id for the viewer and answers null to another viewer, as before.
func TestMutedTargetHasTheInboxsTargetID(t *testing.T) {
	t.Parallel()
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	alice, bob := s.Token("t1", "alice"), s.Token("t1", "bob")
	s.Send(sender, s.SendInput("first about repo-1", "alice", "bob"))
	s.Send(sender, s.SendInput("second about repo-1", "alice"))

	type target struct {
		ID       string `json:"id"`
		TargetID string `json:"targetId"`
		Kind     string `json:"kind"`
	}
	targetIDs := func(token string) []string {
		t.Helper()
		var d struct {
			Viewer struct {
				Inbox struct {
					Nodes []struct {
						Target *target `json:"target"`
					} `json:"nodes"`
				} `json:"inbox"`
			} `json:"viewer"`
		}
		s.MustData(token, `{ viewer { inbox(first: 10) { nodes { target { id targetId kind } } } } }`, nil, &d)
		var ids []string
		for _, n := range d.Viewer.Inbox.Nodes {
			if n.Target == nil || n.Target.TargetID != "repo-1" {
				t.Fatalf("a notification's target = %+v, want repo-1", n.Target)
			}
			ids = append(ids, n.Target.ID)
		}
		return ids
	}
	ids := targetIDs(alice)
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Fatalf("alice's two notifications about repo-1 show target ids %v, want one id", ids)
	}
	targetID := ids[0]
	if bobs := targetIDs(bob); len(bobs) != 1 || bobs[0] == targetID {
		t.Fatalf("bob's id of repo-1 %v equals alice's %s: a viewer's target id must be its own", bobs, targetID)
	}

	var muted struct {
		UpdatePreferences struct {
			MutedTargets []target `json:"mutedTargets"`
		} `json:"updatePreferences"`
	}
	s.MustData(alice, `mutation($ids: [ID!]!) { updatePreferences(input: { muteTargets: $ids }) { mutedTargets { id targetId kind } } }`,
		map[string]any{"ids": []string{targetID}}, &muted)
	var prefs struct {
		Viewer struct {
			Preferences struct {
				MutedTargets []target `json:"mutedTargets"`
			} `json:"preferences"`
		} `json:"viewer"`
	}
	s.MustData(alice, `{ viewer { preferences { mutedTargets { id targetId kind } } } }`, nil, &prefs)
	for what, list := range map[string][]target{"updatePreferences": muted.UpdatePreferences.MutedTargets, "Viewer.preferences": prefs.Viewer.Preferences.MutedTargets} {
		if len(list) != 1 || list[0].ID != targetID || list[0].TargetID != "repo-1" || list[0].Kind != "repository" {
			t.Fatalf("%s.mutedTargets = %+v, want repo-1 with the inbox's id %s", what, list, targetID)
		}
	}
	if again := targetIDs(alice); again[0] != targetID {
		t.Fatalf("after the mute the inbox shows target id %s, want %s", again[0], targetID)
	}

	// node(): the viewer's id resolves for the viewer, and for nobody else.
	const nodeQ = `query($id: ID!) { node(id: $id) { id ... on Target { targetId title } } }`
	var nd struct {
		Node *struct {
			ID       string  `json:"id"`
			TargetID string  `json:"targetId"`
			Title    *string `json:"title"`
		} `json:"node"`
	}
	s.MustData(alice, nodeQ, map[string]any{"id": targetID}, &nd)
	if nd.Node == nil || nd.Node.ID != targetID || nd.Node.TargetID != "repo-1" || nd.Node.Title == nil || *nd.Node.Title != "hello-world" {
		t.Fatalf("alice's node(her target id) = %+v", nd.Node)
	}
	for _, tok := range []string{bob, s.Token("t2", "alice")} {
		nd.Node = nil
		s.MustData(tok, nodeQ, map[string]any{"id": targetID}, &nd)
		if nd.Node != nil {
			t.Fatalf("another viewer's node(alice's target id) = %+v, want null", nd.Node)
		}
	}

	// unmuteTargets takes the id too.
	s.MustData(alice, `mutation($ids: [ID!]!) { updatePreferences(input: { unmuteTargets: $ids }) { mutedTargets { id } } }`,
		map[string]any{"ids": []string{targetID}}, &muted)
	if len(muted.UpdatePreferences.MutedTargets) != 0 {
		t.Fatalf("after unmuteTargets: %+v", muted.UpdatePreferences.MutedTargets)
	}
}
