package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// postSend posts body to gw's /v1/notifications with key and returns the status and the
// accepted ids (0 and nil when the gateway did not answer).
func postSend(gw *testgw.Server, token, key string, body any) (int, []string) {
	js, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), testgw.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, restBase(gw)+"/v1/notifications", bytes.NewReader(js))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var acc struct {
		NotificationIDs []string `json:"notificationIds"`
	}
	_ = json.Unmarshal(b, &acc)
	return resp.StatusCode, acc.NotificationIDs
}

// A send whose gateway is killed (SIGKILL) once the request is stored, before or after
// its answer, and that the client then retries with the same key on a new gateway, twice
// at once: both retries name the same notifications, and every recipient has exactly
// one, badge 1, the request done.
func TestSendKilledMidwayRetriedOnAnotherGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	env, pa, a, st, users := startCrashRetry(t, "r%02d", 40)
	body := map[string]any{"recipients": users, "type": "digest", "title": "Weekly digest"}
	tok := a.Token("t1", "svc", auth.ScopeSend)
	first := make(chan int, 1)
	go func() {
		s, _ := postSend(a, tok, "crash-retry", body)
		first <- s
	}()
	testgw.WaitFor(t, 30*time.Second, "the request stored", func() bool {
		_, ok, err := st.GetRequest(t.Context(), "t1", "crash-retry")
		return err == nil && ok
	})
	pa.kill(syscall.SIGKILL)
	t.Logf("the first try answered %d", <-first)

	_, b := startGatewayProc(t, "gateway-B", env)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen [][]string
	)
	for range 2 {
		wg.Go(func() {
			s, ids := postSend(b, tok, "crash-retry", body)
			mu.Lock()
			defer mu.Unlock()
			if s != http.StatusAccepted && s != http.StatusOK {
				t.Errorf("retry answered %d", s)
			}
			seen = append(seen, ids)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if len(seen[0]) != len(users) || !slices.Equal(seen[0], seen[1]) {
		t.Fatalf("the retries named %v and %v", seen[0], seen[1])
	}
	testgw.WaitFor(t, 45*time.Second, "the request done", func() bool {
		r, ok, err := st.GetRequest(t.Context(), "t1", "crash-retry")
		if err != nil {
			t.Fatal(err)
		}
		return ok && r.State == inbox.RequestDone
	})
	ids := checkExactlyOne(t, st, "t1", users)
	for i, u := range users {
		if ids[u] != seen[0][i] {
			t.Fatalf("%s has %s, the retry named %s", u, ids[u], seen[0][i])
		}
	}
}

// A GraphQL send to users who already have a read and an unread notification is killed
// (SIGKILL) once its request is stored; the client retries it on a new gateway and at once
// marks half of the new notifications read, while the new gateway may still be writing
// them. Once the request is done every user has exactly the one new notification the
// retry named, and the badge equals a recount of the unread notifications.
func TestGraphQLSendKilledMidwayBadgeMatchesRecount(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	env, pa, a, st, users := startCrashRetry(t, "g%d", 8)
	for i := range 2 {
		res, err := service.Writer{Store: st}.Send(t.Context(), "t1", inbox.SendInput{IdempotencyKey: fmt.Sprintf("pre-%d", i), Recipients: users, Type: "pre", Title: "before"})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			for j, u := range users {
				if _, err := st.Mark(t.Context(), inbox.Viewer{TenantID: "t1", UserID: u}, []string{res.NotificationIDs[j]}, true); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	tok := a.Token("t1", "svc", auth.ScopeSend)
	in := a.SendInput("during the kill", users...)
	key := in["idempotencyKey"].(string)
	first := make(chan int, 1)
	go func() {
		s, _ := postGraphQL(a, tok, testgw.SendMutation, map[string]any{"in": in})
		first <- s
	}()
	testgw.WaitFor(t, 30*time.Second, "the request stored", func() bool {
		_, ok, err := st.GetRequest(t.Context(), "t1", key)
		return err == nil && ok
	})
	pa.kill(syscall.SIGKILL)
	t.Logf("the first try answered %d", <-first)

	_, b := startGatewayProc(t, "gateway-B", env)
	res := b.Send(tok, in)
	if len(res.NotificationIds) != len(users) {
		t.Fatalf("the retry answered %+v", res)
	}
	for i, u := range users[:len(users)/2] {
		// Some may not be written yet: notFound then, which is fine.
		b.Post(b.Token("t1", u), `mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }`, map[string]any{"ids": []string{res.NotificationIds[i]}})
	}
	testgw.WaitFor(t, 45*time.Second, "the request done", func() bool {
		r, ok, err := st.GetRequest(t.Context(), "t1", key)
		if err != nil {
			t.Fatal(err)
		}
		return ok && r.State == inbox.RequestDone
	})
	hundred := 100
	for i, u := range users {
		v := inbox.Viewer{TenantID: "t1", UserID: u}
		page, err := st.Inbox(t.Context(), v, inbox.PageQuery{First: &hundred})
		if err != nil {
			t.Fatal(err)
		}
		unread, fresh := 0, 0
		for _, n := range page.Nodes() {
			if !n.Read {
				unread++
			}
			if n.GlobalID() == res.NotificationIds[i] {
				fresh++
			}
		}
		badge, err := st.Badge(t.Context(), v)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Nodes()) != 3 || fresh != 1 || badge.Unread != unread {
			t.Errorf("%s: %d notifications, %d of the retry's, badge %d against a recount of %d", u, len(page.Nodes()), fresh, badge.Unread, unread)
		}
	}
}

// postGraphQL posts one GraphQL request and returns the status (0 when the gateway did
// not answer).
func postGraphQL(gw *testgw.Server, token, query string, vars map[string]any) (int, []byte) {
	js, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	ctx, cancel := context.WithTimeout(context.Background(), testgw.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL, bytes.NewReader(js))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// startCrashRetry starts gateway-A of a crash-and-retry test on a fresh table (which it
// creates), and returns the environment of the test's gateways, gateway-A's process and
// server, a store on the table, and n user ids named by format.
func startCrashRetry(t *testing.T, format string, n int) ([]string, *proc, *testgw.Server, *store.Store, []string) {
	t.Helper()
	table := dynlocaltest.TableName(t)
	env := crashEnv(t, table)
	pa, a := startGatewayProc(t, "gateway-A", env)
	st := store.New(dynlocaltest.Client(t), table)
	t.Cleanup(st.Close)
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf(format, i)
	}
	return env, pa, a, st, users
}
