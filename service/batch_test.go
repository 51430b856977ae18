package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/routing"
	"github.com/inboxgw/gateway/sched"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/tmpl"
)

// batched is a send to recipients of a comment by actor, batched per post in window.
func batched(key string, recipients []string, actor string, b inbox.Batch) service.SendRequest {
	return service.SendRequest{IdempotencyKey: key, Recipients: recipients, Type: "comment", Title: "New comments",
		Actor:   &inbox.Actor{ActorID: actor, Name: strings.ToUpper(actor[:1]) + actor[1:]},
		Payload: inbox.JSON(fmt.Sprintf(`{"by":%q}`, actor)), Batch: &b}
}

// closeNow runs the close task of u's batch of type comment and key as the scheduler would.
func closeNow(t *testing.T, svc *service.Service, u, key, id string) {
	t.Helper()
	err := svc.BatchHandler()(context.Background(), inbox.Task{Kind: inbox.TaskBatch,
		Viewer: inbox.Viewer{TenantID: tenant, UserID: u}, Ref: routing.BatchRef("comment", key), Token: id})
	if err != nil {
		t.Fatal(err)
	}
}

// onlyNotification returns u's one notification, failing unless there is exactly one.
func (e *env) onlyNotification(t *testing.T, u string) *inbox.Notification {
	t.Helper()
	first := 10
	p, err := e.st.Inbox(context.Background(), inbox.Viewer{TenantID: tenant, UserID: u}, inbox.PageQuery{First: &first})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Edges) != 1 {
		t.Fatalf("%s has %d notifications, want 1", u, len(p.Edges))
	}
	return p.Edges[0].Node
}

// TestBatchCollectsSendsIntoOneNotification: twelve comments to two users in one window
// answer one id per user (the batch's), read `batching` and write nothing into the
// inbox until the close, which writes ONE notification per user with all twelve counted
// and the first ten kept, unread once; a replay of a joined send counts nothing.
func TestBatchCollectsSendsIntoOneNotification(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ctx := context.Background()
	b := inbox.Batch{Key: "post-1", Window: time.Hour}
	var ids [2]string
	for i := range 12 {
		actor := fmt.Sprintf("user%02d", i)
		sent, err := svc.Send(ctx, tenant, batched(fmt.Sprintf("c%d", i), []string{"ann", "bob"}, actor, b))
		if err != nil {
			t.Fatal(err)
		}
		got := sent.Result.NotificationIDs
		if len(got) != 2 || (i > 0 && (got[0] != ids[0] || got[1] != ids[1])) || got[0] == got[1] {
			t.Fatalf("send %d answered %v, want the batches %v", i, got, ids)
		}
		copy(ids[:], got)
	}
	// A replay joins nothing.
	again, err := svc.Send(ctx, tenant, batched("c3", []string{"ann", "bob"}, "user03", b))
	if err != nil || !again.Result.Duplicate || again.Result.NotificationIDs[0] != ids[0] {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	for i, u := range []string{"ann", "bob"} {
		if got, unread := e.inboxOf(t, u); len(got) != 0 || unread != 0 {
			t.Fatalf("%s's inbox before the close: %v, unread %d", u, got, unread)
		}
		st, err := e.st.Status(ctx, tenant, ids[i])
		if err != nil || st.Status != inbox.NotificationBatching || st.UserID != u {
			t.Fatalf("status before the close: %+v, %v", st, err)
		}
		closeNow(t, svc, u, "post-1", ids[i])
		closeNow(t, svc, u, "post-1", ids[i]) // a second close (a late task) writes nothing
		n := e.onlyNotification(t, u)
		if n.ID != ids[i] || n.ActivityCount != 12 || len(n.Activities) != inbox.MaxBatchActivities || n.Title != "New comments" {
			t.Fatalf("%s's notification: id %s count %d activities %d title %q", u, n.ID, n.ActivityCount, len(n.Activities), n.Title)
		}
		for j, a := range n.Activities {
			if want := fmt.Sprintf("user%02d", j); a.ActorID != want || string(a.Data) != fmt.Sprintf(`{"by":%q}`, want) {
				t.Fatalf("activity %d: %+v", j, a)
			}
		}
		if _, unread := e.inboxOf(t, u); unread != 1 {
			t.Fatalf("%s unread %d after the close, want 1", u, unread)
		}
		if st, err := e.st.Status(ctx, tenant, ids[i]); err != nil || st.Status != inbox.NotificationWritten {
			t.Fatalf("status after the close: %+v, %v", st, err)
		}
	}
	// The next comment opens a new batch.
	next, err := svc.Send(ctx, tenant, batched("c-next", []string{"ann"}, "user99", b))
	if err != nil || next.Result.NotificationIDs[0] == ids[0] {
		t.Fatalf("after the close: %+v, %v", next, err)
	}
}

// TestBatchMaxItemsClosesAtOnce: the send that fills a batch closes it before it answers,
// and the next send opens another.
func TestBatchMaxItemsClosesAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ctx := context.Background()
	b := inbox.Batch{Key: "p", Window: time.Hour, MaxItems: 3}
	var first string
	for i := range 3 {
		sent, err := svc.Send(ctx, tenant, batched(fmt.Sprintf("m%d", i), []string{"ann"}, fmt.Sprintf("a%d", i), b))
		if err != nil {
			t.Fatal(err)
		}
		first = sent.Result.NotificationIDs[0]
	}
	if n := e.onlyNotification(t, "ann"); n.ID != first || n.ActivityCount != 3 {
		t.Fatalf("after maxItems: %+v", n)
	}
	sent, err := svc.Send(ctx, tenant, batched("m3", []string{"ann"}, "a3", b))
	if err != nil || sent.Result.NotificationIDs[0] == first {
		t.Fatalf("the fourth send: %+v, %v", sent, err)
	}
}

