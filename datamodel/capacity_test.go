package datamodel

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal"
)

// The recorder asks every call that has the field for INDEXES, on a copy (the caller's
// input is never changed), and leaves calls without it alone.
func TestWithIndexesCapacity(t *testing.T) {
	inputs := []any{
		&dynamodb.QueryInput{TableName: aws.String("t")},
		&dynamodb.GetItemInput{TableName: aws.String("t"), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal},
		&dynamodb.BatchGetItemInput{},
		&dynamodb.TransactWriteItemsInput{},
		&dynamodb.UpdateItemInput{},
		&dynamodb.ScanInput{},
	}
	for _, in := range inputs {
		out := withIndexesCapacity(in)
		if out == in {
			t.Errorf("%T: the caller's input was used, not a copy", in)
			continue
		}
		if got := fieldOf(out); got != types.ReturnConsumedCapacityIndexes {
			t.Errorf("%T: ReturnConsumedCapacity %q; want INDEXES", in, got)
		}
		if got := fieldOf(in); got == types.ReturnConsumedCapacityIndexes {
			t.Errorf("%T: the caller's input was changed", in)
		}
	}
	for _, in := range []any{&dynamodb.DescribeTableInput{}, &dynamodb.CreateTableInput{}, nil, "x"} {
		if out := withIndexesCapacity(in); out != in {
			t.Errorf("%T without the field: got %v; want it unchanged", in, out)
		}
	}
}

func fieldOf(in any) types.ReturnConsumedCapacity {
	switch in := in.(type) {
	case *dynamodb.QueryInput:
		return in.ReturnConsumedCapacity
	case *dynamodb.GetItemInput:
		return in.ReturnConsumedCapacity
	case *dynamodb.BatchGetItemInput:
		return in.ReturnConsumedCapacity
	case *dynamodb.TransactWriteItemsInput:
		return in.ReturnConsumedCapacity
	case *dynamodb.UpdateItemInput:
		return in.ReturnConsumedCapacity
	case *dynamodb.ScanInput:
		return in.ReturnConsumedCapacity
	}
	return ""
}

// A unit reported as CapacityUnits alone is a write unit for a write and a read unit
// for a read; parts per table and index are kept apart; a total without parts is the
// table's.
func TestCapacityUnits(t *testing.T) {
	one := aws.Float64(1)
	for _, c := range []struct {
		name string
		op   string
		out  any
		want map[string]Units
	}{
		{"a write's total units", "UpdateItem", &dynamodb.UpdateItemOutput{ConsumedCapacity: &types.ConsumedCapacity{
			CapacityUnits: aws.Float64(2), Table: &types.Capacity{CapacityUnits: one},
			GlobalSecondaryIndexes: map[string]types.Capacity{"GSI1": {CapacityUnits: one}}}},
			map[string]Units{"table": {WCU: 1}, "GSI1": {WCU: 1}}},
		{"a read's total units", "GetItem", &dynamodb.GetItemOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(0.5)}},
			map[string]Units{"table": {RCU: 0.5}}},
		{"read and write units named", "TransactWriteItems", &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{{
			Table: &types.Capacity{ReadCapacityUnits: one, WriteCapacityUnits: aws.Float64(4)}}}},
			map[string]Units{"table": {RCU: 1, WCU: 4}}},
		{"a Query on an index", "Query", &dynamodb.QueryOutput{ScannedCount: 12, Count: 3, ConsumedCapacity: &types.ConsumedCapacity{
			Table: &types.Capacity{CapacityUnits: aws.Float64(0)}, GlobalSecondaryIndexes: map[string]types.Capacity{"GSI1": {CapacityUnits: aws.Float64(1.5)}}}},
			map[string]Units{"table": {}, "GSI1": {RCU: 1.5}}},
	} {
		got := describe(c.op, nil, c.out)
		if len(got.Capacity) != len(c.want) {
			t.Errorf("%s: %v; want %v", c.name, got.Capacity, c.want)
			continue
		}
		for k, v := range c.want {
			if got.Capacity[k] != v {
				t.Errorf("%s: %v; want %v", c.name, got.Capacity, c.want)
			}
		}
	}
}

// Through a real client: the request on the wire asks for INDEXES, and the call is
// recorded under the pattern running with its key condition, filter, counts and units;
// calls outside a pattern are not recorded.
func TestRecorderOnTheWire(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct{ ReturnConsumedCapacity string }
		_ = json.Unmarshal(body, &in)
		asked = append(asked, in.ReturnConsumedCapacity)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{"Count":1,"ScannedCount":10,"Items":[],"ConsumedCapacity":{"TableName":"t","CapacityUnits":1.5,"Table":{"CapacityUnits":1.5}}}`)
	}))
	defer srv.Close()
	rec := &Recorder{}
	db := dynlocal.Client(srv.URL, rec.Option())
	in := &dynamodb.QueryInput{TableName: aws.String("t"), KeyConditionExpression: aws.String("#pk = :pk"),
		FilterExpression:          aws.String("#type IN (:t1, :t10)"),
		ExpressionAttributeNames:  map[string]string{"#pk": "pk", "#type": "type"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV("T#acme#U#user0001"), ":t1": strAV("a"), ":t10": strAV("b")}}
	ctx := context.Background()
	if _, err := db.Query(ctx, in); err != nil { // outside a pattern
		t.Fatal(err)
	}
	rec.Begin(5)
	if _, err := db.Query(ctx, in); err != nil {
		t.Fatal(err)
	}
	if strings.Join(asked, ",") != "INDEXES,INDEXES" {
		t.Errorf("ReturnConsumedCapacity sent: %v; want INDEXES on every call", asked)
	}
	if in.ReturnConsumedCapacity != "" {
		t.Errorf("the caller's input was changed: %q", in.ReturnConsumedCapacity)
	}
	calls := rec.Calls()
	if len(calls) != 1 {
		t.Fatalf("recorded %d calls; want the one inside pattern 5", len(calls))
	}
	c := calls[0]
	want := Call{Pattern: 5, Op: "Query", Key: "pk = 'T#acme#U#user0001'", Filter: "type IN ('a', 'b')", Scanned: 10, Count: 1, Items: 1}
	if c.Pattern != want.Pattern || c.Op != want.Op || c.Key != want.Key || c.Filter != want.Filter || c.Scanned != want.Scanned ||
		c.Count != want.Count || c.Items != want.Items || c.Total() != (Units{RCU: 1.5}) {
		t.Errorf("recorded %+v; want %+v with 1.5 RCU", c, want)
	}
}
