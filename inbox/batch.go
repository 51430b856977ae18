package inbox

import (
	"fmt"
	"time"
)

// TaskBatch is the scheduler task that closes a batch at the end of its window (Ref: the
// batch's reference, Token: its notification id; the send service handles it).
const TaskBatch = "batch"

// NotificationBatching is the summary status of a batch's notification until its close:
// sends are joining it, nothing is in the inbox yet.
const NotificationBatching = "batching"

// Bounds of a send's batch (Batch; DESIGN.md "Workflows (v3)").
const (
	MinBatchWindow       = time.Second
	MaxBatchWindow       = 24 * time.Hour
	MinBatchMaxItems     = 2
	MaxBatchMaxItems     = 1000
	DefaultBatchMaxItems = 100
	// MaxBatchActivities is how many activities a batch keeps (the first ones joined);
	// the notification counts every one (Notification.ActivityCount).
	MaxBatchActivities = 10
)

// Batch collects a recipient's sends of one type and Key into one notification: the first
// send opens the batch, later ones within Window join it, and at the close (open + Window,
// or at once when MaxItems sends joined) ONE notification is written and routed.
type Batch struct {
	// Key names the batch among the recipient's batches of the send's type (CheckID rules;
	// the service defaults it to the type).
	Key string `json:"key"`
	// Window is how long the batch stays open after its first send, 1 s..24 h, whole
	// milliseconds.
	Window time.Duration `json:"window"`
	// MaxItems closes the batch at once when that many sends joined it, 2..1,000.
	MaxItems int `json:"maxItems"`
}

// Activity is one send that joined a batch: its actor, its data (the template's
// variables, else the payload) and when it joined.
type Activity struct {
	ActorID   string    `json:"actorId,omitempty"`
	ActorName string    `json:"actorName,omitempty"`
	Data      JSON      `json:"data,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Via is the notification the API shows the activity on (its actor's id is anchored
	// on it, as Actor.Via); "" in storage.
	Via string `json:"-"`
	// Actor is the activity's actor as the notification carries it (an announcement's
	// own, Notification.Embedded: no profile item exists for it); nil when the actor is
	// the profile ActorID names. Never stored.
	Actor *Actor `json:"-"`
}

// BatchJoin is one recipient's send into a batch (the store's JoinBatch): the guard of
// IdempotencyKey for UserID holds InputHash and the batch's notification id, in the same
// transaction as the join.
type BatchJoin struct {
	TenantID, UserID          string
	IdempotencyKey, InputHash string
	// Ref is the batch's reference among the recipient's batches (routing.BatchRef of
	// the send's type and batch key).
	Ref   string
	Batch Batch
	// Activity is what the send adds to the batch.
	Activity Activity
	// Doc is what the close needs to write the notification (opaque to the store; kept by
	// the batch from its first send), at most MaxPayloadBytes*4 bytes.
	Doc []byte
}

// BatchJoined is what a join did.
type BatchJoined struct {
	// ID is the batch's notification id.
	ID string
	// Opened is true when this send opened the batch.
	Opened bool
	// Count is the batch's activities once joined.
	Count int
	// Duplicate is true when the guard was there: an earlier call of the key joined.
	Duplicate bool
	// Full is true when the batch reached its MaxItems and is not closed: it is to be
	// closed at once (a replay too: the first call's close may have failed).
	Full bool
}

// BatchClosing is the store's answer to a join that found its batch full or being
// closed: the caller closes batch ID (idempotent) and joins again, into a new batch.
type BatchClosing struct {
	Ref, ID string
}

func (e *BatchClosing) Error() string {
	return fmt.Sprintf("batch %s is full or closing", e.ID)
}

// FrozenBatch is a batch as its close found it: frozen (no send joins it any more).
type FrozenBatch struct {
	Ref, ID    string
	Count      int
	Activities []Activity
	Doc        []byte
}

// BatchClose, on a send, makes it the close of a batch: its notification (id ID, the
// batch's) carries Count and Activities, and the same transaction marks the batch closed.
type BatchClose struct {
	Ref, ID    string
	Count      int
	Activities []Activity
}
