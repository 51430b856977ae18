// Package sched is the gateway's durable scheduler: tasks (inbox.Task) written to the
// table by package store (Schedule, or ScheduleAction inside another write's
// transaction) are handed, when due, to the Handler registered for their kind, on
// whichever instance holds the task's shard. Snooze wake-ups and expiry run on it;
// scheduled sends and delivery retries are meant to.
//
// Tasks are write-sharded (shard = hash of the task id) and time-bucketed (one
// partition per shard and minute; see store/keys.go). Every instance runs a Scheduler;
// the instances share the shards through leases (package lease): each one heartbeats a
// membership lease, reads every lease with one Query, and holds a fair share,
// ceil(shards / live members), taking shards that are free or whose holder's lease
// expired, and releasing shards above its share so that a new instance gets some.
//
// A shard is processed from its checkpoint, kept in the shard's lease item: the oldest
// minute that may still hold tasks. Each poll reads, for every minute from the
// checkpoint to now, the tasks due by now (a Query per minute, paginated), starts those
// not running yet (at most Concurrency running at once per shard: a slow handler holds a
// slot, not the shard), and deletes each one whose handler succeeded. The checkpoint
// moves past a minute once a Query finds no task left in it and the minute ended more
// than Grace ago, so a restart of every instance loses nothing and a long outage
// is caught up minute by minute. The checkpoint write is fenced by the lease.
//
// Delivery is at least once. A handler may see a task again after a crash, a lease
// takeover or a failed delete: handlers must be idempotent and check the task's Token
// (for a snooze, the snoozedUntil the task was scheduled for) against the current state.
// A handler's error reschedules the task (one more attempt, due after an exponential
// backoff with jitter) until MaxAttempts, after which the task is logged and dropped
// (counted in Stats). A task whose kind has no handler on this instance is retried the
// same way (an instance of a newer version may know it).
//
// Time comes from Options.Clock (the real clock unless a test passes a fake one): the due
// times read, the leases' expiry, the polls, the rebalancings and the retry delays. The
// tests advance a fake clock shared with the store and never wait on a wall-clock tick.
package sched
