package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/ddbtrace"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// writtenPKs counts, per partition key, the items written by the recorded requests
// (PutItem, UpdateItem, DeleteItem, TransactWriteItems actions).
func writtenPKs(reqs []ddbtrace.Request) map[string]int {
	out := map[string]int{}
	pk := func(m map[string]types.AttributeValue) {
		if v, ok := m["pk"].(*types.AttributeValueMemberS); ok {
			out[v.Value]++
		}
	}
	for _, r := range reqs {
		switch in := r.Input.(type) {
		case *dynamodb.TransactWriteItemsInput:
			for _, a := range in.TransactItems {
				switch {
				case a.Put != nil:
					pk(a.Put.Item)
				case a.Update != nil:
					pk(a.Update.Key)
				case a.Delete != nil:
					pk(a.Delete.Key)
				case a.ConditionCheck != nil:
					pk(a.ConditionCheck.Key)
				}
			}
		case *dynamodb.PutItemInput:
			pk(in.Item)
		case *dynamodb.UpdateItemInput:
			pk(in.Key)
		case *dynamodb.DeleteItemInput:
			pk(in.Key)
		}
	}
	return out
}

func members(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// A 2,000-member segment written 1,000 a call: every shard gets members, no partition
// key receives more than twice the mean of the writes (asserted from the requests sent),
// and the counts are exact.
func TestSegmentWritesSpreadOverShards(t *testing.T) {
	// Not parallel: thousands of members' writes beside the concurrency races made their
	// conflict retries run out of time on the shared engine. 2,000 members (two calls,
	// about 125 a shard) show the spread as well as 10,000 did, at a fifth of the writes.
	f := newFixture(t, store.WithSweepWorkers(0))
	f.rec.KeepInputs()
	ctx := context.Background()
	all := members("user-", 2*inbox.MaxSegmentChange)
	for i := 0; i < len(all); i += inbox.MaxSegmentChange {
		c, err := f.s.UpdateSegment(ctx, f.tenant, "followers:actor-1", all[i:i+inbox.MaxSegmentChange], nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Added != inbox.MaxSegmentChange {
			t.Fatalf("added %d, want %d", c.Added, inbox.MaxSegmentChange)
		}
	}
	perPK := writtenPKs(f.rec.Requests())
	if len(perPK) != store.DefaultSegmentShards {
		t.Fatalf("writes went to %d partition keys, want the %d shards: %v", len(perPK), store.DefaultSegmentShards, perPK)
	}
	total := 0
	for pk, n := range perPK {
		if !strings.Contains(pk, "#SEG#followers:actor-1#S#") {
			t.Fatalf("a write to %s", pk)
		}
		total += n
	}
	mean := float64(total) / float64(len(perPK))
	for pk, n := range perPK {
		if float64(n) > 2*mean {
			t.Errorf("partition %s received %d writes, over twice the mean %.0f", pk, n, mean)
		}
	}
	if n, err := f.s.SegmentCount(ctx, f.tenant, "followers:actor-1"); err != nil || n != len(all) {
		t.Fatalf("count %d, %v; want %d", n, err, len(all))
	}
	f.rec.Reset()
	if _, err := f.s.SegmentCount(ctx, f.tenant, "followers:actor-1"); err != nil {
		t.Fatal(err)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"BatchGetItem"}) {
		t.Fatalf("the count took %v, want one BatchGetItem", ops)
	}
}

// Repeated adds and removes, and a mix in one call, keep the count exact; a page walks
// every member once across shards.
func TestSegmentCountsExactAndPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, store.WithSweepWorkers(0), store.WithSegmentShards(4))
	ctx := context.Background()
	seg := "beta-testers"
	all := members("u", 250)
	if _, err := f.s.UpdateSegment(ctx, f.tenant, seg, all[:200], nil); err != nil {
		t.Fatal(err)
	}
	// 100 already in, 50 new; 20 removed of which 10 are not members.
	c, err := f.s.UpdateSegment(ctx, f.tenant, seg, all[100:250], nil)
	if err != nil || c.Added != 50 {
		t.Fatalf("re-add: %+v, %v; want 50 added", c, err)
	}
	rm := append(slices.Clone(all[0:10]), members("nobody", 10)...)
	c, err = f.s.UpdateSegment(ctx, f.tenant, seg, []string{"new-one"}, rm)
	if err != nil || c.Added != 1 || c.Removed != 10 {
		t.Fatalf("mixed: %+v, %v; want 1 added, 10 removed", c, err)
	}
	c, err = f.s.UpdateSegment(ctx, f.tenant, seg, nil, rm)
	if err != nil || c.Removed != 0 {
		t.Fatalf("repeat remove: %+v, %v; want none removed", c, err)
	}
	want := append(slices.Clone(all[10:]), "new-one")
	slices.Sort(want)
	var got []string
	cursor := ""
	for range 100 {
		p, err := f.s.GetSegment(ctx, f.tenant, seg, 37, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if p.Count != len(want) {
			t.Fatalf("count %d, want %d", p.Count, len(want))
		}
		got = append(got, p.Members...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("paged %d members, want %d", len(got), len(want))
	}
	for _, op := range f.rec.Ops() {
		if op == "Scan" {
			t.Fatal("a Scan")
		}
	}
}

// Bad input is refused before anything is written.
func TestSegmentBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, store.WithSweepWorkers(0))
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"too many": func() error {
			_, err := f.s.UpdateSegment(ctx, f.tenant, "s", members("u", 600), members("v", 401))
			return err
		},
		"hash in segment": func() error { _, err := f.s.UpdateSegment(ctx, f.tenant, "a#b", []string{"u"}, nil); return err },
		"hash in member":  func() error { _, err := f.s.UpdateSegment(ctx, f.tenant, "s", []string{"u#1"}, nil); return err },
		"none":            func() error { _, err := f.s.UpdateSegment(ctx, f.tenant, "s", nil, nil); return err },
		"both": func() error {
			_, err := f.s.UpdateSegment(ctx, f.tenant, "s", []string{"u"}, []string{"u"})
			return err
		},
		"cursor": func() error { _, err := f.s.GetSegment(ctx, f.tenant, "s", 10, "!!"); return err },
	} {
		if err := call(); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v, want BAD_USER_INPUT", name, err)
		}
	}
	if n := f.rec.Count("TransactWriteItems"); n != 0 {
		t.Fatalf("%d writes for refused input", n)
	}
}
