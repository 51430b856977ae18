package loader_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
)

// instantSource answers every ref at once, so the benchmarks measure the loader alone.
type instantSource struct {
	calls atomic.Int64
	keys  atomic.Int64
}

func (s *instantSource) Profiles(_ context.Context, _ string, refs []inbox.ProfileRef) ([]*inbox.Profile, error) {
	s.calls.Add(1)
	s.keys.Add(int64(len(refs)))
	out := make([]*inbox.Profile, len(refs))
	for i, r := range refs {
		if r.TargetKind == "" {
			out[i] = &inbox.Profile{Actor: &inbox.Actor{ActorID: r.ID, Name: r.ID}}
		} else {
			out[i] = &inbox.Profile{Target: &inbox.Target{TargetID: r.ID, Kind: r.TargetKind, Title: r.ID}}
		}
	}
	return out, nil
}

// pageRefs are the refs of one inbox page of 20: an actor and a target each, with
// repeats (a few actors cause most notifications).
func pageRefs() []inbox.ProfileRef {
	var refs []inbox.ProfileRef
	for i := range 20 {
		refs = append(refs, inbox.ProfileRef{ID: fmt.Sprintf("actor%d", i%7)},
			inbox.ProfileRef{TargetKind: "issue", ID: fmt.Sprintf("%d", i)})
	}
	return refs
}

// BenchmarkPageLoad is one operation's loaders serving one page: 40 resolvers (an actor
// and a target for each of 20 notifications) asking concurrently, as gqlgen runs them. It
// includes the batch window (loader.Wait) when the loader waits for it.
func BenchmarkPageLoad(b *testing.B) {
	src := &instantSource{}
	refs := pageRefs()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l := loader.New(src, "acme")
		ctx := loader.With(ctx, l)
		var wg sync.WaitGroup
		for _, r := range refs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if p, err := loader.Profile(ctx, src, "acme", r); err != nil || p == nil {
					b.Error(p, err)
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(src.calls.Load())/float64(b.N), "batches/op")
	b.ReportMetric(float64(src.keys.Load())/float64(b.N), "keys/op")
}

// BenchmarkPageLoadThunks enqueues the page's keys from one goroutine and then waits for
// all of them: the loader's own cost without goroutine scheduling.
func BenchmarkPageLoadThunks(b *testing.B) {
	src := &instantSource{}
	refs := pageRefs()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l := loader.New(src, "acme")
		thunk := l.Profiles.LoadMany(ctx, refs)
		if _, errs := thunk(); errs != nil {
			b.Fatal(errs)
		}
	}
	b.ReportMetric(float64(src.calls.Load())/float64(b.N), "batches/op")
}

// BenchmarkCachedLoad is a key the operation already loaded (a repeated actor).
func BenchmarkCachedLoad(b *testing.B) {
	src := &instantSource{}
	l := loader.New(src, "acme")
	ctx := loader.With(context.Background(), l)
	ref := inbox.ProfileRef{ID: "octocat"}
	if _, err := loader.Profile(ctx, src, "acme", ref); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := loader.Profile(ctx, src, "acme", ref); err != nil {
			b.Fatal(err)
		}
	}
}
