package inbox

import "time"

// Task is one durable scheduled task: at Due, the scheduler's worker hands it to the
// handler registered for Kind (a snooze wake-up, an expiry, a scheduled send, a delivery
// retry). Delivery is at least once: a handler may see the same task twice (after a
// crash or a lease takeover) and must be idempotent; Token lets it tell whether the task
// still stands (for a snooze wake-up, the snoozedUntil it was scheduled for: a task whose
// token no longer matches the item is stale and does nothing).
type Task struct {
	// ID identifies the task (at most 256 bytes, no '#'); scheduling the same ID at the
	// same Due twice writes one task. The ID also picks the task's shard.
	ID string
	// Kind selects the handler (same rules as ID).
	Kind string
	// Due is when the task should run, kept to the millisecond.
	Due time.Time
	// Viewer is the inbox the task acts on, if any (both ids empty when none).
	Viewer Viewer
	// Ref names what the task is about (e.g. a notification id); Token is the guard the
	// handler checks (see above). Both are opaque to the scheduler.
	Ref   string
	Token string
	// Attempts counts the handler's failures so far (0 on the first run).
	Attempts int
	// Traceparent is the W3C traceparent of the span that wrote the task ("" when
	// tracing was off): the store sets it from the writer's context, and the run's span
	// links to it. A rescheduled task keeps its first writer's.
	Traceparent string
}

// Task kinds of the inbox states.
const (
	// TaskWake wakes a snoozed notification (Wake); its token is snoozedUntil in ms.
	TaskWake = "inbox.wake"
	// TaskExpire expires a notification (Expire); its token is expireAt in ms.
	TaskExpire = "inbox.expire"
)

// TaskDeliver is the scheduler task kind of one channel delivery of a notification
// (package delivery handles it): Viewer is the recipient, Ref the notification id,
// Token the delivery record's key (inbox.DeliveryKey: the channel, or "PUSH#{deviceId}"
// for one push device). It is due when the send commits, at the end of the recipient's
// quiet hours, or when DeliveryRetry says.
const TaskDeliver = "deliver"

// TaskPage is one page of a shard bucket's due tasks (DueTasks).
type TaskPage struct {
	Tasks []Task
	// More is true when the Query stopped at its limit: pass Last as after to read on.
	More bool
	// Last is where the Query stopped: the last item it read, as a task holding only ID
	// and Due when it was an item DueTasks skipped (one that does not decode as a task);
	// nil when it read none. Pass it, not the last of Tasks, as after: a page whose items
	// were all skipped still moves on.
	Last *Task
	// Next is the due time of the bucket's first task due after the page's bound, when
	// the Query read one (zero otherwise): the scheduler sleeps until then.
	Next time.Time
}
