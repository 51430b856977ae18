package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// statusStub answers each notification's status with one EMAIL record, skipped
// opted_out, and NOT_FOUND for "gone".
type statusStub struct{ calls int }

func (s *statusStub) Status(_ context.Context, tenantID, id string) (inbox.NotificationStatus, error) {
	s.calls++
	if id == "gone" {
		return inbox.NotificationStatus{}, inbox.Errorf(inbox.CodeNotFound, "notification status not found")
	}
	return inbox.NotificationStatus{ID: id, Channels: []inbox.ChannelStatus{{Channel: inbox.ChannelEmail, Status: inbox.DeliverySkipped, Reason: inbox.ReasonOptedOut}}}, nil
}

// The recorder keeps the last devRecentSends recipients, each once (a replay moves it to
// the newest), and lists them newest first, leaving out a status gone.
func TestRecentSendsKeepsTheLastRecipientsOnce(t *testing.T) {
	r := &recentSends{now: func() time.Time { return time.Unix(0, 0) }}
	var users []string
	ids := map[string]string{}
	for i := range devRecentSends + 2 {
		u := fmt.Sprintf("u%d", i)
		users = append(users, u)
		ids[u] = fmt.Sprintf("n%d", i)
	}
	users = append(users, "skipped-without-status")
	r.record("t", users, inbox.SendResult{StatusIDs: ids})
	r.record("t", []string{"u5"}, inbox.SendResult{StatusIDs: map[string]string{"u5": "n5"}})
	r.record("t", []string{"old"}, inbox.SendResult{StatusIDs: map[string]string{"old": "gone"}})
	st := &statusStub{}
	out, err := r.outcomes(st)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.calls != devRecentSends {
		t.Fatalf("%d status reads, want %d", st.calls, devRecentSends)
	}
	// The first send kept n2..n11; the replay moved n5 to the newest; "gone" pushed n2
	// out and is left out of the list, read newest first.
	want := []string{"n5", "n11", "n10", "n9", "n8", "n7", "n6", "n4", "n3"}
	if len(out) != len(want) {
		t.Fatalf("outcomes %+v, want notifications %v", out, want)
	}
	for i, o := range out {
		if o.NotificationID != want[i] || o.Reason != inbox.ReasonOptedOut || o.Explain == "" || o.Channel != inbox.ChannelEmail {
			t.Fatalf("outcome %d: %+v, want notification %s skipped opted_out", i, o, want[i])
		}
	}
}
