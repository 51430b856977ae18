package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// TaskBroadcast is the scheduler task kind of a broadcast shard's work: Ref is the
// broadcast id, Token the shard number, Viewer.TenantID the tenant.
const TaskBroadcast = "broadcast"

// Broadcast statuses.
const (
	BroadcastQueued    = "queued"
	BroadcastRunning   = "running"
	BroadcastDone      = "done"
	BroadcastFailed    = "failed"
	BroadcastCancelled = "cancelled"
)

// Broadcast is a broadcast's head: what GET /v1/broadcasts/{id} shows, plus what the
// service needs to run it.
type Broadcast struct {
	ID     string
	Status string // queued | running | done | failed | cancelled
	// Segment is the audience ("" for a list broadcast).
	Segment string
	Lane    string
	// Hash identifies the start request (a replay with another one is a CONFLICT).
	Hash string
	// Request is the send request, encoded by the service.
	Request []byte
	// Shards is how many shards the broadcast runs; ShardsDone how many finished.
	Shards, ShardsDone int
	// Recipients is the audience's size when the broadcast started; Written, Skipped and
	// Failed count the recipients processed so far, each once.
	Recipients, Written, Skipped, Failed int
	CreatedAt, StartedAt, FinishedAt     time.Time
}

// BroadcastShard is a shard's progress (BroadcastShardState).
type BroadcastShard struct {
	// Page is the number of pages done; Cursor the last member done ("" before any).
	Page   int
	Cursor string
	Done   bool
	// List is the shard's recipients for a list broadcast (nil for a segment's shard).
	List []string
	// Pending is the page in flight (nil when none), ending at member PendingEnd; when
	// PendingLast, the shard is done once it is.
	Pending     []string
	PendingEnd  string
	PendingLast bool
}

// NewBroadcast is what CreateBroadcast writes.
type NewBroadcast struct {
	// ID is the broadcast's id (inbox.CheckID rules), derived by the caller from its
	// idempotency key so that a repeated start finds the first.
	ID string
	// Segment is the audience; List the recipients of a list broadcast instead (at most
	// 1,000, distinct, checked ids). Exactly one of them is set.
	Segment string
	List    []string
	// Recipients is the audience's size (the segment's count, or len(List)).
	Recipients int
	Lane       string
	Hash       string
	Request    []byte
	// Due is when the shards' first tasks are due (a scheduled broadcast); zero or a
	// time not after now: at once. The broadcast stays queued until then.
	Due time.Time
}

// BroadcastCounts are the outcomes of one page, added to the head at its checkpoint.
type BroadcastCounts struct {
	Written, Skipped, Failed int
}

// BroadcastTask is the scheduler task running shard of broadcast id of tenantID, the
// run after seq pages (its id is derived from all of these, so a repeated scheduling of
// the same continuation writes one task).
func BroadcastTask(tenantID, id string, shard, seq int, due time.Time) Task {
	h := sha256.New()
	for _, part := range []string{tenantID, id, strconv.Itoa(shard), strconv.Itoa(seq)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return Task{ID: TaskBroadcast + ":" + hex.EncodeToString(h.Sum(nil)[:16]), Kind: TaskBroadcast, Due: due,
		Viewer: Viewer{TenantID: tenantID}, Ref: id, Token: strconv.Itoa(shard)}
}

// MaxSegmentChange is the most member ids (add and remove together) one UpdateSegment
// takes.
const MaxSegmentChange = 1000