// TestBatchConcurrentJoinsCountOnce: 40 sends at once to one batch count 40, keep 10,
// and close into one notification counted once.
func TestBatchConcurrentJoinsCountOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ctx := context.Background()
	b := inbox.Batch{Key: "hot", Window: time.Hour, MaxItems: 1000}
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			sent, err := svc.Send(ctx, tenant, batched(fmt.Sprintf("h%d", i), []string{"ann"}, fmt.Sprintf("a%d", i), b))
			if err != nil {
				errs <- err
				return
			}
			ids[i] = sent.Result.NotificationIDs[0]
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("answers name different batches: %v", ids)
		}
	}
	closeNow(t, svc, "ann", "hot", ids[0])
	if got := e.onlyNotification(t, "ann"); got.ActivityCount != n || len(got.Activities) != inbox.MaxBatchActivities {
		t.Fatalf("count %d activities %d, want %d and 10", got.ActivityCount, len(got.Activities), n)
	}
	if _, unread := e.inboxOf(t, "ann"); unread != 1 {
		t.Fatalf("unread %d", unread)
	}
}

// TestBatchClosesAfterACrash: a gateway that accepted and joined dies (no process is
// left); another instance's scheduler closes the batch at the end of its window.
func TestBatchClosesAfterACrash(t *testing.T) {
	t.Parallel()
	e, clk := setupClock(t)
	dead := service.New(e.st, service.Options{Now: clk.Now})
	sent, err := dead.Send(context.Background(), tenant, batched("k1", []string{"ann"}, "bob", inbox.Batch{Key: "p", Window: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	added := &addedIDs{ch: make(chan string, 4)}
	svc := e.newService(t, service.Options{Now: clk.Now, Publisher: added}, false)
	s := sched.New(e.st, sched.Options{DB: e.db, Poll: 200 * time.Millisecond, Lease: 6 * time.Second, Lookback: 2 * time.Minute, Clock: clk})
	s.Register(inbox.TaskBatch, sched.HandlerFunc(svc.BatchHandler()))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The window passes on the scheduler's clock; its poll then finds the close task.
	for step := 0; ; step++ {
		clk.Advance(500 * time.Millisecond)
		select {
		case id := <-added.ch:
			if id != sent.Result.NotificationIDs[0] {
				t.Fatalf("closed as %s, answered %s", id, sent.Result.NotificationIDs[0])
			}
			if got, unread := e.inboxOf(t, "ann"); len(got) != 1 || unread != 1 {
				t.Fatalf("after the close: %v, unread %d", got, unread)
			}
			return
		case <-time.After(clocktest.Within / 60):
			if step == 20 {
				t.Fatal("the batch never closed within 10 s of the scheduler's clock")
			}
		}
	}
}

// addedIDs is a publisher that passes on the id of every notification added.
type addedIDs struct{ ch chan string }

func (a *addedIDs) Publish(_ context.Context, c inbox.Change) {
	if c.Kind == inbox.EventAdded && c.Notification != nil {
		a.ch <- c.Notification.ID
	}
}

// TestBatchTemplateSeesActivities: a templated batch renders once at the close with
// activities and total_activities ("Ann and 2 others").
func TestBatchTemplateSeesActivities(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	ts := &templates{Service: tmpl.New(e.st)}
	if _, err := ts.Put(ctx, tenant, "comments", inbox.TemplateInput{Locale: "en",
		Title: "{{ activities[0].actor.name }} and {{ total_activities | minus: 1 }} others commented on {{ post }}"}); err != nil {
		t.Fatal(err)
	}
	svc := e.newService(t, service.Options{Templates: ts}, false)
	var id string
	for i, a := range []string{"ann", "bob", "cy"} {
		r := batched(fmt.Sprintf("t%d", i), []string{"dee"}, a, inbox.Batch{Key: "p", Window: time.Hour})
		r.Title, r.Template, r.Data = "", "comments", inbox.JSON(`{"post":"Launch"}`)
		sent, err := svc.Send(ctx, tenant, r)
		if err != nil {
			t.Fatal(err)
		}
		id = sent.Result.NotificationIDs[0]
	}
	closeNow(t, svc, "dee", "p", id)
	if got := e.onlyNotification(t, "dee").Title; got != "Ann and 2 others commented on Launch" {
		t.Fatalf("title %q", got)
	}
}

// TestBatchRefusals: what a batch cannot be combined with, and its bounds, are refused
// before anything is written.
func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.newService(t, service.Options{}, false)
	ok := inbox.Batch{Key: "p", Window: time.Minute}
	for name, mod := range map[string]func(*service.SendRequest){
		"sendAt":       func(r *service.SendRequest) { r.SendAt = time.Now().Add(time.Hour) },
		"bulk":         func(r *service.SendRequest) { r.Priority = service.Bulk },
		"window 500ms": func(r *service.SendRequest) { r.Batch.Window = 500 * time.Millisecond },
		"window 25h":   func(r *service.SendRequest) { r.Batch.Window = 25 * time.Hour },
		"maxItems 1":   func(r *service.SendRequest) { r.Batch.MaxItems = 1 },
		"key of 10 KB": func(r *service.SendRequest) { r.Batch.Key = strings.Repeat("k", 10<<10) },
		"expires within the window": func(r *service.SendRequest) {
			r.ExpiresAt = time.Now().Add(30 * time.Second)
		},
		"a derived key": func(r *service.SendRequest) { r.IdempotencyKey = "batch~01ARZ3NDEKTSV4RRFFQ69G5FAV" },
	} {
		r := batched("refused", []string{"ann"}, "bob", ok)
		mod(&r)
		if _, err := svc.Send(context.Background(), tenant, r); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v, want BAD_USER_INPUT", name, err)
		}
	}
	if _, ok, _ := e.st.GetRequest(context.Background(), tenant, "refused"); ok {
		t.Fatal("a refused send was written")
	}
}

// TestBatchWhoseCloseCanNeverBeWrittenIsAbandoned: a batch whose expiry passed before its
// close writes no notification, says so in its status, and does not block the next one.
func TestBatchWhoseCloseCanNeverBeWrittenIsAbandoned(t *testing.T) {
	t.Parallel()
	e, clk := setupClock(t)
	svc := e.newService(t, service.Options{Now: clk.Now}, false)
	ctx := context.Background()
	r := batched("ab1", []string{"ann"}, "bob", inbox.Batch{Key: "p", Window: time.Second})
	r.ExpiresAt = clk.Now().Add(1500 * time.Millisecond)
	sent, err := svc.Send(ctx, tenant, r)
	if err != nil {
		t.Fatal(err)
	}
	id := sent.Result.NotificationIDs[0]
	clk.Advance(1550 * time.Millisecond) // the expiry passes while the batch is open
	closeNow(t, svc, "ann", "p", id)
	if got, unread := e.inboxOf(t, "ann"); len(got) != 0 || unread != 0 {
		t.Fatalf("an abandoned batch wrote %v (unread %d)", got, unread)
	}
	st, err := e.st.Status(ctx, tenant, id)
	if err != nil || st.Status != inbox.NotificationSkipped || st.Reason != inbox.ReasonBatchAbandoned {
		t.Fatalf("status: %+v, %v", st, err)
	}
	next, err := svc.Send(ctx, tenant, batched("ab2", []string{"ann"}, "cy", inbox.Batch{Key: "p", Window: time.Hour}))
	if err != nil || next.Result.NotificationIDs[0] == id {
		t.Fatalf("the next send: %+v, %v", next, err)
	}
}

// TestBatchJoinRefusesAKeyReusedWithOtherContent: once a request's record is gone, the
// guard alone still tells a key that comes back with other content (BAD_USER_INPUT, not a
// silent duplicate).
func TestBatchJoinRefusesAKeyReusedWithOtherContent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	j := inbox.BatchJoin{TenantID: tenant, UserID: "ann", IdempotencyKey: "reused", InputHash: "h1",
		Ref: routing.BatchRef("comment", "p"), Batch: inbox.Batch{Key: "p", Window: time.Hour, MaxItems: 10},
		Activity: inbox.Activity{ActorID: "bob", CreatedAt: time.Now()}, Doc: []byte(`{}`)}
	first, err := e.st.JoinBatch(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.st.JoinBatch(ctx, j)
	if err != nil || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	j.InputHash = "h2"
	if _, err := e.st.JoinBatch(ctx, j); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Fatalf("other content under the key: %v, want BAD_USER_INPUT", err)
	}
}
