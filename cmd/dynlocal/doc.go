// Command dynlocal runs one DynamoDB Local for as long as it is needed, so a
// whole `go test ./...` run (or a developer's shell) can share it.
//
// It starts the engine (in memory unless -data names a directory), prints its
// endpoint as the first and only line on stdout, and then blocks until it
// receives SIGINT or SIGTERM or its stdin reaches end of file; then it stops
// the engine and exits. Watching stdin lets a script tie the engine's life to
// its own: it holds the write end of the pipe, and when the script dies, even
// by SIGKILL, the pipe closes and the engine stops. Pass -stdin=false when
// stdin is not such a pipe (e.g. </dev/null). Logs go to stderr.
// scripts/test.sh shows the pipe form.
//
// Usage:
//
//	dynlocal [-dir DIR] [-data :memory:|DIR] [-port N] [-timeout D] [-stdin=true] [-v]
package main
