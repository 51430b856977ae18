// Package sched is the gateway's durable scheduler: tasks (inbox.Task) written to the
// table by package store (Schedule, or ScheduleAction inside another write's
// transaction) are handed, when due, to the Handler registered for their kind, on
// whichever instance holds the task's shard. Snooze wake-ups, expiries, scheduled sends,
// channel deliveries and their retries, and broadcasts' shard runs run on it.
//
// Tasks are write-sharded (shard = hash of the task id) and time-bucketed (one
// partition per shard and minute; see store/keys.go).
//
// Leases in bulk. Every instance runs a Scheduler; the instances share the shards through
// one roster item (roster.go): every instance's membership (its expiry), every shard's
// holder and checkpoint. Every Lease/3 (10 s by default) an instance sends one
// UpdateItem that renews its membership, saves the checkpoints that moved and returns the
// whole roster; from it the instance holds a fair share, ceil(shards / live members),
// taking shards that are free or whose holder's membership expired (one conditional
// write for up to 16 of them), and giving up shards above its share so that a new
// instance gets some. A membership dated more than an hour ahead (forged, or a clock
// far off) counts as none; a checkpoint past the current minute is ignored; roster
// entries of the wrong type are taken over or reset, never a write refused forever. A shard is held while its holder's membership lasts: one renewal covers
// all the shards of an instance, and a crashed instance's shards are taken over within
// Lease and a heartbeat. Writes are fenced: checkpoints are saved on condition that the
// shard is still the writer's and its membership unexpired, and an instance that cannot
// renew stops its shard workers a sixth of the lease before it expires, so two
// instances never run one shard at once (as long as their clocks agree to within that).
//
// Writers wake the shard they write. After every write of a task commits, the store
// tells the scheduler its shard and due time (store.Store.NotifyDue → Notify). On the
// instance holding the shard, the worker arms a timer for the due time (or reads the
// shard at once when it has come); for a shard held by another instance, the wake-up goes
// through the broker (Options.Bus: live.Local in one process, Redis pub/sub between
// processes) to every instance, and the holder arms its timer. A worker remembers, per
// minute bucket, the earliest due time it heard of, in order (4 bytes a minute, at most
// 10,000 minutes a shard: the latest are forgotten past that, read ahead when near), and
// each pass reads its current minute whole, so it also learns the next task due in it
// (read ahead): tasks of that minute written before the pass, even with no wake-up, run
// at their time. A task written before its shard changed hands (a restart, a takeover:
// the new holder heard of nothing) runs at its time too: the first pass of a shard and
// every safety-net pass read the next minute ahead (its first task), so each minute's
// tasks are known before the minute begins.
//
// Polling is a slow safety net. Each held shard is also read every Poll (one minute by
// default), just after the previous minute's Grace ended: the previous minute one last
// time (to close it) and the next minute ahead. The current minute is left to the passes
// its read-ahead timed when it was read ahead before it began (every task written into
// it since woke the shard), and read otherwise. A task whose wake-up was lost runs at
// most about Poll + Grace late, or, when its minute had been read ahead, once that minute
// closed (a minute more at most). Idle, an instance of 16 shards makes about 38 DynamoDB
// calls a minute (6 heartbeats; per shard and minute two Queries), three instances about
// 50.
//
// A shard is processed from its checkpoint: the oldest minute that may still hold tasks.
// Each pass reads, for every minute from the checkpoint to now, the tasks due by now (a
// Query per minute, paginated), starts those not running yet (at most Concurrency
// running at once per shard: a slow handler holds a slot, not the shard), and deletes
// each one whose handler succeeded. The checkpoint moves past a minute once a Query finds
// no task left in it and the minute ended more than Grace ago, so a restart of every
// instance loses nothing and a long outage is caught up minute by minute; the roster
// saves it at the next heartbeat (a lagging checkpoint only costs a few more Queries to
// the next holder).
//
// Delivery is at least once. A handler may see a task again after a crash, a takeover or
// a failed delete: handlers must be idempotent and check the task's Token (for a snooze,
// the snoozedUntil the task was scheduled for) against the current state. A handler's
// error reschedules the task (one more attempt, due after an exponential backoff with
// jitter) until MaxAttempts, after which the task is logged and dropped (counted in
// Stats). A task whose kind has no handler on this instance is retried the same way (an
// instance of a newer version may know it).
//
// Upgrading from the scheduler that leased each shard on its own item (SHARD#n): a shard
// the roster has no checkpoint for starts from that item's, and a shard whose old lease
// was live when the instance started is left alone until that lease's expiry. An
// instance of the earlier version does not read the roster: while both versions run
// (a rolling deploy), a shard may run on two instances at once, which at-least-once
// handlers tolerate.
//
// Time comes from Options.Clock (the real clock unless a test passes a fake one): the due
// times read, the memberships' expiry, the timers, the heartbeats and the retry delays.
// The tests advance a fake clock shared with the store and never wait on a wall-clock
// tick.
package sched
