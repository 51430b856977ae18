package resolvers

import (
	"encoding/base64"
	"strings"

	"github.com/inboxgw/gateway/inbox"
)

// Global ids are encoded by the inbox package (inbox.GlobalID and the GlobalID methods the
// id fields are bound to); they are parsed here.
const (
	typeNotification = inbox.TypeNotification
	typeActor        = inbox.TypeActor
	typeTarget       = inbox.TypeTarget
	typeViewer       = inbox.TypeViewer
)

func globalID(typ, key string) string { return inbox.GlobalID(typ, key) }

// parseGlobalID splits a global id into its type and what the store looks up for it:
// BAD_USER_INPUT when it is not a global id or a part of it could not be part of a key.
// ok is false for an id that can name nothing (a Viewer, which is no Node, or an Actor or
// Target id of the old, unanchored format "Actor:<id>"): it resolves as one that does not
// exist. A Target id with an empty anchor ("\x00<kind>\x00<target id>", a muted target of
// Preferences) is not ok either, but its ref carries the target (Profile) for
// unmuteTargets. Actor and Target ids are anchored on a notification (see inbox.GlobalID):
// "<ULID>\x00<actor id>" and "<ULID>\x00<kind>\x00<target id>".
func parseGlobalID(id string) (typ string, ref inbox.NodeRef, ok bool, err error) {
	malformed := inbox.Errorf(inbox.CodeBadUserInput, "malformed id")
	b, derr := base64.RawURLEncoding.DecodeString(id)
	if derr != nil {
		return "", ref, false, malformed
	}
	typ, key, found := strings.Cut(string(b), ":")
	if !found || key == "" {
		return "", ref, false, malformed
	}
	// Every part will become part of a DynamoDB key: the same rules as any id.
	var parts []string
	switch typ {
	case typeNotification:
		ref.Notification, parts, ok = key, []string{key}, true
	case typeActor:
		anchor, actor, anchored := strings.Cut(key, "\x00")
		ref = inbox.NodeRef{Notification: anchor, Profile: inbox.ProfileRef{ID: actor}}
		parts, ok = []string{anchor, actor}, anchored
	case typeTarget:
		anchor, rest, anchored := strings.Cut(key, "\x00")
		kind, target, two := strings.Cut(rest, "\x00")
		if anchored && two && anchor == "" {
			// Unanchored, as Preferences.mutedTargets renders a target: it names the
			// target for unmuteTargets but nothing that node() may look up.
			for _, p := range []string{kind, target} {
				if inbox.CheckID("id", p) != nil {
					return "", inbox.NodeRef{}, false, malformed
				}
			}
			return typ, inbox.NodeRef{Profile: inbox.ProfileRef{TargetKind: kind, ID: target}}, false, nil
		}
		ref = inbox.NodeRef{Notification: anchor, Profile: inbox.ProfileRef{TargetKind: kind, ID: target}}
		parts, ok = []string{anchor, kind, target}, anchored && two
	case typeViewer:
		return typ, inbox.NodeRef{}, false, nil
	default:
		if inbox.CheckID("id", key) != nil {
			return "", ref, false, malformed
		}
	}
	if !ok {
		// Nothing to look up; the id still had to be well formed: no segment that could
		// not be part of a key (as before ids were anchored).
		for _, p := range strings.Split(key, "\x00") {
			if inbox.CheckID("id", p) != nil {
				return "", inbox.NodeRef{}, false, malformed
			}
		}
		return typ, inbox.NodeRef{}, false, nil
	}
	for _, p := range parts {
		if err := inbox.CheckID("id", p); err != nil {
			return "", inbox.NodeRef{}, false, malformed
		}
	}
	return typ, ref, true, nil
}

// notificationULID returns the ULID a notification global id names: BAD_USER_INPUT for a
// malformed id, NOT_FOUND for an id of another type (as for one that does not exist).
func notificationULID(id string) (string, error) {
	typ, ref, _, err := parseGlobalID(id)
	if err != nil {
		return "", err
	}
	if typ != typeNotification {
		return "", inbox.Errorf(inbox.CodeNotFound, "notification not found")
	}
	return ref.Notification, nil
}
