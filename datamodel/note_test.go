package datamodel

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/dynlocal"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
)

// notePath is the committed note, from this package's directory.
const notePath = "../docs/data-model.md"

// TestNoteIsCurrent runs the model as `go run . model` does, on this binary's DynamoDB
// Local, and fails when the committed docs/data-model.md differs from the fresh note,
// when a pattern Scans, or when a pattern's FilterExpression discards more than half of
// what it reads (seed 002's rules; Check).
func TestNoteIsCurrent(t *testing.T) {
	ep := dynlocaltest.Endpoint(t)
	note, violations, err := Note(context.Background(), func(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
		return dynlocal.Client(ep, optFns...)
	}, dynlocaltest.TableName(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(notePath)
	if err != nil {
		t.Fatalf("read the note: %v (run `go run . model`)", err)
	}
	if !bytes.Equal(committed, note) {
		t.Errorf("docs/data-model.md differs from a fresh run of the model: run `go run . model` and commit it\n%s", firstDifference(committed, note))
	}
	for _, v := range violations {
		t.Errorf("data model check: %s", v)
	}
}

// firstDifference describes the first line where committed and fresh differ.
func firstDifference(committed, fresh []byte) string {
	a, b := strings.Split(string(committed), "\n"), strings.Split(string(fresh), "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("first difference at line %d:\ncommitted: %s\nfresh:     %s", i+1, x, y)
		}
	}
	return ""
}
