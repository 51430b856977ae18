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
	table := dynlocaltest.TableName(t)
	env := crashEnv(t, table)
	pa, a := startGatewayProc(t, "gateway-A", append(env, "INBOX_CREATE_TABLE=1"))
	st := store.New(dynlocaltest.Client(t), table)
	t.Cleanup(st.Close)
	users := make([]string, 40)
	for i := range users {
		users[i] = fmt.Sprintf("r%02d", i)
	}
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

	_, b := startGatewayProc(t, "gateway-B", append(env, "INBOX_CREATE_TABLE=0"))
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
