// Package delivery runs the channel deliveries a send queues: the scheduler's
// inbox.TaskDeliver tasks, one per delivery record (notification × channel, one per push
// device) that a recipient's routing decision queued, due at once, at the end of the
// recipient's quiet hours, or at a retry's time.
//
// A task names its record: Viewer.TenantID, Ref (the notification id) and Token (the
// record key: "EMAIL", "SMS", "WEBHOOK", "PUSH#{deviceId}"). Handler.Handle:
//
//  1. picks the adapter of the record's channel (Channels; a push record's platform
//     picks APNs or FCM). No adapter configured: the record becomes SKIPPED no_provider.
//     A webhook reads the tenant's URL and secret now (store.CachedTenantSettings): none
//     configured any more, SKIPPED no_webhook.
//  2. claims the record (store.ClaimDelivery: QUEUED and unclaimed → claimed until
//     now + Timeout + ClaimMargin, attempts + 1) before calling the provider;
//  3. for a record that waited (deferred by quiet hours, or a retry), checks the
//     recipient's preferences of now (store.RecheckDelivery): an opt-out or mute made
//     since the send skips it with that reason; for a push record, checks that the device
//     is still the recipient's (store.RecheckDevice): a token another user of the tenant
//     registered since is SKIPPED device_moved, one unregistered or pruned since no_device;
//  4. sends once, within Timeout (the adapter's rate limit wait included);
//  5. records what the provider answered, conditioned on the claim's attempt: SENT with
//     the provider's message id; a transient failure (5xx, 429, a timeout) → retried
//     through a new deliver task at now + max(Retry-After, backoff), where backoff is
//     exponential with full jitter (uniform in [0, min(MaxBackoff, Backoff·2^(n-1))]
//     after the n-th attempt), and no sooner than a millisecond after the running task's
//     due time (the new task has its id: in the same millisecond it would be the same
//     item, deleted as done), until Attempts sends, then FAILED; a permanent failure →
//     FAILED at once; an unregistered device token → the device is removed from the
//     user's profile (store.PruneDevice) and the record FAILED.
//
// The send-once rule: a record is only sent under a claim, and a claim that expired
// without an outcome (the worker died between the provider's acceptance and the record's
// update, or during the call) is never sent again: the task that finds it
// (ClaimOrphaned) marks the record SENT with an "unconfirmed" error
// (store.DeliveryUnconfirmed). The provider got the message at most once. So that a
// DynamoDB outage does not turn into such an orphan, each outcome write that the store
// gives up on (THROTTLED, UNAVAILABLE) is repeated with backoff for up to 10 s; an outage
// longer than that still leaves the record SENT "unconfirmed", even after a refusal. Every attempt of
// one record carries the same Message.IdempotencyKey, so providers that deduplicate (the
// webhook's webhook-id, the email's Message-ID, APNs' apns-id) see one message even when
// a timed-out attempt had in fact been accepted.
//
// Tasks are at least once (package sched): a second run of a handled task finds the
// record done (ClaimDone) and writes nothing; a run that finds another run's live claim
// (ClaimBusy) fails with ErrBusy, so the scheduler tries the task again later, by when the
// claim has an outcome or has expired.
package delivery
