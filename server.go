// Command inbox-gateway is the GraphQL API gateway of the notification inbox: it serves
// GraphQL (POST/GET, WebSocket graphql-transport-ws and graphql-ws, SSE) and GraphiQL over
// one DynamoDB table, on Amazon's DynamoDB Local (started as a child process, the default)
// or on DynamoDB. Package app composes it; `go run . help` prints the commands and the
// environment variables. This file is the entry point DESIGN.md names (server.go);
// the composition itself (config, AWS client, store, services, resolvers, transports,
// middleware, http.Server) is app/server.go, so that the test harness (internal/testgw)
// builds the very same surface.
package main

//go:generate go tool gqlgen generate

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/inboxgw/gateway/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "inbox-gateway:", err)
		os.Exit(1)
	}
}
