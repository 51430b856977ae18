package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/store"
)

// Attributes of the lease item (key store.RelayLeaseKey).
const (
	attrOwner      = "owner"
	attrLeaseUntil = "leaseUntil" // Unix milliseconds
	attrEntityType = "entityType"
	entityLease    = "RelayLease"
)

// errLeaseLost reports that another relay holds the lease now.
var errLeaseLost = errors.New("relay: lease lost")

func ms(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

// tryAcquire takes the lease if it is free, expired or already ours, until now+d. It
// returns the current holder and expiry when another relay holds it.
func (r *Relay) tryAcquire(ctx context.Context) (ok bool, holder string, until time.Time, err error) {
	now := r.now()
	item := store.RelayLeaseKey()
	item[attrEntityType] = &types.AttributeValueMemberS{Value: entityLease}
	item[attrOwner] = &types.AttributeValueMemberS{Value: r.owner}
	item[attrLeaseUntil] = ms(now.Add(r.leaseDur))
	_, err = r.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(r.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk) OR #until < :now OR #owner = :me"),
		ExpressionAttributeNames: map[string]string{"#pk": store.PartitionKeyAttr, "#until": attrLeaseUntil, "#owner": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": ms(now), ":me": &types.AttributeValueMemberS{Value: r.owner},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		r.leaseUntil.Store(now.Add(r.leaseDur).UnixMilli())
		return true, r.owner, now.Add(r.leaseDur), nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if o, ok := ccf.Item[attrOwner].(*types.AttributeValueMemberS); ok {
			holder = o.Value
		}
		if u, ok := ccf.Item[attrLeaseUntil].(*types.AttributeValueMemberN); ok {
			if n, perr := strconv.ParseInt(u.Value, 10, 64); perr == nil {
				until = time.UnixMilli(n)
			}
		}
		return false, holder, until, nil
	}
	return false, "", time.Time{}, fmt.Errorf("relay: acquire lease: %w", err)
}

// renew extends our lease; errLeaseLost when it is not ours any more.
func (r *Relay) renew(ctx context.Context) error {
	now := r.now()
	_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(r.table),
		Key:                      store.RelayLeaseKey(),
		UpdateExpression:         aws.String("SET #until = :until"),
		ConditionExpression:      aws.String("#owner = :me AND #until >= :now"),
		ExpressionAttributeNames: map[string]string{"#until": attrLeaseUntil, "#owner": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":until": ms(now.Add(r.leaseDur)), ":now": ms(now), ":me": &types.AttributeValueMemberS{Value: r.owner},
		},
	})
	if err == nil {
		r.leaseUntil.Store(now.Add(r.leaseDur).UnixMilli())
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return errLeaseLost
	}
	return fmt.Errorf("relay: renew lease: %w", err)
}

// Release gives the lease up (when this relay holds it), so that a successor need not
// wait for it to expire. Call it after Run returned, on a graceful shutdown.
func (r *Relay) Release(ctx context.Context) error {
	_, err := r.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(r.table),
		Key:                       store.RelayLeaseKey(),
		ConditionExpression:       aws.String("#owner = :me"),
		ExpressionAttributeNames:  map[string]string{"#owner": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": &types.AttributeValueMemberS{Value: r.owner}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("relay: release lease: %w", err)
	}
	return nil
}

// leaseCondition is the ConditionCheck that fences a checkpoint write: the lease is still
// ours and unexpired.
func (r *Relay) leaseCondition() *types.ConditionCheck {
	return &types.ConditionCheck{
		TableName:                aws.String(r.table),
		Key:                      store.RelayLeaseKey(),
		ConditionExpression:      aws.String("#owner = :me AND #until >= :now"),
		ExpressionAttributeNames: map[string]string{"#until": attrLeaseUntil, "#owner": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": ms(r.now()), ":me": &types.AttributeValueMemberS{Value: r.owner},
		},
	}
}
