package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
)

func TestMetaSortsAboveEveryNotification(t *testing.T) {
	t.Parallel()
	for _, id := range []string{ulid.Make().String(), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "00000000000000000000000000"} {
		if !(notifSK(id) < skMeta) || !(notifSK(id) > skNotifPrefix) {
			t.Errorf("%s does not sort inside [N#, N~META)", notifSK(id))
		}
	}
	if skPrefs > skNotifPrefix && skPrefs < skMeta {
		t.Error("PREFS sorts inside the page range")
	}
}

func TestKeysKeepTheirSegments(t *testing.T) {
	t.Parallel()
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	if got := userPK(v); got != "T#acme#U#alice" {
		t.Fatal(got)
	}
	if got := unreadPK(v); got != "T#acme#U#alice#UNREAD" {
		t.Fatal(got)
	}
	if got := targetPK("acme", "issue", "42"); got != "T#acme#TARGET#issue#42" {
		t.Fatal(got)
	}
	// A device token of any bytes reaches the key only as its digest, whose first 16
	// digits are the device id.
	for _, tok := range []string{"tok", "a#b#U#c", strings.Repeat("x", inbox.MaxDeviceTokenBytes), "\u00e9\u2028"} {
		got := deviceOwnerPK("acme", inbox.PlatformFCM, tok)
		digest, ok := strings.CutPrefix(got, "T#acme#DEVTOKEN#")
		if !ok || len(digest) != 64 || strings.Contains(digest, "#") || digest[:16] != inbox.DeviceID(inbox.PlatformFCM, tok) {
			t.Fatalf("owner key of %.20q: %s", tok, got)
		}
		if deviceOwnerPK("acme", inbox.PlatformAPNs, tok) == got {
			t.Fatalf("owner key of %.20q: the same on both platforms", tok)
		}
		if other := deviceOwnerPK("globex", inbox.PlatformFCM, tok); other != "T#globex#DEVTOKEN#"+digest {
			t.Fatalf("owner key of %.20q in another tenant: %s", tok, other)
		}
	}
	// An id that passed CheckID cannot add a segment: no '#'.
	if inbox.CheckID("user", "alice#UNREAD") == nil {
		t.Fatal("CheckID accepted a delimiter")
	}
}

func TestEffectiveRead(t *testing.T) {
	t.Parallel()
	const (
		id1 = "01HZX8Y3T9M2V6Q4R8S0W1A2B1"
		wm  = "01HZX8Y3T9M2V6Q4R8S0W1A2B5"
		id9 = "01HZX8Y3T9M2V6Q4R8S0W1A2B9"
		m7  = "01HZX8Y3T9M2V6Q4R8S0W1A2B7"
		m3  = "01HZX8Y3T9M2V6Q4R8S0W1A2B3"
	)
	for _, tc := range []struct {
		name string
		it   notificationItem
		wm   string
		read bool
	}{
		{"untouched, no watermark", notificationItem{ID: id1}, "", false},
		{"untouched below watermark", notificationItem{ID: id1}, wm, true},
		{"untouched above watermark", notificationItem{ID: id9}, wm, false},
		{"marked unread after watermark wins", notificationItem{ID: id1, Mark: markUnread, MarkedAt: m7}, wm, false},
		{"watermark after unread mark wins", notificationItem{ID: id1, Mark: markUnread, MarkedAt: m3}, wm, true},
		{"read explicitly", notificationItem{ID: id9, Mark: markRead, MarkedAt: m7}, "", true},
		{"read before watermark stays read", notificationItem{ID: id1, Mark: markRead, MarkedAt: m3}, wm, true},
	} {
		if got := effectiveRead(&tc.it, tc.wm); got != tc.read {
			t.Errorf("%s: read = %v", tc.name, got)
		}
	}
}

func TestStreamChangeVersion(t *testing.T) {
	t.Parallel()
	meta := func(count, version int) map[string]types.AttributeValue {
		m := map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "T#acme#U#alice"}, "sk": &types.AttributeValueMemberS{Value: skMeta},
			"entityType":  &types.AttributeValueMemberS{Value: entityMeta},
			"unreadCount": &types.AttributeValueMemberN{Value: fmt.Sprint(count)},
		}
		if version > 0 {
			m["version"] = &types.AttributeValueMemberN{Value: fmt.Sprint(version)}
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		old, new    map[string]types.AttributeValue
		wantVersion int64
	}{
		{"created", nil, meta(1, 1), 1},
		{"raised", meta(1, 1), meta(2, 2), 2},
		{"outside writer, version kept", meta(1, 4), meta(2, 4), 0},
		{"outside writer, no version", meta(1, 0), meta(2, 0), 0},
	} {
		c, ok, err := StreamChange("MODIFY", tc.old, tc.new)
		if err != nil || !ok || c.Version != tc.wantVersion || c.Viewer.UserID != "alice" {
			t.Errorf("%s: %+v ok=%v err=%v, want version %d", tc.name, c, ok, err, tc.wantVersion)
		}
	}
}
