package inbox_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

func TestDeliveryRefRoundTrip(t *testing.T) {
	for _, r := range []inbox.DeliveryRef{
		{TenantID: "acme", NotificationID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Key: inbox.ChannelEmail},
		{TenantID: "t-ü", NotificationID: "n", Key: inbox.DeliveryKey(inbox.ChannelPush, "0123456789abcdef")},
		{TenantID: "acme", NotificationID: "n", Key: inbox.ChannelPush},
	} {
		s := r.String()
		if raw, err := base64.RawURLEncoding.DecodeString(s); err != nil || string(raw) != r.TenantID+"#"+r.NotificationID+"#"+r.Key {
			t.Errorf("%+v: String %q decodes to %q, %v", r, s, raw, err)
		}
		got, err := inbox.ParseDeliveryRef(s)
		if err != nil || got != r {
			t.Errorf("ParseDeliveryRef(%q) = %+v, %v; want %+v", s, got, err, r)
		}
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []string{
		"", "!!!", enc("acme#n"), enc("acme#n#FAX"), enc("#n#EMAIL"), enc("acme##EMAIL"),
		enc("acme#n#PUSH#xyz"), enc("acme#n#PUSH#0123456789ABCDEF"), enc("acme#n\x00#EMAIL"),
		base64.StdEncoding.EncodeToString([]byte("acme#n#EMAIL")) + "==",
	} {
		if r, err := inbox.ParseDeliveryRef(bad); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("ParseDeliveryRef(%q) = %+v, %v; want BAD_USER_INPUT", bad, r, err)
		}
	}
}

func TestDeliveryKeys(t *testing.T) {
	sum := sha256.Sum256([]byte("fcm:tok"))
	id := inbox.DeviceID(inbox.PlatformFCM, "tok")
	if id != hex.EncodeToString(sum[:])[:16] || !inbox.IsDeviceID(id) || id == inbox.DeviceID(inbox.PlatformAPNs, "tok") {
		t.Fatalf("DeviceID = %q", id)
	}
	for key, want := range map[string][2]string{
		"EMAIL": {inbox.ChannelEmail, ""}, "PUSH": {inbox.ChannelPush, ""}, "PUSH#" + id: {inbox.ChannelPush, id},
		"IN_APP": {inbox.ChannelInApp, ""}, "WEBHOOK": {inbox.ChannelWebhook, ""}, "SMS": {inbox.ChannelSMS, ""},
	} {
		ch, dev, err := inbox.ParseDeliveryKey(key)
		if err != nil || ch != want[0] || dev != want[1] {
			t.Errorf("ParseDeliveryKey(%q) = %q, %q, %v", key, ch, dev, err)
		}
		if inbox.DeliveryKey(ch, dev) != key {
			t.Errorf("DeliveryKey(%q, %q) = %q", ch, dev, inbox.DeliveryKey(ch, dev))
		}
	}
	for _, bad := range []string{"", "EMAIL#x", "PUSH#", "PUSH#" + id + "0", "SMS#" + id, "push"} {
		if _, _, err := inbox.ParseDeliveryKey(bad); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("ParseDeliveryKey(%q): %v", bad, err)
		}
	}
}

func TestChannelContent(t *testing.T) {
	plain := inbox.Rendered{Title: "T", Body: "B"}
	for ch, want := range map[string]inbox.Content{
		inbox.ChannelEmail: {Subject: "T", Text: "B"}, inbox.ChannelPush: {Title: "T", Body: "B"},
		inbox.ChannelSMS: {Text: "T\nB"}, inbox.ChannelSlack: {Text: "T\nB"},
		inbox.ChannelInApp: {}, inbox.ChannelWebhook: {}, "NOPE": {},
	} {
		if got := plain.Content(ch); got != want {
			t.Errorf("without parts, %s: %+v, want %+v", ch, got, want)
		}
	}
	for _, ch := range []string{inbox.ChannelSMS, inbox.ChannelSlack} {
		if got := (inbox.Rendered{Title: "T"}).Content(ch); got.Text != "T" {
			t.Errorf("title only, %s: %q", ch, got.Text)
		}
	}
	r := inbox.Rendered{Title: "T", Body: "B", Parts: map[string]inbox.Content{
		inbox.ChannelEmail: {Subject: "S", HTML: "<b>H</b>", Text: "X"}, inbox.ChannelPush: {Title: "PT", Body: "PB"},
		inbox.ChannelSMS: {Text: "sms"}, inbox.ChannelSlack: {Text: "*slack*"}}}
	for ch, want := range r.Parts {
		if got := r.Content(ch); got != want {
			t.Errorf("with parts, %s: %+v, want %+v", ch, got, want)
		}
	}
}

func TestCheckDevice(t *testing.T) {
	if err := inbox.CheckDevice("tok", inbox.PlatformAPNs); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"tok", "gcm"}, {"", "fcm"}, {"a b", "fcm"}, {"a\tb", "fcm"}, {"\xff", "fcm"}} {
		if err := inbox.CheckDevice(c[0], c[1]); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("CheckDevice(%q, %q): %v", c[0], c[1], err)
		}
	}
}
