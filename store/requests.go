package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Send requests (AP25): the send service's durable accept. A request accepted under an
// idempotency key is one item, T#{t}#REQ#{key} / REQ, written in the same
// TransactWriteItems as its recovery task, so that an accepted request is always either
// done or due to be run again by the scheduler. The item holds the request's content hash
// (a replay with another body is refused by the service), the request document and the
// answer given (both opaque to the store), its state, and a TTL: the idempotency window.

// requestItem is a Request as stored.
type requestItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	Hash       string `dynamodbav:"hash"`
	Body       []byte `dynamodbav:"body"`
	Answer     []byte `dynamodbav:"answer,omitempty"`
	Result     []byte `dynamodbav:"result,omitempty"`
	State      string `dynamodbav:"state"`
	CreatedAt  int64  `dynamodbav:"createdAt"` // Unix ms
	// ExpiresAt is the TTL, in Unix seconds.
	ExpiresAt int64 `dynamodbav:"expiresAt"`
}

func (it requestItem) request(tenantID, key string) inbox.Request {
	return inbox.Request{TenantID: tenantID, Key: key, Hash: it.Hash, Body: it.Body, Answer: it.Answer, Result: it.Result,
		State: it.State, CreatedAt: time.UnixMilli(it.CreatedAt), ExpiresAt: time.Unix(it.ExpiresAt, 0)}
}

// AcceptRequest writes r (state RequestAccepted, expiring ttl from now) after its
// recovery task, on condition that no live request holds r.Key (none, or one past its
// expiry that DynamoDB's TTL has not removed yet). When one does, the request is not
// written and the live one is returned with created false (a replay: the caller compares
// hashes).
//
// Two PutItems, the task first, rather than one TransactWriteItems of both: a
// transaction costs twice the write units and, on DynamoDB Local, several times the
// latency of a PutItem (bench scenario 15). The order keeps the guarantee: a request is
// only ever stored with its task already written, and a task whose request never got
// written (a crash in between, a replay, a refused write) finds no live request, or a
// done one, and does nothing (the send handler's rule). Errors: BAD_USER_INPUT for an
// invalid tenant or key, else the DynamoDB failure.
func (s *Store) AcceptRequest(ctx context.Context, r inbox.Request, ttl time.Duration, task inbox.Task) (stored inbox.Request, created bool, err error) {
	if err := inbox.CheckID("tenant", r.TenantID); err != nil {
		return inbox.Request{}, false, err
	}
	if err := inbox.CheckID("idempotencyKey", r.Key); err != nil {
		return inbox.Request{}, false, err
	}
	if task.ID == "" || task.Kind == "" {
		return inbox.Request{}, false, inbox.Errorf(inbox.CodeBadUserInput, "a task needs an id and a kind")
	}
	now := s.now()
	it := requestItem{PK: requestPK(r.TenantID, r.Key), SK: skRequest, EntityType: entityRequest, Hash: r.Hash,
		Body: r.Body, Answer: r.Answer, State: inbox.RequestAccepted, CreatedAt: now.UnixMilli(), ExpiresAt: now.Add(ttl).Unix()}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return inbox.Request{}, false, fmt.Errorf("encode request: %w", err)
	}
	if err := s.Schedule(ctx, task); err != nil {
		return inbox.Request{}, false, fmt.Errorf("store: accept request: its recovery task: %w", err)
	}
	// Free: no request holds the key, or the one holding it expired (TTL deletes late).
	x, err := expression.NewBuilder().WithCondition(itemAbsent().Or(expression.Name(attrTTL).LessThan(expression.Value(now.Unix())))).Build()
	if err != nil {
		return inbox.Request{}, false, fmt.Errorf("store: accept request: %w", err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av,
		ConditionExpression:                 x.Condition(),
		ExpressionAttributeNames:            x.Names(),
		ExpressionAttributeValues:           x.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	if err == nil {
		return it.request(r.TenantID, r.Key), true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return inbox.Request{}, false, fmt.Errorf("store: accept request: %w", err)
	}
	if ccf.Item != nil {
		var old requestItem
		if err := attributevalue.UnmarshalMap(ccf.Item, &old); err != nil {
			return inbox.Request{}, false, fmt.Errorf("decode request: %w", err)
		}
		return old.request(r.TenantID, r.Key), false, nil
	}
	// No old image reported: read it.
	got, ok, err := s.GetRequest(ctx, r.TenantID, r.Key)
	if err != nil {
		return inbox.Request{}, false, err
	}
	if !ok {
		return inbox.Request{}, false, errors.New("store: accept request: the request holding the key vanished")
	}
	return got, false, nil
}

// GetRequest reads the request accepted under key (strongly consistent GetItem); false
// when there is none or it expired.
func (s *Store) GetRequest(ctx context.Context, tenantID, key string) (inbox.Request, bool, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.Request{}, false, err
	}
	if err := inbox.CheckID("idempotencyKey", key); err != nil {
		return inbox.Request{}, false, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table),
		Key: itemKey{requestPK(tenantID, key), skRequest}.av(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return inbox.Request{}, false, fmt.Errorf("store: get request: %w", err)
	}
	if out.Item == nil {
		return inbox.Request{}, false, nil
	}
	var it requestItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return inbox.Request{}, false, fmt.Errorf("decode request: %w", err)
	}
	if it.ExpiresAt < s.now().Unix() {
		return inbox.Request{}, false, nil
	}
	return it.request(tenantID, key), true, nil
}

// CompleteRequest marks the request under key done with result and deletes its recovery
// task (the id and due it was scheduled with; gone already is fine), in one
// TransactWriteItems, on condition that the request exists. Completing it twice writes
// the later result. Errors: NOT_FOUND when there is no such request.
func (s *Store) CompleteRequest(ctx context.Context, tenantID, key string, result []byte, task inbox.Task) error {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return err
	}
	if err := inbox.CheckID("idempotencyKey", key); err != nil {
		return err
	}
	// The result as binary even when empty (attributevalue would make a nil slice NULL).
	x, err := buildUpdate(expression.Set(expression.Name("state"), expression.Value(inbox.RequestDone)).
		Set(expression.Name("result"), expression.Value(&types.AttributeValueMemberB{Value: result})),
		[]expression.ConditionBuilder{itemPresent()}, nil)
	if err != nil {
		return fmt.Errorf("store: complete request: %w", err)
	}
	t := &txn{}
	k := itemKey{requestPK(tenantID, key), skRequest}
	t.add(k, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: k.av(),
		UpdateExpression: x.Update(), ConditionExpression: x.Condition(),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}})
	if task.ID != "" {
		t.add(itemKey{}, s.CancelAction(task.ID, task.Due))
	}
	_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
	switch {
	case t.conditionFailed(err, k):
		return inbox.Errorf(inbox.CodeNotFound, "no send request under this idempotency key")
	case err != nil:
		return fmt.Errorf("store: complete request: %w", err)
	}
	return nil
}
