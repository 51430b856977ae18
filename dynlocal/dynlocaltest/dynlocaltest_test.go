package dynlocaltest_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
)

func TestClientCreatesAndSeesTable(t *testing.T) {
	t.Parallel()
	client := dynlocaltest.Client(t)
	table := dynlocaltest.TableName(t)
	_, err := client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	if got := aws.ToString(out.Table.TableName); got != table {
		t.Errorf("DescribeTable name = %q, want %q", got, table)
	}
}

func TestClientSharesOneEngine(t *testing.T) {
	t.Parallel()
	a, b := dynlocaltest.Endpoint(t), dynlocaltest.Endpoint(t)
	if a != b || a == "" {
		t.Fatalf("Endpoint() = %q then %q, want one shared endpoint", a, b)
	}
}

func TestClientOptions(t *testing.T) {
	t.Parallel()
	called := false
	client := dynlocaltest.Client(t, func(o *dynamodb.Options) { called = true; o.Region = "eu-west-1" })
	if !called {
		t.Fatal("option function not applied")
	}
	if got := client.Options().Region; got != "eu-west-1" {
		t.Errorf("Region = %q, want the option's eu-west-1", got)
	}
	// -sharedDb: a different region still works against the same engine.
	if _, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables: %v", err)
	}
}

func TestEndpointFromEnvironment(t *testing.T) {
	t.Setenv(dynlocaltest.EndpointEnv, "http://127.0.0.1:1")
	if got := dynlocaltest.Endpoint(t); got != "http://127.0.0.1:1" {
		t.Errorf("Endpoint() = %q, want the environment's", got)
	}
}

var validTableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

func TestTableName(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, sub := range []string{"simple", "with spaces/and#hash:é", strings.Repeat("long", 100)} {
		t.Run(sub, func(t *testing.T) {
			for range 3 {
				name := dynlocaltest.TableName(t)
				if !validTableName.MatchString(name) {
					t.Errorf("TableName() = %q (%d chars), not a valid table name", name, len(name))
				}
				if !strings.HasPrefix(name, "test_TestTableName_") {
					t.Errorf("TableName() = %q, want it to start with the test name", name)
				}
				if names[name] {
					t.Errorf("TableName() repeated %q", name)
				}
				names[name] = true
			}
		})
	}
}
