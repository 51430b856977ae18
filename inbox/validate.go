package inbox

import (
	"unicode"
	"unicode/utf8"
)

// MaxIDBytes is the longest tenant, user, actor, target or idempotency key id accepted.
const MaxIDBytes = 256

// CheckID reports whether s may become part of a DynamoDB key: 1..MaxIDBytes bytes of valid
// UTF-8, without the key delimiter '#' and without control characters. It returns a
// BAD_USER_INPUT *Error naming field otherwise. Every id that reaches a key passes here
// first, so no input can break out of its key segment.
func CheckID(field, s string) error {
	switch {
	case s == "":
		return Errorf(CodeBadUserInput, "%s must not be empty", field)
	case len(s) > MaxIDBytes:
		return Errorf(CodeBadUserInput, "%s must be at most %d bytes", field, MaxIDBytes)
	case !utf8.ValidString(s):
		return Errorf(CodeBadUserInput, "%s must be valid UTF-8", field)
	}
	for _, r := range s {
		if r == '#' {
			return Errorf(CodeBadUserInput, "%s must not contain '#'", field)
		}
		if unicode.IsControl(r) {
			return Errorf(CodeBadUserInput, "%s must not contain control characters", field)
		}
	}
	return nil
}

// CheckViewer checks both ids of v with CheckID.
func CheckViewer(v Viewer) error {
	if err := CheckID("tenant", v.TenantID); err != nil {
		return err
	}
	return CheckID("user", v.UserID)
}

// Validate checks the page arguments against the Relay cursor connections rules this API
// follows: not both first and last, each within 0..MaxPageSize, and a filter of at most 20
// types. Cursors are checked by the store, which alone can decode them.
func (q PageQuery) Validate() error {
	if q.First != nil && q.Last != nil {
		return Errorf(CodeBadUserInput, "pass either first or last, not both")
	}
	for _, n := range []struct {
		name string
		v    *int
	}{{"first", q.First}, {"last", q.Last}} {
		if n.v != nil && (*n.v < 0 || *n.v > MaxPageSize) {
			return Errorf(CodeBadUserInput, "%s must be between 0 and %d", n.name, MaxPageSize)
		}
	}
	if q.First != nil && q.Before != "" {
		return Errorf(CodeBadUserInput, "before goes with last, not with first")
	}
	if q.Last != nil && q.After != "" {
		return Errorf(CodeBadUserInput, "after goes with first, not with last")
	}
	if len(q.Types) > MaxFilterTypes {
		return Errorf(CodeBadUserInput, "filter.types takes at most %d types", MaxFilterTypes)
	}
	for _, t := range q.Types {
		if t == "" || len(t) > MaxIDBytes {
			return Errorf(CodeBadUserInput, "filter.types entries must be 1..%d bytes", MaxIDBytes)
		}
	}
	return nil
}

// Validate checks a send request: the idempotency key, 1..MaxRecipients recipients each a
// valid id, a type, the actor and target ids, and a payload of at most MaxPayloadBytes.
func (in SendInput) Validate() error {
	if err := CheckID("idempotencyKey", in.IdempotencyKey); err != nil {
		return err
	}
	if len(in.Recipients) == 0 {
		return Errorf(CodeBadUserInput, "recipients must not be empty")
	}
	if len(in.Recipients) > MaxRecipients {
		return Errorf(CodeBadUserInput, "at most %d recipients per call", MaxRecipients)
	}
	for _, r := range in.Recipients {
		if err := CheckID("recipient", r); err != nil {
			return err
		}
	}
	if in.Type == "" || len(in.Type) > MaxIDBytes {
		return Errorf(CodeBadUserInput, "type must be 1..%d bytes", MaxIDBytes)
	}
	if len(in.Category) > MaxIDBytes {
		return Errorf(CodeBadUserInput, "category must be at most %d bytes", MaxIDBytes)
	}
	if in.Actor != nil {
		if err := CheckID("actor.id", in.Actor.ActorID); err != nil {
			return err
		}
	}
	if in.Target != nil {
		if err := CheckID("target.id", in.Target.TargetID); err != nil {
			return err
		}
		if err := CheckID("target.kind", in.Target.Kind); err != nil {
			return err
		}
	}
	if len(in.Payload) > MaxPayloadBytes {
		return Errorf(CodeBadUserInput, "payload must be at most %d bytes of JSON", MaxPayloadBytes)
	}
	if len(in.Title)+len(in.Body) > MaxPayloadBytes {
		return Errorf(CodeBadUserInput, "title and body must be at most %d bytes together", MaxPayloadBytes)
	}
	return nil
}
