package live

import (
	"reflect"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/fill"
)

// One change for one new field: an inbox.Change with EVERY field set (by reflection, its
// notification's too, so a field added later is covered) crosses the Redis wire format
// (encodeChange, decodeChange) unchanged; a field the wire structs forget fails here.
func TestWireFormatCarriesEveryField(t *testing.T) {
	t.Parallel()
	var c inbox.Change
	if err := fill.Fill(&c); err != nil {
		t.Fatal(err)
	}
	if z := fill.Zero(&c); len(z) != 0 {
		t.Fatalf("fill left %v zero", z)
	}
	// A published badge is never composed with announcements (each badge stream composes
	// its own with its instance's set): the composition's fields stay off the wire.
	c.Badge.Own, c.Badge.AnnouncementSeq = nil, 0
	b, err := encodeChange("origin-1", c)
	if err != nil {
		t.Fatal(err)
	}
	origin, sent, got, err := decodeChange(b)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "origin-1" || sent.IsZero() {
		t.Fatalf("origin %q, sent %v", origin, sent)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("across the wire:\n got %+v\n     %+v\nwant %+v\n     %+v", got, got.Notification, c, c.Notification)
	}
}

// TestWireCarriesEvents: kind, ids and the whole badge (categories included) survive the
// Redis wire; a change without a badge decodes without one.
func TestWireCarriesEvents(t *testing.T) {
	in := inbox.Change{Viewer: inbox.Viewer{TenantID: "t", UserID: "u"}, UnreadCount: 2, Version: 7,
		Kind: inbox.EventArchived, IDs: []string{"01A", "01B"},
		Badge: inbox.Badge{Unread: 2, Unseen: 3, Version: 7, Categories: []inbox.CategoryCount{
			{Category: "billing", Unread: 1, Unseen: 2}, {Category: "social", Unread: 1, Unseen: 1}}}}
	b, err := encodeChange("o", in)
	if err != nil {
		t.Fatal(err)
	}
	_, _, out, err := decodeChange(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded %+v\nwant    %+v", out, in)
	}
	hint := inbox.Change{Viewer: in.Viewer}
	b, _ = encodeChange("o", hint)
	if _, _, out, _ = decodeChange(b); !reflect.DeepEqual(out, hint) {
		t.Fatalf("hint decoded %+v", out)
	}
}
