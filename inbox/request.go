package inbox

import "time"

// Request states.
const (
	// RequestAccepted is a request written and not yet processed to the end.
	RequestAccepted = "accepted"
	// RequestDone is a request whose processing finished.
	RequestDone = "done"
)

// Request is one send request as stored.
type Request struct {
	TenantID string
	// Key is the idempotency key (checked with inbox.CheckID).
	Key string
	// Hash identifies the request's content (the service's canonical hash).
	Hash string
	// Body is the request document to process, Answer the accept's answer, Result the
	// outcome once done: opaque to the store (the service's JSON).
	Body   []byte
	Answer []byte
	Result []byte
	// State is RequestAccepted or RequestDone.
	State string
	// CreatedAt is when it was accepted; ExpiresAt when the key may be used afresh.
	CreatedAt time.Time
	ExpiresAt time.Time
}
