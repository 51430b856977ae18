package auth

import "context"

// claimsKey is the context key of the verified Claims.
type claimsKey struct{}

// WithClaims returns a copy of ctx carrying the verified claims c.
func WithClaims(ctx context.Context, c Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// FromContext returns the Claims stored by WithClaims, and false when the request is
// unauthenticated.
func FromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(Claims)
	return c, ok
}
