// Package loader holds the per-operation dataloaders: actor and target profiles of one
// tenant, batched into BatchGetItem calls (graph-gophers/dataloader/v7).
//
// A Loaders value lives for one GraphQL operation (attached by the server's operation
// interceptor, so queries, mutations and every subscription event get their own), which
// keeps its cache request-scoped: nothing is shared between users or tenants.
package loader

import (
	"context"
	"sync"
	"time"

	"github.com/graph-gophers/dataloader/v7"

	"github.com/inboxgw/gateway/inbox"
)

// ProfileSource loads profiles of a tenant, aligned with refs (nil where missing); the
// store implements it with BatchGetItem.
type ProfileSource interface {
	Profiles(ctx context.Context, tenantID string, refs []inbox.ProfileRef) ([]*inbox.Profile, error)
}

// Loaders are the dataloaders of one operation.
type Loaders struct {
	// Profiles loads actors and targets together: one batch (≤100 keys, the BatchGetItem
	// limit) serves both, and a key asked twice is fetched once.
	Profiles *dataloader.Loader[inbox.ProfileRef, *inbox.Profile]
	badge    *BadgeShare

	// primed holds profiles given by Prime (a page's prefetch) for refs the dataloader
	// was never asked: Profile answers them from this map, without the dataloader's
	// per-Load thunk, tracer and cache work (most of an inbox page's loader cost).
	// loaded marks refs asked of the dataloader; Prime leaves those to it, so an answer
	// the dataloader already gave is kept, as its own Prime does.
	mu     sync.Mutex
	primed map[inbox.ProfileRef]*inbox.Profile
	loaded map[inbox.ProfileRef]bool
}

// Prime makes ref resolve to p in this operation unless it already resolves to
// something (like dataloader's Prime: the first answer is kept).
func (l *Loaders) Prime(ctx context.Context, ref inbox.ProfileRef, p *inbox.Profile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded[ref] {
		l.Profiles.Prime(ctx, ref, p)
		return
	}
	if _, ok := l.primed[ref]; ok {
		return
	}
	if l.primed == nil {
		l.primed = make(map[inbox.ProfileRef]*inbox.Profile, 64)
	}
	l.primed[ref] = p
}

// cached returns ref's primed profile, or else records that ref goes to the dataloader.
func (l *Loaders) cached(ref inbox.ProfileRef) (*inbox.Profile, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.primed[ref]; ok {
		return p, true
	}
	if l.loaded == nil {
		l.loaded = make(map[inbox.ProfileRef]bool)
	}
	l.loaded[ref] = true
	return nil, false
}

// Wait is how long a batch waits for more keys after its first one. Resolvers of one
// level of a query enqueue their keys within microseconds of each other.
const Wait = 500 * time.Microsecond

// New returns the loaders for one operation of tenantID.
func New(src ProfileSource, tenantID string) *Loaders {
	batch := func(ctx context.Context, refs []inbox.ProfileRef) []*dataloader.Result[*inbox.Profile] {
		out := make([]*dataloader.Result[*inbox.Profile], len(refs))
		got, err := src.Profiles(ctx, tenantID, refs)
		for i := range refs {
			if err != nil {
				out[i] = &dataloader.Result[*inbox.Profile]{Error: err}
				continue
			}
			out[i] = &dataloader.Result[*inbox.Profile]{Data: got[i]}
		}
		return out
	}
	return &Loaders{
		Profiles: dataloader.NewBatchedLoader(batch,
			dataloader.WithBatchCapacity[inbox.ProfileRef, *inbox.Profile](100),
			dataloader.WithWait[inbox.ProfileRef, *inbox.Profile](Wait),
		),
		badge: &BadgeShare{done: make(chan struct{})},
	}
}

type ctxKey struct{}

// With returns ctx carrying l.
func With(ctx context.Context, l *Loaders) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// For returns the loaders of ctx's operation, or nil when there are none.
func For(ctx context.Context) *Loaders {
	l, _ := ctx.Value(ctxKey{}).(*Loaders)
	return l
}

// Profile loads one profile through ctx's loaders (or directly from src when ctx has
// none). A missing profile is (nil, nil). A failed load is not kept in the cache.
func Profile(ctx context.Context, src ProfileSource, tenantID string, ref inbox.ProfileRef) (*inbox.Profile, error) {
	l := For(ctx)
	if l == nil {
		got, err := src.Profiles(ctx, tenantID, []inbox.ProfileRef{ref})
		if err != nil {
			return nil, err
		}
		return got[0], nil
	}
	if p, ok := l.cached(ref); ok {
		return p, nil
	}
	p, err := l.Profiles.Load(ctx, ref)()
	if err != nil {
		l.Profiles.Clear(ctx, ref)
	}
	return p, err
}

// BadgeShare lets the unreadCount field reuse the badge that an inbox page read from the
// top of the same viewer already carries (its Query returns META first), instead of a
// GetItem of its own. It is per operation.
type BadgeShare struct {
	once  sync.Once
	done  chan struct{}
	count int
	ok    bool
}

// Badge returns the operation's badge share (nil when ctx has no loaders).
func Badge(ctx context.Context) *BadgeShare {
	if l := For(ctx); l != nil {
		return l.badge
	}
	return nil
}

// Offer publishes the badge an inbox page read (ok false: the page failed or did not read
// it). Only the first offer counts.
func (b *BadgeShare) Offer(count int, ok bool) {
	b.once.Do(func() {
		b.count, b.ok = count, ok
		close(b.done)
	})
}

// Await waits for the first offer; ok is false when it carried no badge or ctx ended.
func (b *BadgeShare) Await(ctx context.Context) (count int, ok bool) {
	select {
	case <-b.done:
		return b.count, b.ok
	case <-ctx.Done():
		return 0, false
	}
}

// Prefetch loads the profiles of notifications in one call to src (one BatchGetItem per
// 100 distinct refs, sent concurrently) and primes ctx's loader with them, so that the
// actor and target resolvers of those notifications answer from the cache at once instead
// of waiting for a batch window. Missing profiles are primed as nil. Without loaders in
// ctx it does nothing.
func Prefetch(ctx context.Context, src ProfileSource, tenantID string, ns []*inbox.Notification) error {
	l := For(ctx)
	if l == nil || len(ns) == 0 {
		return nil
	}
	refs := make([]inbox.ProfileRef, 0, 2*len(ns))
	seen := make(map[inbox.ProfileRef]bool, 2*len(ns))
	add := func(r inbox.ProfileRef) {
		if r.ID != "" && !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	for _, n := range ns {
		if n == nil {
			continue
		}
		add(inbox.ProfileRef{ID: n.ActorID})
		if n.TargetID != "" {
			add(inbox.ProfileRef{TargetKind: n.TargetKind, ID: n.TargetID})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	got, err := src.Profiles(ctx, tenantID, refs)
	if err != nil {
		return err
	}
	for i, r := range refs {
		l.Prime(ctx, r, got[i])
	}
	return nil
}
