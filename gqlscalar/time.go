package gqlscalar

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/inboxgw/gateway/inbox"
)

// MarshalTime writes a Time scalar as gqlgen does: an RFC 3339 string with nanoseconds
// (trailing zeros dropped), or null for the zero time.
func MarshalTime(t time.Time) graphql.Marshaler {
	return graphql.MarshalTime(t)
}

// UnmarshalTime reads a Time scalar from a query literal or a variable: an RFC 3339
// timestamp with a time zone, with or without fractional seconds (null and "" are the zero
// time, as in gqlgen's Time). Anything else is BAD_USER_INPUT naming the value, instead of
// gqlgen's uncoded error, which the error presenter could only report as
// INTERNAL_SERVER_ERROR; gqlgen's "2006-01-02 15:04:05" without a zone, which it read as
// UTC (a local time off by hours), is refused too.
func UnmarshalTime(v any) (time.Time, error) {
	switch s, ok := v.(string); {
	case v == nil || ok && s == "":
		return time.Time{}, nil
	case ok:
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, inbox.Errorf(inbox.CodeBadUserInput,
		"Time: %s is not an RFC 3339 timestamp with a time zone, e.g. 2026-12-01T10:00:00Z or 2026-12-01T11:00:00+01:00", describeValue(v))
}

// describeValue names a scalar's input value for an error message: a string quoted (at
// most 64 bytes of it), another value by its JSON kind.
func describeValue(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 64 {
			return strconv.Quote(v[:64]) + "…"
		}
		return strconv.Quote(v)
	case bool:
		return "a boolean"
	case json.Number, int, int64, float64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("a %T", v)
	}
}
