// Package lease is a lease any background worker can hold on an item of the inbox table:
// a named right, held by one owner until a time, taken over by another owner once that
// time passed. The stream relay holds one. (The scheduler holds its shards in bulk
// through one roster item instead, package sched; it reads the per-shard leases of its
// earlier versions with List once at start.)
//
// A lease item carries the attributes owner (the holder's name), leaseUntil (Unix
// milliseconds) and entityType; its key comes from package store (the only package that
// knows key formats). Every change is a conditional write:
//
//   - TryAcquire: an UpdateItem on condition that the item does not exist, has expired or
//     is already ours. It keeps the item's other attributes, so a lease item can carry
//     its holder's checkpoint across takeovers (SetAttributes).
//   - Renew: extends leaseUntil on condition that the lease is still ours and unexpired.
//   - Release: clears owner and leaseUntil (keeping the other attributes) on condition
//     that it is ours, so a successor need not wait for the expiry.
//   - Fencing: Condition returns a ConditionCheck to put beside a write in a
//     TransactWriteItems (it commits only while the lease is ours); SetAttributes writes
//     attributes of the lease item on the same condition.
//
// Hold runs a function while renewing the lease every third of its duration, and cancels
// its context when the lease is lost or cannot be renewed before it would expire.
// Expiry compares the writer's clock with leaseUntil: owners' clocks are assumed to agree
// to well within a lease duration. The clock is Options.Clock (the real one by default),
// so tests expire, renew and take over leases by advancing a fake clock, never by
// waiting.
package lease
