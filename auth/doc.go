// Package auth owns caller authentication for the gateway: it verifies the HS256 JSON Web
// Tokens that carry the viewer (tenant, user) and their scopes, signs such tokens for
// development and tests, keeps the verified Claims in the request context, and provides the
// HTTP middleware that turns an Authorization header into those Claims.
//
// A token is accepted only when it is signed with HS256 under the configured secret, has an
// exp in the future (within the configured leeway) and a sub, and, when configured, the
// expected iss and aud. The tenant claim is optional and defaults to DefaultTenant; scope is
// a space-separated list. Every failure is an *inbox.Error with code UNAUTHENTICATED and a
// short message that names what is wrong without echoing the token or library internals.
//
// Requests without an Authorization header pass the middleware without Claims: resolvers
// answer UNAUTHENTICATED for the fields that need a viewer, and WebSocket and SSE
// connections authenticate with the same "Bearer <token>" value in their connection_init
// payload through Verifier.FromHeader.
package auth
