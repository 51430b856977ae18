// Package rest is the service API under /v1 (README "Service API (REST /v1)"), spec first:
// openapi.yaml is the hand-written OpenAPI 3.1 document (embedded, served as JSON at
// GET /v1/openapi.json), package gen is generated from it by oapi-codegen (go generate
// ./...), and this package implements gen.StrictServerInterface as thin handlers over a
// Backend.
//
// Around the generated server, NewHandler adds what the document promises for every
// request: bearer authentication (auth.Claims; the tenant always comes from the token),
// the scope of each operation (notifications:send or notifications:admin; a user token
// reaches only its own preferences), a body limit per operation, strict JSON (unknown
// members are refused), and RFC 9457 problem details (application/problem+json with the
// GraphQL error code in `code`) for every error: the Backend's, the generated code's own
// decode errors, unknown routes under /v1 and wrong methods.
//
// Provider callbacks (POST /v1/webhooks/provider/{name}) take no token: the route's guard
// refuses a query string or a body over the provider's limits (ProviderHook.Limits)
// before it reads the body, reads the raw body within them, and has the provider's
// ProviderHook (package providerhook) check its signature before the generated code
// runs; only the events it verified reach the Backend (ApplyProviderEvents).
package rest
