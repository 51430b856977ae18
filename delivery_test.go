package main

// The channel deliveries with the built binary: an email sent through REST reaches a real
// SMTP server with the template's parts and its record ends SENT; a gateway killed (kill
// -9) between the provider's acceptance and the record's update never sends it again; a
// provider failing then recovering gets the message once, after retries.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/channel/channeltest"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/store"
)

// tasksDone reads from gw's /metrics how many tasks of kind its scheduler ran to the end
// (done: the handler succeeded and the task was deleted).
func tasksDone(t *testing.T, gw *testgw.Server, kind string) int {
	t.Helper()
	resp, err := http.Get(restBase(gw) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	prefix := fmt.Sprintf(`inbox_sched_tasks_total{kind=%q,outcome="done"} `, kind)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %q", line)
			}
			return int(n)
		}
	}
	return 0
}

// deliveryFrom is the sender the delivery tests' gateways send email as.
const deliveryFrom = "Inbox Tests <inbox@example.test>"

// emailSend sets up user u1 of tenant t1 with an email address and a template "welcome"
// with an email part, sends it to u1 through REST (idempotency key key) and returns the
// notification's id.
func emailSend(t *testing.T, gw *testgw.Server, key string) string {
	t.Helper()
	tok := gw.Token("t1", "svc", auth.ScopeSend, auth.ScopeAdmin)
	rest(t, gw, http.MethodPut, "/v1/users/u1", tok, "", map[string]any{"email": "u1@example.test"}, http.StatusOK, nil)
	rest(t, gw, http.MethodPut, "/v1/templates/welcome", tok, "", map[string]any{
		"locale": "en", "title": "Welcome {{ name }}", "body": "In-app hello",
		"email": map[string]any{"subject": "Welcome, {{ name }}", "html": "<p>Hello <b>{{ name }}</b></p>", "text": "Hello {{ name }}, plain"},
	}, http.StatusOK, nil)
	var acc struct {
		NotificationID string `json:"notificationId"`
	}
	rest(t, gw, http.MethodPost, "/v1/notifications", tok, key, map[string]any{
		"recipientUserId": "u1", "type": "welcome", "template": "welcome", "data": map[string]any{"name": "Ada & <Bob>"},
	}, http.StatusAccepted, &acc)
	if acc.NotificationID == "" {
		t.Fatal("202 without a notificationId")
	}
	return acc.NotificationID
}

// emailRecord returns notification id's EMAIL delivery record of tenant t1 (ok false
// while there is none, or no status yet).
func emailRecord(t *testing.T, st *store.Store, id string) (inbox.ChannelStatus, bool) {
	t.Helper()
	s, err := st.Status(t.Context(), "t1", id)
	if inbox.ErrorCode(err) == inbox.CodeNotFound {
		return inbox.ChannelStatus{}, false // accepted (202), not written yet
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Channels {
		if c.Channel == inbox.ChannelEmail {
			return c, true
		}
	}
	return inbox.ChannelStatus{}, false
}

// waitEmailRecord waits until id's EMAIL record is no longer QUEUED and returns it.
func waitEmailRecord(t *testing.T, st *store.Store, id string, within time.Duration) inbox.ChannelStatus {
	t.Helper()
	var c inbox.ChannelStatus
	testgw.WaitFor(t, within, "the EMAIL record leaves QUEUED", func() bool {
		var ok bool
		c, ok = emailRecord(t, st, id)
		return ok && c.Status != inbox.DeliveryQueued
	})
	return c
}

// A REST send with a template that has an email part, to a user whose profile has an
// email address: a real SMTP server receives one message with the rendered subject, HTML
// (escaped) and text parts, from the configured sender to the profile's address, and the
// record ends SENT after one attempt with the message's id.
func TestDeliveryEmailEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway process")
	}
	t.Parallel()
	smtpSrv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	table := dynlocaltest.TableName(t)
	_, gw := startGatewayProc(t, "gateway", crashEnv(t, table, "INBOX_SMTP_URL="+smtpSrv.URL(), "INBOX_EMAIL_FROM="+deliveryFrom))
	st := store.New(dynlocaltest.Client(t), table)
	t.Cleanup(st.Close)

	id := emailSend(t, gw, "welcome-e2e")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	msgs, err := smtpSrv.WaitMessages(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[0]
	if m.Subject != "Welcome, Ada & <Bob>" || m.Text != "Hello Ada & <Bob>, plain" || !strings.Contains(m.HTML, "<p>Hello <b>Ada &amp; &lt;Bob&gt;</b></p>") {
		t.Errorf("message parts: subject %q, text %q, html %q", m.Subject, m.Text, m.HTML)
	}
	if len(m.To) != 1 || m.To[0] != "u1@example.test" || m.From != "inbox@example.test" {
		t.Errorf("envelope from %q to %v", m.From, m.To)
	}
	c := waitEmailRecord(t, st, id, 30*time.Second)
	if c.Status != inbox.DeliverySent || c.Attempts != 1 || c.Provider != "smtp" || c.Error != "" || c.SentAt.IsZero() {
		t.Fatalf("record %+v, want SENT by smtp after 1 attempt", c)
	}
	if c.ProviderMessageID == "" || c.ProviderMessageID != strings.Trim(m.MessageID, "<>") && c.ProviderMessageID != m.MessageID {
		t.Errorf("record's provider message id %q, the message's Message-ID %q", c.ProviderMessageID, m.MessageID)
	}
	if got := len(smtpSrv.Messages()); got != 1 {
		t.Fatalf("the SMTP server received %d messages, want 1", got)
	}
}

