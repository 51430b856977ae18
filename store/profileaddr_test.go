package store

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// A PROFILE item as written before addresses were keyed by channel (email, phone and
// slackUserId attributes beside locale, timezone and the devices) reads back with every
// address under its channel's AddressKey; an attribute no channel registers is no address,
// and an empty one is none.
func TestProfileItemAddressesByChannel(t *testing.T) {
	item := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "T#acme#U#ada"}, "sk": &types.AttributeValueMemberS{Value: skUserProfile},
		"entityType":  &types.AttributeValueMemberS{Value: entityUserProfile},
		"email":       &types.AttributeValueMemberS{Value: "ada@example.com"},
		"phone":       &types.AttributeValueMemberS{Value: "+4915112345678"},
		"slackUserId": &types.AttributeValueMemberS{Value: "U024BE7LH"},
		"fax":         &types.AttributeValueMemberS{Value: "+4930123456"},
		"locale":      &types.AttributeValueMemberS{Value: "de-DE"},
		"timezone":    &types.AttributeValueMemberS{Value: "Europe/Berlin"},
		"updatedAt":   &types.AttributeValueMemberN{Value: "1"},
		"devices": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"d1": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"token": &types.AttributeValueMemberS{Value: "tok"}, "platform": &types.AttributeValueMemberS{Value: "fcm"}, "createdAt": &types.AttributeValueMemberN{Value: "1"}}}}},
	}
	p, devs, err := decodeUserDevices(item)
	want := map[string]string{"email": "ada@example.com", "phone": "+4915112345678", "slackUserId": "U024BE7LH"}
	if err != nil || !maps.Equal(p.Addresses, want) || p.Locale != "de-DE" || p.Timezone != "Europe/Berlin" || len(devs) != 1 {
		t.Fatalf("decoded %+v %v %v, want addresses %v", p, devs, err, want)
	}
	for _, k := range inbox.AddressKeys {
		if p.Address(k) == "" {
			t.Errorf("address %q of a stored profile is not read", k)
		}
	}
	item["phone"] = &types.AttributeValueMemberS{Value: ""}
	delete(item, "email")
	if p, err := decodeUserProfile(item); err != nil || p.Address("phone") != "" || p.Address("email") != "" || p.Address("slackUserId") == "" {
		t.Errorf("empty and missing addresses: %+v %v", p, err)
	}
	item["slackUserId"] = &types.AttributeValueMemberL{}
	if _, err := decodeUserProfile(item); err == nil {
		t.Error("a list as an address decoded")
	}
}

// No channel's AddressKey is an attribute the PROFILE item uses for something else (a
// channel registered with "locale" or "devices" as its address would overwrite it).
func TestAddressKeysAreNotProfileAttributes(t *testing.T) {
	taken := map[string]bool{}
	rt := reflect.TypeFor[userProfileItem]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("dynamodbav"), ",")
		taken[name] = true
	}
	if !taken["locale"] || !taken["devices"] {
		t.Fatalf("attributes %v", taken)
	}
	for _, k := range inbox.AddressKeys {
		if taken[k] {
			t.Errorf("address key %q is an attribute of the PROFILE item", k)
		}
	}
}
