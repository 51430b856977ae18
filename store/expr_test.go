package store

import (
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// setClauses maps the attributes an update expression SETs to plain values (name
// placeholders resolved with names, value placeholders with values): what the update
// writes when every SET is "#name = :value".
func setClauses(t *testing.T, update string, names map[string]string, values map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	set, _, _ := strings.Cut(strings.TrimPrefix(update, "SET "), "\n")
	out := map[string]types.AttributeValue{}
	for _, c := range strings.Split(set, ", ") {
		m := regexp.MustCompile(`^(#\d+) = (:\d+)$`).FindStringSubmatch(strings.TrimSpace(c))
		if m == nil {
			t.Fatalf("SET clause %q of %q is not #name = :value", c, update)
		}
		name, ok := names[m[1]]
		if !ok || values[m[2]] == nil {
			t.Fatalf("clause %q: placeholder missing (names %v)", c, names)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("%q set twice in %q", name, update)
		}
		out[name] = values[m[2]]
	}
	return out
}

// TestPrefsUpdateCategoryNamesStayWhole: a category is data inside an attribute name
// ("cat#<category>#<channel>"), so whatever inbox.CheckID lets through (dots, brackets
// that are or are not list indexes, '$', non-ASCII) is one attribute that the SET writes
// and decodePrefs reads back as the same category and switch. expression.Name would split
// the dots and expression.NameNoDotSplit alone refuses or strips brackets.
func TestPrefsUpdateCategoryNamesStayWhole(t *testing.T) {
	categories := []string{"plain", "a.b", "a.b.c", ".lead", "trail.", "x[1]", "x[1].y", "[0]", "a[b]", "a[", "]", "a]b[",
		"a[]", "$n", "a$v.b", "ünï.cödé", strings.Repeat("w.", inbox.MaxIDBytes/2)}
	for _, c := range categories {
		if err := inbox.CheckID("category", c); err != nil {
			t.Fatalf("%q: %v", c, err)
		}
	}
	var upd inbox.PreferencesUpdate
	want := map[string]inbox.SwitchChanges{}
	for i, c := range categories {
		sw := inbox.SwitchChanges{inbox.ChannelInApp: true}
		if i%2 == 1 {
			sw = inbox.SwitchChanges{inbox.ChannelEmail: false, inbox.ChannelSMS: true, inbox.ChannelSlack: false}
		}
		upd.Categories = append(upd.Categories, inbox.CategorySwitches{Category: c, Channels: sw})
		want[c] = sw
	}
	upd.Channels = inbox.SwitchChanges{inbox.ChannelPush: false}
	x, rule, err := prefsUpdate(upd, "UTC", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rule != "" || x.Condition() != nil {
		t.Fatalf("no condition expected: %q %v", rule, x.Condition())
	}
	item := setClauses(t, *x.Update(), x.Names(), x.Values())
	for _, n := range x.Names() {
		if strings.ContainsRune(n, 0) {
			t.Fatalf("a stand-in reached the names: %q", n)
		}
	}
	own, err := decodePrefs(item)
	if err != nil {
		t.Fatal(err)
	}
	if len(own.Categories) != len(want) {
		t.Fatalf("decoded %d categories, want %d: %v", len(own.Categories), len(want), item)
	}
	for c, sw := range want {
		got, ok := own.Categories[c]
		if !ok || !maps.Equal(got, sw) {
			t.Errorf("category %q: got %+v, want %+v", c, got, sw)
		}
	}
	if on, ok := own.Channels[inbox.ChannelPush]; !ok || on || len(own.Channels) != 1 {
		t.Errorf("push switch: %v", own.Channels[inbox.ChannelPush])
	}
	if et, ok := item[prefsAttrEntityType].(*types.AttributeValueMemberS); !ok || et.Value != entityPrefs {
		t.Errorf("entityType: %v", item[prefsAttrEntityType])
	}
}

// TestPrefsUpdateConditions: the muted-targets bound (counting only targets not already
// muted, each of which must still be), the zone rules (only when the tenant has no
// timezone) and the ADD/DELETE of mutedTargets are the ones UpdatePreferences documents.
func TestPrefsUpdateConditions(t *testing.T) {
	zone, none := "Europe/Berlin", ""
	qh := &inbox.QuietHours{Start: "22:00", End: "07:00"}
	for _, tc := range []struct {
		name                  string
		upd                   inbox.PreferencesUpdate
		tenantZone            string
		mute, unmute, already []string
		update, cond, rule    []string // substrings (names resolved as {attr}, values as <value>)
	}{
		{name: "mute new", mute: []string{"t#1", "t#2"},
			update: []string{"ADD {mutedTargets} <[t#1 t#2]>"},
			cond:   []string{"attribute_not_exists ({mutedTargets})", "size ({mutedTargets}) <= <98>"}},
		{name: "mute some already", mute: []string{"t#1", "t#2", "t#3"}, already: []string{"t#2"},
			update: []string{"ADD {mutedTargets} <[t#1 t#2 t#3]>"},
			cond:   []string{"size ({mutedTargets}) <= <98>", "contains ({mutedTargets}, <t#2>)"}},
		{name: "unmute", unmute: []string{"t#9"}, update: []string{"DELETE {mutedTargets} <[t#9]>"}},
		{name: "quiet hours without zone", upd: inbox.PreferencesUpdate{QuietHours: qh},
			update: []string{"{quietHours} = <map>"}, cond: []string{"attribute_exists ({timezone})"},
			rule: []string{"quietHours need a timezone"}},
		{name: "quiet hours, tenant zone", upd: inbox.PreferencesUpdate{QuietHours: qh}, tenantZone: "UTC",
			update: []string{"{quietHours} = <map>"}},
		{name: "quiet hours with zone", upd: inbox.PreferencesUpdate{QuietHours: qh, Timezone: &zone},
			update: []string{"{quietHours} = <map>", "{timezone} = <Europe/Berlin>"}},
		{name: "clear zone", upd: inbox.PreferencesUpdate{Timezone: &none, Locale: &zone},
			update: []string{"REMOVE {timezone}", "{locale} = <Europe/Berlin>"}, cond: []string{"attribute_not_exists ({quietHours})"},
			rule: []string{"the timezone cannot be cleared while quiet hours are set"}},
		{name: "clear zone and quiet hours", upd: inbox.PreferencesUpdate{Timezone: &none, ClearQuietHours: true},
			update: []string{"REMOVE", "{timezone}", "{quietHours}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, rule, err := prefsUpdate(tc.upd, tc.tenantZone, tc.mute, tc.unmute, tc.already)
			if err != nil {
				t.Fatal(err)
			}
			resolve := func(s *string) string {
				if s == nil {
					return ""
				}
				out := regexp.MustCompile(`[#:]\d+`).ReplaceAllStringFunc(*s, func(p string) string {
					if p[0] == '#' {
						return "{" + x.Names()[p] + "}"
					}
					switch v := x.Values()[p].(type) {
					case *types.AttributeValueMemberS:
						return "<" + v.Value + ">"
					case *types.AttributeValueMemberN:
						return "<" + v.Value + ">"
					case *types.AttributeValueMemberSS:
						return "<[" + strings.Join(v.Value, " ") + "]>"
					case *types.AttributeValueMemberM:
						return "<map>"
					}
					return "<?>"
				})
				return strings.ReplaceAll(strings.ReplaceAll(out, "(", " ("), "  (", " (")
			}
			update, cond := resolve(x.Update()), resolve(x.Condition())
			for _, w := range tc.update {
				if !strings.Contains(update, w) {
					t.Errorf("update %q lacks %q", update, w)
				}
			}
			for _, w := range tc.cond {
				if !strings.Contains(cond, w) {
					t.Errorf("condition %q lacks %q", cond, w)
				}
			}
			if len(tc.cond) == 0 && cond != "" {
				t.Errorf("unexpected condition %q", cond)
			}
			if want := strings.Join(tc.rule, ""); rule != want {
				t.Errorf("zone rule %q, want %q", rule, want)
			}
			if !strings.Contains(update, "{entityType} = <"+entityPrefs+">") {
				t.Errorf("update %q does not set entityType", update)
			}
		})
	}
}

// TestDeviceUpdatesNameTheIDWhole: the device id is a key of the devices map, so the
// path is devices.<id> with the id one name however it reads (dots, brackets), in the
// update and the condition of each of the three device actions and of the removal.
func TestDeviceUpdatesNameTheIDWhole(t *testing.T) {
	s := &Store{table: "t"}
	k := itemKey{"pk", "sk"}
	path := regexp.MustCompile(`(#\d+)\.(#\d+)`)
	for _, id := range []string{"0123456789abcdef", "a.b", "x[1]", "a[b]", "]", "a.b[0].c"} {
		check := func(what string, exprs []*string, names map[string]string) {
			t.Helper()
			for _, e := range exprs {
				if e == nil {
					t.Fatalf("%s %q: expression missing", what, id)
				}
				m := path.FindStringSubmatch(*e)
				if m == nil || names[m[1]] != attrDevices || names[m[2]] != id {
					t.Errorf("%s %q: %q with %v does not name devices.<id>", what, id, *e, names)
				}
			}
		}
		have, err := s.devicesAction(k, userProfileItem{}, id, deviceAttr{}, true, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		check("check", []*string{have.ConditionCheck.ConditionExpression}, have.ConditionCheck.ExpressionAttributeNames)
		add, err := s.devicesAction(k, userProfileItem{Devices: map[string]deviceAttr{}}, id, deviceAttr{}, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		check("add", []*string{add.Update.UpdateExpression, add.Update.ConditionExpression}, add.Update.ExpressionAttributeNames)
		rm, err := removeDeviceUpdate("t", k, id)
		if err != nil {
			t.Fatal(err)
		}
		check("remove", []*string{rm.UpdateExpression, rm.ConditionExpression}, rm.ExpressionAttributeNames)
	}
}
