package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
)

// maxBatchGet is BatchGetItem's limit of keys per call (DynamoDB API reference).
const maxBatchGet = 100

// itemKey identifies an item by its primary key.
type itemKey struct{ pk, sk string }

func (k itemKey) av() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: k.pk},
		attrSK: &types.AttributeValueMemberS{Value: k.sk},
	}
}

func keyOf(item map[string]types.AttributeValue) itemKey {
	var k itemKey
	if v, ok := item[attrPK].(*types.AttributeValueMemberS); ok {
		k.pk = v.Value
	}
	if v, ok := item[attrSK].(*types.AttributeValueMemberS); ok {
		k.sk = v.Value
	}
	return k
}

// batchGetOptions shape a batchGet.
type batchGetOptions struct {
	consistent bool
	// projection and names form a ProjectionExpression; it must include pk and sk.
	projection string
	names      map[string]string
}

// maxUnprocessedCalls bounds the BatchGetItem calls one chunk of ≤100 keys makes while
// DynamoDB keeps answering with UnprocessedKeys (the first call included). With the
// backoff of batchGetChunk that is at most about 3 s of waiting.
const maxUnprocessedCalls = 10

// errUnprocessed ends a batchGet whose keys stayed unprocessed for maxUnprocessedCalls
// calls: DynamoDB is throttling the table or partition.
var errUnprocessed = inbox.Errorf(inbox.CodeThrottled, "the inbox storage is throttling reads; retry shortly")

// batchGet reads the items of keys (which must be distinct; DynamoDB rejects duplicates)
// with BatchGetItem: ≤100 keys a call, the calls of one batch sent concurrently, and
// UnprocessedKeys re-sent with capped exponential backoff and full jitter (10 ms doubling
// to 500 ms), as the BatchGetItem API reference advises, at most maxUnprocessedCalls calls
// per chunk and never waiting past ctx's deadline: then the error is THROTTLED
// (errUnprocessed). Only keys not yet answered are ever re-sent. Missing items are absent
// from the returned map.
func (s *Store) batchGet(ctx context.Context, keys []itemKey, o batchGetOptions) (map[itemKey]map[string]types.AttributeValue, error) {
	out := make(map[itemKey]map[string]types.AttributeValue, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	chunks := (len(keys) + maxBatchGet - 1) / maxBatchGet
	if chunks == 1 {
		// One call (the usual case): no errgroup, goroutine or derived context.
		items, err := s.batchGetChunk(ctx, keys, o)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			out[keyOf(it)] = it
		}
		return out, nil
	}
	results := make([][]map[string]types.AttributeValue, chunks)
	g, gctx := errgroup.WithContext(ctx)
	for c := 0; c < chunks; c++ {
		part := keys[c*maxBatchGet : min(len(keys), (c+1)*maxBatchGet)]
		g.Go(func() error {
			items, err := s.batchGetChunk(gctx, part, o)
			results[c] = items
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, items := range results {
		for _, it := range items {
			out[keyOf(it)] = it
		}
	}
	return out, nil
}

func (s *Store) batchGetChunk(ctx context.Context, keys []itemKey, o batchGetOptions) ([]map[string]types.AttributeValue, error) {
	req := types.KeysAndAttributes{Keys: make([]map[string]types.AttributeValue, len(keys))}
	// The key values of the whole chunk in one allocation (k.av() makes two per key).
	vals := make([]types.AttributeValueMemberS, 2*len(keys))
	for i, k := range keys {
		vals[2*i].Value, vals[2*i+1].Value = k.pk, k.sk
		req.Keys[i] = map[string]types.AttributeValue{attrPK: &vals[2*i], attrSK: &vals[2*i+1]}
	}
	if o.consistent {
		req.ConsistentRead = aws.Bool(true)
	}
	if o.projection != "" {
		req.ProjectionExpression = aws.String(o.projection)
		req.ExpressionAttributeNames = o.names
	}
	var items []map[string]types.AttributeValue
	delay := 10 * time.Millisecond
	for calls := 1; ; calls++ {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{s.table: req},
		})
		if err != nil {
			return nil, fmt.Errorf("batch get: %w", err)
		}
		items = append(items, out.Responses[s.table]...)
		next, ok := out.UnprocessedKeys[s.table]
		if !ok || len(next.Keys) == 0 {
			return items, nil
		}
		req.Keys = next.Keys
		wait := rand.N(delay) + time.Millisecond
		if dl, ok := ctx.Deadline(); calls >= maxUnprocessedCalls || ok && time.Until(dl) < wait {
			return nil, fmt.Errorf("%w (%d keys unprocessed after %d calls)", errUnprocessed, len(next.Keys), calls)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}
