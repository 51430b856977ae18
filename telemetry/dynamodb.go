package telemetry

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithytracing "github.com/aws/smithy-go/tracing"
	"github.com/aws/smithy-go/tracing/smithyoteltracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of a DynamoDB call's span besides the SDK's rpc.* (OpenTelemetry's
// semantic conventions for DynamoDB).
const (
	AttrTableNames       = "aws.dynamodb.table_names"
	AttrConsumedCapacity = "aws.dynamodb.consumed_capacity"
)

// DynamoDB returns a client option that gives every DynamoDB call made inside a traced
// context (a request's, a task's) one client span, "DynamoDB.{Operation}", through the
// SDK's own tracing and smithy-go's OpenTelemetry adapter: rpc.method, the table
// (AttrTableNames) and the capacity it consumed (AttrConsumedCapacity: the call asks
// for TOTAL when its input asks for nothing). Calls outside a trace (the scheduler's
// polls, lease renewals) and the SDK's inner steps (serialize, sign, resolve endpoint)
// make no span: a trace shows one span per call, and an idle gateway exports nothing.
// With tracing off it returns an option that changes nothing.
func DynamoDB(t *Tracing) func(*dynamodb.Options) {
	if !t.Enabled() {
		return func(*dynamodb.Options) {}
	}
	tp := callsOnly{smithyoteltracing.Adapt(t.TracerProvider())}
	return func(o *dynamodb.Options) {
		o.TracerProvider = tp
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("telemetry.dynamodb", describeCall), middleware.After)
		})
	}
}

// callsOnly is a tracer provider that starts only the SDK's operation spans (kind
// client) and only under a span of ours.
type callsOnly struct{ smithytracing.TracerProvider }

func (p callsOnly) Tracer(scope string, opts ...smithytracing.TracerOption) smithytracing.Tracer {
	return callsOnlyTracer{p.TracerProvider.Tracer(scope, opts...)}
}

type callsOnlyTracer struct{ smithytracing.Tracer }

func (t callsOnlyTracer) StartSpan(ctx context.Context, name string, opts ...smithytracing.SpanOption) (context.Context, smithytracing.Span) {
	var o smithytracing.SpanOptions
	for _, f := range opts {
		f(&o)
	}
	if o.Kind != smithytracing.SpanKindClient || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nopSpan{}
	}
	return t.Tracer.StartSpan(ctx, name, opts...)
}

// nopSpan is a span that records nothing.
type nopSpan struct{}

func (nopSpan) Name() string                                  { return "" }
func (nopSpan) Context() smithytracing.SpanContext            { return smithytracing.SpanContext{} }
func (nopSpan) AddEvent(string, ...smithytracing.EventOption) {}
func (nopSpan) SetStatus(smithytracing.SpanStatus)            {}
func (nopSpan) SetProperty(any, any)                          {}
func (nopSpan) End()                                          {}

// describeCall puts the table and the consumed capacity on the call's span.
func describeCall(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return next.HandleInitialize(ctx, in)
	}
	tables, params := tablesAndCapacity(in.Parameters)
	in.Parameters = params
	if len(tables) > 0 {
		span.SetAttributes(attribute.StringSlice(AttrTableNames, tables))
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if cc := consumed(out.Result); len(cc) > 0 {
		js := make([]string, 0, len(cc))
		for _, c := range cc {
			b, err := json.Marshal(capacity{TableName: deref(c.TableName), CapacityUnits: c.CapacityUnits,
				ReadCapacityUnits: c.ReadCapacityUnits, WriteCapacityUnits: c.WriteCapacityUnits})
			if err == nil {
				js = append(js, string(b))
			}
		}
		span.SetAttributes(attribute.StringSlice(AttrConsumedCapacity, js))
	}
	return out, md, err
}

// capacity is one table's consumed capacity as AttrConsumedCapacity records it (the
// semantic conventions' JSON of the SDK's ConsumedCapacity, without its empty fields).
type capacity struct {
	TableName          string   `json:"TableName,omitempty"`
	CapacityUnits      *float64 `json:"CapacityUnits,omitempty"`
	ReadCapacityUnits  *float64 `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits *float64 `json:"WriteCapacityUnits,omitempty"`
}

// tablesAndCapacity returns the tables in, an input of the store's operations, names,
// and the input to send: a copy asking for the TOTAL consumed capacity when in asks for
// none (the caller's input is never changed).
func tablesAndCapacity(in any) ([]string, any) {
	switch v := in.(type) {
	case *dynamodb.GetItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return []string{deref(v.TableName)}, &c
	case *dynamodb.PutItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return []string{deref(v.TableName)}, &c
	case *dynamodb.UpdateItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return []string{deref(v.TableName)}, &c
	case *dynamodb.DeleteItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return []string{deref(v.TableName)}, &c
	case *dynamodb.QueryInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return []string{deref(v.TableName)}, &c
	case *dynamodb.ScanInput:
		return []string{deref(v.TableName)}, in
	case *dynamodb.BatchGetItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return keys(v.RequestItems), &c
	case *dynamodb.BatchWriteItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return keys(v.RequestItems), &c
	case *dynamodb.TransactWriteItemsInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		seen := map[string]bool{}
		var ts []string
		for _, it := range v.TransactItems {
			var name *string
			switch {
			case it.Put != nil:
				name = it.Put.TableName
			case it.Update != nil:
				name = it.Update.TableName
			case it.Delete != nil:
				name = it.Delete.TableName
			case it.ConditionCheck != nil:
				name = it.ConditionCheck.TableName
			}
			if n := deref(name); n != "" && !seen[n] {
				seen[n] = true
				ts = append(ts, n)
			}
		}
		return ts, &c
	case *dynamodb.TransactGetItemsInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		seen := map[string]bool{}
		var ts []string
		for _, it := range v.TransactItems {
			if it.Get != nil && !seen[deref(it.Get.TableName)] {
				seen[deref(it.Get.TableName)] = true
				ts = append(ts, deref(it.Get.TableName))
			}
		}
		return ts, &c
	case *dynamodb.DescribeTableInput:
		return []string{deref(v.TableName)}, in
	}
	return nil, in
}

// orTotal is r, or TOTAL when r is unset.
func orTotal(r types.ReturnConsumedCapacity) types.ReturnConsumedCapacity {
	if r == "" {
		return types.ReturnConsumedCapacityTotal
	}
	return r
}

// consumed returns the consumed capacity an operation's output reports.
func consumed(out any) []types.ConsumedCapacity {
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	switch v := out.(type) {
	case *dynamodb.GetItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		return one(v.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		return v.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		return v.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		return v.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		return v.ConsumedCapacity
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
