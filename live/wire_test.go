package live

import (
	"reflect"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

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
