package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithymw "github.com/aws/smithy-go/middleware"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// faultKind is what the injector does to one call.
type faultKind int

const (
	pass       faultKind = iota
	fail                 // answer with an error; DynamoDB never sees the call
	lostAnswer           // let DynamoDB run the call, then answer with an error
)

// injector is a test-only SDK middleware that counts the calls of each operation and lets
// decide, per call, to pass it, fail it or lose its answer after DynamoDB ran it. The
// errors are DynamoDB's own codes (smithy.GenericAPIError), as the SDK decodes them.
type injector struct {
	mu     sync.Mutex
	calls  map[string]int
	decide func(op string, n int, in any) (faultKind, string)
}

func newInjector(decide func(op string, n int, in any) (faultKind, string)) *injector {
	return &injector{calls: map[string]int{}, decide: decide}
}

func (j *injector) count(op string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.calls[op]
}

func (j *injector) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *smithymw.Stack) error {
		return s.Initialize.Add(smithymw.InitializeMiddlewareFunc("fault-injector",
			func(ctx context.Context, in smithymw.InitializeInput, next smithymw.InitializeHandler) (smithymw.InitializeOutput, smithymw.Metadata, error) {
				op := smithymw.GetOperationName(ctx)
				j.mu.Lock()
				j.calls[op]++
				n := j.calls[op]
				j.mu.Unlock()
				kind, code := j.decide(op, n, in.Parameters)
				apiErr := &smithy.GenericAPIError{Code: code, Message: "injected " + code}
				switch kind {
				case fail:
					return smithymw.InitializeOutput{}, smithymw.Metadata{}, apiErr
				case lostAnswer:
					out, md, err := next.HandleInitialize(ctx, in)
					if err != nil {
						return out, md, err
					}
					return smithymw.InitializeOutput{}, md, apiErr
				}
				return next.HandleInitialize(ctx, in)
			}), smithymw.After)
	})
}

// recorder is a Publisher that keeps every change.
type recorder struct {
	mu      sync.Mutex
	changes []inbox.Change
}

func (r *recorder) Publish(_ context.Context, c inbox.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, c)
}

func (r *recorder) take() []inbox.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.changes
	r.changes = nil
	return out
}

// faulty returns a store over f's table whose client goes through j, with a fast retry
// policy (the budget is what is tested, not the waiting).
func (f *fixture) faulty(t *testing.T, j *injector, opts ...store.Option) *store.Store {
	t.Helper()
	base := []store.Option{store.WithSweepWorkers(0),
		store.WithRetryPolicy(store.RetryPolicy{Attempts: 6, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})}
	s := store.New(dynlocaltest.Client(t, j.option), f.table, append(base, opts...)...)
	t.Cleanup(s.Close)
	return s
}

func sendTo(t *testing.T, w service.Writer, tenant, key string, users ...string) inbox.SendResult {
	t.Helper()
	res, err := w.Send(context.Background(), tenant, inbox.SendInput{IdempotencyKey: key, Recipients: users, Type: "t",
		Actor: &inbox.Actor{ActorID: "bob", Name: "Bob"}, Target: &inbox.Target{Kind: "issue", TargetID: "42", Title: "Issue 42"}})
	if err != nil {
		t.Fatalf("send %s: %v", key, err)
	}
	return res
}

// Issue 8, item 7: DynamoDB that answers every BatchGetItem with all keys unprocessed
// gets a bounded number of calls, then the request ends THROTTLED (it used to loop until
// the client gave up: 2,400 calls in 5 minutes).
func TestUnprocessedKeysForeverEndThrottledAfterBoundedCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := sendTo(t, writer(f.s), f.tenant, "k1", "alice").NotificationIDs
	var mu sync.Mutex
	calls := 0
	unprocessed := func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *smithymw.Stack) error {
			return s.Initialize.Add(smithymw.InitializeMiddlewareFunc("all-unprocessed",
				func(ctx context.Context, in smithymw.InitializeInput, next smithymw.InitializeHandler) (smithymw.InitializeOutput, smithymw.Metadata, error) {
					req, ok := in.Parameters.(*dynamodb.BatchGetItemInput)
					if !ok {
						return next.HandleInitialize(ctx, in)
					}
					mu.Lock()
					calls++
					mu.Unlock()
					return smithymw.InitializeOutput{Result: &dynamodb.BatchGetItemOutput{
						Responses: map[string][]map[string]types.AttributeValue{}, UnprocessedKeys: req.RequestItems}}, smithymw.Metadata{}, nil
				}), smithymw.After)
		})
	}
	s := store.New(dynlocaltest.Client(t, unprocessed), f.table, store.WithSweepWorkers(0))
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := s.Notifications(ctx, f.viewer("alice"), ids)
	if code := inbox.ErrorCode(err); code != inbox.CodeThrottled {
		t.Fatalf("error %v (code %q), want THROTTLED", err, code)
	}
	mu.Lock()
	n := calls
	mu.Unlock()
	if n > 10 {
		t.Fatalf("%d BatchGetItem calls; the budget is 10", n)
	}
	if ctx.Err() != nil {
		t.Fatal("the request ran until its context ended instead of its budget")
	}
}

