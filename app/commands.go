package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/jonboulle/clockwork"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal"
	ghimport "github.com/inboxgw/gateway/importer/github"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/relay"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// tokenCommand prints a signed token: token --user U [--tenant T] [--scope S] [--ttl D].
func tokenCommand(cfg Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("user", "", "user id (the token's sub); required")
	tenant := fs.String("tenant", auth.DefaultTenant, "tenant id")
	scope := fs.String("scope", "", "space-separated scopes; notifications:send or notifications:admin make a service token (it sends, it has no inbox)")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *user == "" {
		return fmt.Errorf("token: --user is required")
	}
	v, err := newSigner(cfg)
	if err != nil {
		return err
	}
	tok, err := v.Sign(auth.Claims{TenantID: *tenant, UserID: *user, Scopes: strings.Fields(*scope)}, *ttl)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, tok)
	return err
}

// importCommand imports a GitHub webhook examples file: import-github FILE [--tenant T].
func importCommand(ctx context.Context, cfg Config, log *slog.Logger, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("import-github", flag.ContinueOnError)
	tenant := fs.String("tenant", cfg.DemoTenant, "tenant to import into")
	if err := fs.Parse(reorder(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("import-github: want one FILE (node_modules/@octokit/webhooks-examples/api.github.com/index.json)")
	}
	g, err := Build(ctx, cfg, Deps{Log: log, Worker: true})
	if err != nil {
		return err
	}
	defer g.Close()
	// Through the send service, as every send: durable accept, then the transactional
	// lane (a recovery task finishes what an interrupted import accepted).
	res, stats, err := importFile(ctx, service.Sender{S: g.Service}, *tenant, fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "events: %d, notifications: %d (new %d, already imported %d; recipients accepted %d), skipped: %d\n",
		stats.Events, stats.Notifications, res.Sent-res.Duplicates, res.Duplicates, res.Accepted, stats.Skipped)
	for _, r := range topRecipients(stats, 5) {
		fmt.Fprintf(out, "  %-24s %d\n", r, stats.ByRecipient[r])
	}
	return nil
}

// reorder moves flags before positional arguments, so "FILE --tenant T" works too.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags = append(flags, args[i])
			if !strings.Contains(args[i], "=") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, args[i])
	}
	return append(flags, pos...)
}

func importFile(ctx context.Context, s inbox.Sender, tenant, path string) (ghimport.ImportResult, ghimport.Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return ghimport.ImportResult{}, ghimport.Stats{}, fmt.Errorf("import: %w (run npm install for @octokit/webhooks-examples)", err)
	}
	defer f.Close()
	ns, stats, err := ghimport.Parse(f)
	if err != nil {
		return ghimport.ImportResult{}, stats, err
	}
	res, err := ghimport.Import(ctx, s, tenant, ns)
	return res, stats, err
}

// topRecipients returns up to n logins with the most notifications, most first (ties by name).
func topRecipients(stats ghimport.Stats, n int) []string {
	users := make([]string, 0, len(stats.ByRecipient))
	for u := range stats.ByRecipient {
		users = append(users, u)
	}
	sort.Slice(users, func(i, j int) bool {
		a, b := stats.ByRecipient[users[i]], stats.ByRecipient[users[j]]
		if a != b {
			return a > b
		}
		return users[i] < users[j]
	})
	return users[:min(n, len(users))]
}

// ImportDemo imports the demo file through s (the send service in serve; idempotent: a
// second start adds nothing) and returns the user with the most notifications.
func ImportDemo(ctx context.Context, cfg Config, log *slog.Logger, s inbox.Sender) (string, error) {
	// The first start writes every notification (about half a minute on a laptop): say so
	// before, not only after.
	log.Info("demo import: importing (the first start takes about half a minute; a restart adds nothing)", "file", cfg.DemoImport)
	res, stats, err := importFile(ctx, s, cfg.DemoTenant, cfg.DemoImport)
	if err != nil {
		return "", err
	}
	log.Info("demo import", "file", cfg.DemoImport, "notifications", stats.Notifications, "new", res.Sent-res.Duplicates, "duplicates", res.Duplicates)
	top := topRecipients(stats, 1)
	if len(top) == 0 {
		return "", nil
	}
	return top[0], nil
}

// workerCommand runs the durable scheduler alone (no HTTP): snooze wake-ups and expiries
// of every inbox, shared with the other instances through leases. Its changes reach
// subscriptions through the broker (INBOX_BROKER=redis for gateways in other processes).
func workerCommand(ctx context.Context, cfg Config, log *slog.Logger) error {
	g, err := Build(ctx, cfg, Deps{Log: log, Worker: true})
	if err != nil {
		return err
	}
	defer g.Close()
	logChannels(log, cfg, g.Channels)
	return g.RunScheduler(ctx)
}

// relayCommand runs the DynamoDB Streams relay (package relay) until ctx ends, then
// releases its lease so that a standby relay takes over at once.
func relayCommand(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.Broker != "redis" {
		return errors.New("relay: set INBOX_BROKER=redis (and INBOX_REDIS_URL): the relay publishes to the gateways through Redis")
	}
	broker, err := newBroker(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer broker.Close()
	eng, err := openEngine(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer eng.close()
	if *cfg.CreateTable {
		st := store.New(eng.db, cfg.Table, store.WithLogger(log), store.WithSweepWorkers(0))
		err := st.CreateTable(ctx)
		st.Close()
		if err != nil {
			return err
		}
	}
	streams, err := streamsClient(ctx, cfg, eng)
	if err != nil {
		return err
	}
	r := relay.New(relay.Options{DB: eng.db, Streams: streams, Table: cfg.Table, Publisher: broker, Lease: cfg.RelayLease, Logger: log,
		Clock: clockwork.NewRealClock()})
	log.Info("relay: starting", "table", cfg.Table, "owner", r.Owner(), "lease", cfg.RelayLease)
	runErr := r.Run(ctx)
	relCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Release(relCtx); err != nil {
		log.Warn("relay: release lease", "err", err)
	}
	return runErr
}

// streamsClient is a DynamoDB Streams client for the engine: DynamoDB Local's endpoint,
// or the standard AWS configuration (AWS_ENDPOINT_URL_DYNAMODB_STREAMS etc.).
func streamsClient(ctx context.Context, cfg Config, eng *engine) (*dynamodbstreams.Client, error) {
	if cfg.Store == "dynamodb" || eng.endpoint == "" {
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("AWS configuration: %w", err)
		}
		return dynamodbstreams.NewFromConfig(awsCfg, func(o *dynamodbstreams.Options) {
			o.Retryer = store.NewSDKRetryer()
			// DynamoDB Local (and other stand-ins) serve Streams on the DynamoDB endpoint:
			// with only AWS_ENDPOINT_URL_DYNAMODB set, use it for Streams too.
			if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
				if ep := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"); ep != "" {
					o.BaseEndpoint = aws.String(ep)
				}
			}
		}), nil
	}
	return dynlocal.StreamsClient(eng.endpoint, func(o *dynamodbstreams.Options) { o.Retryer = store.NewSDKRetryer() }), nil
}
