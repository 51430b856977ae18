package dynlocaltest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
)

// fatalTB is a test whose Fatalf records the message and ends only the calling goroutine.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// keepStreams calls KeepStreams(t) and returns the message it failed t with ("" for none).
func keepStreams(t testing.TB) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dynlocaltest.KeepStreams(f)
	}()
	<-done
	return f.msg
}

// createWithStream creates table through client, asking for a NEW_AND_OLD_IMAGES stream.
func createWithStream(t testing.TB, client *dynamodb.Client, table string) {
	t.Helper()
	_, err := client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatalf("CreateTable %s: %v", table, err)
	}
}

// hasStream reports whether table really has a stream (one DynamoDB Streams can read:
// LatestStreamArn), checking that DescribeTable reports the stream asked for either way.
func hasStream(t testing.TB, client *dynamodb.Client, table string) bool {
	t.Helper()
	out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("DescribeTable %s: %v", table, err)
	}
	if sp := out.Table.StreamSpecification; sp == nil || !aws.ToBool(sp.StreamEnabled) {
		t.Fatalf("DescribeTable %s reports no stream: %+v", table, sp)
	}
	return out.Table.LatestStreamArn != nil
}

// A table gets its stream when its test called KeepStreams before creating it, also
// after a subtest's own KeepStreams ended; a table created without it has none (and
// DescribeTable reports the stream it asked for).
func TestKeepStreamsBeforeTheTable(t *testing.T) {
	client := dynlocaltest.Client(t)
	if msg := keepStreams(t); msg != "" {
		t.Fatalf("KeepStreams before any table: %s", msg)
	}
	first := dynlocaltest.TableName(t)
	createWithStream(t, client, first)
	if !hasStream(t, client, first) {
		t.Fatal("a table created after KeepStreams has no stream")
	}
	t.Run("sub", func(t *testing.T) {
		if msg := keepStreams(t); msg != "" {
			t.Fatalf("a subtest's KeepStreams: %s", msg)
		}
		table := dynlocaltest.TableName(t)
		createWithStream(t, client, table)
		if !hasStream(t, client, table) {
			t.Fatal("a subtest's table has no stream")
		}
	})
	// The subtest's KeepStreams ended; the parent's has not.
	second := dynlocaltest.TableName(t)
	createWithStream(t, client, second)
	if !hasStream(t, client, second) {
		t.Fatal("a table created after a subtest's KeepStreams ended has no stream: the parent's ended with it")
	}
}

// A table created without KeepStreams has no stream; a KeepStreams after it, in the test
// or in any of its subtests, fails the test instead of silently changing nothing. A table
// deleted again, or one that asked for no stream, does not count.
func TestKeepStreamsAfterTheTableFails(t *testing.T) {
	client := dynlocaltest.Client(t)
	noStream := dynlocaltest.TableName(t)
	if _, err := client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(noStream),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	deleted := dynlocaltest.TableName(t)
	createWithStream(t, client, deleted)
	if _, err := client.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(deleted)}); err != nil {
		t.Fatal(err)
	}
	t.Run("nothing dropped yet", func(t *testing.T) {
		if msg := keepStreams(t); msg != "" {
			t.Fatalf("KeepStreams with no table created without its stream: %s", msg)
		}
	})

	var table string
	t.Run("created in a subtest", func(t *testing.T) {
		table = dynlocaltest.TableName(t)
		createWithStream(t, client, table)
		if hasStream(t, client, table) {
			t.Fatalf("%s was created without KeepStreams and has a stream", table)
		}
	})
	for _, name := range []string{"", "a later subtest"} {
		check := func(t *testing.T) {
			msg := keepStreams(t)
			if !strings.Contains(msg, table) || !strings.Contains(msg, "before") {
				t.Errorf("KeepStreams after %s was created: failed with %q, want a failure naming the table", table, msg)
			}
		}
		if name == "" {
			check(t)
		} else {
			t.Run(name, check)
		}
	}
}