// Issue 8, item 11: throttling and outages are retried for reads and writes, and what
// outlives the budget is THROTTLED or UNAVAILABLE, never INTERNAL_SERVER_ERROR.
func TestTransientFailuresAreRetriedThenCoded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sendTo(t, writer(f.s), f.tenant, "k1", "alice")
	v := f.viewer("alice")
	ctx := context.Background()

	// Two throttles, then an answer: the read succeeds.
	j := newInjector(func(op string, n int, _ any) (faultKind, string) {
		if op == "GetItem" && n <= 2 {
			return fail, "ThrottlingException"
		}
		return pass, ""
	})
	if n, err := f.faulty(t, j).UnreadCount(ctx, v); err != nil || n != 1 {
		t.Fatalf("UnreadCount after two throttles = %d, %v; want 1", n, err)
	}
	if got := j.count("GetItem"); got != 3 {
		t.Fatalf("GetItem calls = %d, want 3", got)
	}

	for _, tc := range []struct{ code, want string }{
		{"ThrottlingException", inbox.CodeThrottled},
		{"ProvisionedThroughputExceededException", inbox.CodeThrottled},
		{"InternalServerError", inbox.CodeUnavailable},
	} {
		j := newInjector(func(string, int, any) (faultKind, string) { return fail, tc.code })
		s := f.faulty(t, j)
		_, err := s.UnreadCount(ctx, v)
		if got := inbox.ErrorCode(err); got != tc.want {
			t.Errorf("read under %s: code %q (%v), want %s", tc.code, got, err, tc.want)
		}
		if got := j.count("GetItem"); got != 6 {
			t.Errorf("read under %s: %d GetItem calls, want the budget of 6", tc.code, got)
		}
		_, err = writer(s).Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: "k-" + tc.code, Recipients: []string{"alice"}, Type: "t"})
		if got := inbox.ErrorCode(err); got != tc.want {
			t.Errorf("send under %s: code %q (%v), want %s", tc.code, got, err, tc.want)
		}
		_, err = s.MarkAll(ctx, v, nil)
		if got := inbox.ErrorCode(err); got != tc.want {
			t.Errorf("markAllRead under %s: code %q (%v), want %s", tc.code, got, err, tc.want)
		}
		// markAllRead reads META first (GetItem), which fails within its own budget: 6
		// more GetItem calls, not multiplied by the conflict loop, and no update.
		if got := j.count("GetItem"); got != 12 {
			t.Errorf("markAllRead under %s: %d GetItem calls in all, want 12 (not multiplied by the conflict loop)", tc.code, got)
		}
	}
	if n, _ := f.s.UnreadCount(ctx, v); n != 1 {
		t.Fatalf("count %d after failed writes, want 1", n)
	}
}

