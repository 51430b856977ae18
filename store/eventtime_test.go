package store

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// A provider event's time is stored only when it can have happened and can be shown: a
// zero time, one after now (year 9999, 1e18 seconds, a clock ahead) or one before 1970
// is stored as now.
func TestEventAtIsAShowableTimeNotAfterNow(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"a minute ago", now.Add(-time.Minute), now.Add(-time.Minute)},
		{"a year ago", now.AddDate(-1, 0, 0), now.AddDate(-1, 0, 0)},
		{"now", now, now},
		{"zero", time.Time{}, now},
		{"a second ahead", now.Add(time.Second), now},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), now},
		{"1e18 seconds", time.Unix(1e18, 0), now},
		{"max int64 seconds", time.Unix(1<<63-1, 0), now},
		{"the epoch", time.Unix(0, 0), now},
		{"negative seconds", time.Unix(-5, 0), now},
		{"min int64 seconds", time.Unix(-1<<63, 0), now},
	} {
		got := eventAt(c.at, now)
		if !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if ms := got.UnixMilli(); ms <= 0 || ms > maxShownMillis {
			t.Errorf("%s: %d ms cannot be shown", c.name, ms)
		}
	}
}

// Whatever time a delivery record holds, its status reads and can be shown (JSON): a
// time that is not an integer, does not fit an int64, is not a number, or is past year
// 9999 or before 1970 is left out. A record of a year-10000 deliveredAt, which
// providers' events could store before their times were checked, made GET
// /v1/notifications/{id}/status answer 500 for good.
func TestStatusReadsWhateverTimeARecordHolds(t *testing.T) {
	t.Parallel()
	const id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	ok := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	summary, err := attributevalue.MarshalMap(statusItem{PK: notifStatusPK("acme", id), SK: skStatusSummary,
		EntityType: entityStatusSummary, UserID: "u", Status: inbox.NotificationWritten, CreatedAt: ok.UnixMilli(), UpdatedAt: ok.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, c := range []struct {
		name string
		av   types.AttributeValue
		want time.Time
	}{
		{"plausible", n("1803902400000"), ok},
		{"year 10000", n("253402300800000"), time.Time{}},
		{"wrapped around below zero", n("-3875820019684212736"), time.Time{}},
		{"max int64", n("9223372036854775807"), time.Time{}},
		{"over int64", n("99999999999999999999999"), time.Time{}},
		{"a fraction", n("1803902400000.5"), time.Time{}},
		{"an exponent", n("1.8e12"), time.Time{}},
		{"negative", n("-5000"), time.Time{}},
		{"a string", &types.AttributeValueMemberS{Value: "yesterday"}, time.Time{}},
		{"null", &types.AttributeValueMemberNULL{Value: true}, time.Time{}},
	} {
		rec, err := attributevalue.MarshalMap(statusItem{PK: notifStatusPK("acme", id), SK: deliverySK(inbox.ChannelEmail),
			EntityType: entityDelivery, Channel: inbox.ChannelEmail, Status: inbox.DeliveryOpened, Provider: "smtp", Attempts: 1,
			SentAt: ok.UnixMilli(), UpdatedAt: ok.UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		rec[attrDeliveredAt], rec[attrOpenedAt] = c.av, c.av
		st, err := statusOf(id, []map[string]types.AttributeValue{summary, rec})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(st.Channels) != 1 || !st.Channels[0].DeliveredAt.Equal(c.want) || !st.Channels[0].OpenedAt.Equal(c.want) ||
			!st.Channels[0].SentAt.Equal(ok) || !st.CreatedAt.Equal(ok) {
			t.Errorf("%s: %+v, want deliveredAt and openedAt %v", c.name, st, c.want)
		}
		if _, err := json.Marshal(st); err != nil {
			t.Errorf("%s: the status cannot be shown: %v", c.name, err)
		}
	}
	// Any of the record's other times past year 9999 is left out too.
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	rec, err := attributevalue.MarshalMap(statusItem{PK: notifStatusPK("acme", id), SK: deliverySK(inbox.ChannelSMS),
		EntityType: entityDelivery, Channel: inbox.ChannelSMS, Status: inbox.DeliveryDelivered, SentAt: far, UpdatedAt: far,
		DeliveredAt: lenientMillis(far), DeferredUntil: far})
	if err != nil {
		t.Fatal(err)
	}
	st, err := statusOf(id, []map[string]types.AttributeValue{summary, rec})
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Channels[0]; !c.SentAt.IsZero() || !c.UpdatedAt.IsZero() || !c.DeliveredAt.IsZero() || !c.DeferredUntil.IsZero() {
		t.Fatalf("far-future times kept: %+v", c)
	}
	if _, err := json.Marshal(st); err != nil {
		t.Fatalf("the status cannot be shown: %v", err)
	}
}
