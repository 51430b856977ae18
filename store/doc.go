// Package store is the gateway's only view of DynamoDB: one table, its keys, items,
// cursors and every access pattern of README.md's Key design table (AP1..AP24 in the
// comments), through aws-sdk-go-v2. It is the only package that knows key formats (see
// keys.go) and it never imports the GraphQL layer.
//
// Every read is a GetItem, Query or BatchGetItem (never a Scan); every write that must be
// exact is a conditional TransactWriteItems or UpdateItem. The inbox's META item holds
// counters that equal, at every committed state, counts over the inbox's notifications:
// unreadCount and unseenCount, and per category c the same as cu#c and cs#c, where a
// notification counts when it is active (not archived, not snoozed; deleted and expired
// ones are gone) and effectively unread, or not seen:
//
//	W(n)    = max(readAllBefore, cr#category)            (read watermarks, ULIDs)
//	read(n) = n.mark == "R" && !(W newer than n.markedAt)
//	       || n.id <= W && !(n.mark == "U" && n.markedAt > W)
//	seen(n) = n.seenAt set || n.id <= max(seenAllBefore, cz#category)
//
// The latest action wins: an explicit mark made after the watermark beats it, the
// watermark beats an older mark. Seen never goes back; markRead marks seen too, and
// markAllRead moves the seen watermarks with the read ones.
//
// What keeps the counters exact under concurrency (meta.go, state.go):
//   - META.clock is the newest ULID written into the inbox (a notification id, a mark
//     time or a watermark). Every write that adds one raises the clock in the same
//     write, on condition that it is above it, so the clock only grows, and every
//     watermark is set above the clock: no notification or explicit mark can sit above a
//     watermark without having been counted after it.
//   - A state change reads META and the items (one consistent BatchGetItem), computes
//     each item's contribution before and after in memory, and writes the items (each on
//     condition that its rev is unchanged) with ONE META update: the deltas, and the
//     conditions that every watermark it used is unchanged. Counters only move by ADD,
//     so concurrent writes that pass their conditions commute.
//   - markAllRead and markAllSeen set counters to 0 on condition that META's version is
//     the one read; per category, on condition that the category's counters are.
//   - A notification's group (groups.go, AP15) is written in the same transaction as the
//     notification, on condition that the group's rev is the one read, so a group's
//     members always agree with its notifications; a member's unread state is computed
//     against META's watermarks at read, like a notification's.
//
// Ids come from a monotonic ULID source, so within one process a write rarely has to
// retry; across processes, clock skew costs a retry, never a wrong count.
package store
