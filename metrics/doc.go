// Package metrics owns the gateway's Prometheus metrics (prometheus/client_golang): one
// Registry, built once in server.go and passed to what reports to it, served at /metrics
// in the Prometheus text format.
//
// Every label is low-cardinality and bounded by the code or the schema, never by a
// client: GraphQL requests by transport, operation type (query, mutation, subscription),
// root field name of the schema and error code (operation names are client-chosen and
// never a label); DynamoDB calls by SDK operation name and outcome; connections and
// subscriptions by transport; broker publish lag by path. No user or tenant id is ever
// a label.
//
// A nil *Registry is valid and records nothing, so the packages that report to it (the
// HTTP handler, the bench's gateways) run without metrics when none is given.
package metrics
