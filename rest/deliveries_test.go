package rest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/store"
)

// delivery is GraphQL's Delivery.
type delivery struct {
	Channel   string    `json:"channel"`
	Status    string    `json:"status"`
	Provider  *string   `json:"provider"`
	Attempts  int       `json:"attempts"`
	UpdatedAt time.Time `json:"updatedAt"`
	Error     *string   `json:"error"`
	// What REST's status has too.
	Key               string     `json:"key"`
	DeviceID          *string    `json:"deviceId"`
	ProviderMessageID *string    `json:"providerMessageId"`
	SentAt            *time.Time `json:"sentAt"`
	DeliveredAt       *time.Time `json:"deliveredAt"`
	OpenedAt          *time.Time `json:"openedAt"`
	DeferredUntil     *time.Time `json:"deferredUntil"`
}

const deliveriesQuery = `{ viewer { inbox(first: 10) { nodes { id deliveries { channel status provider attempts updatedAt error
	key deviceId providerMessageId sentAt deliveredAt openedAt deferredUntil } } } } }`

// inboxDeliveries runs deliveriesQuery with token: each notification's deliveries.
func inboxDeliveries(t *testing.T, s *testgw.Server, token string) [][]delivery {
	t.Helper()
	var data struct {
		Viewer struct {
			Inbox struct {
				Nodes []struct {
					ID         string     `json:"id"`
					Deliveries []delivery `json:"deliveries"`
				} `json:"nodes"`
			} `json:"inbox"`
		} `json:"viewer"`
	}
	s.MustData(token, deliveriesQuery, nil, &data)
	var out [][]delivery
	for _, n := range data.Viewer.Inbox.Nodes {
		out = append(out, n.Deliveries)
	}
	return out
}

// Notification.deliveries answers the viewer's records (one Query each), the same the
// REST status has; a notification in another user's inbox under the same id (so its
// status partition is the first user's) answers none: the records are never another
// user's. Its cost counts one read per notification.
func TestGraphQLDeliveriesAreTheViewersOwn(t *testing.T) {
	t.Parallel()
	rec := &ddbtrace.Recorder{}
	s := testgw.NewWith(t, testgw.Options{DynamoDB: []func(*dynamodb.Options){rec.Option()}})
	ref := sentRecord(t, s, "alice", inbox.ChannelSMS, channel.ProviderTwilio, "SM0001")
	st, err := s.Store.Status(t.Context(), tenant, ref.NotificationID)
	if err != nil {
		t.Fatal(err)
	}

	rec.Reset()
	got := inboxDeliveries(t, s, s.Token(tenant, "alice"))
	if len(got) != 1 || len(got[0]) != len(st.Channels) {
		t.Fatalf("alice's deliveries %+v, status %+v", got, st.Channels)
	}
	if n := rec.Count("Query"); n != 2 { // the inbox page, and the one notification's status
		t.Errorf("%d Query calls (%v), want 2", n, rec.Ops())
	}
	for i, d := range got[0] {
		c := st.Channels[i]
		if d.Channel != c.Channel || d.Status != c.Status || d.Attempts != c.Attempts || d.UpdatedAt.IsZero() {
			t.Errorf("delivery %d: %+v, record %+v", i, d, c)
		}
	}
	sms := slices.IndexFunc(got[0], func(d delivery) bool { return d.Channel == inbox.ChannelSMS })
	if sms < 0 || got[0][sms].Status != inbox.DeliverySent || got[0][sms].Provider == nil || *got[0][sms].Provider != "twilio" || got[0][sms].Attempts != 1 {
		t.Fatalf("SMS delivery: %+v", got[0])
	}
	if d := got[0][sms]; d.Key != "SMS" || d.ProviderMessageID == nil || *d.ProviderMessageID != "SM0001" || d.SentAt == nil ||
		d.DeliveredAt != nil || d.OpenedAt != nil || d.DeferredUntil != nil || d.DeviceID != nil {
		t.Fatalf("SMS delivery's record fields: %+v", d)
	}
	inApp := slices.IndexFunc(got[0], func(d delivery) bool { return d.Channel == inbox.ChannelInApp })
	if inApp < 0 || got[0][inApp].Status != inbox.DeliveryDelivered {
		t.Fatalf("in-app delivery: %+v", got[0])
	}
	skipped := slices.IndexFunc(got[0], func(d delivery) bool { return d.Status == inbox.DeliverySkipped })
	if skipped >= 0 && got[0][skipped].Error == nil {
		t.Errorf("a skipped delivery without its reason: %+v", got[0][skipped])
	}

	// bob's inbox holds a notification with alice's notification's id (written as an
	// outside service would): its status partition is alice's, so bob sees no records.
	item, err := store.OutsideNotificationItem(inbox.Viewer{TenantID: tenant, UserID: "bob"}, inbox.Notification{ID: ref.NotificationID, Type: "otp", Title: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: item}); err != nil {
		t.Fatal(err)
	}
	if bob := inboxDeliveries(t, s, s.Token(tenant, "bob")); len(bob) != 1 || len(bob[0]) != 0 {
		t.Fatalf("bob's deliveries: %+v", bob)
	}
	// A notification without status records (written by an outside service) has none.
	item, err = store.OutsideNotificationItem(inbox.Viewer{TenantID: tenant, UserID: "carol"}, inbox.Notification{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Type: "otp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: item}); err != nil {
		t.Fatal(err)
	}
	if carol := inboxDeliveries(t, s, s.Token(tenant, "carol")); len(carol) != 1 || len(carol[0]) != 0 {
		t.Fatalf("carol's deliveries: %+v", carol)
	}

	// The cost: each notification's deliveries are a read; 50 of them exceed the default
	// limit (5000), 40 fit.
	s.ExpectError(s.Token(tenant, "alice"), `{ viewer { inbox(first: 50) { nodes { deliveries { status } } } } }`, nil, "COMPLEXITY_LIMIT_EXCEEDED")
	s.MustData(s.Token(tenant, "alice"), `{ viewer { inbox(first: 40) { nodes { deliveries { status } } } } }`, nil, nil)
}
