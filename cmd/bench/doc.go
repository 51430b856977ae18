// Command bench seeds a realistic inbox data set and measures the gateway side by side
// with hand-written DynamoDB calls, in one process run, on one engine:
//
//  1. gateway vs raw: the initial inbox load through HTTP+GraphQL (a loopback listener,
//     real JWTs) against one Query + one BatchGetItem + JSON encoding by hand; req/s,
//     p50/p99, and the gateway process's own CPU time and allocations per request. Both
//     sides warm up in turn, then run in halves (gateway, raw, raw, gateway) so that the
//     engine's JIT warming up does not weigh on one side only.
//  2. batched vs naive: the same query with the per-operation dataloaders against a mode
//     without them (every actor and target read by a call of its own); DynamoDB calls per
//     request and p50/p99.
//  3. the mark-alls are O(1): markAllRead, markAllSeen and markAllRead(filter:
//     {categories}) through HTTP+GraphQL, p50 for an inbox with -few-size (10) unread and
//     unseen notifications against one with -big-size (10,000), each of one category
//     (goal: p50 ratio ≤ 1.5). META is restored before every call, so each finds the same
//     counts; per mutation the two users run in halves (few, many, many, few).
//  4. send throughput: notifications written per second through sendNotification
//     (100 recipients per call) against a hand-written TransactWriteItems loop.
//  5. memory: RSS at rest and under load.
//  6. shared profile cache: the inbox load through a gateway whose store shares actor and
//     target profiles across requests (store.WithProfileCache, -profile-cache-size and
//     -profile-cache-ttl) against scenario 1's gateway without it; hit rate, DynamoDB
//     calls per request, p50/p99.
//  7. live: S concurrent `subscription { unreadCount }` subscribers (-live-subscribers,
//     1000 and 10000), one WebSocket (graphql-transport-ws) and one distinct seeded user
//     each, opened by a child process (this binary re-executed with -livegen), for each
//     broker of -live-brokers: local (one instance) and redis (redis-server started here,
//     two instances: subscribers on A, mutations to B). It reports the gateway process's
//     RSS and goroutines per subscriber, then sends markRead/markUnread/sendNotification at
//     -live-rate (50/s) for -live-duration (10s) to random subscribed users and times each
//     change from just before its HTTP request to the frame with the expected count
//     (p50/p99); then a burst of -live-burst toggles on one user, counting the frames of a
//     fast and of a slow subscriber (coalescing); then -live-events (200) rounds of
//     sendNotification + markRead on one user with an `inboxEvents` subscriber, each event
//     timed from the store's publish of the committed write to its frame (goal p99 ≤ 50 ms;
//     READ is measured once the store publishes marks with their kind). -skip live leaves
//     it out.
//  8. relay: an outside write reaches a subscriber through the DynamoDB Streams relay
//     (issue 4's goal: p99 ≤ 1 s). With redis-server started here (skipped with a note when
//     it is missing), a relay runs in this process (relay.New + Run on its own context, the
//     defaults of `go run . relay`) publishing to Redis, and one gateway instance holds
//     -relay-subscribers (200) WebSocket subscribers opened by this process; then
//     -relay-writes (100) TransactWriteItems at -relay-rate (10/s), straight into the table
//     with the SDK (a notification item + META ADD unreadCount 1, version 1, as the store
//     writes them), each timed from just before the call to the frame with the new count at
//     that user's subscriber. The relay's polling (200ms after a non-empty read, up to 500ms
//     when idle) bounds it. -skip relay leaves it out.
//  9. abuse: the attacks of issue 8 (directive flood, 1,000 padded documents for the
//     query cache, introspection, slow body, idle connection, without a token; a silent
//     WebSocket peer, 4,900 viewer aliases, 2,400 node aliases, 500 markRead aliases and
//     the largest alias documents the default limits let through, with one) against the gateway binary in a child process, a fresh one per
//     attack: its RSS for one hostile request and for -abuse-conc (8) at once, a normal
//     client's p50/p99 at rest and during the attack, how long connections are kept,
//     and the DynamoDB calls of aliased documents against the same without aliases
//     (from the gateway's /metrics); and the attacks of issue 16 (Twilio callbacks of a
//     1 MiB form of 10,000 fields and of a 960 KiB query string, a 1 MiB SendGrid batch,
//     without a token; Liquid ranges to the int64 limit, of 20,000,000 integers and
//     bounded by data, PUT and sent, and a send to 40 users each with a private-use
//     locale of a large template, with a service token): the gateway's CPU-seconds and
//     RSS growth for one request, its work after the answer included (a send's until its
//     recipients have it); see abuse.go and abusecost.go. -abuse-only picks attacks,
//     -abuse-rss-cap (2048 MiB) kills a gateway above it. -skip abuse leaves it out.
//  10. sched: the durable scheduler's lag (issue 9's goal for snooze wake-ups: p99 ≤ 2 s).
//     -sched-instances (1) schedulers run in this process on -sched-shards (16) shards,
//     polling every -sched-poll (250ms); each run writes -sched-tasks (10,000) tasks due
//     within one minute, spread evenly over -sched-spread of it (runs 1m and 0s: through
//     the minute, and all at one instant), with a handler doing one PutItem; lag is from a
//     task's due time to the return of its handler's write (p50/p90/p99/max), and every
//     task must run once. Each run waits for its minute (up to about 1.5 minutes).
//     -skip sched leaves it out; see sched.go.
//  11. groups vs inbox: the same users' page of 20 groups (counts, first actors, target,
//     latest) against their initial inbox page, both through the gateway, warmed up in
//     turn and measured in halves (groups, inbox, inbox, groups); p50 ratio (goal ≤ 1.25)
//     and DynamoDB calls per request (both one Query + one BatchGetItem). -skip groups
//     leaves it out; see groups.go.
//  12. snooze: wake-up lag end to end (issue 9's goal: p99 ≤ 2 s spread over the minute).
//     -snooze-notifications (10,000) sent through the store to -snooze-users (1,000), then
//     per run snoozed through Store.ApplyState (OpSnooze, one call per user) until due
//     times within one minute, spread by user over -snooze-spread of it (1m, then 0s: all
//     at one instant); woken by the gateway's own scheduler (sched.NewInbox, the real
//     Store.Wake handler) in this process on -sched-shards, polling every -sched-poll. Lag
//     is from snoozedUntil to the store's publish of the WOKE change (p50/p90/p99/max);
//     wake-ups published twice or never are counted, and every user's badge is compared
//     with a recount of its notifications afterwards. Each run waits for its minute
//     (about 2 to 2.5 minutes a run). -skip snooze leaves it out; see snooze.go.
//  13. broadcast: issue 10's broadcast throughput (goal: ≥ 0.8× raw). A segment of
//     -broadcast-members (20,000 by default; the recorded run used 100,000) members added
//     through Store.UpdateSegment, then a broadcast to it through service.Broadcasts on a
//     sched.Scheduler in this process (pages of 100 through service.Writer), timed from Start
//     to its finishedAt; against a raw TransactWriteItems loop writing, for as many fresh
//     users, the transaction one recipient costs (recorded from a real service.Writer of the
//     same notification), at the broadcast's most recipients in flight (segment shards ×
//     8), half before the broadcast and half after. Every call asks for its consumed
//     capacity: WCU and RCU per recipient by operation and partition kind, and 1,000,000
//     recipients on DynamoDB on paper from them and DynamoDB's documented limits.
//     -skip broadcast leaves it out; see broadcast.go (its rig is reusable).
//  14. lanes: issue 10's lane isolation (goal: a transactional send's p99 while a broadcast
//     runs ≤ 2× its p99 idle). One send pipeline as app builds it (service.Service with
//     the default lanes, service.Broadcasts writing its pages through RunInLane, one
//     scheduler for the broadcast's shards and the service's recovery tasks); -lanes-rate
//     (20/s) transactional service.Send calls with one recipient, open loop, timed from the
//     call to the return (the notification stored; each checked once with
//     Store.Notifications): idle (-duration/2 before the broadcast and after it), busy
//     (-duration while a broadcast to a -lanes-members (20,000) segment runs in the bulk
//     lane; cancelled after). It also reports the sends' own DynamoDB time (their calls
//     timed at the client), the rest of their time, the most in flight and the engine's
//     CPU per phase, to tell the lanes from the shared engine. -skip lanes leaves it out;
//     see lanes.go.
//  15. accept: issue 10's accept latency (goal: p50 ≤ 1.5× raw). POST /v1/notifications
//     through the handler app builds (service token, a fresh Idempotency-Key, one
//     recipient, priority bulk: 202 at accept) against one PutItem of an item holding the
//     request body, same DynamoDB client, -concurrency callers in this process, halves
//     gateway, raw, raw, gateway (the bulk lane's processing of what a gateway half
//     accepted is left to finish before the next half); also one request at a time, the
//     calls and units per request (a POST's processing included), and GraphQL
//     sendNotification (waits for the write) for context. -skip accept leaves it out; see
//     accept.go.
//  16. deliver: issue 11's channel deliveries/s (goal: ≥ 0.8× the raw client loop). A
//     local SMTP server (go-smtp) and webhook receiver (net/http) in this process; for
//     EMAIL and WEBHOOK (-deliver-channels), -deliver-messages (2,000) messages a side at
//     -deliver-concurrency (8): the delivery handler as app builds it (claim, adapter,
//     record SENT) over records queued by real sends, the raw client with the same two
//     record writes by hand, the adapter alone, and the raw client alone (go-mail
//     DialAndSend; net/http POST signed by hand), in halves; deliveries/s, p50/p99, the
//     engine work per delivery, every message counted at the sink and a sample of the
//     records read back SENT. -skip deliver leaves it out; see deliver.go.
//  17. e2e: issue 11's end-to-end latency: a gateway as serve builds it (HTTP surface and
//     scheduler, email to a local SMTP server), transactional POST /v1/notifications with
//     an email template at -e2e-rate (10/s, open loop), each timed to its 202 and to the
//     end of DATA of its email at the server; idle (-e2e-duration in halves, before and
//     after) and busy (-e2e-duration while an in-app broadcast to a -e2e-members
//     (100,000) segment runs in the bulk lane; cancelled after). p50/p90/p99 per phase,
//     lost emails (-e2e-timeout). -skip e2e leaves it out; see e2e.go.
//
// -only runs the named scenarios alone (the complement of -skip).
//
// It prints a table and writes bench/results/latest.{json,md} plus a dated copy. The
// recorded runs, their tables and what they mean are in bench/README.md.
//
//	go run ./cmd/bench                                  DynamoDB Local, in memory (started here)
//	go run ./cmd/bench -duration 5s -users 50           smaller and faster
//	go run ./cmd/bench -endpoint http://127.0.0.1:8000  any DynamoDB endpoint (static local credentials for localhost)
//	go run ./cmd/bench -endpoint aws                    DynamoDB itself (standard AWS configuration)
//	go run ./cmd/bench -skip inbox,naive,cache,markall,send,relay,abuse,sched,snooze -users 4 -big-users 0
//	                                                    the live scenario alone (small seed)
//	go run ./cmd/bench -skip inbox,naive,cache,markall,send,live,abuse,sched,snooze -users 4 -big-users 0 -out /tmp/relay
//	                                                    the relay scenario alone
//	go run ./cmd/bench -endpoint http://127.0.0.1:8765 -only abuse -users 2 -per-user 5 -big-users 0 -few-size 0 -out /tmp/abuse
//	                                                    the abuse scenario alone (small seed; issue 8's attacks about 3 minutes)
//	go run ./cmd/bench -endpoint http://127.0.0.1:8765 -only abuse -users 2 -per-user 5 -big-users 0 -few-size 0 -out /tmp/abuse16 \
//	    -abuse-only twilio-form-fields,twilio-long-query,sendgrid-big-body,template-range-int64-put,template-range-20m-put,template-range-int64-send,template-range-20m-send,template-range-data-send,template-locales-40
//	                                                    issue 16's attacks alone (about 6 minutes on a gateway without their fixes)
//	go run ./cmd/bench -skip inbox,naive,cache,markall,send,live,relay,abuse,snooze -users 0 -big-users 0 -few-size 0 -out /tmp/sched
//	                                                    the sched scenario alone (no seed; about 4 minutes)
//	go run ./cmd/bench -skip inbox,naive,cache,send,live,relay,abuse,sched -users 0 -big-users 1 -out /tmp/state
//	                                                    the mark-alls and snooze wake-ups alone (about 7 minutes)
//	go run ./cmd/bench -skip naive,cache,markall,send,live,relay,abuse,sched,snooze -cpuprofile cpu.pprof -memprofile mem.pprof
//	                                                    profile the gateway side of scenario 1 (its first half):
//	                                                    go tool pprof -top cpu.pprof
//	                                                    go tool pprof -sample_index=alloc_objects -base mem.pprof.base -top mem.pprof
//
// The HTTP load of scenarios 1 and 2 comes from a child process (this binary re-executed
// with -loadgen), so the CPU time and allocations measured in this process are the
// gateway's own: not the load generator's, and not DynamoDB Local's (a separate JVM).
package main
