package resolvers

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// SubscriptionPaths is a gqlgen extension that gives every event of a subscription the
// root field's context, so that an error raised below it (a failed actor read under
// notificationAdded) carries the whole path, ["notificationAdded","actor"], not
// ["actor"] (issue 8, item 9). gqlgen marshals each event under the context the transport
// passes for that response, which holds no field context: the path of every field below
// the root started there.
type SubscriptionPaths struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = SubscriptionPaths{}

// ExtensionName names the extension in gqlgen's registry.
func (SubscriptionPaths) ExtensionName() string { return "SubscriptionPaths" }

// Validate accepts every schema.
func (SubscriptionPaths) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse puts the root subscription field's context under each event of a
// subscription; other responses pass unchanged.
func (SubscriptionPaths) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	if !graphql.HasOperationContext(ctx) || graphql.GetFieldContext(ctx) != nil {
		return next(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	fields := graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Subscription"})
	if len(fields) != 1 {
		return next(ctx) // refused by the executor: "must subscribe to exactly one stream"
	}
	return next(graphql.WithFieldContext(ctx, &graphql.FieldContext{Object: "Subscription", Field: fields[0]}))
}
