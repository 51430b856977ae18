package live

import (
	"reflect"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// fillEvery sets every field of the struct v points to a non-zero value (by kind), so a
// field a copy forgets shows up as a difference.
func fillEvery(t *testing.T, v reflect.Value) {
	t.Helper()
	at := time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeOf(time.Time{}):
			f.Set(reflect.ValueOf(at.Add(time.Duration(i) * time.Minute)))
		case f.Type() == reflect.TypeOf(&time.Time{}):
			x := at.Add(time.Duration(i) * time.Hour)
			f.Set(reflect.ValueOf(&x))
		case f.Type() == reflect.TypeOf(inbox.JSON(nil)):
			f.Set(reflect.ValueOf(inbox.JSON(`{"n":1}`)))
		case f.Type() == reflect.TypeOf([]inbox.Action(nil)):
			f.Set(reflect.ValueOf([]inbox.Action{{Label: "Open", URL: "https://example.com/1"}}))
		case f.Kind() == reflect.String:
			f.SetString(v.Type().Field(i).Name + "-value")
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("fillEvery: field %s of kind %s: teach this test its values", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// A notification crosses the Redis wire with every field: a field added to
// inbox.Notification and forgotten in wire.go fails here.
func TestWireCarriesEveryNotificationField(t *testing.T) {
	var n inbox.Notification
	fillEvery(t, reflect.ValueOf(&n).Elem())
	c := inbox.Change{Viewer: inbox.Viewer{TenantID: "t", UserID: "u"}, UnreadCount: 3, Version: 7, Notification: &n}
	b, err := encodeChange("origin", c)
	if err != nil {
		t.Fatal(err)
	}
	_, _, got, err := decodeChange(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Notification, &n) {
		t.Fatalf("the wire lost fields:\n sent %+v\n got  %+v", n, *got.Notification)
	}
}
