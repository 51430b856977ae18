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
