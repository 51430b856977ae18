package providerhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/providerhook"
	"github.com/inboxgw/gateway/providerhook/providerhooktest"
)

// SendGrid's published example (sendgrid-go's eventwebhook test): a payload signed by
// SendGrid with this key at this timestamp.
const (
	sgExampleKey       = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	sgExampleSignature = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
	sgExampleTimestamp = "1600112502"
	sgExamplePayload   = `[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]` + "\r\n"
)

func sendGridRequest(body []byte, sig, ts string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/webhooks/provider/sendgrid", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if sig != "" {
		r.Header.Set(eventwebhook.VerificationHTTPHeader, sig)
	}
	if ts != "" {
		r.Header.Set(eventwebhook.TimestampHTTPHeader, ts)
	}
	return r
}

// A payload SendGrid itself signed verifies (at its time); its one event carries no
// inbox_ref (mail the gateway did not send), so it reports nothing.
func TestSendGridAcceptsSendGridsOwnExample(t *testing.T) {
	t.Parallel()
	at := time.Unix(1600112502, 0).Add(30 * time.Second)
	sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: sgExampleKey, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := sg.Events(sendGridRequest([]byte(sgExamplePayload), sgExampleSignature, sgExampleTimestamp), []byte(sgExamplePayload))
	if err != nil || len(evs) != 0 {
		t.Fatalf("%v %+v", err, evs)
	}
	// One byte more and it does not.
	tampered := []byte(strings.Replace(sgExamplePayload, "dropped", "droppeD", 1))
	if _, err := sg.Events(sendGridRequest(tampered, sgExampleSignature, sgExampleTimestamp), tampered); inbox.ErrorCode(err) != inbox.CodeUnauthenticated {
		t.Fatalf("tampered example: %v", err)
	}
}

func sendGridBatch(t *testing.T, events ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(events)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSendGridSignedBatchMapsEvents(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: key.Public, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	other := inbox.DeliveryRef{TenantID: "acme", NotificationID: "01ARZ3NDEKTSV4RRFFQ69G5FAW", Key: inbox.ChannelEmail}
	mail := inbox.DeliveryRef{TenantID: "acme", NotificationID: ref.NotificationID, Key: inbox.ChannelEmail}
	body := sendGridBatch(t,
		map[string]any{"inbox_ref": mail.String(), "event": "processed", "sg_message_id": "a.1", "timestamp": now.Unix() - 9},
		map[string]any{"inbox_ref": mail.String(), "event": "delivered", "sg_message_id": "a.1", "timestamp": now.Unix() - 8},
		map[string]any{"inbox_ref": mail.String(), "event": "open", "sg_message_id": "a.1", "timestamp": now.Unix() - 7},
		map[string]any{"inbox_ref": other.String(), "event": "bounce", "reason": "550 5.1.1 unknown user", "timestamp": now.Unix() - 6},
		map[string]any{"inbox_ref": other.String(), "event": "dropped", "reason": "Bounced Address", "timestamp": now.Unix() - 5},
		map[string]any{"inbox_ref": other.String(), "event": "click", "timestamp": now.Unix() - 4},
		map[string]any{"event": "delivered", "timestamp": now.Unix()},                                  // not the gateway's mail
		map[string]any{"inbox_ref": "garbage", "event": "delivered", "timestamp": now.Unix()},          // a malformed ref
		map[string]any{"inbox_ref": 42, "event": "delivered"},                                          // unreadable
		map[string]any{"inbox_ref": mail.String(), "event": "deferred", "timestamp": now.Unix()},       // untracked
		map[string]any{"inbox_ref": mail.String(), "event": "spamreport", "timestamp": now.Unix() - 1}, // untracked
	)
	sig, ts, err := key.Sign(body, now)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := sg.Events(sendGridRequest(body, sig, ts), body)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		ref    inbox.DeliveryRef
		status string
		err    string
		at     int64
	}{
		{mail, inbox.DeliveryDelivered, "", now.Unix() - 8},
		{mail, inbox.DeliveryOpened, "", now.Unix() - 7},
		{other, inbox.DeliveryFailed, "sendgrid: bounce: 550 5.1.1 unknown user", now.Unix() - 6},
		{other, inbox.DeliveryFailed, "sendgrid: dropped: Bounced Address", now.Unix() - 5},
		{other, inbox.DeliveryOpened, "", now.Unix() - 4},
	}
	if len(evs) != len(want) {
		t.Fatalf("events %+v", evs)
	}
	for i, w := range want {
		ev := evs[i]
		if ev.Ref != w.ref || ev.Status != w.status || ev.Error != w.err || ev.At.Unix() != w.at ||
			ev.Provider != channel.ProviderSMTP || ev.MessageID != "" {
			t.Errorf("event %d: %+v, want %+v", i, ev, w)
		}
	}
}

