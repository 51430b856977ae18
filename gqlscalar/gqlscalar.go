// Package gqlscalar holds the Go side of the schema's custom scalars and the Node
// interface binding, apart from the generated code in graph/ and from resolvers/ (which
// imports graph/), so that both can use it without an import cycle.
package gqlscalar

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/99designs/gqlgen/graphql"
)

// Node is any object with a global id: *inbox.Notification, *inbox.Actor or *inbox.Target.
// Resolvers return these domain types; the generated executor switches on them.
type Node interface{}

// MarshalRawJSON writes a JSON scalar: the stored document as it is, or null when empty.
func MarshalRawJSON(v json.RawMessage) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if len(v) == 0 {
			_, _ = io.WriteString(w, "null")
			return
		}
		_, _ = w.Write(v)
	})
}

// UnmarshalRawJSON reads a JSON scalar from a query literal or a variable (any JSON value)
// and returns it compacted. It fails when the value cannot be encoded as JSON.
func UnmarshalRawJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("JSON scalar: value is not representable as JSON")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, errors.New("JSON scalar: invalid JSON")
	}
	return buf.Bytes(), nil
}
