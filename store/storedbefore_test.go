package store_test

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

func sAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func bAV(b bool) types.AttributeValue   { return &types.AttributeValueMemberBOOL{Value: b} }
func mAV(m map[string]string) types.AttributeValue {
	out := map[string]types.AttributeValue{}
	for k, v := range m {
		out[k] = sAV(v)
	}
	return &types.AttributeValueMemberM{Value: out}
}

func (f *fixture) putRaw(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// Items written before channels were registrations (switches a struct of four, template
// parts three fields) read the same through today's store, byte for byte as the old
// code wrote them: a tenant's settings (their preferences JSON with the struct's field
// names, null for a category switch not set), a user's PREFS item (BOOL attributes
// inApp/email/push/sms, cat#<category>#<switch>, v1 muted categories), a template
// version (email, push and sms maps, empty fields included). SLACK, which none of them
// names, is on wherever nothing turned it off; an update of today keeps what the old
// item said.
func TestItemsStoredBeforeTheChannelRegistry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.putRaw(t, map[string]types.AttributeValue{
		"pk": sAV("T#" + f.tenant + "#SETTINGS"), "sk": sAV("SETTINGS"), "entityType": sAV("TenantSettings"),
		"updatedAt": &types.AttributeValueMemberN{Value: "1700000000000"},
		"preferences": sAV(`{"Channels":{"InApp":true,"Email":false,"Push":true,"SMS":false},` +
			`"Categories":[{"Category":"marketing","Channels":{"InApp":null,"Email":null,"Push":false,"SMS":true}}],` +
			`"QuietHours":{"Start":"22:00","End":"07:00"},"Timezone":"Europe/Berlin","Locale":"de-DE","Critical":["security"]}`),
	})
	f.putRaw(t, map[string]types.AttributeValue{
		"pk": sAV("T#" + f.tenant + "#U#a"), "sk": sAV("PREFS"), "entityType": sAV("Preferences"),
		"inApp": bAV(true), "sms": bAV(true), "cat#social#email": bAV(true), "cat#social#push": bAV(false),
		"mutedCategories": &types.AttributeValueMemberSS{Value: []string{"digest"}},
		"quietHours":      mAV(map[string]string{"start": "23:00", "end": "06:00"}), "timezone": sAV("Europe/Paris"),
	})

	set, err := f.s.TenantSettings(ctx, f.tenant)
	if err != nil || set.Preferences == nil {
		t.Fatalf("settings %+v, %v", set, err)
	}
	tp := *set.Preferences
	wantTenant := inbox.TenantPreferences{
		Channels: inbox.ChannelSwitches{inbox.ChannelInApp: true, inbox.ChannelEmail: false, inbox.ChannelPush: true, inbox.ChannelSMS: false, inbox.ChannelSlack: true},
		Categories: []inbox.CategorySwitches{{Category: "marketing",
			Channels: inbox.SwitchChanges{inbox.ChannelPush: false, inbox.ChannelSMS: true}}},
		QuietHours: &inbox.QuietHours{Start: "22:00", End: "07:00"}, Timezone: "Europe/Berlin", Locale: "de-DE",
		Critical: []string{"security"},
	}
	if !reflect.DeepEqual(tp, wantTenant) {
		t.Fatalf("tenant preferences\n got  %+v\n want %+v", tp, wantTenant)
	}

	on := func(chans ...string) inbox.ChannelSwitches {
		sw := inbox.ChannelSwitches{}
		for _, c := range inbox.SwitchChannels {
			sw[c] = false
		}
		for _, c := range chans {
			sw[c] = true
		}
		return sw
	}
	all := inbox.AllOn()
	global := on(inbox.ChannelInApp, inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack)
	want := inbox.Preferences{
		Channels: global,
		Categories: []inbox.CategoryPreference{
			{Category: "digest", Channels: on(inbox.ChannelPush, inbox.ChannelSMS, inbox.ChannelSlack)},
			{Category: "marketing", Channels: on(inbox.ChannelInApp, inbox.ChannelSMS, inbox.ChannelSlack)},
			{Category: "security", Critical: true, Channels: all},
			{Category: "social", Channels: on(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelSMS, inbox.ChannelSlack)},
		},
		QuietHours: &inbox.QuietHours{Start: "23:00", End: "06:00"}, Timezone: "Europe/Paris", Locale: "de-DE",
	}
	p, err := f.s.Preferences(ctx, f.viewer("a"))
	if err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("preferences %v\n got  %+v\n want %+v", err, p, want)
	}
	// Today's update (SLACK off for social) keeps every old attribute.
	p, err = f.s.UpdatePreferences(ctx, f.viewer("a"), inbox.PreferencesUpdate{
		Categories: []inbox.CategorySwitches{{Category: "social", Channels: inbox.SwitchChanges{inbox.ChannelSlack: false}}}})
	want.Categories[3].Channels = on(inbox.ChannelInApp, inbox.ChannelEmail, inbox.ChannelSMS)
	if err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("after an update %v\n got  %+v\n want %+v", err, p, want)
	}
	if !maps.Equal(p.Channels, global) {
		t.Fatalf("global switches %v", p.Channels)
	}

	// A template version as the old code wrote it (a PUT of today makes the HEAD; the
	// version item is then replaced by the old shape).
	v, err := f.s.PutTemplate(ctx, f.tenant, "welcome", inbox.TemplateInput{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	f.putRaw(t, map[string]types.AttributeValue{
		"pk": sAV("T#" + f.tenant + "#TPL#welcome"), "sk": sAV("L#en#V#00000001"), "entityType": sAV("TemplateVersion"),
		"version": &types.AttributeValueMemberN{Value: "1"}, "locale": sAV("en"), "title": sAV("Hi {{ name }}"), "body": sAV(""),
		"createdAt": &types.AttributeValueMemberN{Value: "1700000000000"},
		"email":     mAV(map[string]string{"subject": "Welcome", "html": "", "text": "Hello {{ name }}"}),
		"push":      mAV(map[string]string{"title": "", "body": "Hi"}),
		"sms":       mAV(map[string]string{"text": "Hi {{ name }}"}),
	})
	tpl, err := f.s.GetTemplate(ctx, f.tenant, "welcome", "en", v)
	wantParts := map[string]inbox.Content{
		inbox.ChannelEmail: {Subject: "Welcome", Text: "Hello {{ name }}"},
		inbox.ChannelPush:  {Body: "Hi"},
		inbox.ChannelSMS:   {Text: "Hi {{ name }}"},
	}
	if err != nil || tpl.Title != "Hi {{ name }}" || tpl.Body != "" || !reflect.DeepEqual(tpl.Parts, wantParts) {
		t.Fatalf("old template version %+v, %v", tpl, err)
	}
}
