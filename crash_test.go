package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/store"
)

// The crash tests of the send pipeline: the only gateway process is killed (SIGKILL)
// after a 202, or in the middle of a broadcast, and gateways started later finish the
// work from what the table holds: every recipient has exactly one notification, the
// badges are exact, the request or broadcast is done.

// crashEnv is the environment of the crash tests' gateways: the scheduler on two shards,
// with leases short enough that a restarted gateway takes the dead one's shards within
// seconds (6 s) and long enough that renewals ride out an engine busy for a second or two
// (with 2 s leases, renewals timed out on a loaded machine and shards stopped); a send's
// recovery task due 1 s after its accept (not 10 s), so that a send left by a killed
// gateway runs as soon as the next one holds the shard.
func crashEnv(t *testing.T, table string, extra ...string) []string {
	return gwEnv(t, table, append([]string{"INBOX_SCHEDULER=true", "INBOX_SCHED_POLL=250ms", "INBOX_SCHED_LEASE=6s",
		"INBOX_SCHED_SHARDS=2", "INBOX_SEND_RECOVERY=1s"}, extra...)...)
}

// restBase is the service API's base URL of a gateway process (its URL without /graphql).
func restBase(gw *testgw.Server) string { return strings.TrimSuffix(gw.URL, "/graphql") }

// rest sends one request to the gateway's /v1 and decodes a JSON answer into out (unless
// nil), failing the test unless the status is want.
func rest(t *testing.T, gw *testgw.Server, method, path, token, key string, body any, want int, out any) http.Header {
	t.Helper()
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testgw.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, restBase(gw)+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, b, err)
		}
	}
	return resp.Header
}

// broadcastProgress is GET /v1/broadcasts/{id}'s answer.
type broadcastProgress struct {
	Status     string `json:"status"`
	Recipients int    `json:"recipients"`
	Written    int    `json:"written"`
	Skipped    int    `json:"skipped"`
	Failed     int    `json:"failed"`
}

// checkExactlyOne checks that each of users of tenant has exactly one notification in
// their inbox, with an unread badge of 1, and returns their notifications' ids by user
// (reads spread over a few goroutines).
func checkExactlyOne(t *testing.T, st *store.Store, tenant string, users []string) map[string]string {
	t.Helper()
	var (
		mu   sync.Mutex
		ids  = map[string]string{}
		errs []string
		wg   sync.WaitGroup
		next = make(chan string)
	)
	two := 2
	for range 8 {
		wg.Go(func() {
			for u := range next {
				v := inbox.Viewer{TenantID: tenant, UserID: u}
				page, err := st.Inbox(t.Context(), v, inbox.PageQuery{First: &two})
				var msg string
				switch {
				case err != nil:
					msg = fmt.Sprintf("%s: %v", u, err)
				case len(page.Nodes()) != 1:
					msg = fmt.Sprintf("%s has %d notifications", u, len(page.Nodes()))
				}
				b, berr := st.Badge(t.Context(), v)
				if msg == "" && (berr != nil || b.Unread != 1) {
					msg = fmt.Sprintf("%s's badge: %+v %v", u, b, berr)
				}
				mu.Lock()
				if msg != "" {
					errs = append(errs, msg)
				} else {
					ids[u] = page.Nodes()[0].ID
				}
				mu.Unlock()
			}
		})
	}
	for _, u := range users {
		next <- u
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d recipients are wrong, e.g. %v", len(errs), len(users), errs[:min(5, len(errs))])
	}
	return ids
}

