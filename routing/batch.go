package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// CheckBatch checks a send's batch: Key a valid id, Window 1 s..24 h in whole
// milliseconds, MaxItems 2..1,000. Errors: BAD_USER_INPUT naming the member.
func CheckBatch(b inbox.Batch) error {
	if err := inbox.CheckID("batch.key", b.Key); err != nil {
		return err
	}
	if b.Window < inbox.MinBatchWindow || b.Window > inbox.MaxBatchWindow || b.Window%time.Millisecond != 0 {
		return inbox.Errorf(inbox.CodeBadUserInput, "batch.window must be a duration from 1s to 24h")
	}
	if b.MaxItems < inbox.MinBatchMaxItems || b.MaxItems > inbox.MaxBatchMaxItems {
		return inbox.Errorf(inbox.CodeBadUserInput, "batch.maxItems must be from %d to %d", inbox.MinBatchMaxItems, inbox.MaxBatchMaxItems)
	}
	return nil
}

// ParseBatch builds a send's batch from a transport's members: key ("" leaves the default
// to the service), window as a Go duration ("5m"), maxItems (nil: the default, 100).
// Errors: BAD_USER_INPUT for a window that is not a duration or a maxItems given out of
// 2..1,000 (other bounds: CheckBatch).
func ParseBatch(key, window string, maxItems *int) (inbox.Batch, error) {
	if len(window) > 32 {
		return inbox.Batch{}, inbox.Errorf(inbox.CodeBadUserInput, "batch.window must be a duration such as \"5m\"")
	}
	d, err := time.ParseDuration(window)
	if err != nil {
		return inbox.Batch{}, inbox.Errorf(inbox.CodeBadUserInput, "batch.window must be a duration such as \"5m\" (%q)", window)
	}
	b := inbox.Batch{Key: key, Window: d, MaxItems: inbox.DefaultBatchMaxItems}
	if maxItems != nil {
		// An explicit 0 is out of bounds, not the default (the service defaults a zero).
		if *maxItems < inbox.MinBatchMaxItems || *maxItems > inbox.MaxBatchMaxItems {
			return inbox.Batch{}, inbox.Errorf(inbox.CodeBadUserInput, "batch.maxItems must be from %d to %d", inbox.MinBatchMaxItems, inbox.MaxBatchMaxItems)
		}
		b.MaxItems = *maxItems
	}
	return b, nil
}

// BatchRef is the reference of the batch of a send of type typ with batch key key among
// one recipient's batches: 32 hex digits of SHA-256 over both, so a long type and key
// make a short sort key.
func BatchRef(typ, key string) string {
	sum := sha256.Sum256([]byte(typ + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}

// BatchState is a recipient's batch pointer as read: whether there is one, its state and
// how many sends joined it.
type BatchState struct {
	Exists bool
	// State is BatchOpen, BatchClosing or BatchClosed.
	State           string
	Count, MaxItems int
}

// States of a batch pointer (BatchState.State).
const (
	BatchOpen    = "open"
	BatchClosing = "closing"
	BatchClosed  = "closed"
)

// BatchStep is what a send does with its recipient's batch.
type BatchStep int

const (
	// StepOpen: no batch is open: the send opens one.
	StepOpen BatchStep = iota
	// StepJoin: the send joins the open batch.
	StepJoin
	// StepCloseFirst: the open batch is full, or its close began: close it, then open.
	StepCloseFirst
)

// NextBatchStep decides a send's step from its recipient's batch as read.
func NextBatchStep(s BatchState) BatchStep {
	switch {
	case !s.Exists || s.State == BatchClosed:
		return StepOpen
	case s.State == BatchOpen && s.Count < s.MaxItems:
		return StepJoin
	default:
		return StepCloseFirst
	}
}

// KeepsActivity reports whether a send joining a batch of count activities is kept among
// its activities (the first inbox.MaxBatchActivities are).
func KeepsActivity(count int) bool { return count < inbox.MaxBatchActivities }

// BatchData is a batch's template data: the first send's data (a JSON object; else
// empty) with `activities` (each {actor: {id, name}, data, createdAt}) and
// `total_activities` set, as templates see them.
func BatchData(data inbox.JSON, acts []inbox.Activity, total int) (inbox.JSON, error) {
	m := map[string]any{}
	if len(data) > 0 {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		if o, ok := v.(map[string]any); ok {
			m = o
		}
	}
	list := make([]map[string]any, len(acts))
	for i, a := range acts {
		e := map[string]any{"createdAt": a.CreatedAt.UTC().Format(time.RFC3339Nano)}
		if a.ActorID != "" {
			e["actor"] = map[string]any{"id": a.ActorID, "name": a.ActorName}
		}
		if len(a.Data) > 0 {
			e["data"] = json.RawMessage(a.Data)
		}
		list[i] = e
	}
	m["activities"] = list
	m["total_activities"] = total
	return json.Marshal(m)
}
