package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// syncBuffer is a log destination safe for the store's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDueTasksSkipsBrokenItems: task items another writer broke (due a string, attempts
// a list, kind a map, tenant a boolean) are skipped with a warning instead of failing the
// page (which stopped every pass over the bucket, and the shard's later tasks with it);
// paging moves past them through Last, even when a whole page holds nothing else.
func TestDueTasksSkipsBrokenItems(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var logs syncBuffer
	f := newFixture(t, store.WithSchedShards(1), store.WithClock(func() time.Time { return base }),
		store.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := context.Background()
	bucket := base.Add(time.Minute)
	put := func(id string, at time.Duration, bad map[string]types.AttributeValue) inbox.Task {
		t.Helper()
		tk := inbox.Task{ID: id, Kind: "wake", Due: bucket.Add(at), Viewer: f.viewer("ann"), Ref: "r-" + id, Token: "tok"}
		item := f.s.ScheduleAction(tk).Put.Item
		maps.Copy(item, bad)
		if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
			t.Fatal(err)
		}
		return tk
	}
	put("a-bad-due", time.Second, map[string]types.AttributeValue{"due": &types.AttributeValueMemberS{Value: "soon"}})
	put("b-bad-attempts", 2*time.Second, map[string]types.AttributeValue{"attempts": &types.AttributeValueMemberL{Value: []types.AttributeValue{}}})
	good := put("c-good", 3*time.Second, nil)
	put("d-bad-kind", 4*time.Second, map[string]types.AttributeValue{"kind": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}})
	put("e-bad-tenant", 5*time.Second, map[string]types.AttributeValue{"tenant": &types.AttributeValueMemberBOOL{Value: true}})
	late := put("f-good", 6*time.Second, nil)

	for _, limit := range []int{1, 2, 100} {
		got := dueAll(t, f.s, 0, bucket, bucket.Add(time.Minute), limit)
		if len(got) != 2 || got[0].ID != good.ID || got[1].ID != late.ID || got[0].Token != "tok" {
			t.Errorf("limit %d: read %+v, want the two good tasks", limit, got)
		}
	}
	// A page of broken items alone still says where to read on.
	p, err := f.s.DueTasks(ctx, 0, bucket, bucket.Add(time.Minute), nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tasks) != 0 || !p.More || p.Last == nil || p.Last.ID != "b-bad-attempts" {
		t.Errorf("a page of two broken items: %+v, want none, More and Last at the second", p)
	}
	if n := strings.Count(logs.String(), "skipping a task item"); n == 0 {
		t.Errorf("no warning logged: %q", logs.String())
	}
}
