package datamodel

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableInfo is the table as DynamoDB describes it after the store created it.
type TableInfo struct {
	Keys, Billing, Stream, TTL string
	Indexes                    []IndexInfo
}

// IndexInfo is one global secondary index: its name and its keys and projection.
type IndexInfo struct{ Name, Desc string }

// describeTable reads what the store's CreateTable made of table.
func describeTable(ctx context.Context, db *dynamodb.Client, table string) (TableInfo, error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return TableInfo{}, fmt.Errorf("model: describe %s: %w", table, err)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return TableInfo{}, fmt.Errorf("model: describe the TTL of %s: %w", table, err)
	}
	t := d.Table
	attrTypes := map[string]string{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	keys := func(ks []types.KeySchemaElement) string {
		parts := make([]string, len(ks))
		for i, k := range ks {
			name := aws.ToString(k.AttributeName)
			parts[i] = fmt.Sprintf("`%s` (%s, %s)", name, k.KeyType, attrTypes[name])
		}
		return strings.Join(parts, ", ")
	}
	info := TableInfo{Keys: keys(t.KeySchema), Billing: "on demand (PAY_PER_REQUEST)", Stream: "none", TTL: "off"}
	if t.BillingModeSummary == nil || t.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		info.Billing = "provisioned"
	}
	if s := t.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		info.Stream = string(s.StreamViewType)
	}
	if td := ttl.TimeToLiveDescription; td != nil && td.TimeToLiveStatus == types.TimeToLiveStatusEnabled {
		info.TTL = "`" + aws.ToString(td.AttributeName) + "`"
	}
	for _, g := range t.GlobalSecondaryIndexes {
		proj := string(g.Projection.ProjectionType)
		if len(g.Projection.NonKeyAttributes) > 0 {
			attrs := append([]string(nil), g.Projection.NonKeyAttributes...)
			sort.Strings(attrs)
			proj += " " + strings.Join(attrs, ", ")
		}
		info.Indexes = append(info.Indexes, IndexInfo{Name: aws.ToString(g.IndexName), Desc: keys(g.KeySchema) + "; projection " + proj})
	}
	sort.Slice(info.Indexes, func(i, j int) bool { return info.Indexes[i].Name < info.Indexes[j].Name })
	return info, nil
}
