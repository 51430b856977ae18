// Package inbox is the domain at the centre of the gateway: notifications, actors, targets,
// inbox pages and their filters, the send request, the error type with its codes, and the
// interfaces the adapters (store, brokers, importers) implement. It imports only the standard
// library, and nothing in it knows about DynamoDB keys or GraphQL.
package inbox
