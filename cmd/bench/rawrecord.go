package main

// The "raw client + records" side of scenario 16: the least a durable, send-once
// delivery costs, written by hand: one UpdateItem claiming the QUEUED record (condition:
// QUEUED and unclaimed; SET claimUntil, updatedAt, ADD attempts 1; ALL_NEW), the raw
// client's send, one UpdateItem recording it SENT (condition: still QUEUED and claimed by
// this attempt; the content removed). The same two writes the store makes (store
// deliveries.go), on records queued the same way, without the handler, the adapter or
// any read of the tenant's settings.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// rawRecords makes the record writes of one delivery by hand.
type rawRecords struct {
	db    *dynamodb.Client
	table string
	lease time.Duration
}

func nAV(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func sAV(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// deliver claims t's record, calls send, and records SENT.
func (r *rawRecords) deliver(ctx context.Context, t inbox.Task, send func(context.Context) (string, error)) error {
	key := map[string]types.AttributeValue{"pk": sAV("T#" + t.Viewer.TenantID + "#NOTIF#" + t.Ref), "sk": sAV("D#" + t.Token)}
	now := time.Now()
	out, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(r.table), Key: key,
		UpdateExpression:         aws.String("SET #cu = :until, #up = :now ADD #at :one"),
		ConditionExpression:      aws.String("#st = :queued AND attribute_not_exists(#cu)"),
		ExpressionAttributeNames: map[string]string{"#cu": "claimUntil", "#up": "updatedAt", "#at": "attempts", "#st": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":until": nAV(now.Add(r.lease).UnixMilli()), ":now": nAV(now.UnixMilli()),
			":one": nAV(1), ":queued": sAV(inbox.DeliveryQueued)},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	attempt := out.Attributes["attempts"]
	msgID, err := send(ctx)
	if err != nil {
		return err
	}
	now = time.Now()
	_, err = r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(r.table), Key: key,
		UpdateExpression: aws.String("SET #st = :sent, #pv = :provider, #sa = :now, #up = :now, #mid = :mid " +
			"REMOVE #cu, #er, #na, #df, #to, #sj, #tx, #ht, #ti, #bo, #pl"),
		ConditionExpression: aws.String("#st = :queued AND #at = :attempt AND attribute_exists(#cu)"),
		ExpressionAttributeNames: map[string]string{"#st": "status", "#pv": "provider", "#sa": "sentAt", "#up": "updatedAt", "#mid": "providerMessageId",
			"#cu": "claimUntil", "#er": "error", "#na": "nextAttemptAt", "#df": "deferredUntil", "#at": "attempts",
			"#to": "to", "#sj": "subject", "#tx": "text", "#ht": "html", "#ti": "title", "#bo": "body", "#pl": "payload"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":sent": sAV(inbox.DeliverySent), ":provider": sAV("raw"), ":now": nAV(now.UnixMilli()),
			":mid": sAV(msgID), ":queued": sAV(inbox.DeliveryQueued), ":attempt": attempt},
	})
	if err != nil {
		return fmt.Errorf("sent: %w", err)
	}
	return nil
}
