package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/inboxgw/gateway/dynlocal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dynlocal:", err)
		os.Exit(1)
	}
}

// run parses args, starts the engine, prints its endpoint to stdout and
// blocks until ctx is done or stdin (when watched) reaches EOF.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dynlocal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts dynlocal.Options
	fs.StringVar(&opts.Dir, "dir", "", "directory holding DynamoDBLocal.jar or the npm package (default: search node_modules upward)")
	fs.StringVar(&opts.DataDir, "data", dynlocal.MemoryDataDir, `":memory:" or a directory to keep tables in`)
	fs.IntVar(&opts.Port, "port", 0, "TCP port (0 picks a free one)")
	fs.DurationVar(&opts.StartTimeout, "timeout", 2*time.Minute, "how long to wait for the engine to answer")
	watchStdin := fs.Bool("stdin", true, "stop when stdin reaches end of file")
	verbose := fs.Bool("v", false, "log the engine's own output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	srv, err := dynlocal.Start(ctx, opts)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, srv.Endpoint()); err != nil {
		return errors.Join(err, srv.Close())
	}

	eof := make(chan struct{})
	if *watchStdin {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			close(eof)
		}()
	}
	select {
	case <-ctx.Done():
		opts.Logger.Info("signal received, stopping")
	case <-eof:
		opts.Logger.Info("stdin closed, stopping")
	case <-srv.Done():
		// Close below reports how it exited.
	}
	return srv.Close()
}
