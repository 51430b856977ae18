// Package auth owns caller authentication for the gateway: it verifies the JSON Web Tokens
// that carry the caller (tenant, and a user or a service) and their scopes, signs HS256
// tokens for development and tests, keeps the verified Claims in the request context, and
// provides the HTTP middleware that turns an Authorization header into those Claims.
//
// Two key sources, either or both configured: HS256 tokens are verified with the secret
// (INBOX_JWT_SECRET) and nothing else; RS256 and ES256 tokens with the public keys of a
// JSON Web Key Set (INBOX_JWKS_URL) and nothing else, so no token of one family is ever
// checked with a key of the other (an HS256 token "signed" with a public key's bytes meets
// the secret only). Every other alg, "none" included, is refused. The key set is fetched
// through github.com/MicahParks/jwkset: cached in memory, refreshed in the background, and
// fetched again when a token names an unknown kid, at most once per minimum interval (a
// flood of forged kids costs at most one fetch per interval), each fetch bounded in time
// and body size. An endpoint down at start does not stop the gateway: RS256 and ES256
// tokens fail until it answers.
//
// A token is accepted only when its signature verifies as above, it has an exp in the
// future (within the configured leeway) and a sub, and, when configured, the expected iss
// and aud. The tenant claim is optional and defaults to DefaultTenant; scope is a
// space-separated list. A token whose scopes include ScopeSend or ScopeAdmin is a service
// token: its sub names the service, it has no user (Claims.User answers FORBIDDEN), and it
// acts for its tenant. Every verification failure is an *inbox.Error with code
// UNAUTHENTICATED and a short message that names what is wrong without echoing the token
// or library internals.
//
// Requests without an Authorization header pass the middleware without Claims: resolvers
// answer UNAUTHENTICATED for the fields that need a viewer, and WebSocket and SSE
// connections authenticate with the same "Bearer <token>" value in their connection_init
// payload through Verifier.FromHeader.
package auth
