package store

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// TestStatusDerivesInApp checks that the status of a send whose in-app record is not
// stored (addStatus writes none) answers exactly what it answered when the record was
// stored, as the send wrote it before: DELIVERED by provider inbox, one attempt, at
// createdAt, for a written notification; SKIPPED with in-app's reason for a skipped one;
// beside the other channels' records, in channel order. A stored in-app record (written
// before) is answered as stored and never doubled.
func TestStatusDerivesInApp(t *testing.T) {
	t.Parallel()
	const id, user, ms = "01JBX0000000000000000000AA", "ada", int64(1767225600123)
	pk := notifStatusPK("acme", id)
	ttl := int64(1769817600)
	summary := func(status, reason string) statusItem {
		return statusItem{PK: pk, SK: skStatusSummary, EntityType: entityStatusSummary, UserID: user,
			Status: status, Reason: reason, CreatedAt: ms, UpdatedAt: ms, TTL: ttl}
	}
	record := func(channel, status, reason string) statusItem {
		return statusItem{PK: pk, SK: deliverySK(channel), EntityType: entityDelivery, UserID: user,
			Channel: channel, Status: status, Reason: reason, CreatedAt: ms, UpdatedAt: ms, TTL: ttl}
	}
	// The in-app record as addStatus wrote it before it was derived.
	delivered := record(inbox.ChannelInApp, inbox.DeliveryDelivered, "")
	delivered.Provider, delivered.Attempts, delivered.SentAt, delivered.DeliveredAt = inbox.ProviderInbox, 1, ms, lenientMillis(ms)
	email := record(inbox.ChannelEmail, inbox.DeliveryQueued, "")
	email.To, email.Subject, email.Text = "ada@example.com", "Hi", "Hello"
	sms := record(inbox.ChannelSMS, inbox.DeliverySkipped, inbox.ReasonNoPhone)
	cases := []struct {
		name          string
		stored, today []statusItem
	}{
		{"in-app only", []statusItem{summary(inbox.NotificationWritten, "")},
			[]statusItem{summary(inbox.NotificationWritten, ""), delivered}},
		{"in-app and email, sms skipped", []statusItem{sms, summary(inbox.NotificationWritten, ""), email},
			[]statusItem{summary(inbox.NotificationWritten, ""), delivered, email, sms}},
		{"in-app skipped", []statusItem{summary(inbox.NotificationSkipped, inbox.ReasonCategoryOptedOut), email},
			[]statusItem{summary(inbox.NotificationSkipped, inbox.ReasonCategoryOptedOut),
				record(inbox.ChannelInApp, inbox.DeliverySkipped, inbox.ReasonCategoryOptedOut), email}},
		{"throttled", []statusItem{summary(inbox.NotificationSkipped, inbox.ReasonThrottled)},
			[]statusItem{summary(inbox.NotificationSkipped, inbox.ReasonThrottled),
				record(inbox.ChannelInApp, inbox.DeliverySkipped, inbox.ReasonThrottled)}},
		{"stored record kept", []statusItem{summary(inbox.NotificationWritten, ""), delivered},
			[]statusItem{summary(inbox.NotificationWritten, ""), delivered}},
	}
	for _, c := range cases {
		got, err := statusOf(id, marshalStatus(t, c.stored))
		got = withInApp(got)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := statusOf(id, marshalStatus(t, c.today))
		want = withInApp(want) // adds nothing: today's records hold in-app's
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: derived\n%+v\nstored\n%+v", c.name, got, want)
		}
		if n := len(want.Channels); n == 0 || want.Channels[0].Channel != inbox.ChannelInApp {
			t.Errorf("%s: today's answer has no in-app record first: %+v", c.name, want.Channels)
		}
	}
	// A summary that says neither written nor skipped (one a later send state writes)
	// gets no in-app record it cannot know.
	got, err := statusOf(id, marshalStatus(t, []statusItem{summary("batching", "")}))
	if got = withInApp(got); err != nil || len(got.Channels) != 0 {
		t.Errorf("batching summary: %+v, %v; want no records", got, err)
	}
}

