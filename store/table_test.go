package store_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// A table deployed by an earlier version (here: without GSI1) gains the indexes this
// version reads when CreateTable runs against it (UpdateTable), and the unread list then
// works; running CreateTable again changes nothing.
func TestCreateTableAddsMissingIndexes(t *testing.T) {
	db := dynlocaltest.Client(t)
	table := dynlocaltest.TableName(t)
	ctx := context.Background()
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{str("pk"), str("sk")},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	}); err != nil {
		t.Fatal(err)
	}
	st := store.New(db, table, store.WithSweepWorkers(0))
	t.Cleanup(st.Close)
	for range 2 {
		if err := st.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Table.GlobalSecondaryIndexes); n != 1 || aws.ToString(out.Table.GlobalSecondaryIndexes[0].IndexName) != "GSI1" ||
		out.Table.GlobalSecondaryIndexes[0].IndexStatus != types.IndexStatusActive {
		t.Fatalf("indexes after CreateTable on a deployed table: %+v", out.Table.GlobalSecondaryIndexes)
	}
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	if _, err := st.Send(ctx, "acme", inbox.SendInput{IdempotencyKey: "k1", Recipients: []string{"alice"}, Type: "t", Title: "hello"}); err != nil {
		t.Fatal(err)
	}
	page, err := st.Inbox(ctx, v, inbox.PageQuery{First: aws.Int(10), UnreadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Edges) != 1 {
		t.Fatalf("unread list on the upgraded table: %d notifications, want 1", len(page.Edges))
	}
}
