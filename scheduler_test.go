package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/internal/testgw"
)

// A snooze's wake-up and an expiry are durable: the gateway that accepted them (its
// scheduler off, so that it cannot run them itself, however slow the machine) is killed
// (SIGKILL), and a gateway started later (a new process) wakes the snoozed notification
// (back in the list and the badge, unread) and expires the other (gone, out of the badge).
// Taking over a killed instance's shards is the crash tests' (crash_test.go) and package
// sched's to prove.
func TestSnoozeAndExpiryOutliveACrashOfEveryInstance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	table := dynlocaltest.TableName(t)
	env := gwEnv(t, table, "INBOX_SCHEDULER=true", "INBOX_SCHED_POLL=250ms", "INBOX_SCHED_LEASE=6s", "INBOX_SCHED_SHARDS=2")
	pa, a := startGatewayProc(t, "gateway-A", append(env, "INBOX_SCHEDULER=false"))
	sender := a.Token("t1", "svc", auth.ScopeSend)
	alice := a.Token("t1", "alice")
	ids := a.Seed(sender, "alice", 2)

	// Soon: gateway-A never runs it (no scheduler), whenever it dies.
	wake := time.Now().Add(2 * time.Second).UTC()
	var sn struct {
		Snooze struct {
			Badge struct{ Unread int } `json:"badge"`
		} `json:"snooze"`
	}
	a.MustData(alice, `mutation($ids: [ID!]!, $until: Time!) { snooze(ids: $ids, until: $until) { badge { unread } } }`,
		map[string]any{"ids": []string{ids[0]}, "until": wake.Format(time.RFC3339Nano)}, &sn)
	if sn.Snooze.Badge.Unread != 1 {
		t.Fatalf("badge after snooze: %d, want 1", sn.Snooze.Badge.Unread)
	}
	in := a.SendInput("expiring", "alice")
	in["expiresAt"] = wake.Format(time.RFC3339Nano)
	expiring := a.Send(sender, in).NotificationIds[0]
	a.ExpectUnread(alice, 2, "after the expiring send")

	pa.kill(syscall.SIGKILL)
	_, b := startGatewayProc(t, "gateway-B", env)
	want := fmt.Sprint([]string{ids[1], ids[0]})
	testgw.WaitFor(t, 60*time.Second, "the woken notification back in the list and the expired one out", func() bool {
		return fmt.Sprint(b.InboxIDs(alice)) == want
	})
	b.ExpectUnread(alice, 2, "after the wake-up and the expiry")
	var d struct {
		Viewer struct {
			Woken *struct {
				Read         bool
				SnoozedUntil *string
			} `json:"woken"`
			Expired *struct{ ID string } `json:"expired"`
		} `json:"viewer"`
	}
	b.MustData(alice, `query($w: ID!, $e: ID!) { viewer { woken: notification(id: $w) { read snoozedUntil } expired: notification(id: $e) { id } } }`,
		map[string]any{"w": ids[0], "e": expiring}, &d)
	if d.Viewer.Woken == nil || d.Viewer.Woken.Read || d.Viewer.Woken.SnoozedUntil != nil {
		t.Fatalf("woken notification: %+v", d.Viewer.Woken)
	}
	if d.Viewer.Expired != nil {
		t.Fatalf("expired notification still there: %+v", d.Viewer.Expired)
	}
}
