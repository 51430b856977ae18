// Package service owns sending: the rules between the transports (GraphQL
// sendNotification, REST POST /v1/notifications) and the store's transactional
// primitives, so that both transports send the same way.
//
// A send is accepted durably (Accept): the request is validated completely (ids that
// could break out of a key, at most MaxRecipients recipients, sendAt within a year, the
// template exists and renders in strict mode) before anything is written, its
// notification ids are chosen, and ONE TransactWriteItems writes the request item (keyed
// by the tenant's idempotency key, kept for the idempotency window) and a scheduler task
// of kind TaskSend that runs it again should this process die. A replay with the same
// body answers the first answer (Replayed); another body under the same key is CONFLICT.
//
// Processing runs in one of two lanes, each a bounded pool of workers
// (Options.Transactional, Options.Bulk): bulk work never takes a transactional worker.
// It writes the recipients in chunks of inbox.MaxRecipients through the send loop
// (Writer: the store's reads and one transaction per recipient, with the pre-assigned ids,
// idempotent per recipient; rendering, decisions and publishing here), then marks the
// request done and deletes its task in one transaction. A send with sendAt is only scheduled: its task runs it.
// A segment send must name a segment with members; its processing, which starts the
// durable broadcast (Broadcaster; queued until sendAt, if any), is done before Accept
// answers, so that the broadcast id answered is readable at once.
package service
