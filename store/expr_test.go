package store

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
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

// resolveExpr returns expression e (nil: "") with its placeholders resolved: a name as
// {attr}, a value as <value> (a set or list as <[a b]>, a map as <map>), and a space
// before each "(" (the builder writes "attribute_exists (#0)" and "(#0 = :0)").
func resolveExpr(e *string, names map[string]string, values map[string]types.AttributeValue) string {
	if e == nil {
		return ""
	}
	var value func(types.AttributeValue) string
	value = func(av types.AttributeValue) string {
		switch v := av.(type) {
		case *types.AttributeValueMemberS:
			return v.Value
		case *types.AttributeValueMemberN:
			return v.Value
		case *types.AttributeValueMemberBOOL:
			return strconv.FormatBool(v.Value)
		case *types.AttributeValueMemberSS:
			return "[" + strings.Join(v.Value, " ") + "]"
		case *types.AttributeValueMemberL:
			var l []string
			for _, e := range v.Value {
				l = append(l, value(e))
			}
			return "[" + strings.Join(l, " ") + "]"
		case *types.AttributeValueMemberM:
			return "map"
		}
		return "?"
	}
	out := regexp.MustCompile(`[#:]\d+`).ReplaceAllStringFunc(*e, func(p string) string {
		if p[0] == '#' {
			return "{" + names[p] + "}"
		}
		return "<" + value(values[p]) + ">"
	})
	return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(out, "(", " ("), "  (", " ("))
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
			resolve := func(s *string) string { return resolveExpr(s, x.Names(), x.Values()) }
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

// resolvedAction resolves a transaction action's update and condition (resolveExpr).
func resolvedAction(t *testing.T, a types.TransactWriteItem, err error) (update, cond string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case a.Update != nil:
		u := a.Update
		return resolveExpr(u.UpdateExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues),
			resolveExpr(u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	case a.Delete != nil:
		return "", resolveExpr(a.Delete.ConditionExpression, a.Delete.ExpressionAttributeNames, a.Delete.ExpressionAttributeValues)
	case a.Put != nil:
		return "", resolveExpr(a.Put.ConditionExpression, a.Put.ExpressionAttributeNames, a.Put.ExpressionAttributeValues)
	}
	t.Fatalf("no write in %+v", a)
	return "", ""
}

