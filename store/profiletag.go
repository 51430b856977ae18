package store

import (
	"encoding/base64"

	"github.com/inboxgw/gateway/inbox"
)

// profileTagLabel keeps a profile tag apart from a cursor tag under the same key: no
// message of one is a message of the other.
const profileTagLabel = "inbox-gateway target tag v1\x00"

// ProfileTag returns the tag that anchors the global id of target ref for viewer v
// (inbox.Target.Via): base64url of the first 16 bytes of HMAC-SHA256 under the cursor key
// (WithCursorKey) of the label, v's tenant and user and ref's kind and id, each
// length-prefixed. The id is one per viewer and target, so the inbox's notifications
// about a target and the viewer's muted targets name it alike (a client cache keeps one
// object), and another viewer cannot make one: node() serves a target only for the
// viewer whose tag its id carries.
func (s *Store) ProfileTag(v inbox.Viewer, ref inbox.ProfileRef) string {
	m := s.cursors.macs.Get().(*cursorMAC)
	defer s.cursors.macs.Put(m)
	m.h.Reset()
	msg := append(m.msg[:0], profileTagLabel...)
	for _, part := range []string{v.TenantID, v.UserID, ref.TargetKind, ref.ID} {
		msg = append(msg, byte(len(part)>>8), byte(len(part)))
		msg = append(msg, part...)
	}
	m.msg = msg
	m.h.Write(msg)
	sum := m.h.Sum(m.sum[:0])
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}
