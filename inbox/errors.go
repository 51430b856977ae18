package inbox

import (
	"errors"
	"fmt"
)

// Error codes: the values of a GraphQL error's extensions.code.
const (
	CodeUnauthenticated = "UNAUTHENTICATED"
	CodeForbidden       = "FORBIDDEN"
	CodeBadUserInput    = "BAD_USER_INPUT"
	// CodeBadRequest is an HTTP request the GraphQL transports cannot take (a method,
	// a content type, a mutation sent with GET).
	CodeBadRequest = "BAD_REQUEST"
	CodeNotFound   = "NOT_FOUND"
	// CodeConflict refuses a request that contradicts one already made: an idempotency key
	// used again with another body (REST 409).
	CodeConflict = "CONFLICT"
	// CodePayloadTooLarge refuses a request whose body is over its operation's limit
	// (REST 413), before any of it is parsed or verified.
	CodePayloadTooLarge = "PAYLOAD_TOO_LARGE"
	// CodeThrottled is a retryable refusal: DynamoDB throttled the request (or an inbox
	// stayed contended) for the whole retry budget. Nothing was half written.
	CodeThrottled = "THROTTLED"
	// CodeUnavailable is a retryable storage outage, or a request that ran out of its
	// deadline (see httpapi's deadlines): when DynamoDB kept failing (HTTP 5xx,
	// InternalServerError, connections reset or timing out) for the whole retry budget.
	// A write that fails with it may have committed; retrying it is safe (every write is
	// idempotent by its conditions or its idempotency key).
	CodeUnavailable = "UNAVAILABLE"
	// CodeSlowConsumer ends a subscription whose client fell too far behind its events.
	CodeSlowConsumer = "SLOW_CONSUMER"
	CodeInternal     = "INTERNAL_SERVER_ERROR"
)

// Error is a domain error whose Message is safe to show to the client and whose Code says
// what kind of failure it is. Any other error reaching the client is reported as
// CodeInternal with a generic message.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the code and a formatted, client-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, CodeInternal for any other
// non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the client-safe message of err: the *Error's message, or a generic
// text for anything else, so internal details never reach the client.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal server error"
}