// A 120-recipient bulk send (two of its chunks of inbox.MaxRecipients) is accepted (202),
// and the only gateway is killed at once: a gateway started later finds the request's
// recovery task and finishes it; every recipient has exactly the notification the 202
// named, once, badge 1, and the request is done.
func TestSendSurvivesAKillRightAfterItsAccept(t *testing.T) {
	// Not parallel, as the broadcast crash test.
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	table := dynlocaltest.TableName(t)
	env := crashEnv(t, table)
	pa, a := startGatewayProc(t, "gateway-A", env)
	st := store.New(dynlocaltest.Client(t), table)
	t.Cleanup(st.Close)
	users := make([]string, inbox.MaxRecipients+20)
	for i := range users {
		users[i] = fmt.Sprintf("u%03d", i)
	}
	var acc struct {
		NotificationIDs []string `json:"notificationIds"`
	}
	rest(t, a, http.MethodPost, "/v1/notifications", a.Token("t1", "svc", auth.ScopeSend), "crash-bulk",
		map[string]any{"recipients": users, "type": "digest", "title": "Weekly digest", "priority": "bulk"}, http.StatusAccepted, &acc)
	pa.kill(syscall.SIGKILL)
	if len(acc.NotificationIDs) != len(users) {
		t.Fatalf("202 with %d ids", len(acc.NotificationIDs))
	}
	r, ok, err := st.GetRequest(t.Context(), "t1", "crash-bulk")
	if err != nil || !ok {
		t.Fatalf("the accepted request is not stored: %v", err)
	}
	t.Logf("at the kill the request was %s", r.State)

	startGatewayProc(t, "gateway-B", env)
	testgw.WaitFor(t, 45*time.Second, "the request done by the restarted gateway", func() bool {
		r, ok, err := st.GetRequest(t.Context(), "t1", "crash-bulk")
		if err != nil {
			t.Fatal(err)
		}
		return ok && r.State == inbox.RequestDone
	})
	ids := checkExactlyOne(t, st, "t1", users)
	for i, u := range users {
		if ids[u] != acc.NotificationIDs[i] {
			t.Fatalf("%s has %s, the 202 named %s", u, ids[u], acc.NotificationIDs[i])
		}
	}
}

// A broadcast to a 160-member segment (16 pages, one per segment shard, of about 10): the
// only gateway is killed in the middle of it,
// a new one resumes it and is killed in the middle too, and a third finishes it: done,
// written = members (each page counted once), every member exactly one notification.
func TestBroadcastSurvivesTwoKillsMidway(t *testing.T) {
	// Not parallel: its writes beside the multi-instance and relay tests made their lease
	// renewals miss on the shared engine.
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	const members = 160
	table := dynlocaltest.TableName(t)
	// One bulk worker: the broadcast's 16 pages are written one at a time, so that the
	// kills land between its first and last page.
	env := crashEnv(t, table, "INBOX_LANE_BULK=1")
	p, gw := startGatewayProc(t, "gateway-A", env)
	st := store.New(dynlocaltest.Client(t), table)
	t.Cleanup(st.Close)
	admin := gw.Token("t1", "svc", auth.ScopeAdmin)
	sender := gw.Token("t1", "svc", auth.ScopeSend)
	users := make([]string, members)
	for i := range users {
		users[i] = fmt.Sprintf("m%04d", i)
	}
	for lo := 0; lo < members; lo += 1000 {
		rest(t, gw, http.MethodPut, "/v1/segments/everyone/members", admin, "",
			map[string]any{"add": users[lo:min(lo+1000, members)]}, http.StatusOK, nil)
	}
	var acc struct {
		BroadcastID string `json:"broadcastId"`
	}
	rest(t, gw, http.MethodPost, "/v1/broadcasts", sender, "crash-bc",
		map[string]any{"segment": "everyone", "type": "launch", "title": "We launched"}, http.StatusAccepted, &acc)
	progress := func() broadcastProgress {
		var bc broadcastProgress
		rest(t, gw, http.MethodGet, "/v1/broadcasts/"+acc.BroadcastID, sender, "", nil, http.StatusOK, &bc)
		return bc
	}
	last := 0
	for kill, name := range []string{"gateway-B", "gateway-C"} {
		var bc broadcastProgress
		testgw.WaitFor(t, 30*time.Second, fmt.Sprintf("the broadcast past %d written (kill %d)", last, kill+1), func() bool {
			bc = progress()
			if bc.Status == inbox.BroadcastDone {
				t.Fatalf("the broadcast finished before kill %d (%+v): the test proves nothing", kill+1, bc)
			}
			return bc.Written > last
		})
		p.kill(syscall.SIGKILL)
		if bc.Written >= members {
			t.Fatalf("every member was written before kill %d (%+v): the test proves nothing", kill+1, bc)
		}
		t.Logf("kill %d at %+v", kill+1, bc)
		last = bc.Written
		p, gw = startGatewayProc(t, name, env)
	}
	var bc broadcastProgress
	testgw.WaitFor(t, 2*time.Minute, "the broadcast done", func() bool {
		bc = progress()
		return bc.Status == inbox.BroadcastDone
	})
	if bc.Recipients != members || bc.Written != members || bc.Skipped != 0 || bc.Failed != 0 {
		t.Fatalf("done: %+v", bc)
	}
	checkExactlyOne(t, st, "t1", users)
}
