// Package testgw is the one harness of the gateway's HTTP, WebSocket and SSE tests: New
// starts the real HTTP surface, composed by app.Build as serve composes it (with
// httpapi.NewServer when Options.Timeouts is set), on a loopback port over a
// fresh table of DynamoDB Local (package dynlocaltest), with real HS256 tokens (Token);
// Attach points the same clients at a gateway process. The clients: Post and its helpers
// (GraphQL over HTTP), DialWS (graphql-transport-ws and the legacy graphql-ws) and
// SubscribeSSE (graphql-sse, distinct connections).
//
// Every Server owns its table, so tests that use one can call t.Parallel(). Helpers fail
// the test they were given (Server.T; WithT for a subtest) and call t.Helper().
package testgw