// TestStateWriteExpressions: the writes whose update or condition has variable parts
// (which attributes differ, which members change, which counters and watermarks META's
// update names, whether a group moves) build, per representative input, exactly the
// update and condition the hand-concatenated expressions had: same SETs, REMOVEs and
// ADDs, same conditions (an absent rev is rev 0; a clock only rises; a negative delta
// needs the count; a group needs room), data names (categories, notification ids) whole.
func TestStateWriteExpressions(t *testing.T) {
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	k := itemKey{"p", "s"}
	meta := func(clock string, build func(b *metaUpdate)) func() (types.TransactWriteItem, error) {
		return func() (types.TransactWriteItem, error) {
			b := newMetaUpdate(v)
			b.clock = clock
			build(b)
			return b.action("tb")
		}
	}
	g := &groupItem{UserPK: "p", GroupKey: "gk", Rev: 4, exists: true, Members: map[string]string{"01A": "x"}}
	metaSets := "SET {gsi1pk} = <T#t#U#u#UNREAD>, {gsi1sk} = <" + skMeta + ">, {entityType} = <" + entityMeta + ">"
	groupSets := "SET {m#01B} = <01B#c#>, {gsi1pk} = <T#t#U#u#GROUPS>, {gsi1sk} = <N#01B>, {entityType} = <" + entityGroup +
		">, {groupKey} = <gk>, {type} = <ty>, {latest} = <map>"
	room := "(attribute_not_exists ({memberCount})) OR ({memberCount} < <" + strconv.Itoa(inbox.MaxGroupMembers) + ">)"
	for _, tc := range []struct {
		name         string
		action       func() (types.TransactWriteItem, error)
		update, cond string
	}{
		{"member values", func() (types.TransactWriteItem, error) {
			return groupValueUpdate("tb", v, "g", map[string]string{"01B": "x", "a.b[1]": "y"})
		}, "ADD {rev} <1>\nSET {m#01B} = <x>, {m#a.b[1]} = <y>",
			"(attribute_exists ({m#01B})) AND (attribute_exists ({m#a.b[1]}))"},
		{"one member value", func() (types.TransactWriteItem, error) {
			return groupValueUpdate("tb", v, "g", map[string]string{"01C": "z"})
		}, "ADD {rev} <1>\nSET {m#01C} = <z>", "attribute_exists ({m#01C})"},
		{"read, from rev 0", func() (types.TransactWriteItem, error) {
			return itemUpdate("tb", k, &notificationItem{GSI1PK: "old"}, &notificationItem{Rev: 1, ReadAt: 5, Mark: "m"})
		}, "REMOVE {gsi1pk}, {gsi1sk}\nSET {rev} = <1>, {mark} = <m>, {readAt} = <5>",
			"(attribute_exists ({pk})) AND (attribute_not_exists ({rev}))"},
		{"woken and unmarked", func() (types.TransactWriteItem, error) {
			return itemUpdate("tb", k, &notificationItem{Rev: 3, ReadAt: 5, Mark: "m", SnoozedUntil: 9},
				&notificationItem{Rev: 4, ReadAt: 5, GSI1PK: "gp", GSI1SK: "gs"})
		}, "REMOVE {mark}, {snoozedUntil}\nSET {rev} = <4>, {gsi1pk} = <gp>, {gsi1sk} = <gs>",
			"(attribute_exists ({pk})) AND ({rev} = <3>)"},
		{"delete at rev 0", func() (types.TransactWriteItem, error) { return deleteAction("tb", k, 0) },
			"", "(attribute_exists ({pk})) AND (attribute_not_exists ({rev}))"},
		{"delete at rev 7", func() (types.TransactWriteItem, error) { return deleteAction("tb", k, 7) },
			"", "(attribute_exists ({pk})) AND ({rev} = <7>)"},
		{"META: a read in a dotted category", meta("01C", func(b *metaUpdate) {
			b.usesWatermarks(&metaItem{ReadAllBefore: "01A", Cats: map[string]*catState{}}, "c.x")
			b.addState("c.x", state{active: true}, state{active: true, read: true})
		}), "ADD {version} <1>, {unreadCount} <-1>, {cu#c.x} <-1>\n" + metaSets + ", {clock} = <01C>",
			"( (attribute_not_exists ({clock})) OR ({clock} < <01C>)) AND ({readAllBefore} = <01A>) AND " +
				"(attribute_not_exists ({seenAllBefore})) AND (attribute_not_exists ({cr#c.x})) AND " +
				"(attribute_not_exists ({cz#c.x})) AND ({unreadCount} >= <1>) AND ({cu#c.x} >= <1>)"},
		{"META: sets without a clock", meta("", func(b *metaUpdate) {
			b.set(attrReadWM, "01D").add(attrUnread, 3).require(attrVersion, 6, true)
		}), "ADD {version} <1>, {unreadCount} <3>\n" + metaSets + ", {readAllBefore} = <01D>", "{version} = <6>"},
		{"META: unconditional", meta("", func(b *metaUpdate) { b.add("cs#a[b]", 2) }),
			"ADD {version} <1>, {cs#a[b]} <2>\n" + metaSets, ""},
		{"group moves to the send", func() (types.TransactWriteItem, error) {
			return g.sendUpdate("tb", v, &notificationItem{ID: "01B", Type: "ty", Category: "c"})
		}, "ADD {memberCount} <1>, {rev} <1>\nREMOVE {targetKind}, {targetId}\n" + groupSets + ", {category} = <c>", room},
		{"group moves to a send below the clock", func() (types.TransactWriteItem, error) {
			return belowGroupUpdate("tb", v, g, &notificationItem{ID: "01B", Type: "ty", Category: "c", TargetKind: "k", TargetID: "i"})
		}, "ADD {memberCount} <1>, {rev} <1>\n" + groupSets + ", {targetKind} = <k>, {targetId} = <i>, {category} = <c>",
			"( " + room + ") AND ( (attribute_not_exists ({gsi1sk})) OR ({gsi1sk} < <N#01B>))"},
		{"group keeps its newer member", func() (types.TransactWriteItem, error) {
			return belowGroupUpdate("tb", v, g, &notificationItem{ID: "009", Type: "ty"})
		}, "ADD {memberCount} <1>, {rev} <1>\nSET {m#009} = <009##>", room},
		{"full group on its rev", func() (types.TransactWriteItem, error) { return g.put("tb", v, g) }, "", "{rev} = <4>"},
		{"new group", func() (types.TransactWriteItem, error) { return g.put("tb", v, nil) }, "", "attribute_not_exists ({pk})"},
	} {
		a, err := tc.action()
		update, cond := resolvedAction(t, a, err)
		if update != tc.update || cond != tc.cond {
			t.Errorf("%s:\nupdate %q\n  want %q\ncondition %q\n     want %q", tc.name, update, tc.update, cond, tc.cond)
		}
	}
}

// TestBuiltValuesMarshalAsBefore: the values the writes now hand the builder marshal to
// the attribute values the hand-made maps held (numbers as strconv wrote them, booleans,
// empty strings; sets, lists and binary results passed as attribute values unchanged).
func TestBuiltValuesMarshalAsBefore(t *testing.T) {
	pending, err := attributevalue.Marshal([]string{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v   any
		old types.AttributeValue
	}{
		{0, &types.AttributeValueMemberN{Value: "0"}},
		{-3, &types.AttributeValueMemberN{Value: strconv.Itoa(-3)}},
		{inbox.MaxGroupMembers, &types.AttributeValueMemberN{Value: strconv.Itoa(inbox.MaxGroupMembers)}},
		{int64(1700000000123), &types.AttributeValueMemberN{Value: strconv.FormatInt(1700000000123, 10)}},
		{int64(-1), &types.AttributeValueMemberN{Value: fmt.Sprint(int64(-1))}},
		{true, &types.AttributeValueMemberBOOL{Value: true}},
		{false, &types.AttributeValueMemberBOOL{Value: false}},
		{"", &types.AttributeValueMemberS{Value: ""}},
		{"T#a#U#b", &types.AttributeValueMemberS{Value: "T#a#U#b"}},
		{pending, &types.AttributeValueMemberL{Value: []types.AttributeValue{}}},
		{&types.AttributeValueMemberB{}, &types.AttributeValueMemberB{}},
		{&types.AttributeValueMemberSS{Value: []string{"t#1"}}, &types.AttributeValueMemberSS{Value: []string{"t#1"}}},
	} {
		x, err := buildUpdate(expression.Set(expression.Name("a"), expression.Value(tc.v)), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := x.Values()[":0"]; !reflect.DeepEqual(got, tc.old) {
			t.Errorf("%#v marshals to %#v, was %#v", tc.v, got, tc.old)
		}
	}
}
