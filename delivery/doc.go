// Package delivery runs the channel deliveries a send queues: the scheduler's
// store.TaskDeliver tasks, one per (notification, channel) that a recipient's routing
// decision queued (due at once, or at the end of the recipient's quiet hours).
//
// No channel adapter exists yet (issue 11 plugs email, push, SMS and webhook providers in
// here): every task marks its delivery record SKIPPED with reason
// inbox.ReasonNoProvider, idempotently, so a status read shows what became of it.
package delivery
