package main

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// writeItems counts the items a call writes: a transaction's actions but its condition
// checks, a batch's requests, one for a single-item write, none for a read. Scenario 19's
// "items written" per announcement and per broadcast recipient are these counts.
func TestWriteItems(t *testing.T) {
	for _, tc := range []struct {
		in   any
		op   string
		want int
	}{
		{&dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{}}, {Update: &types.Update{}}, {ConditionCheck: &types.ConditionCheck{}}, {Delete: &types.Delete{}}}}, "TransactWriteItems", 3},
		{&dynamodb.PutItemInput{}, "PutItem", 1},
		{&dynamodb.UpdateItemInput{}, "UpdateItem", 1},
		{&dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"a": {{}, {}}, "b": {{}}}}, "BatchWriteItem", 3},
		{&dynamodb.QueryInput{}, "Query", 0},
		{&dynamodb.GetItemInput{}, "GetItem", 0},
	} {
		op, n := writeItems(tc.in)
		if op != tc.op || n != tc.want {
			t.Errorf("writeItems(%T) = %s, %d; want %s, %d", tc.in, op, n, tc.op, tc.want)
		}
	}
}

// opCalls renders calls by operation sorted by name, zero counts left out.
func TestOpCalls(t *testing.T) {
	if got := opCalls(map[string]int{"TransactWriteItems": 1, "Query": 2, "GetItem": 0}); got != "2 Query + 1 TransactWriteItems" {
		t.Errorf("opCalls = %q", got)
	}
	if got := opCalls(nil); got != "none" {
		t.Errorf("opCalls(nil) = %q", got)
	}
}
