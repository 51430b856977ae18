package store

import (
	"encoding/base64"

	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

// cursorPrefix versions the cursor format.
const cursorPrefix = "n1:"

// EncodeCursor returns the opaque cursor of the notification with ULID id: base64url
// (unpadded) of "n1:" + id. It names only a sort key position inside the caller's own
// partition; the partition always comes from the viewer, so a cursor can never move a
// Query to another user's items.
func EncodeCursor(id string) string {
	var buf [len(cursorPrefix) + ulid.EncodedSize]byte
	n := copy(buf[:], cursorPrefix)
	n += copy(buf[n:], id)
	// Encode into a stack buffer: EncodeToString would allocate a byte slice and then the
	// string copied from it; this way the string is the only allocation.
	var out [(len(buf)*8 + 5) / 6]byte
	if base64.RawURLEncoding.EncodedLen(len(id)+len(cursorPrefix)) > len(out) {
		// An id longer than a ULID (callers pass ULIDs; keep the old behaviour anyway).
		return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + id))
	}
	base64.RawURLEncoding.Encode(out[:], buf[:n])
	return string(out[:base64.RawURLEncoding.EncodedLen(n)])
}

// DecodeCursor returns the notification ULID a cursor names. A cursor that is not one
// EncodeCursor made gives a BAD_USER_INPUT *inbox.Error.
func DecodeCursor(c string) (string, error) {
	var buf [64]byte
	if base64.RawURLEncoding.DecodedLen(len(c)) > len(buf) {
		return "", errBadCursor
	}
	n, err := base64.RawURLEncoding.Decode(buf[:], []byte(c))
	if err != nil || n != len(cursorPrefix)+ulid.EncodedSize || string(buf[:len(cursorPrefix)]) != cursorPrefix {
		return "", errBadCursor
	}
	id := string(buf[len(cursorPrefix):n])
	if !ValidNotificationID(id) {
		return "", errBadCursor
	}
	return id, nil
}

var errBadCursor = inbox.Errorf(inbox.CodeBadUserInput, "malformed cursor")
