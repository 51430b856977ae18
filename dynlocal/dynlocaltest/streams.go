package dynlocaltest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Why tables here have no stream: DynamoDB Local keeps every stream record it has written,
// across deleted tables, and each later write costs more the more it holds. Measured
// (2026-12-02, 2 cores, one engine, 600 PutItem on a fresh table per round, the table
// dropped after it): with the stream on, round 1 cost 1.5 CPU-seconds and round 28 cost 8.5
// (14 ms a write); without it every round cost 0.7. That growth is why engines were replaced
// every dozen tests; without streams one engine serves a whole test binary at a flat cost.
//
// So a table created through a client of this package gets no stream unless its test
// called KeepStreams, and DescribeTable reports the stream the CreateTable asked for (the
// store's schema check, store/migrate.go, then finds what it created). Only the stream's
// own readers (the relay's tests) need a real one.

// streams records the tables created without the stream their CreateTable asked for, and
// the top-level tests that keep streams.
var streams struct {
	mu      sync.Mutex
	dropped map[string]droppedStream // table name -> the stream it asked for
	keep    map[string]int           // top-level test name -> KeepStreams calls not yet cleaned up
}

// droppedStream is the stream a table's CreateTable asked for and did not get, and the
// top-level test that created it.
type droppedStream struct {
	spec *types.StreamSpecification
	test string
}

// KeepStreams makes the tables t's clients create (t, its subtests, and the clients
// StreamOption(t) builds) keep the stream their CreateTable asks for, until t ends: for
// tests that read the stream (DynamoDB Streams, the relay). Call it before any table of
// the top-level test is created: it fails the test when one was already created without
// the stream it asked for (a late call could not give that table its stream back).
func KeepStreams(t testing.TB) {
	t.Helper()
	key := topLevel(t)
	streams.mu.Lock()
	var late []string
	for table, d := range streams.dropped {
		if d.test == key {
			late = append(late, table)
		}
	}
	streams.mu.Unlock()
	if len(late) > 0 {
		slices.Sort(late)
		t.Fatalf("dynlocaltest.KeepStreams: %s already created table(s) %v without the stream they asked for; call KeepStreams before creating them", key, late)
	}
	streams.mu.Lock()
	if streams.keep == nil {
		streams.keep = map[string]int{}
	}
	streams.keep[key]++
	streams.mu.Unlock()
	// Counted, so that a subtest's KeepStreams ending does not end its parent's (or a
	// sibling's still running).
	t.Cleanup(func() {
		streams.mu.Lock()
		defer streams.mu.Unlock()
		if streams.keep[key]--; streams.keep[key] <= 0 {
			delete(streams.keep, key)
		}
	})
}

func topLevel(t testing.TB) string {
	key, _, _ := strings.Cut(t.Name(), "/")
	return key
}

// StreamOption is the client option Client adds: CreateTable drops the stream (unless t
// keeps streams, KeepStreams) and DescribeTable reports the dropped stream as enabled.
// Clients built without Client (app.LocalClient in internal/testgw) add it themselves.
func StreamOption(t testing.TB) func(*dynamodb.Options) {
	key := topLevel(t)
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("dynlocaltestStreams",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					switch p := in.Parameters.(type) {
					case *dynamodb.CreateTableInput:
						streams.mu.Lock()
						keep := streams.keep[key] > 0
						streams.mu.Unlock()
						if keep || p.StreamSpecification == nil || !aws.ToBool(p.StreamSpecification.StreamEnabled) {
							out, md, err := next.HandleInitialize(ctx, in)
							if err == nil {
								forgetDropped(aws.ToString(p.TableName))
							}
							return out, md, err
						}
						cp := *p
						cp.StreamSpecification = nil
						in.Parameters = &cp
						out, md, err := next.HandleInitialize(ctx, in)
						if err == nil {
							streams.mu.Lock()
							if streams.dropped == nil {
								streams.dropped = map[string]droppedStream{}
							}
							streams.dropped[aws.ToString(p.TableName)] = droppedStream{spec: p.StreamSpecification, test: key}
							streams.mu.Unlock()
						}
						return out, md, err
					case *dynamodb.DeleteTableInput:
						out, md, err := next.HandleInitialize(ctx, in)
						if err == nil {
							forgetDropped(aws.ToString(p.TableName))
						}
						return out, md, err
					case *dynamodb.DescribeTableInput:
						out, md, err := next.HandleInitialize(ctx, in)
						if err != nil {
							return out, md, err
						}
						streams.mu.Lock()
						spec := streams.dropped[aws.ToString(p.TableName)].spec
						streams.mu.Unlock()
						if res, ok := out.Result.(*dynamodb.DescribeTableOutput); ok && spec != nil && res.Table != nil && res.Table.StreamSpecification == nil {
							desc := *res.Table
							desc.StreamSpecification = spec
							res.Table = &desc
						}
						return out, md, err
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}

// forgetDropped forgets the stream table's CreateTable asked for: the table is deleted,
// or created again with what it asked for.
func forgetDropped(table string) {
	streams.mu.Lock()
	defer streams.mu.Unlock()
	delete(streams.dropped, table)
}
