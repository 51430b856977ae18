package resolvers

import (
	"encoding/base64"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// Profile ids are anchored on a notification; an unanchored (old) id names nothing but is
// no input error; an id with a part that could not be a key is.
func TestParseGlobalID(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	const n = "01HZX8Y3T9M2V6Q4R8S0W1A2B3"
	for _, c := range []struct {
		id     string
		ref    inbox.NodeRef
		ok     bool
		badArg bool
	}{
		{id: enc("Notification:" + n), ref: inbox.NodeRef{Notification: n}, ok: true},
		{id: (&inbox.Actor{ActorID: "octo", Via: n}).GlobalID(), ref: inbox.NodeRef{Notification: n, Profile: inbox.ProfileRef{ID: "octo"}}, ok: true},
		{id: (&inbox.Target{Kind: "issue", TargetID: "42", Via: n}).GlobalID(), ref: inbox.NodeRef{Notification: n, Profile: inbox.ProfileRef{TargetKind: "issue", ID: "42"}}, ok: true},
		{id: enc("Actor:octo")},
		{id: enc("Target:issue\x0042")},
		{id: (&inbox.Target{Kind: "issue", TargetID: "42"}).GlobalID(), ref: inbox.NodeRef{Profile: inbox.ProfileRef{TargetKind: "issue", ID: "42"}}},
		{id: enc("Target:\x00issue\x00a#b"), badArg: true},
		{id: enc("Target:\x00\x0042"), badArg: true},
		{id: enc("Viewer:acme\x00alice")},
		{id: enc("Actor:octo#cat"), badArg: true},
		{id: enc("Target:" + n + "\x00issue\x00a#b"), badArg: true},
		{id: enc("Actor:" + n + "\x00"), badArg: true},
		{id: "%%%", badArg: true},
	} {
		_, ref, ok, err := parseGlobalID(c.id)
		if (err != nil) != c.badArg || ok != c.ok || ref != c.ref {
			t.Errorf("%q: ref %+v ok %v err %v; want %+v %v bad=%v", c.id, ref, ok, err, c.ref, c.ok, c.badArg)
		}
	}
}
