package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/datamodel"
	"github.com/inboxgw/gateway/dynlocal"
)

// NotePath is where the model command writes the data model's design note.
const NotePath = "docs/data-model.md"

// modelCommand runs every access pattern of the README's table against DynamoDB Local
// and writes the design note (package datamodel): model [--out FILE] [--endpoint URL]
// [--table NAME]. Without --endpoint it starts an in-memory DynamoDB Local, as dev mode
// does. The note is written even when a check fails; the command then fails naming them.
func modelCommand(ctx context.Context, cfg Config, log *slog.Logger, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("model", flag.ContinueOnError)
	path := fs.String("out", NotePath, "the note to write")
	endpoint := fs.String("endpoint", "", "a running DynamoDB Local to use (default: start one, in memory)")
	table := fs.String("table", "inbox-model", "the table to create there; it must not exist")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("model: unexpected arguments %q", fs.Args())
	}
	if *endpoint == "" {
		srv, err := dynlocal.Start(ctx, dynlocal.Options{Dir: cfg.DynamoDBLocal, DataDir: dynlocal.MemoryDataDir, Logger: log})
		if err != nil {
			return err
		}
		defer srv.Close()
		*endpoint = srv.Endpoint()
	}
	note, violations, err := datamodel.Note(ctx, func(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
		return LocalClient(*endpoint, optFns...)
	}, *table, log)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*path), 0o755); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := os.WriteFile(*path, note, 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	fmt.Fprintf(out, "wrote %s: %d access patterns measured\n", *path, len(datamodel.Patterns))
	for _, v := range violations {
		fmt.Fprintf(out, "check failed: %s\n", v)
	}
	if len(violations) > 0 {
		return fmt.Errorf("model: %d check(s) failed (the note's Checks section lists them)", len(violations))
	}
	return nil
}
