package httpapi

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracer is the gqlgen extension that traces GraphQL: one span per operation (per
// event of a subscription), named "{type} {name}" ("query Inbox"; the type alone for an
// anonymous operation) with graphql.operation.type and graphql.operation.name, under the
// request's HTTP span; and one child span per resolver that does I/O (IOFields), named
// "{Object}.{field}". Trivial resolvers and the per-row fields the request's
// dataloaders batch (a notification's actor and target) get none: their one batched
// read is a DynamoDB span of its own. The document and variables are never recorded.
type Tracer struct {
	Tracer trace.Tracer
}

var (
	_ graphql.HandlerExtension    = Tracer{}
	_ graphql.ResponseInterceptor = Tracer{}
	_ graphql.FieldInterceptor    = Tracer{}
)

// IOFields are the fields whose resolvers read or write the store themselves, by
// "{Object}.{field}"; every field of Mutation and Subscription is one too.
var IOFields = map[string]bool{
	"Query.node": true, "Query.nodes": true,
	"Viewer.inbox": true, "Viewer.unreadCount": true, "Viewer.notification": true, "Viewer.unseenCount": true,
	"Viewer.badge": true, "Viewer.preferences": true, "Viewer.groups": true,
	"Notification.deliveries": true, "Preferences.mutedTargets": true,
}

// ExtensionName implements graphql.HandlerExtension.
func (Tracer) ExtensionName() string { return "Tracer" }

// Validate implements graphql.HandlerExtension.
func (Tracer) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse implements graphql.ResponseInterceptor: the operation's span.
func (t Tracer) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	if !graphql.HasOperationContext(ctx) {
		return next(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil {
		return next(ctx)
	}
	typ := string(oc.Operation.Operation)
	name := oc.OperationName
	if name == "" {
		name = oc.Operation.Name
	}
	spanName := typ
	if name != "" {
		spanName += " " + name
	}
	ctx, span := t.Tracer.Start(ctx, spanName, trace.WithAttributes(
		attribute.String("graphql.operation.type", typ), attribute.String("graphql.operation.name", name)))
	defer span.End()
	resp := next(ctx)
	if resp != nil && len(resp.Errors) > 0 {
		span.SetStatus(codes.Error, resp.Errors[0].Message)
	}
	return resp
}

// InterceptField implements graphql.FieldInterceptor: a span per I/O resolver.
func (t Tracer) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || !fc.IsResolver || fc.Field.Field == nil || !isIOField(fc.Object, fc.Field.Name) {
		return next(ctx)
	}
	ctx, span := t.Tracer.Start(ctx, fc.Object+"."+fc.Field.Name, trace.WithAttributes(
		attribute.String("graphql.field.path", fc.Path().String())))
	defer span.End()
	res, err := next(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "resolver failed")
	}
	return res, err
}

// isIOField reports whether object's field resolver does I/O (IOFields).
func isIOField(object, field string) bool {
	if object == "Mutation" || object == "Subscription" {
		return true
	}
	return IOFields[object+"."+field]
}
