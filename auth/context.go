package auth

import (
	"context"

	"github.com/inboxgw/gateway/telemetry"
)

// claimsKey is the context key of the verified Claims.
type claimsKey struct{}

// WithClaims returns a copy of ctx carrying the verified claims c. Within an HTTP
// request (telemetry.Middleware) it also names the request's tenant for its access log.
func WithClaims(ctx context.Context, c Claims) context.Context {
	telemetry.SetTenant(ctx, c.TenantID)
	return context.WithValue(ctx, claimsKey{}, c)
}

// FromContext returns the Claims stored by WithClaims, and false when the request is
// unauthenticated.
func FromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(Claims)
	return c, ok
}