// Issue 8, items 10 and 11: writes whose answer is lost after they committed are retried
// and stay exact, and what they did is published.
func TestLostAnswersAfterCommitStayExactAndPublish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	pub := &recorder{}
	lose := map[string]bool{}
	var mu sync.Mutex
	j := newInjector(func(op string, _ int, _ any) (faultKind, string) {
		mu.Lock()
		defer mu.Unlock()
		if lose[op] {
			lose[op] = false
			return lostAnswer, "InternalServerError"
		}
		return pass, ""
	})
	s := f.faulty(t, j, store.WithPublisher(pub))
	arm := func(op string) { mu.Lock(); lose[op] = true; mu.Unlock() }

	arm("TransactWriteItems")
	res := sendTo(t, writer(s, pub), f.tenant, "lost-send", "alice")
	if res.Accepted != 1 {
		t.Fatalf("send with a lost answer: %+v", res)
	}
	if got := pub.take(); len(got) == 0 {
		t.Fatal("a send whose answer was lost published nothing for its recipient")
	}
	p := f.page(t, "alice", inbox.PageQuery{First: ptr(10)})
	if len(p.Edges) != 1 || p.UnreadCount != 1 {
		t.Fatalf("after a lost send answer: %d notifications, count %d; want 1, 1", len(p.Edges), p.UnreadCount)
	}

	arm("TransactWriteItems")
	mr, err := s.Mark(ctx, v, res.NotificationIDs, true)
	if err != nil {
		t.Fatalf("mark with a lost answer: %v", err)
	}
	bg, _ := f.s.Badge(ctx, v)
	n, ver := bg.Unread, bg.Version
	if mr.UnreadCount != 0 || n != 0 {
		t.Fatalf("mark with a lost answer: answered %d, stored %d; want 0", mr.UnreadCount, n)
	}
	if got := pub.take(); len(got) == 0 || got[len(got)-1].Version != ver || got[len(got)-1].UnreadCount != 0 {
		t.Fatalf("mark with a lost answer published %+v; want the stored badge 0 at version %d", got, ver)
	}

	sendTo(t, writer(s, pub), f.tenant, "second", "alice")
	arm("UpdateItem")
	if _, err := s.MarkAll(ctx, v, nil); err != nil {
		t.Fatalf("markAllRead with a lost answer: %v", err)
	}
	if n, _ := f.s.UnreadCount(ctx, v); n != 0 {
		t.Fatalf("count %d after markAllRead, want 0", n)
	}
}

// Issue 8, item 10: a mark whose follow-up META read fails after the commit publishes a
// re-read hint with its error, and the client's retry, which finds nothing to change,
// publishes the stored badge.
func TestMarkPublishesWhenItsMetaReadFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	ids := sendTo(t, writer(f.s), f.tenant, "k1", "alice").NotificationIDs
	pub := &recorder{}
	var mu sync.Mutex
	broken := false
	j := newInjector(func(op string, _ int, _ any) (faultKind, string) {
		mu.Lock()
		defer mu.Unlock()
		if op == "TransactWriteItems" {
			broken = true // every GetItem after the commit fails
		}
		if op == "GetItem" && broken {
			return fail, "InternalServerError"
		}
		return pass, ""
	})
	s := f.faulty(t, j, store.WithPublisher(pub))
	_, err := s.Mark(ctx, v, ids, true)
	if code := inbox.ErrorCode(err); code != inbox.CodeUnavailable {
		t.Fatalf("mark whose META read fails: %v (code %q), want UNAVAILABLE", err, code)
	}
	got := pub.take()
	if len(got) != 1 || got[0].Viewer != v || got[0].Version != 0 {
		t.Fatalf("published %+v; want one re-read hint (Version 0) for alice", got)
	}
	mu.Lock()
	broken = false
	mu.Unlock()
	mr, err := s.Mark(ctx, v, ids, true)
	if err != nil || mr.Changed != 0 || mr.UnreadCount != 0 {
		t.Fatalf("client retry: %+v, %v; want nothing changed, count 0", mr, err)
	}
	bg, _ := f.s.Badge(ctx, v)
	ver := bg.Version
	got = pub.take()
	if len(got) != 1 || got[0].Version != ver || got[0].UnreadCount != 0 {
		t.Fatalf("client retry published %+v; want the stored badge 0 at version %d", got, ver)
	}
}

