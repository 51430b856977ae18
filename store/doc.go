// Package store is the gateway's only view of DynamoDB: one table, its keys, items,
// cursors and every access pattern of README.md's Key design table (AP1..AP12 in the
// comments), through aws-sdk-go-v2. It is the only package that knows key formats (see
// keys.go) and it never imports the GraphQL layer.
//
// Every read is a GetItem, Query or BatchGetItem (never a Scan); every write that must be
// exact is a conditional TransactWriteItems or UpdateItem. The badge counter lives in the
// inbox's META item and equals, at every committed state, the number of the inbox's
// notifications whose effective read state is unread:
//
//	read(n) = n.mark == "R" && !(watermark newer than n.markedAt)
//	       || n.id <= watermark && !(n.mark == "U" && n.markedAt > watermark)
//
// where watermark is META.readAllBefore, a ULID set by markAllRead. The latest action wins:
// an explicit mark made after the watermark beats it, the watermark beats an older mark.
//
// What keeps the counter exact under concurrency is META.clock: the newest ULID written
// into the inbox (a notification id or a mark time). Every write that adds one raises the
// clock in the same transaction, on condition that it is above it, so the clock only
// grows; markAllRead sets a watermark above the clock, on the same condition. Hence no
// notification or explicit mark can ever sit above a watermark without having been
// counted after it. Ids come from a monotonic ULID source, so within one process a write
// rarely has to retry; across processes, clock skew costs a retry, never a wrong count.
package store
