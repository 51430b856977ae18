package loader_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
)

// countingSource answers every ref with an actor except ids "missing"; it records batches
// and fails while fail is set.
type countingSource struct {
	mu      sync.Mutex
	batches [][]inbox.ProfileRef
	fail    bool
}

func (s *countingSource) Profiles(_ context.Context, tenant string, refs []inbox.ProfileRef) ([]*inbox.Profile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, append([]inbox.ProfileRef(nil), refs...))
	if s.fail {
		return nil, errors.New("throttled")
	}
	out := make([]*inbox.Profile, len(refs))
	for i, r := range refs {
		if r.ID != "missing" {
			out[i] = &inbox.Profile{Actor: &inbox.Actor{ActorID: tenant + "/" + r.ID}}
		}
	}
	return out, nil
}

func TestLoaderBatchesAndAligns(t *testing.T) {
	src := &countingSource{}
	ctx := loader.With(context.Background(), loader.New(src, "acme", loader.WithBatch(time.Hour, 4))) // the batch closes at its 4 distinct keys, whenever the goroutines run
	refs := []inbox.ProfileRef{{ID: "a"}, {ID: "b"}, {ID: "a"}, {ID: "missing"}, {TargetKind: "issue", ID: "a"}}
	got := make([]*inbox.Profile, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, r := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = loader.Profile(ctx, src, "acme", r)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ref %d: %v", i, err)
		}
	}
	if len(src.batches) != 1 || len(src.batches[0]) != 4 {
		t.Fatalf("batches = %v, want one batch of 4 distinct refs", src.batches)
	}
	if got[0].Actor.ActorID != "acme/a" || got[2] != got[0] || got[3] != nil || got[1].Actor.ActorID != "acme/b" {
		t.Fatalf("results misaligned: %+v", got)
	}
}

func TestLoaderDoesNotCacheErrors(t *testing.T) {
	src := &countingSource{fail: true}
	ctx := loader.With(context.Background(), loader.New(src, "acme"))
	if _, err := loader.Profile(ctx, src, "acme", inbox.ProfileRef{ID: "a"}); err == nil {
		t.Fatal("want the source's error")
	}
	src.mu.Lock()
	src.fail = false
	src.mu.Unlock()
	p, err := loader.Profile(ctx, src, "acme", inbox.ProfileRef{ID: "a"})
	if err != nil || p == nil {
		t.Fatalf("a transient error was cached: %v", err)
	}
}

func TestPrefetchPrimesTheCache(t *testing.T) {
	src := &countingSource{}
	ctx := loader.With(context.Background(), loader.New(src, "acme"))
	ns := []*inbox.Notification{{ActorID: "a", TargetKind: "issue", TargetID: "1"}, {ActorID: "a"}, {ActorID: "b", TargetKind: "issue", TargetID: "1"}}
	if err := loader.Prefetch(ctx, src, "acme", ns); err != nil {
		t.Fatal(err)
	}
	for _, r := range []inbox.ProfileRef{{ID: "a"}, {ID: "b"}, {TargetKind: "issue", ID: "1"}} {
		if _, err := loader.Profile(ctx, src, "acme", r); err != nil {
			t.Fatal(err)
		}
	}
	if len(src.batches) != 1 || len(src.batches[0]) != 3 {
		t.Fatalf("batches = %v, want the one prefetch batch of 3", src.batches)
	}
}

// An announcement's notification carries its actor and target: Prefetch reads the
// profiles of the others only.
func TestPrefetchSkipsEmbedded(t *testing.T) {
	src := &countingSource{}
	ctx := loader.With(context.Background(), loader.New(src, "acme"))
	ann := &inbox.Notification{ActorID: "team", TargetKind: "release", TargetID: "r1", Kind: inbox.KindAnnouncement,
		Embedded: &inbox.Embedded{Actor: &inbox.Actor{ActorID: "team"}, Target: &inbox.Target{Kind: "release", TargetID: "r1"}}}
	if err := loader.Prefetch(ctx, src, "acme", []*inbox.Notification{ann}); err != nil {
		t.Fatal(err)
	}
	if len(src.batches) != 0 {
		t.Fatalf("batches = %v, want none for an announcement", src.batches)
	}
	if err := loader.Prefetch(ctx, src, "acme", []*inbox.Notification{ann, {ActorID: "a"}}); err != nil {
		t.Fatal(err)
	}
	if len(src.batches) != 1 || len(src.batches[0]) != 1 || src.batches[0][0].ID != "a" {
		t.Fatalf("batches = %v, want one of the personal notification's actor", src.batches)
	}
}

// Concurrent callers of one key share one read; a failed read is not kept.
func TestOnceSharesOneReadAndForgetsFailures(t *testing.T) {
	ctx := loader.With(context.Background(), loader.New(&countingSource{}, "acme"))
	var calls, fail atomic.Int32
	fail.Store(1)
	read := func(context.Context) (int, error) {
		calls.Add(1)
		if fail.Load() == 1 {
			return 0, errors.New("throttled")
		}
		return 7, nil
	}
	if _, err := loader.Once(ctx, "badge", read); err == nil {
		t.Fatal("want the read's error")
	}
	fail.Store(0)
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := loader.Once(ctx, "badge", read); v != 7 || err != nil {
				t.Errorf("Once = %d, %v", v, err)
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d reads, want 2 (the failed one, then one for 100 callers)", n)
	}
}

// At most MaxConcurrent reads of one operation run at once.
func TestReadsOfAnOperationAreBounded(t *testing.T) {
	ctx := loader.With(context.Background(), loader.New(&countingSource{}, "acme"))
	var now, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = loader.Once(ctx, fmt.Sprint("page", i), func(ctx context.Context) (int, error) {
				return loader.Bounded(ctx, func(context.Context) (int, error) {
					n := now.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(time.Millisecond)
					now.Add(-1)
					return 0, nil
				})
			})
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > loader.MaxConcurrent || p < 1 {
		t.Fatalf("%d reads at once, want 1..%d", p, loader.MaxConcurrent)
	}
}

// Prefetches of the same notifications by concurrent resolvers read them once.
func TestPrefetchIsSingleFlight(t *testing.T) {
	src := &countingSource{}
	ctx := loader.With(context.Background(), loader.New(src, "acme"))
	ns := []*inbox.Notification{{ActorID: "a", TargetKind: "issue", TargetID: "1"}}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loader.Prefetch(ctx, src, "acme", ns); err != nil {
				t.Error(err)
			}
			if p, err := loader.Profile(ctx, src, "acme", inbox.ProfileRef{ID: "a"}); err != nil || p == nil {
				t.Errorf("Profile = %v, %v", p, err)
			}
		}()
	}
	wg.Wait()
	if len(src.batches) != 1 {
		t.Fatalf("batches = %v, want one", src.batches)
	}
}