// Issue 8, item 13: a replay that completes a missing recipient writes no profile again.
func TestSendReplayWritesNoProfileAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := inbox.SendInput{IdempotencyKey: "replay", Recipients: []string{"alice", "bob"}, Type: "t",
		Actor: &inbox.Actor{ActorID: "carol", Name: "Carol"}, Target: &inbox.Target{Kind: "issue", TargetID: "7", Title: "Seven"}}
	// bob's transaction is refused (not transient): the first send fails part-way.
	j := newInjector(func(op string, _ int, params any) (faultKind, string) {
		if tw, ok := params.(*dynamodb.TransactWriteItemsInput); ok && op == "TransactWriteItems" {
			if u, ok := tw.TransactItems[0].Put.Item["userId"].(*types.AttributeValueMemberS); ok && u.Value == "bob" {
				// Fail only once alice's guard has committed (recipients run concurrently,
				// and bob's failure cancels the transactions not yet sent).
				for i := 0; i < 500 && !aliceDone(ctx, f); i++ {
					time.Sleep(10 * time.Millisecond)
				}
				return fail, "ValidationException"
			}
		}
		return pass, ""
	})
	if _, err := writer(f.faulty(t, j)).Send(ctx, f.tenant, in); err == nil {
		t.Fatal("the first send should have failed for bob")
	}
	k := newInjector(func(string, int, any) (faultKind, string) { return pass, "" })
	res, err := writer(f.faulty(t, k)).Send(ctx, f.tenant, in)
	if err != nil || res.Accepted != 2 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if n := k.count("UpdateItem"); n != 0 {
		t.Fatalf("the replay made %d UpdateItem calls (profile upserts); the first send wrote them already", n)
	}
	for _, u := range []string{"alice", "bob"} {
		if p := f.page(t, u, inbox.PageQuery{First: ptr(10)}); len(p.Edges) != 1 || p.UnreadCount != 1 {
			t.Fatalf("%s: %d notifications, count %d; want 1, 1", u, len(p.Edges), p.UnreadCount)
		}
	}
}

// aliceDone reports whether alice's guard of the key "replay" has committed.
func aliceDone(ctx context.Context, f *fixture) bool {
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &f.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "T#acme#IDEM#replay"}, "sk": &types.AttributeValueMemberS{Value: "R#alice"}}})
	return err == nil && out.Item != nil
}

// Issue 8, item 7: a mark whose transactions keep being cancelled by conflicts ends
// THROTTLED when its deadline ends the conflict loop (it used to end with the bare
// context error, an INTERNAL_SERVER_ERROR), after a bounded number of transactions.
func TestConflictLoopEndsThrottledAtTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The deadline passes once the third conflict is met, however slow the engine: with a
	// 300 ms deadline a loaded machine's first read outlasted it before any conflict (a
	// fresh clone's make test: INTERNAL_SERVER_ERROR, a timeout, not the conflict loop's end).
	dl := newConflictDeadline()
	ids := sendTo(t, writer(f.s), f.tenant, "k1", "alice").NotificationIDs
	var mu sync.Mutex
	calls := 0
	conflicting := func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *smithymw.Stack) error {
			return s.Initialize.Add(smithymw.InitializeMiddlewareFunc("always-conflict",
				func(ctx context.Context, in smithymw.InitializeInput, next smithymw.InitializeHandler) (smithymw.InitializeOutput, smithymw.Metadata, error) {
					if _, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); !ok {
						return next.HandleInitialize(ctx, in)
					}
					mu.Lock()
					calls++
					if calls == 3 {
						dl.pass()
					}
					mu.Unlock()
					code := "TransactionConflict"
					return smithymw.InitializeOutput{}, smithymw.Metadata{}, &types.TransactionCanceledException{
						Message: &code, CancellationReasons: []types.CancellationReason{{Code: &code}, {Code: &code}}}
				}), smithymw.After)
		})
	}
	s := store.New(dynlocaltest.Client(t, conflicting), f.table, store.WithSweepWorkers(0))
	defer s.Close()
	_, err := s.Mark(dl, f.viewer("alice"), ids, true)
	if code := inbox.ErrorCode(err); code != inbox.CodeThrottled {
		t.Fatalf("mark under endless conflicts: %v (code %q), want THROTTLED", err, code)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls < 3 || calls > 4 {
		t.Fatalf("%d transactions; want the 3 before the deadline (and at most one in flight)", calls)
	}
}

// conflictDeadline is a context whose deadline passes when pass is called: its Err is
// then context.DeadlineExceeded, as a deadline's.
type conflictDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newConflictDeadline() *conflictDeadline {
	return &conflictDeadline{Context: context.Background(), done: make(chan struct{})}
}

func (c *conflictDeadline) pass() { c.once.Do(func() { close(c.done) }) }

func (c *conflictDeadline) Done() <-chan struct{} { return c.done }

