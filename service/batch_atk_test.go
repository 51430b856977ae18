package service_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
)

// TestBatchCloseAfterWatermarkKeepsItsID: attack: a markAllSeen between the end of a
// batch's window and its close (the scheduler's lag, a crash) puts the inbox's
// watermark above the batch's pre-assigned id (a ULID of its close time). The close must
// still write the notification under the id every joined send was answered with, and
// its status must leave `batching`.
func TestBatchCloseAfterWatermarkKeepsItsID(t *testing.T) {
	t.Parallel()
	e, clk := setupClock(t)
	svc := e.newService(t, service.Options{Now: clk.Now}, false)
	ctx := context.Background()
	b := inbox.Batch{Key: "wm", Window: time.Second}
	sent, err := svc.Send(ctx, tenant, batched("wm1", []string{"ann"}, "bob", b))
	if err != nil {
		t.Fatal(err)
	}
	id := sent.Result.NotificationIDs[0]
	clk.Advance(1200 * time.Millisecond) // the window ends; the close task has not run yet
	v := inbox.Viewer{TenantID: tenant, UserID: "ann"}
	if _, err := e.st.MarkAllSeen(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.MarkAll(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	closeNow(t, svc, "ann", "wm", id)
	n := e.onlyNotification(t, "ann")
	if n.ID != id {
		t.Errorf("the close wrote %s, but the sends were answered %s", n.ID, id)
	}
	if st, err := e.st.Status(ctx, tenant, id); err != nil || st.Status == inbox.NotificationBatching {
		t.Errorf("status of the answered id after the close: %+v, %v", st, err)
	}
	if _, unread := e.inboxOf(t, "ann"); unread != 1 {
		t.Errorf("unread %d after the close, want 1", unread)
	}
	// A markAllRead after the close reads it, exactly.
	if _, err := e.st.MarkAll(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	if _, unread := e.inboxOf(t, "ann"); unread != 0 {
		t.Errorf("unread %d after markAllRead, want 0", unread)
	}
}

// TestBatchDocumentOfEscapedCharacters: attack: a title and body of 16 KiB of '<' (each
// one byte, six once HTML-escaped in JSON) pass the send's checks, but the batch's
// document (JSON of the request) then exceeded the store's bound: the send answered
// BAD_USER_INPUT while its request stayed accepted, its recovery task retrying it for
// ever. The document keeps such characters as they are; a join that can never pass
// (a document over the bound all the same: control characters) ends its request.
func TestBatchDocumentOfEscapedCharacters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ctx := context.Background()
	r := batched("esc1", []string{"ann"}, "bob", inbox.Batch{Key: "esc", Window: time.Hour})
	r.Title = strings.Repeat("<", 8000)
	r.Body = strings.Repeat("&", 8000)
	sent, err := svc.Send(ctx, tenant, r)
	if err != nil || len(sent.Result.NotificationIDs) != 1 {
		t.Fatalf("a send of '<' and '&': %+v, %v (want it joined)", sent, err)
	}
	r = batched("esc2", []string{"ann"}, "bob", inbox.Batch{Key: "esc2", Window: time.Hour})
	r.Payload = inbox.JSON(`"` + strings.Repeat(`\u0001`, 2700) + `"`)
	r.Data = r.Payload
	r.Body = strings.Repeat("\x01", 8000)
	r.Title = strings.Repeat("\x01", 8000)
	_, err = svc.Send(ctx, tenant, r)
	if err == nil {
		return // it fits: nothing to end
	}
	if inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("an oversized batched send: %v (want BAD_USER_INPUT)", err)
	}
	req, ok, err := e.st.GetRequest(ctx, tenant, "esc2")
	if err != nil || !ok || req.State != inbox.RequestDone {
		t.Fatalf("the refused batched send's request: state %q %v %v (want done: no retry for ever)", req.State, ok, err)
	}
}

// TestBatchFilledByConcurrentJoinsClosesAtOnce: attack: maxItems joins at once. Past the
// tenth activity a join was conditioned only on n < maxItems, and decided whether it
// filled the batch from the count it had read: two joins reading the same count both
// committed, the last slot taken by one that believed another remained, so no one
// closed the full batch (it waited for its window, up to 24 h). Every batch filled must
// be written when the sends that filled it have answered.
func TestBatchFilledByConcurrentJoinsClosesAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ctx := context.Background()
	const n = 20
	b := inbox.Batch{Key: "fill", Window: time.Hour, MaxItems: n}
	users := []string{"u1", "u2", "u3"}
	var wg sync.WaitGroup
	errs := make(chan error, n*len(users))
	for _, u := range users {
		for i := range n {
			wg.Go(func() {
				if _, err := svc.Send(ctx, tenant, batched(fmt.Sprintf("%s-f%d", u, i), []string{u}, fmt.Sprintf("a%d", i), b)); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, u := range users {
		got, _ := e.inboxOf(t, u)
		if len(got) != 1 {
			t.Errorf("%s: %d notifications after %d joins of a batch of %d, want its close", u, len(got), n, n)
			continue
		}
		if c := e.onlyNotification(t, u).ActivityCount; c != n {
			t.Errorf("%s: count %d, want %d", u, c, n)
		}
	}
}

// TestBatchReplayedFillingJoinCountsOnce: attack: the send that fills a batch retried
// ten times at once (one idempotency key), on two instances, while its close runs: it counts once, every
// call answers the batch's id, one notification is written, and the next send opens
// another batch.
func TestBatchReplayedFillingJoinCountsOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	svcs := []*service.Service{svc, e.newService(t, service.Options{}, false)} // two instances
	ctx := context.Background()
	b := inbox.Batch{Key: "rp", Window: time.Hour, MaxItems: 3}
	var id string
	for i := range 2 {
		sent, err := svc.Send(ctx, tenant, batched(fmt.Sprintf("rp%d", i), []string{"ann"}, fmt.Sprintf("a%d", i), b))
		if err != nil {
			t.Fatal(err)
		}
		id = sent.Result.NotificationIDs[0]
	}
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Go(func() {
			sent, err := svcs[i%2].Send(ctx, tenant, batched("rp2", []string{"ann"}, "a2", b))
			if err != nil {
				errs <- err
				return
			}
			if got := sent.Result.NotificationIDs; len(got) != 1 || got[0] != id {
				errs <- fmt.Errorf("answered %v, want %s", got, id)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := e.onlyNotification(t, "ann")
	if n.ID != id || n.ActivityCount != 3 {
		t.Fatalf("notification %s count %d, want %s and 3", n.ID, n.ActivityCount, id)
	}
	next, err := svc.Send(ctx, tenant, batched("rp3", []string{"ann"}, "a3", b))
	if err != nil || next.Result.NotificationIDs[0] == id {
		t.Fatalf("after the close: %+v, %v", next, err)
	}
	if _, unread := e.inboxOf(t, "ann"); unread != 1 {
		t.Fatalf("unread %d", unread)
	}
}

// TestBatchJoinsRacingClosesLoseNothing: attack: 60 joins on two instances with maxItems
// 7 while the window's close task runs again and again on the latest batch answered:
// joins that land after a freeze open a new batch; in the end every join is counted in
// exactly one notification (the sum of activityCount is 60) and each answered id is one
// notification.
func TestBatchJoinsRacingClosesLoseNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svcs := []*service.Service{e.newService(t, service.Options{}, false), e.newService(t, service.Options{}, false)}
	ctx := context.Background()
	const n = 60
	b := inbox.Batch{Key: "race", Window: time.Hour, MaxItems: 7}
	var mu sync.Mutex
	answered := map[string]bool{}
	latest := ""
	stop := make(chan struct{})
	closerDone := make(chan struct{})
	go func() {
		defer close(closerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			id := latest
			mu.Unlock()
			if id != "" {
				// Each close is a few DynamoDB calls: they pace the loop.
				closeNow(t, svcs[1], "ann", "race", id)
			} else {
				runtime.Gosched()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			var sent service.Sent
			var err error
			for try := 0; try < 20; try++ {
				sent, err = svcs[(i+try)%2].Send(ctx, tenant, batched(fmt.Sprintf("r%d", i), []string{"ann"}, fmt.Sprintf("a%d", i), b))
				if inbox.ErrorCode(err) != inbox.CodeThrottled {
					break // contention is THROTTLED: retried with the same key, it joins once
				}
			}
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			answered[sent.Result.NotificationIDs[0]] = true
			latest = sent.Result.NotificationIDs[0]
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stop)
	<-closerDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id := range answered {
		closeNow(t, svcs[0], "ann", "race", id)
	}
	first := 100
	p, err := e.st.Inbox(ctx, inbox.Viewer{TenantID: tenant, UserID: "ann"}, inbox.PageQuery{First: &first})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, ed := range p.Edges {
		sum += max(1, ed.Node.ActivityCount)
		if !answered[ed.Node.ID] {
			t.Errorf("notification %s was never answered", ed.Node.ID)
		}
		if ed.Node.ActivityCount > 7 {
			t.Errorf("notification %s counts %d > maxItems", ed.Node.ID, ed.Node.ActivityCount)
		}
	}
	if sum != n || len(p.Edges) != len(answered) {
		t.Fatalf("%d notifications counting %d joins, want %d notifications counting %d", len(p.Edges), sum, len(answered), n)
	}
	if _, unread := e.inboxOf(t, "ann"); unread != len(answered) {
		t.Fatalf("unread %d, want %d", unread, len(answered))
	}
}

// TestBatchThrottledCloseStillCloses: attack: a batched send that is also throttled, its
// throttle full at the close: the close is skipped (throttled) but the batch must close
// all the same, so that the next send opens a new batch instead of meeting it.
func TestBatchThrottledCloseStillCloses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ctx := context.Background()
	thr := &inbox.Throttle{Key: "thr", Limit: 1, Window: time.Hour}
	plain := service.SendRequest{IdempotencyKey: "plain", Recipients: []string{"ann"}, Type: "comment", Title: "x", Throttle: thr}
	if _, err := svc.Send(ctx, tenant, plain); err != nil {
		t.Fatal(err)
	}
	b := inbox.Batch{Key: "tb", Window: time.Hour}
	r := batched("tb1", []string{"ann"}, "bob", b)
	r.Throttle = thr
	sent, err := svc.Send(ctx, tenant, r)
	if err != nil {
		t.Fatal(err)
	}
	id := sent.Result.NotificationIDs[0]
	closeNow(t, svc, "ann", "tb", id)
	st, err := e.st.Status(ctx, tenant, id)
	if err != nil || st.Status == inbox.NotificationBatching {
		t.Fatalf("status after a throttled close: %+v, %v", st, err)
	}
	r = batched("tb2", []string{"ann"}, "cy", b)
	r.Throttle = thr
	next, err := svc.Send(ctx, tenant, r)
	if err != nil || next.Result.NotificationIDs[0] == id {
		t.Fatalf("after a throttled close: %+v, %v (want a new batch)", next, err)
	}
}
