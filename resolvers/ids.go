package resolvers

import (
	"encoding/base64"
	"strings"

	"github.com/inboxgw/gateway/inbox"
)

// Global ids (Relay object identification): base64url, unpadded, of "<Type>:<key>", where
// key is a notification's ULID, an actor id, "<kind>\x00<target id>" or
// "<tenant>\x00<user>" for a Viewer. Ids never carry the tenant or user of a notification:
// the partition they are looked up in always comes from the token.
const (
	typeNotification = "Notification"
	typeActor        = "Actor"
	typeTarget       = "Target"
	typeViewer       = "Viewer"
)

func globalID(typ, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + ":" + key))
}

func targetKey(kind, id string) string { return kind + "\x00" + id }

// parseGlobalID splits a global id into type and key; BAD_USER_INPUT when it is not one.
func parseGlobalID(id string) (typ, key string, err error) {
	b, derr := base64.RawURLEncoding.DecodeString(id)
	if derr != nil {
		return "", "", inbox.Errorf(inbox.CodeBadUserInput, "malformed id")
	}
	typ, key, ok := strings.Cut(string(b), ":")
	if !ok || key == "" {
		return "", "", inbox.Errorf(inbox.CodeBadUserInput, "malformed id")
	}
	// The key part will become part of a DynamoDB key: the same rules as any id.
	parts := []string{key}
	switch typ {
	case typeTarget:
		kind, id, ok := strings.Cut(key, "\x00")
		if !ok {
			return "", "", inbox.Errorf(inbox.CodeBadUserInput, "malformed id")
		}
		parts = []string{kind, id}
	case typeViewer:
		parts = nil
	}
	for _, p := range parts {
		if err := inbox.CheckID("id", p); err != nil {
			return "", "", inbox.Errorf(inbox.CodeBadUserInput, "malformed id")
		}
	}
	return typ, key, nil
}

// notificationULID returns the ULID a notification global id names: BAD_USER_INPUT for a
// malformed id, NOT_FOUND for an id of another type (as for one that does not exist).
func notificationULID(id string) (string, error) {
	typ, key, err := parseGlobalID(id)
	if err != nil {
		return "", err
	}
	if typ != typeNotification {
		return "", inbox.Errorf(inbox.CodeNotFound, "notification not found")
	}
	return key, nil
}