func TestSendGridRefusesUnsignedWrongAndReplayedCallbacks(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: key.Public, MaxAge: 5 * time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	mail := inbox.DeliveryRef{TenantID: "acme", NotificationID: ref.NotificationID, Key: inbox.ChannelEmail}
	body := sendGridBatch(t, map[string]any{"inbox_ref": mail.String(), "event": "delivered", "timestamp": now.Unix()})
	sign := func(k providerhooktest.SendGridKey, b []byte, at time.Time) (string, string) {
		sig, ts, err := k.Sign(b, at)
		if err != nil {
			t.Fatal(err)
		}
		return sig, ts
	}
	unauth := func(name string, b []byte, sig, ts string) {
		t.Helper()
		evs, err := sg.Events(sendGridRequest(b, sig, ts), b)
		if inbox.ErrorCode(err) != inbox.CodeUnauthenticated || evs != nil {
			t.Errorf("%s: %v %+v, want UNAUTHENTICATED", name, err, evs)
		}
	}
	sig, ts := sign(key, body, now)
	unauth("unsigned", body, "", "")
	unauth("no timestamp", body, sig, "")
	unauth("no signature", body, "", ts)
	unauth("another key", body, func() string { s, _ := sign(otherKey, body, now); return s }(), ts)
	unauth("not base64", body, "%%%", ts)
	unauth("not DER", body, "AAAA", ts)
	changed := sendGridBatch(t, map[string]any{"inbox_ref": mail.String(), "event": "bounce", "timestamp": now.Unix()})
	unauth("body changed", changed, sig, ts)
	unauth("timestamp changed", body, sig, ts+"0")
	oldSig, oldTS := sign(key, body, now.Add(-6*time.Minute))
	unauth("replayed after the maximum age", body, oldSig, oldTS)
	aheadSig, aheadTS := sign(key, body, now.Add(2*time.Minute))
	unauth("ahead", body, aheadSig, aheadTS)
	unauth("timestamp not a number", body, sig, "yesterday")
	// Inside the window it holds.
	okSig, okTS := sign(key, body, now.Add(-4*time.Minute))
	if evs, err := sg.Events(sendGridRequest(body, okSig, okTS), body); err != nil || len(evs) != 1 {
		t.Fatalf("4 min old: %v %+v", err, evs)
	}
}

func TestSendGridSignedButUnreadableBatches(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: key.Public, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tooMany := make([]map[string]any, providerhook.MaxEvents+1)
	for i := range tooMany {
		tooMany[i] = map[string]any{"event": "processed"}
	}
	for name, body := range map[string][]byte{
		"not JSON":       []byte("event=delivered"),
		"not an array":   []byte(`{"event":"delivered"}`),
		"over MaxEvents": sendGridBatch(t, tooMany...),
	} {
		sig, ts, err := key.Sign(body, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sg.Events(sendGridRequest(body, sig, ts), body); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v, want BAD_USER_INPUT", name, err)
		}
	}
}

