package main

// Consumed capacity, as the engine reports it: a client option whose middleware asks
// every call for ReturnConsumedCapacity INDEXES and adds what the answer says, per
// operation and per kind of partition the call touched (the key's entity after the
// tenant: U, IDEM, NOTIF, BCAST, SEG, ...; a scheduler task or lease by its own prefix).
// DynamoDB Local computes the units as DynamoDB does (item sizes rounded up to 1 KB for
// writes, 4 KB for reads, transactions counted twice); nothing is charged on it.

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// capacityMeter sums the capacity units of the calls of the clients it is an option of.
// Safe for concurrent use.
type capacityMeter struct {
	mu    sync.Mutex
	total Capacity
	by    map[string]*Capacity // by operation + " " + partition kinds
}

// Capacity is consumed capacity: write and read units, and the calls that consumed them.
type Capacity struct {
	WCU   float64 `json:"wcu"`
	RCU   float64 `json:"rcu"`
	Calls int     `json:"calls"`
}

// writeOps are the operations whose units are write units (a transaction's condition
// checks included, as DynamoDB counts them).
var writeOps = map[string]bool{"TransactWriteItems": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true}

// option returns the dynamodb client option that meters the client's calls.
func (m *capacityMeter) option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchcapacity",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					op, kinds := askCapacity(&in)
					out, md, err := next.HandleInitialize(ctx, in)
					if err == nil && op != "" {
						m.add(op+" "+kinds, op, consumed(out.Result))
					}
					return out, md, err
				}), middleware.After)
		})
	}
}

// askCapacity replaces in's parameters by a copy that asks for the consumed capacity
// (the caller's input is left as it was) and returns the operation's name and the kinds
// of partition its keys are in ("" when the operation returns no capacity).
func askCapacity(in *middleware.InitializeInput) (op, kinds string) {
	idx := types.ReturnConsumedCapacityIndexes
	var keys []map[string]types.AttributeValue
	switch p := in.Parameters.(type) {
	case *dynamodb.TransactWriteItemsInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "TransactWriteItems"
		keys = append(keys, txnKeys(p)...)
	case *dynamodb.PutItemInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "PutItem"
		keys = append(keys, p.Item)
	case *dynamodb.UpdateItemInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "UpdateItem"
		keys = append(keys, p.Key)
	case *dynamodb.DeleteItemInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "DeleteItem"
		keys = append(keys, p.Key)
	case *dynamodb.GetItemInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "GetItem"
		keys = append(keys, p.Key)
	case *dynamodb.QueryInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "Query"
		if v, ok := p.ExpressionAttributeValues[":pk"]; ok {
			keys = append(keys, map[string]types.AttributeValue{"pk": v})
		}
	case *dynamodb.BatchGetItemInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "BatchGetItem"
		for _, ka := range p.RequestItems {
			keys = append(keys, ka.Keys...)
		}
	case *dynamodb.BatchWriteItemInput:
		c := *p
		c.ReturnConsumedCapacity, in.Parameters, op = idx, &c, "BatchWriteItem"
		for _, ws := range p.RequestItems {
			for _, w := range ws {
				switch {
				case w.PutRequest != nil:
					keys = append(keys, w.PutRequest.Item)
				case w.DeleteRequest != nil:
					keys = append(keys, w.DeleteRequest.Key)
				}
			}
		}
	default:
		return "", ""
	}
	var ks []string
	for _, k := range keys {
		if s, ok := k["pk"].(*types.AttributeValueMemberS); ok {
			if kind := partitionKind(s.Value); !slices.Contains(ks, kind) {
				ks = append(ks, kind)
			}
		}
	}
	sort.Strings(ks)
	return op, strings.Join(ks, "+")
}

// partitionKind names the kind of partition key pk: for T#{tenant}#KIND#..., KIND (U for
// a user's partition); otherwise its first '#'-separated part.
func partitionKind(pk string) string {
	parts := strings.SplitN(pk, "#", 4)
	if parts[0] == "T" && len(parts) >= 3 {
		return parts[2]
	}
	return parts[0]
}

// consumed returns the capacity an operation's output reports.
func consumed(out any) []types.ConsumedCapacity {
	switch o := out.(type) {
	case *dynamodb.TransactWriteItemsOutput:
		return o.ConsumedCapacity
	case *dynamodb.BatchGetItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.PutItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.GetItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(o.ConsumedCapacity)
	}
	return nil
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

// add counts one call of op (under key) that consumed cs: its total units, as write
// units for a write operation and read units otherwise.
func (m *capacityMeter) add(key, op string, cs []types.ConsumedCapacity) {
	var u float64
	for _, c := range cs {
		if c.CapacityUnits != nil {
			u += *c.CapacityUnits
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[string]*Capacity{}
	}
	b := m.by[key]
	if b == nil {
		b = &Capacity{}
		m.by[key] = b
	}
	for _, c := range []*Capacity{&m.total, b} {
		c.Calls++
		if writeOps[op] {
			c.WCU += u
		} else {
			c.RCU += u
		}
	}
}

// take returns what was consumed since the last take (total, and by operation and
// partition kinds) and starts again from zero.
func (m *capacityMeter) take() (Capacity, map[string]Capacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	by := make(map[string]Capacity, len(m.by))
	for k, v := range m.by {
		by[k] = *v
	}
	t := m.total
	m.total, m.by = Capacity{}, nil
	return t, by
}

// txnKeys returns the item (Put) or key (Update, Delete, ConditionCheck) of each action
// of a transaction, in order.
func txnKeys(p *dynamodb.TransactWriteItemsInput) []map[string]types.AttributeValue {
	keys := make([]map[string]types.AttributeValue, 0, len(p.TransactItems))
	for _, a := range p.TransactItems {
		switch {
		case a.Put != nil:
			keys = append(keys, a.Put.Item)
		case a.Update != nil:
			keys = append(keys, a.Update.Key)
		case a.Delete != nil:
			keys = append(keys, a.Delete.Key)
		case a.ConditionCheck != nil:
			keys = append(keys, a.ConditionCheck.Key)
		}
	}
	return keys
}
