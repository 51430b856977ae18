package store_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/telemetry"
)

// tasksAt returns every task of every shard due in the minute of due, by id.
func tasksAt(t *testing.T, s *store.Store, due time.Time) map[string]inbox.Task {
	t.Helper()
	out := map[string]inbox.Task{}
	for n := range s.SchedShards() {
		for _, tk := range dueAll(t, s, n, store.SchedBucket(due), due.Add(time.Minute), 100) {
			out[tk.ID] = tk
		}
	}
	return out
}

// Every task the store writes within a traced context carries the writer's traceparent,
// whichever path writes it (Schedule's PutItem, a state change's transaction), and keeps
// its first writer's when rescheduled from another trace; a task written outside a
// trace carries none.
func TestTasksCarryTheWritersTraceparent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")
	ctx, span := tracer.Start(context.Background(), "request")
	defer span.End()
	want := telemetry.Traceparent(ctx)
	if want == "" {
		t.Fatal("no traceparent in a traced context")
	}

	due := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	if err := f.s.Schedule(ctx, inbox.Task{ID: "traced", Kind: "k", Due: due}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Schedule(context.Background(), inbox.Task{ID: "untraced", Kind: "k", Due: due}); err != nil {
		t.Fatal(err)
	}
	ids := f.send(t, 1, "t", "u1")
	if _, err := f.s.ApplyState(ctx, f.viewer("u1"), inbox.StateChange{Op: inbox.OpSnooze, IDs: ids, Until: due}); err != nil {
		t.Fatal(err)
	}
	got := tasksAt(t, f.s, due)
	if got["traced"].Traceparent != want || got["untraced"].Traceparent != "" {
		t.Errorf("Schedule: traced %q, untraced %q; want %q and none", got["traced"].Traceparent, got["untraced"].Traceparent, want)
	}
	var wake *inbox.Task
	for _, tk := range got {
		if tk.Kind == inbox.TaskWake {
			wake = &tk
		}
	}
	if wake == nil || wake.Traceparent != want {
		t.Fatalf("the snooze's wake-up task %+v, want traceparent %q", wake, want)
	}

	// A retry, run in the worker's own trace, keeps the writer's traceparent.
	wctx, wspan := tracer.Start(context.Background(), "worker")
	defer wspan.End()
	later := due.Add(time.Hour)
	moved, ok, err := f.s.RescheduleTask(wctx, store.SchedShard(wake.ID, f.s.SchedShards()), store.SchedBucket(due), *wake, later)
	if err != nil || !ok {
		t.Fatalf("reschedule: %v %v", ok, err)
	}
	if again := tasksAt(t, f.s, later)[moved.ID]; again.Traceparent != want || again.Attempts != 1 {
		t.Errorf("rescheduled task %+v, want the writer's traceparent %q", again, want)
	}
}
