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

// batchGet reads the items of keys (which must be distinct; DynamoDB rejects duplicates)
// with BatchGetItem: ≤100 keys a call, the calls of one batch sent concurrently, and
// UnprocessedKeys re-sent with capped exponential backoff and full jitter (10 ms doubling
// to 500 ms) until all are answered or ctx ends, as the BatchGetItem API reference
// advises. Only keys not yet answered are ever re-sent. Missing items are absent from the
// returned map.
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
	for {
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
		t := time.NewTimer(rand.N(delay) + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}