// The only gateway is killed (SIGKILL) after the SMTP server accepted the message (its
// DATA reply withheld, so the gateway cannot record it) and before the record's update:
// a gateway started later finds the expired claim and marks the record SENT with an
// "unconfirmed" error without sending it again. The server received it exactly once.
func TestDeliveryKillBetweenAcceptAndRecordSendsOnce(t *testing.T) {
	// Not parallel, as the other crash tests.
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	smtpSrv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	smtpSrv.Hold(channeltest.StepData)
	table := dynlocaltest.TableName(t)
	// A 5 s attempt: the claim lasts 10 s, well past the kill.
	env := crashEnv(t, table, "INBOX_SMTP_URL="+smtpSrv.URL(), "INBOX_EMAIL_FROM="+deliveryFrom, "INBOX_DELIVERY_TIMEOUT=5s")
	pa, a := startGatewayProc(t, "gateway-A", env)
	st := store.New(dynlocaltest.Client(t), table)
	t.Cleanup(st.Close)

	id := emailSend(t, a, "welcome-crash")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := smtpSrv.WaitMessages(ctx, 1); err != nil {
		t.Fatal(err)
	}
	pa.kill(syscall.SIGKILL)
	c, ok := emailRecord(t, st, id)
	if !ok || c.Status != inbox.DeliveryQueued || c.Attempts != 1 {
		t.Fatalf("at the kill the record is %+v (found %v), want QUEUED under its first claim", c, ok)
	}
	// The server answers the dead connection; nothing more is held.
	smtpSrv.Release()

	_, b := startGatewayProc(t, "gateway-B", env)
	c = waitEmailRecord(t, st, id, 60*time.Second)
	if c.Status != inbox.DeliverySent || !strings.HasPrefix(c.Error, "unconfirmed") || c.Attempts != 1 {
		t.Fatalf("record %+v, want SENT unconfirmed after 1 attempt", c)
	}
	// The task is done (its run ended and it was deleted): nothing is sent later either.
	testgw.WaitFor(t, 30*time.Second, "gateway-B's delivery task done", func() bool {
		return tasksDone(t, b, inbox.TaskDeliver) >= 1
	})
	if got := len(smtpSrv.Messages()); got != 1 {
		t.Fatalf("the SMTP server received %d messages, want exactly 1", got)
	}
	if again, _ := emailRecord(t, st, id); again.Status != inbox.DeliverySent || again.Attempts != 1 {
		t.Fatalf("the record moved on: %+v", again)
	}
}

// The SMTP server fails the first two attempts with a transient reply (451 at DATA, the
// message not kept) and then accepts: the delivery is retried after its backoff, the
// server keeps exactly one message, and the record ends SENT after 3 attempts.
func TestDeliveryRetriesATransientFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway process")
	}
	t.Parallel()
	smtpSrv := channeltest.StartSMTP(t, channeltest.SMTPOptions{})
	smtpSrv.Fail(channeltest.StepData, 451, [3]int{4, 3, 0}, "try again later", 2)
	table := dynlocaltest.TableName(t)
	// A ten-minute safety-net poll: each retry runs at its time because writing its task
	// woke the scheduler, not because a poll found it.
	_, gw := startGatewayProc(t, "gateway", crashEnv(t, table, "INBOX_SMTP_URL="+smtpSrv.URL(), "INBOX_EMAIL_FROM="+deliveryFrom,
		"INBOX_DELIVERY_BACKOFF=300ms", "INBOX_DELIVERY_ATTEMPTS=4", "INBOX_SCHED_POLL=10m"))
	st := store.New(dynlocaltest.Client(t), table)
	t.Cleanup(st.Close)

	id := emailSend(t, gw, "welcome-retry")
	var seenRetry bool
	var c inbox.ChannelStatus
	testgw.WaitFor(t, 60*time.Second, "the EMAIL record SENT", func() bool {
		var ok bool
		c, ok = emailRecord(t, st, id)
		if ok && c.Status == inbox.DeliveryQueued && strings.Contains(c.Error, "451") {
			seenRetry = true // between attempts: the failure is on the record
		}
		return ok && c.Status != inbox.DeliveryQueued
	})
	if c.Status != inbox.DeliverySent || c.Attempts != 3 || c.Error != "" {
		t.Fatalf("record %+v (a retry seen: %v), want SENT after 3 attempts", c, seenRetry)
	}
	if got := len(smtpSrv.Messages()); got != 1 {
		t.Fatalf("the SMTP server kept %d messages, want 1", got)
	}
	t.Logf("a QUEUED record with the failure was seen between attempts: %v", seenRetry)
}
