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
