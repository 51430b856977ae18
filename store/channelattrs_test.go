package store

import (
	"reflect"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// itemAttributes returns the attribute names of item struct type T (its dynamodbav tags).
func itemAttributes[T any](t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	rt := reflect.TypeFor[T]()
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("dynamodbav"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// A channel's Switch is a top-level attribute of the PREFS item and its Part one of the
// template version item, both named by the registration alone: none may be an attribute
// those items hold for something else (a switch "locale" would SET the user's locale to a
// boolean, a part "title" would replace the template's title), start like a category's
// switch ("cat#"), or hold what the expression builder reads as a path ('.', '[', ']':
// prefsUpdate names a switch with expression.Name). TestAddressKeysAreNotProfileAttributes
// is the same for the addresses.
func TestSwitchesAndPartsAreNotItemAttributes(t *testing.T) {
	prefs := itemAttributes[prefsItem](t)
	for _, a := range []string{prefsAttrMutedTargets, prefsAttrQuietHours, prefsAttrTimezone, prefsAttrLocale, prefsAttrEntityType, prefsAttrMutedCategories} {
		if !prefs[a] {
			t.Fatalf("PREFS attribute %q is not among prefsItem's %v", a, prefs)
		}
	}
	version := itemAttributes[templateVersionItem](t)
	if !version["title"] || !version["locale"] {
		t.Fatalf("template version attributes %v", version)
	}
	for _, s := range inbox.Specs() {
		if s.Switch != "" && (prefs[s.Switch] || strings.HasPrefix(s.Switch, prefsAttrCategoryPrefix) || strings.ContainsAny(s.Switch, ".[]#")) {
			t.Errorf("%s: switch %q is an attribute of the PREFS item, a category's, or a path", s.Name, s.Switch)
		}
		if s.Part != "" && (version[s.Part] || strings.ContainsAny(s.Part, ".[]#")) {
			t.Errorf("%s: part %q is an attribute of the template version item or a path", s.Name, s.Part)
		}
	}
}
