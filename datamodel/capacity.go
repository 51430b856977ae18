package datamodel

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Call is one DynamoDB call as the capacity recorder saw it: what was asked and what it
// cost.
type Call struct {
	// Pattern is the access pattern that was running when the call was sent (Recorder.Begin).
	Pattern int
	// Op is the operation ("Query", "TransactWriteItems", ...).
	Op string
	// Index is the index a Query read ("" for the table).
	Index string
	// Key is what the call addressed: a Query's key condition with its names and values
	// substituted, or the keys of a GetItem, write, batch or transaction ("pk=… sk=…",
	// one per item, in the request's order).
	Key string
	// Filter is a Query's FilterExpression with its names and values substituted.
	Filter string
	// Scanned and Count are a Query's ScannedCount (items read) and Count (items
	// returned after the filter).
	Scanned, Count int
	// Items is how many items a batch or transaction addressed (1 for a single-item call,
	// the items returned for a Query).
	Items int
	// Capacity is the consumed capacity by where it was consumed: "table" and each index
	// name, read and write units apart.
	Capacity map[string]Units
	// Err is the call's error, if it failed (a failed condition is a recorded outcome).
	Err string
}

// Units are read and write capacity units.
type Units struct{ RCU, WCU float64 }

// Total is the call's units over the table and its indexes.
func (c Call) Total() Units {
	var u Units
	for _, x := range c.Capacity {
		u.RCU += x.RCU
		u.WCU += x.WCU
	}
	return u
}

// Recorder is an SDK middleware that asks every call that has the field for
// ReturnConsumedCapacity INDEXES and records each call (Call) under the pattern running
// (Begin). It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	pattern int
	calls   []Call
}

// Begin attributes the calls sent from now on to pattern n (0: to none, not recorded).
func (r *Recorder) Begin(n int) {
	r.mu.Lock()
	r.pattern = n
	r.mu.Unlock()
}

// Calls returns a copy of the calls recorded so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Option returns a dynamodb client option that installs the recorder.
func (r *Recorder) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("datamodelCapacity",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					r.mu.Lock()
					pattern := r.pattern
					r.mu.Unlock()
					in.Parameters = withIndexesCapacity(in.Parameters)
					out, md, err := next.HandleInitialize(ctx, in)
					if pattern == 0 {
						return out, md, err
					}
					c := describe(awsmiddleware.GetOperationName(ctx), in.Parameters, out.Result)
					c.Pattern = pattern
					if err != nil {
						c.Err = errorName(err)
					}
					r.mu.Lock()
					r.calls = append(r.calls, c)
					r.mu.Unlock()
					return out, md, err
				}), middleware.After)
		})
	}
}

// withIndexesCapacity returns a copy of the input *struct with ReturnConsumedCapacity
// set to INDEXES when it has that field (every read and write does), else in itself.
// The caller's input is not changed.
func withIndexesCapacity(in any) any {
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return in
	}
	f := v.Elem().FieldByName("ReturnConsumedCapacity")
	if !f.IsValid() || f.Type() != reflect.TypeOf(types.ReturnConsumedCapacityIndexes) {
		return in
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	cp.Elem().FieldByName("ReturnConsumedCapacity").Set(reflect.ValueOf(types.ReturnConsumedCapacityIndexes))
	return cp.Interface()
}

// errorName is the error's DynamoDB code (ConditionalCheckFailedException, ...) when it
// has one.
func errorName(err error) string {
	var coded interface{ ErrorCode() string }
	if ok := asCoded(err, &coded); ok {
		return coded.ErrorCode()
	}
	return "error"
}