func (c *conflictDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A call that DynamoDB never answers (a silent network, a stalled engine) times out after
// the policy's AttemptTimeout and is retried; it used to wait as long as the caller's
// context, forever without a deadline. The silent call's own deadline is checked (the
// attempt's, not the caller's 30 s); the retry reaches the engine without it, so a busy
// engine's slow answer cannot time it out too and make the count depend on the machine.
func TestUnansweredCallTimesOutAndIsRetried(t *testing.T) {
	t.Parallel()
	const attemptTimeout = 300 * time.Millisecond
	f := newFixture(t)
	sendTo(t, writer(f.s), f.tenant, "k1", "alice")
	var mu sync.Mutex
	calls := 0
	var silentBound time.Duration // how far the silent call's deadline was when it arrived
	silent := func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *smithymw.Stack) error {
			return s.Initialize.Add(smithymw.InitializeMiddlewareFunc("silent-once",
				func(ctx context.Context, in smithymw.InitializeInput, next smithymw.InitializeHandler) (smithymw.InitializeOutput, smithymw.Metadata, error) {
					mu.Lock()
					calls++
					first := calls == 1
					if dl, ok := ctx.Deadline(); first && ok {
						silentBound = time.Until(dl)
					}
					mu.Unlock()
					if first {
						<-ctx.Done() // never answered
						return smithymw.InitializeOutput{}, smithymw.Metadata{}, ctx.Err()
					}
					return next.HandleInitialize(context.WithoutCancel(ctx), in)
				}), smithymw.After)
		})
	}
	s := store.New(dynlocaltest.Client(t, silent), f.table, store.WithSweepWorkers(0),
		store.WithRetryPolicy(store.RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, AttemptTimeout: attemptTimeout}))
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := s.UnreadCount(ctx, f.viewer("alice"))
	if err != nil || n != 1 {
		t.Fatalf("UnreadCount = %d, %v; want 1 after the silent call timed out", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Fatalf("%d calls, want 2 (the silent one, then its retry)", calls)
	}
	if silentBound <= 0 || silentBound > attemptTimeout {
		t.Fatalf("the silent call's deadline was %v away, want within the attempt timeout %v", silentBound, attemptTimeout)
	}
}

// A state change whose every answer is lost after the commit ends UNAVAILABLE; the
// client's retry finds the notifications already in the state and changes nothing. Its
// event must still name them (kind and ids), or an inboxEvents subscriber never hears of
// the change: the failed call could only publish a re-read hint, which carries no event.
func TestClientRetryAfterLostAnswersPublishesTheEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("alice")
	ids := sendTo(t, writer(f.s), f.tenant, "k1", "alice").NotificationIDs
	pub := &recorder{}
	var mu sync.Mutex
	losing := false
	j := newInjector(func(op string, _ int, _ any) (faultKind, string) {
		mu.Lock()
		defer mu.Unlock()
		if losing && op == "TransactWriteItems" {
			return lostAnswer, "InternalServerError"
		}
		return pass, ""
	})
	s := f.faulty(t, j, store.WithPublisher(pub))
	for _, tc := range []struct {
		ch   inbox.StateChange
		kind inbox.EventKind
	}{
		{inbox.StateChange{Op: inbox.OpArchive, IDs: ids}, inbox.EventArchived},
		{inbox.StateChange{Op: inbox.OpUnarchive, IDs: ids}, inbox.EventUnarchived},
		{inbox.StateChange{Op: inbox.OpSnooze, IDs: ids, Until: time.Now().Add(time.Hour)}, inbox.EventSnoozed},
	} {
		mu.Lock()
		losing = true
		mu.Unlock()
		if _, err := s.ApplyState(ctx, v, tc.ch); inbox.ErrorCode(err) != inbox.CodeUnavailable {
			t.Fatalf("%s with every answer lost: %v, want UNAVAILABLE", tc.kind, err)
		}
		mu.Lock()
		losing = false
		mu.Unlock()
		pub.take()
		mr, err := s.ApplyState(ctx, v, tc.ch)
		if err != nil || mr.Changed != 0 {
			t.Fatalf("%s: client retry %+v, %v; want nothing left to change", tc.kind, mr, err)
		}
		truth := f.checkExact(t, v)
		if mr.Badge.Unread != truth.Unread || mr.Badge.Unseen != truth.Unseen {
			t.Fatalf("%s: retry answered badge %+v, stored %+v", tc.kind, mr.Badge, truth)
		}
		got := pub.take()
		if len(got) != 1 || got[0].Kind != tc.kind || len(got[0].IDs) != 1 || got[0].IDs[0] != ids[0] || got[0].Version != truth.Version {
			t.Fatalf("%s: client retry published %+v; want one %s event for %v at version %d", tc.kind, got, tc.kind, ids, truth.Version)
		}
	}
}