func TestNewSendGridConfiguration(t *testing.T) {
	t.Parallel()
	for name, k := range map[string]string{
		"empty":      "",
		"not base64": "%%%",
		"not DER":    "AAAA",
		// An Ed25519 key: eventwebhook.ConvertPublicKeyBase64ToECDSA would panic on it.
		"not ECDSA": "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=",
	} {
		if _, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: k}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// An event's timestamp is its time only when plausible (within MaxEventAge before the
// callback, at most a minute after): any other timestamp, whatever its form, gives the
// time the callback came, and never loses the event. A year-9999 or 1e18-second time
// once reached the record and made its status unreadable (500); a timestamp that was not
// an int64 made the event be dropped.
func TestSendGridEventTimesArePlausible(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: key.Public, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	secs := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	mail := inbox.DeliveryRef{TenantID: "acme", NotificationID: ref.NotificationID, Key: inbox.ChannelEmail}
	for _, c := range []struct {
		name, timestamp string // the JSON value ("": no timestamp member)
		want            time.Time
	}{
		{"a minute ago", secs(-time.Minute), now.Add(-time.Minute)},
		{"6 days ago", secs(-6 * 24 * time.Hour), now.Add(-6 * 24 * time.Hour)},
		{"30 s ahead (clock skew)", secs(30 * time.Second), now.Add(30 * time.Second)},
		{"fractional seconds", secs(-time.Minute) + ".25", now.Add(-time.Minute + 250*time.Millisecond)},
		{"exponent", "1.79999994e9", time.Unix(1_799_999_940, 0)},
		{"none", "", now},
		{"null", "null", now},
		{"zero", "0", now},
		{"negative", "-5", now},
		{"most negative", "-9223372036854775808", now},
		{"8 days ago", secs(-8 * 24 * time.Hour), now},
		{"5 min ahead", secs(5 * time.Minute), now},
		{"year 10000", "253402300800", now},
		{"1e18 seconds", "1000000000000000000", now},
		{"1e18 as a float", "1e18", now},
		{"max int64", "9223372036854775807", now},
		{"over int64", "99999999999999999999", now},
		{"over float64", "1e400", now},
		{"a string", `"1800000000"`, now},
		{"an object", `{"s":1}`, now},
	} {
		member := ""
		if c.timestamp != "" {
			member = `,"timestamp":` + c.timestamp
		}
		body := []byte(`[{"inbox_ref":"` + mail.String() + `","event":"delivered"` + member + `}]`)
		sig, ts, err := key.Sign(body, now)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := sg.Events(sendGridRequest(body, sig, ts), body)
		if err != nil || len(evs) != 1 {
			t.Errorf("%s: %v %+v, want the event", c.name, err, evs)
			continue
		}
		if !evs[0].At.Equal(c.want) {
			t.Errorf("%s: at %v, want %v", c.name, evs[0].At, c.want)
		}
	}
}

// TestSendGridSuppressingEvents: a hard bounce, a drop and a spam complaint name their
// address for the suppression list (the complaint with no status: it changes no
// record); a "blocked" bounce (temporary), an event without an address and a delivery
// name none.
func TestSendGridSuppressingEvents(t *testing.T) {
	t.Parallel()
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: key.Public, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	mail := inbox.DeliveryRef{TenantID: "acme", NotificationID: ref.NotificationID, Key: inbox.ChannelEmail}
	body := sendGridBatch(t,
		map[string]any{"inbox_ref": mail.String(), "event": "bounce", "type": "bounce", "email": "Kim@Example.test", "reason": "550 5.1.1 unknown user", "timestamp": now.Unix()},
		map[string]any{"inbox_ref": mail.String(), "event": "bounce", "type": "blocked", "email": "kim@example.test", "timestamp": now.Unix()},
		map[string]any{"inbox_ref": mail.String(), "event": "dropped", "email": "kim@example.test", "reason": "Bounced Address", "timestamp": now.Unix()},
		map[string]any{"inbox_ref": mail.String(), "event": "spamreport", "email": "kim@example.test", "timestamp": now.Unix()},
		map[string]any{"inbox_ref": mail.String(), "event": "spamreport", "timestamp": now.Unix()},
		map[string]any{"inbox_ref": mail.String(), "event": "delivered", "email": "kim@example.test", "timestamp": now.Unix()},
	)
	sig, ts, err := key.Sign(body, now)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := sg.Events(sendGridRequest(body, sig, ts), body)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		status, supp, reason string
	}{
		{inbox.DeliveryFailed, "Kim@Example.test", "bounce"},
		{inbox.DeliveryFailed, "", ""},
		{inbox.DeliveryFailed, "kim@example.test", "dropped"},
		{"", "kim@example.test", "spamreport"},
		{inbox.DeliveryDelivered, "", ""},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, w := range want {
		ev := evs[i]
		got, reason := "", ""
		if ev.Suppress != nil {
			got, reason = ev.Suppress.Address, ev.Suppress.Reason
			if ev.Suppress.Channel != inbox.ChannelEmail {
				t.Errorf("event %d: channel %q", i, ev.Suppress.Channel)
			}
		}
		if ev.Status != w.status || got != w.supp || reason != w.reason {
			t.Errorf("event %d: status %q suppress %q (%q), want %q %q (%q)", i, ev.Status, got, reason, w.status, w.supp, w.reason)
		}
	}
}