func marshalStatus(t *testing.T, items []statusItem) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	for _, it := range items {
		av, err := attributevalue.MarshalMap(it)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, av)
	}
	return out
}

// TestStatusSummaryCarriedByRecords checks that a send that stored delivery records
// and no summary item (addStatus: each record carries the summary's status and reason)
// answers exactly what it answered with the summary item stored: the user, the status,
// the reason, createdAt, in-app derived from them, every record as stored; that a
// summary item, when there is one, is the summary whatever the records carry; and that
// records that carry no summary (written with a summary item that is gone) are NOT_FOUND
// as before.
func TestStatusSummaryCarriedByRecords(t *testing.T) {
	t.Parallel()
	const id, user, ms = "01JBX0000000000000000000AB", "ada", int64(1767225600123)
	pk := notifStatusPK("acme", id)
	ttl := int64(1769817600)
	summary := func(status, reason string) statusItem {
		return statusItem{PK: pk, SK: skStatusSummary, EntityType: entityStatusSummary, UserID: user,
			Status: status, Reason: reason, CreatedAt: ms, UpdatedAt: ms, TTL: ttl}
	}
	record := func(channel, status, reason string) statusItem {
		return statusItem{PK: pk, SK: deliverySK(channel), EntityType: entityDelivery, UserID: user,
			Channel: channel, Status: status, Reason: reason, CreatedAt: ms, UpdatedAt: ms, TTL: ttl}
	}
	carrying := func(it statusItem, status, reason string) statusItem {
		it.NotifStatus, it.NotifReason = status, reason
		return it
	}
	email := record(inbox.ChannelEmail, inbox.DeliveryQueued, "")
	email.To, email.Subject, email.Text = "ada@example.com", "Hi", "Hello"
	sent := record(inbox.ChannelEmail, inbox.DeliverySent, "")
	sent.Provider, sent.Attempts, sent.SentAt, sent.UpdatedAt = "smtp", 1, ms+5000, ms+5000
	sms := record(inbox.ChannelSMS, inbox.DeliverySkipped, inbox.ReasonNoPhone)
	written, skipped := inbox.NotificationWritten, inbox.NotificationSkipped
	cases := []struct {
		name          string
		stored, today []statusItem
	}{
		{"in-app and email, sms skipped",
			[]statusItem{carrying(email, written, ""), carrying(sms, written, "")},
			[]statusItem{summary(written, ""), email, sms}},
		{"email sent since",
			[]statusItem{carrying(sent, written, "")},
			[]statusItem{summary(written, ""), sent}},
		{"in-app skipped",
			[]statusItem{carrying(email, skipped, inbox.ReasonCategoryOptedOut)},
			[]statusItem{summary(skipped, inbox.ReasonCategoryOptedOut), email}},
		{"throttled",
			[]statusItem{carrying(record(inbox.ChannelEmail, inbox.DeliverySkipped, inbox.ReasonThrottled), skipped, inbox.ReasonThrottled)},
			[]statusItem{summary(skipped, inbox.ReasonThrottled), record(inbox.ChannelEmail, inbox.DeliverySkipped, inbox.ReasonThrottled)}},
		{"summary item wins",
			[]statusItem{carrying(email, skipped, inbox.ReasonMuted), summary(written, "")},
			[]statusItem{summary(written, ""), email}},
	}
	for _, c := range cases {
		got, err := statusOf(id, marshalStatus(t, c.stored))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := statusOf(id, marshalStatus(t, c.today))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want = withInApp(got), withInApp(want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: carried\n%+v\nsummary item\n%+v", c.name, got, want)
		}
		if want.UserID != user || want.CreatedAt.UnixMilli() != ms || len(want.Channels) == 0 || want.Channels[0].Channel != inbox.ChannelInApp {
			t.Errorf("%s: the summary item's answer %+v is not the send's", c.name, want)
		}
	}
	if _, err := statusOf(id, marshalStatus(t, []statusItem{email})); inbox.ErrorCode(err) != inbox.CodeNotFound {
		t.Errorf("records without a summary: %v, want NOT_FOUND", err)
	}
}
