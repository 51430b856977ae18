package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// A tenant's suppression list (AP27): one item per (channel, address), pk
// suppressionPK, sk "SUPP", in GSI1 under suppressedPK (sorted by channel and address)
// for the admin listing. A send reads its recipients' items by key (ReadRecipients'
// second BatchGetItem), never the list.

const (
	skSuppression     = "SUPP"
	entitySuppression = "Suppression"
	// MaxSuppressionPage bounds one page of Suppressions.
	MaxSuppressionPage = 100
	// maxSuppressionDetail bounds a suppression's Detail (bytes, clipped on a rune
	// boundary).
	maxSuppressionDetail = 500
)

// suppressionPK is the partition of one suppressed address of channel in tenantID (addr
// normalized: inbox.NormalizeAddress).
func suppressionPK(tenantID, channel, addr string) string {
	return "T#" + tenantID + "#SUPP#" + channel + "#" + addr
}

// suppressedPK is the GSI1 partition of tenantID's suppression list; its sort key is
// "{CHANNEL}#{address}".
func suppressedPK(tenantID string) string { return "T#" + tenantID + "#SUPPRESSED" }

type suppressionItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	GSI1PK     string `dynamodbav:"gsi1pk"`
	GSI1SK     string `dynamodbav:"gsi1sk"`
	Channel    string `dynamodbav:"channel"`
	Address    string `dynamodbav:"address"`
	Reason     string `dynamodbav:"reason"`
	Detail     string `dynamodbav:"detail,omitempty"`
	CreatedAt  int64  `dynamodbav:"createdAt"`
}

func (it suppressionItem) plain() inbox.Suppression {
	return inbox.Suppression{Channel: it.Channel, Address: it.Address, Reason: it.Reason, Detail: it.Detail,
		CreatedAt: time.UnixMilli(it.CreatedAt).UTC()}
}

// AddSuppression puts sup's address on tenantID's suppression list: ONE conditional
// PutItem (the first entry of an address stands; a repeated bounce writes nothing and
// answers false). The address is normalized. Errors: BAD_USER_INPUT for a channel or an
// address that cannot be suppressed.
func (s *Store) AddSuppression(ctx context.Context, tenantID string, sup inbox.Suppression) (bool, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return false, err
	}
	addr, err := inbox.NormalizeAddress(sup.Channel, sup.Address)
	if err != nil {
		return false, err
	}
	if len(sup.Detail) > maxSuppressionDetail {
		// On a rune boundary: a cut rune would be stored as U+FFFD.
		n := maxSuppressionDetail
		for n > 0 && !utf8.RuneStart(sup.Detail[n]) {
			n--
		}
		sup.Detail = sup.Detail[:n]
	}
	at := sup.CreatedAt
	if at.IsZero() {
		at = s.now()
	}
	it := suppressionItem{PK: suppressionPK(tenantID, sup.Channel, addr), SK: skSuppression, EntityType: entitySuppression,
		GSI1PK: suppressedPK(tenantID), GSI1SK: sup.Channel + "#" + addr, Channel: sup.Channel, Address: addr,
		Reason: sup.Reason, Detail: sup.Detail, CreatedAt: at.UnixMilli()}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return false, fmt.Errorf("encode suppression: %w", err)
	}
	put, err := condPut(s.table, av, itemAbsent())
	if err != nil {
		return false, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item,
		ConditionExpression: put.ConditionExpression, ExpressionAttributeNames: put.ExpressionAttributeNames,
		ExpressionAttributeValues: put.ExpressionAttributeValues})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("put suppression: %w", err)
	}
	return true, nil
}

// RemoveSuppression takes channel's address off tenantID's list: ONE DeleteItem;
// false when it was not on it. Errors: BAD_USER_INPUT as AddSuppression.
func (s *Store) RemoveSuppression(ctx context.Context, tenantID, channel, address string) (bool, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return false, err
	}
	addr, err := inbox.NormalizeAddress(channel, address)
	if err != nil {
		return false, err
	}
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table),
		Key: itemKey{suppressionPK(tenantID, channel, addr), skSuppression}.av(), ReturnValues: types.ReturnValueAllOld})
	if err != nil {
		return false, fmt.Errorf("delete suppression: %w", err)
	}
	return len(out.Attributes) > 0, nil
}

// suppressionCursor is a page's position: the last entry's channel and address (the
// keys are rebuilt from them under the caller's tenant, so a forged cursor can only point
// into the caller's own list).
type suppressionCursor struct {
	Channel string `json:"c"`
	Address string `json:"a"`
}

// Suppressions pages tenantID's suppression list in (channel, address) order: ONE Query
// of GSI1 (channel "" for every channel, else that channel's entries only), at most
// limit (1..MaxSuppressionPage) from after cursor; next is "" on the last page.
// Errors: BAD_USER_INPUT for a bad channel, limit or cursor.
func (s *Store) Suppressions(ctx context.Context, tenantID, channel, cursor string, limit int) ([]inbox.Suppression, string, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return nil, "", err
	}
	if channel != "" && !inbox.SuppressibleChannel(channel) {
		return nil, "", inbox.Errorf(inbox.CodeBadUserInput, "channel must be EMAIL or SMS")
	}
	if limit < 1 || limit > MaxSuppressionPage {
		return nil, "", inbox.Errorf(inbox.CodeBadUserInput, "limit must be from 1 to %d", MaxSuppressionPage)
	}
	kc := expression.Key(attrGSI1PK).Equal(expression.Value(suppressedPK(tenantID)))
	if channel != "" {
		kc = kc.And(expression.Key(attrGSI1SK).BeginsWith(channel + "#"))
	}
	x, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, "", fmt.Errorf("store: build suppression query: %w", err)
	}
	in := &dynamodb.QueryInput{TableName: aws.String(s.table), IndexName: aws.String(gsi1Name),
		KeyConditionExpression: x.KeyCondition(), ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		Limit: aws.Int32(int32(limit))}
	if cursor != "" {
		c, err := decodeSuppressionCursor(cursor)
		if err != nil || (channel != "" && c.Channel != channel) {
			return nil, "", inbox.Errorf(inbox.CodeBadUserInput, "cursor is not one of this list's")
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: suppressionPK(tenantID, c.Channel, c.Address)},
			attrSK: &types.AttributeValueMemberS{Value: skSuppression}, attrGSI1PK: &types.AttributeValueMemberS{Value: suppressedPK(tenantID)},
			attrGSI1SK: &types.AttributeValueMemberS{Value: c.Channel + "#" + c.Address}}
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("query suppressions: %w", err)
	}
	var its []suppressionItem
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &its); err != nil {
		return nil, "", fmt.Errorf("decode suppressions: %w", err)
	}
	list := make([]inbox.Suppression, len(its))
	for i, it := range its {
		list[i] = it.plain()
	}
	next := ""
	if len(out.LastEvaluatedKey) > 0 && len(its) > 0 {
		last := its[len(its)-1]
		b, _ := json.Marshal(suppressionCursor{Channel: last.Channel, Address: last.Address})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	return list, next, nil
}

// decodeSuppressionCursor decodes and checks a cursor of Suppressions.
func decodeSuppressionCursor(cursor string) (suppressionCursor, error) {
	var c suppressionCursor
	if len(cursor) > 1024 {
		return c, fmt.Errorf("cursor too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, err
	}
	a, err := inbox.NormalizeAddress(c.Channel, c.Address)
	if err != nil || a != c.Address {
		return c, fmt.Errorf("bad cursor")
	}
	return c, nil
}
