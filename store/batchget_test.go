package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithymw "github.com/aws/smithy-go/middleware"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// halfUnprocessed is a test-only SDK middleware that lets DynamoDB Local answer only the
// first half of each BatchGetItem's keys and reports the rest as UnprocessedKeys, as
// DynamoDB does under load. It records every key sent.
type halfUnprocessed struct {
	mu    sync.Mutex
	calls int
	asked map[string]int
}

func (h *halfUnprocessed) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *smithymw.Stack) error {
		return s.Initialize.Add(smithymw.InitializeMiddlewareFunc("half-unprocessed",
			func(ctx context.Context, in smithymw.InitializeInput, next smithymw.InitializeHandler) (smithymw.InitializeOutput, smithymw.Metadata, error) {
				req, ok := in.Parameters.(*dynamodb.BatchGetItemInput)
				if !ok {
					return next.HandleInitialize(ctx, in)
				}
				sent := map[string]types.KeysAndAttributes{}
				held := map[string]types.KeysAndAttributes{}
				h.mu.Lock()
				h.calls++
				for table, ka := range req.RequestItems {
					cut := (len(ka.Keys) + 1) / 2
					first, rest := ka, ka
					first.Keys, rest.Keys = ka.Keys[:cut], ka.Keys[cut:]
					for _, k := range first.Keys { // what DynamoDB answers
						h.asked[k["pk"].(*types.AttributeValueMemberS).Value]++
					}
					sent[table] = first
					if len(rest.Keys) > 0 {
						held[table] = rest
					}
				}
				h.mu.Unlock()
				in.Parameters = &dynamodb.BatchGetItemInput{RequestItems: sent}
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil {
					return out, md, err
				}
				res := out.Result.(*dynamodb.BatchGetItemOutput)
				if res.UnprocessedKeys == nil {
					res.UnprocessedKeys = map[string]types.KeysAndAttributes{}
				}
				for table, ka := range held {
					res.UnprocessedKeys[table] = ka
				}
				return out, md, nil
			}), smithymw.After)
	})
}

func TestBatchGetRetriesUnprocessedKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var refs []inbox.ProfileRef
	for i := 0; i < 37; i++ {
		if _, err := writer(f.s).Send(ctx, f.tenant, inbox.SendInput{IdempotencyKey: fmt.Sprintf("u%d", i), Recipients: []string{"a"}, Type: "t",
			Actor: &inbox.Actor{ActorID: fmt.Sprintf("actor%d", i), Name: fmt.Sprintf("A%d", i)}}); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, inbox.ProfileRef{ID: fmt.Sprintf("actor%d", i)})
	}
	h := &halfUnprocessed{asked: map[string]int{}}
	flaky := store.New(dynlocaltest.Client(t, h.option), f.table, store.WithSweepWorkers(0))
	defer flaky.Close()
	got, err := flaky.Profiles(ctx, f.tenant, refs)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range got {
		if p == nil || p.Actor.Name != fmt.Sprintf("A%d", i) {
			t.Fatalf("profile %d lost: %+v", i, p)
		}
	}
	for k, n := range h.asked {
		if n != 1 {
			t.Errorf("key %s was asked %d times; an answered key must never be asked again", k, n)
		}
	}
	if len(h.asked) != 37 || h.calls < 6 {
		t.Fatalf("asked %d keys in %d calls; want 37 keys over ≥6 calls (halving each time)", len(h.asked), h.calls)
	}
}
