package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

func ExampleStore_EncodeCursor() {
	s := New(nil, "inbox", WithSweepWorkers(0), WithCursorKey([]byte("example-cursor-key-0123456789abcdef")))
	defer s.Close()
	alice := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	c := s.EncodeCursor(alice, IndexInbox, "01HZX8Y3T9M2V6Q4R8S0W1A2B3")
	id, err := s.DecodeCursor(alice, IndexInbox, c)
	fmt.Println(len(c), id, err)
	_, err = s.DecodeCursor(inbox.Viewer{TenantID: "acme", UserID: "bob"}, IndexInbox, c)
	fmt.Println(err)
	_, err = s.DecodeCursor(alice, IndexUnread, c)
	fmt.Println(err)
	// Output:
	// 40 01HZX8Y3T9M2V6Q4R8S0W1A2B3 <nil>
	// invalid cursor
	// invalid cursor
}

// The tag computed on stack buffers is HMAC-SHA256 as crypto/hmac computes it, for keys
// shorter than, as long as and longer than SHA-256's block, and viewers up to the
// longest ids.
func TestCursorTagIsHMAC(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("t", inbox.MaxIDBytes)
	viewers := []inbox.Viewer{{TenantID: "acme", UserID: "alice"}, {TenantID: "a", UserID: "b"},
		{TenantID: long, UserID: strings.Repeat("u", inbox.MaxIDBytes)}, {TenantID: "x", UserID: long + "more"}}
	for _, keyLen := range []int{1, 32, 63, 64, 65, 200} {
		key := []byte(strings.Repeat("k", keyLen))
		k := newCursorKey(key)
		for _, v := range viewers {
			var head [cursorHead]byte
			head[0], head[1] = cursorVersion, byte(IndexUnread)
			u := ulid.Make()
			copy(head[2:], u[:])
			m := hmac.New(sha256.New, key)
			m.Write(head[:])
			m.Write([]byte{byte(len(v.TenantID) >> 8), byte(len(v.TenantID))})
			m.Write([]byte(v.TenantID + v.UserID))
			want := m.Sum(nil)
			if got := k.tag(&head, v); !hmac.Equal(got[:], want) {
				t.Errorf("key of %d bytes, viewer %.20q/%.20q: tag %x, crypto/hmac %x", keyLen, v.TenantID, v.UserID, got, want)
			}
		}
	}
}

// Every cursor but the one the viewer was given for that list is BAD_USER_INPUT.
func TestDecodeCursorRejects(t *testing.T) {
	t.Parallel()
	s := &Store{cursors: newCursorKey([]byte("test-cursor-key-0123456789abcdef"))}
	alice := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	id := ulid.Make().String()
	good := s.EncodeCursor(alice, IndexInbox, id)
	if got, err := s.DecodeCursor(alice, IndexInbox, good); err != nil || got != id {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	reject := func(what string, v inbox.Viewer, ix CursorIndex, c string) {
		t.Helper()
		if got, err := s.DecodeCursor(v, ix, c); inbox.ErrorCode(err) != inbox.CodeBadUserInput || err.Error() != "invalid cursor" {
			t.Errorf("%s: DecodeCursor(%q) = %q, %v; want BAD_USER_INPUT invalid cursor", what, c, got, err)
		}
	}
	reject("another user", inbox.Viewer{TenantID: "acme", UserID: "bob"}, IndexInbox, good)
	reject("another tenant", inbox.Viewer{TenantID: "other", UserID: "alice"}, IndexInbox, good)
	// The tenant's length is in the MAC: "ab"/"c" and "a"/"bc" do not share cursors.
	abc := s.EncodeCursor(inbox.Viewer{TenantID: "ab", UserID: "c"}, IndexInbox, id)
	reject("ids split elsewhere", inbox.Viewer{TenantID: "a", UserID: "bc"}, IndexInbox, abc)
	reject("the unread list's cursor on the main list", alice, IndexInbox, s.EncodeCursor(alice, IndexUnread, id))
	reject("the main list's cursor on the unread list", alice, IndexUnread, good)
	other := &Store{cursors: newCursorKey([]byte("another-cursor-key-0123456789abcdef"))}
	reject("another key", alice, IndexInbox, other.EncodeCursor(alice, IndexInbox, id))
	reject("the earlier format", alice, IndexInbox, base64.RawURLEncoding.EncodeToString([]byte("n1:"+id)))
	for _, c := range []string{"", "x", good[:len(good)-1], good + "A", good + "AAAA", strings.Repeat("A", 40), strings.Repeat("A", 200),
		"!" + good[1:], good[:39] + "=", base64.StdEncoding.EncodeToString([]byte("n1:" + id))} {
		reject("malformed", alice, IndexInbox, c)
	}
	// Every single-bit change of the 30 bytes is caught.
	raw, err := base64.RawURLEncoding.DecodeString(good)
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(raw) * 8 {
		flipped := append([]byte(nil), raw...)
		flipped[i/8] ^= 1 << (i % 8)
		reject(fmt.Sprintf("bit %d flipped", i), alice, IndexInbox, base64.RawURLEncoding.EncodeToString(flipped))
	}
}

// Stores with the same key (instances behind a load balancer) accept each other's cursors;
// DeriveCursorKey depends on its secret and is not the secret.
func TestCursorKeyShared(t *testing.T) {
	t.Parallel()
	secret := []byte("jwt-secret-0123456789abcdef-0123456789")
	key := DeriveCursorKey(secret)
	if len(key) != sha256.Size || hmac.Equal(key, secret[:sha256.Size]) || hmac.Equal(key, DeriveCursorKey([]byte("another-secret-0123456789abcdef"))) {
		t.Fatalf("DeriveCursorKey = %x", key)
	}
	a, b := &Store{cursors: newCursorKey(key)}, &Store{cursors: newCursorKey(DeriveCursorKey(secret))}
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	id := ulid.Make().String()
	if got, err := b.DecodeCursor(v, IndexUnread, a.EncodeCursor(v, IndexUnread, id)); err != nil || got != id {
		t.Fatalf("another instance: %q, %v", got, err)
	}
	if s := New(nil, "t", WithSweepWorkers(0)); s.EncodeCursor(v, IndexInbox, id) == a.EncodeCursor(v, IndexInbox, id) {
		t.Fatal("a Store without a key signs with a fixed one")
	}
}