func asCoded(err error, target *interface{ ErrorCode() string }) bool {
	for e := err; e != nil; {
		if c, ok := e.(interface{ ErrorCode() string }); ok {
			*target = c
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// describe makes the Call of one operation from its input and output (out is nil when
// the call failed).
func describe(op string, in, out any) Call {
	c := Call{Op: op, Capacity: map[string]Units{}}
	switch in := in.(type) {
	case *dynamodb.QueryInput:
		c.Index = aws.ToString(in.IndexName)
		c.Key = substitute(aws.ToString(in.KeyConditionExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
		c.Filter = substitute(aws.ToString(in.FilterExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	case *dynamodb.ScanInput:
		c.Index = aws.ToString(in.IndexName)
		c.Filter = substitute(aws.ToString(in.FilterExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	case *dynamodb.GetItemInput:
		c.Key, c.Items = keyText(in.Key), 1
	case *dynamodb.PutItemInput:
		c.Key, c.Items = keyText(in.Item), 1
	case *dynamodb.UpdateItemInput:
		c.Key, c.Items = keyText(in.Key), 1
	case *dynamodb.DeleteItemInput:
		c.Key, c.Items = keyText(in.Key), 1
	case *dynamodb.BatchGetItemInput:
		var keys []string
		for _, ka := range in.RequestItems {
			for _, k := range ka.Keys {
				keys = append(keys, keyText(k))
			}
		}
		c.Key, c.Items = joinKeys(keys), len(keys)
	case *dynamodb.TransactWriteItemsInput:
		keys := make([]string, 0, len(in.TransactItems))
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				keys = append(keys, "Put "+keyText(it.Put.Item))
			case it.Update != nil:
				keys = append(keys, "Update "+keyText(it.Update.Key))
			case it.Delete != nil:
				keys = append(keys, "Delete "+keyText(it.Delete.Key))
			case it.ConditionCheck != nil:
				keys = append(keys, "ConditionCheck "+keyText(it.ConditionCheck.Key))
			}
		}
		c.Key, c.Items = joinKeys(keys), len(keys)
	}
	var caps []types.ConsumedCapacity
	switch out := out.(type) {
	case *dynamodb.QueryOutput:
		c.Scanned, c.Count, c.Items = int(out.ScannedCount), int(out.Count), int(out.Count)
		caps = oneCapacity(out.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		c.Scanned, c.Count, c.Items = int(out.ScannedCount), int(out.Count), int(out.Count)
		caps = oneCapacity(out.ConsumedCapacity)
	case *dynamodb.GetItemOutput:
		caps = oneCapacity(out.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		caps = oneCapacity(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		caps = oneCapacity(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		caps = oneCapacity(out.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		caps = out.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		caps = out.ConsumedCapacity
	}
	write := writeOps[op]
	for _, cc := range caps {
		addCapacity(c.Capacity, cc, write)
	}
	return c
}

func oneCapacity(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

// writeOps are the operations whose units are write units when DynamoDB reports only
// CapacityUnits.
var writeOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"BatchWriteItem": true, "TransactWriteItems": true}

// addCapacity adds cc's units, per table and per index, to m. DynamoDB reports a
// call's total beside the parts; the parts are kept when there are any (the total is
// their sum), else the total counts as the table's. Units reported only as
// CapacityUnits are write units for a write (write), else read units.
func addCapacity(m map[string]Units, cc types.ConsumedCapacity, write bool) {
	parts := false
	add := func(where string, c *types.Capacity) {
		if c == nil {
			return
		}
		parts = true
		m[where] = addUnits(m[where], c.ReadCapacityUnits, c.WriteCapacityUnits, c.CapacityUnits, write)
	}
	add("table", cc.Table)
	for name, c := range cc.GlobalSecondaryIndexes {
		c := c
		add(name, &c)
	}
	for name, c := range cc.LocalSecondaryIndexes {
		c := c
		add(name, &c)
	}
	if !parts {
		m["table"] = addUnits(m["table"], cc.ReadCapacityUnits, cc.WriteCapacityUnits, cc.CapacityUnits, write)
	}
}

// addUnits adds read, write or (when neither is reported) total units to u.
func addUnits(u Units, read, written, total *float64, write bool) Units {
	switch {
	case read != nil || written != nil:
		u.RCU += aws.ToFloat64(read)
		u.WCU += aws.ToFloat64(written)
	case write:
		u.WCU += aws.ToFloat64(total)
	default:
		u.RCU += aws.ToFloat64(total)
	}
	return u
}

// keyText is an item's key as "pk=… sk=…" (the other attributes left out).
func keyText(item map[string]types.AttributeValue) string {
	return "pk=" + valueText(item["pk"]) + " sk=" + valueText(item["sk"])
}

func joinKeys(keys []string) string { return strings.Join(keys, "; ") }

// valueText is an attribute value as text: a string or number as itself, a set or a
// list as its members in brackets.
func valueText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberBOOL:
		if v.Value {
			return "true"
		}
		return "false"
	case *types.AttributeValueMemberNULL:
		return "null"
	case *types.AttributeValueMemberSS:
		return "[" + strings.Join(v.Value, ",") + "]"
	case *types.AttributeValueMemberNS:
		return "[" + strings.Join(v.Value, ",") + "]"
	case *types.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, x := range v.Value {
			parts[i] = valueText(x)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case nil:
		return "∅"
	}
	return "…"
}

// substitute replaces an expression's #names and :values by what they stand for, the
// longest placeholder first (so :v10 is not read as :v1 followed by 0).
func substitute(expr string, names map[string]string, values map[string]types.AttributeValue) string {
	if expr == "" {
		return ""
	}
	type sub struct{ from, to string }
	subs := make([]sub, 0, len(names)+len(values))
	for k, v := range names {
		subs = append(subs, sub{k, v})
	}
	for k, v := range values {
		subs = append(subs, sub{k, "'" + valueText(v) + "'"})
	}
	sort.Slice(subs, func(i, j int) bool {
		if len(subs[i].from) != len(subs[j].from) {
			return len(subs[i].from) > len(subs[j].from)
		}
		return subs[i].from < subs[j].from
	})
	pairs := make([]string, 0, 2*len(subs))
	for _, s := range subs {
		pairs = append(pairs, s.from, s.to)
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}
