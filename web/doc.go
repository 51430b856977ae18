// Package web owns the gateway's browser-facing pages: the GraphiQL IDE served at "/".
//
// The page loads GraphiQL 3, React 18 and the graphql-ws client from the project's
// node_modules when they are installed (served by this package under "/graphiql/assets/",
// from a fixed whitelist of files), and from a CDN pinned to the same versions otherwise.
// Queries and mutations go over HTTP to the GraphQL endpoint; subscriptions go over a
// graphql-transport-ws WebSocket on the same path, and the headers of GraphiQL's header
// editor (typically {"Authorization": "Bearer …"}) travel in its connection_init payload,
// which is where the gateway authenticates WebSocket connections.
package web
