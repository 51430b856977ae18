package inbox

import (
	"encoding/base64"
	"unsafe"
)

// Global ids (Relay object identification): base64url, unpadded, of "<Type>:<key>", where
// key is a notification's ULID, "<notification ULID>\x00<actor id>" for an Actor,
// "<notification ULID>\x00<kind>\x00<target id>" for a Target, or "<tenant>\x00<user>" for
// a Viewer. Ids never carry the tenant or user of a notification: the partition they are
// looked up in always comes from the token. The resolvers parse them.
//
// Actor ids are anchored on the notification they were reached through (issue 8, item
// 6): profiles are shared by a tenant, and an id made of the profile's own key alone was
// guessable, so node(id) served any profile of the tenant to any user. An anchored id
// resolves only for a viewer who has that notification and only while it names the
// profile; for anyone else it answers exactly as an id that does not exist. Target ids
// are anchored on the viewer instead, by a tag only the gateway can make (Target.Via), so
// that one target has one id for its viewer, in the inbox and in the muted targets
// (issue 20, item 9), and still resolves for that viewer alone.
//
// The id fields are bound to the GlobalID methods below (gqlgen.yml) rather than to
// resolvers: a field bound to a resolver runs concurrently in gqlgen (a closure and a
// goroutine per object), which a pure encoding does not need.
const (
	TypeNotification = "Notification"
	TypeActor        = "Actor"
	TypeTarget       = "Target"
	TypeViewer       = "Viewer"
)

// GlobalID encodes the global id of the object of type typ named by key, with one
// allocation (the returned string).
func GlobalID(typ, key string) string {
	return globalID(typ, key, "", "")
}

// globalID encodes typ + ":" + key, then "\x00" + key2 when key2 is not empty and
// "\x00" + key3 when key3 is not empty.
func globalID(typ, key, key2, key3 string) string {
	n := len(typ) + 1 + len(key)
	if key2 != "" {
		n += 1 + len(key2)
	}
	if key3 != "" {
		n += 1 + len(key3)
	}
	var buf [128]byte
	src := buf[:0]
	if n > len(buf) {
		src = make([]byte, 0, n)
	}
	src = append(append(append(src, typ...), ':'), key...)
	if key2 != "" {
		src = append(append(src, 0), key2...)
	}
	if key3 != "" {
		src = append(append(src, 0), key3...)
	}
	dst := make([]byte, base64.RawURLEncoding.EncodedLen(n))
	base64.RawURLEncoding.Encode(dst, src)
	// dst is never written again: the string may share its bytes (as strings.Builder does).
	return unsafe.String(unsafe.SliceData(dst), len(dst))
}

// GlobalID is the notification's global id; an announcement's key is "@<ULID>"
// (AnnouncementRef), which the state changes and node() route to the tenant's
// announcement.
func (n *Notification) GlobalID() string {
	if n.Kind == KindAnnouncement {
		return globalID(TypeNotification, AnnouncementRef+n.ID, "", "")
	}
	return globalID(TypeNotification, n.ID, "", "")
}

// GlobalID is the actor's global id, anchored on the notification it was reached through:
// its key is "<Via>\x00<actor id>".
func (a *Actor) GlobalID() string { return globalID(TypeActor, a.Via, a.ActorID, "") }

// GlobalID is the target's global id: its key is "<Via>\x00<kind>\x00<target id>", Via
// being the viewer's tag for the target (see Target.Via; issue 20 item 9: one id per
// viewer and target, in the inbox and in the muted targets alike).
func (t *Target) GlobalID() string { return globalID(TypeTarget, t.Via, t.Kind, t.TargetID) }

// GlobalID is the viewer's global id: its key is "<tenant>\x00<user>".
func (v *Viewer) GlobalID() string { return globalID(TypeViewer, v.TenantID, v.UserID, "") }
