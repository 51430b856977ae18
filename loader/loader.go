// Package loader holds the per-operation dataloaders: actor and target profiles of one
// tenant and the objects global ids name (node, nodes, Viewer.notification), batched into
// BatchGetItem calls (graph-gophers/dataloader/v7); a memo of the operation's other reads
// (the badge, inbox pages), so that a read repeated under aliases is served once; and the
// bound on how many store calls one operation has in flight (MaxConcurrent).
//
// A Loaders value lives for one GraphQL operation (attached by the server's operation
// interceptor, so queries, mutations and every subscription event get their own), which
// keeps its cache request-scoped: nothing is shared between users or tenants.
//
// Why (issue 8, item 5): a document must cost what it reaches in DynamoDB, not what it
// says. 4,900 aliases of viewer { unreadCount } made 4,904 GetItem calls with about 2,000
// concurrent connections; 2,400 node aliases over two ids made 2,400 BatchGetItem calls.
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

// NodeSource resolves what global ids name for a viewer (the store: one BatchGetItem
// reads the notifications and the profiles anchored on them), aligned with refs.
type NodeSource interface {
	Nodes(ctx context.Context, v inbox.Viewer, refs []inbox.NodeRef) ([]inbox.NodeResult, error)
}

// MaxConcurrent is how many store calls one operation has in flight at most: every read
// made through this package (dataloader batches, prefetches, memoized reads) holds one of
// MaxConcurrent slots while it runs. A store call sends one DynamoDB request or several
// (a BatchGetItem over more than 100 keys one per 100 keys, a typed page one Query per
// type and a GetItem): the requests themselves are bounded by MaxRequests (LimitRequests). Mutations
// run their fields one after another.
const MaxConcurrent = 4

// Loaders are the dataloaders of one operation.
type Loaders struct {
	// Profiles loads actors and targets together: one batch (≤100 keys, the BatchGetItem
	// limit) serves both, and a key asked twice is fetched once.
	Profiles *dataloader.Loader[inbox.ProfileRef, *inbox.Profile]
	// nodes loads what global ids name (nil when the source is no NodeSource); viewer is
	// the operation's viewer, recorded by the first Nodes call.
	nodes  *dataloader.Loader[inbox.NodeRef, inbox.NodeResult]
	viewer inbox.Viewer
	badge  *BadgeShare
	sem    chan struct{}
	// requests are the operation's DynamoDB request slots (LimitRequests).
	requests chan struct{}

	// primed holds profiles given by Prime (a page's prefetch) for refs the dataloader
	// was never asked: Profile answers them from this map, without the dataloader's
	// per-Load thunk, tracer and cache work (most of an inbox page's loader cost).
	// loaded marks refs asked of the dataloader; Prime leaves those to it, so an answer
	// the dataloader already gave is kept, as its own Prime does.
	// A primed entry whose fetch is still running (a Prefetch of another resolver) has
	// an open flight: Profile waits for it instead of reading the profile again.
	mu     sync.Mutex
	primed map[inbox.ProfileRef]primedProfile
	loaded map[inbox.ProfileRef]bool
	memo   map[string]*memoCall
}

// primedProfile is a profile given by Prime or Prefetch; f is the Prefetch still fetching
// it (nil once known).
type primedProfile struct {
	p *inbox.Profile
	f *flight
}

// flight is one Prefetch's fetch: done closes when it ended, err is its failure.
type flight struct {
	done chan struct{}
	err  error
}

// Prime makes ref resolve to p in this operation unless it already resolves to
// something (like dataloader's Prime: the first answer is kept).
func (l *Loaders) Prime(ctx context.Context, ref inbox.ProfileRef, p *inbox.Profile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.primeLocked(ctx, ref, p)
}

func (l *Loaders) primeLocked(ctx context.Context, ref inbox.ProfileRef, p *inbox.Profile) {
	if l.loaded[ref] {
		l.Profiles.Prime(ctx, ref, p)
		return
	}
	if e, ok := l.primed[ref]; ok && e.f == nil {
		return
	}
	if l.primed == nil {
		l.primed = make(map[inbox.ProfileRef]primedProfile, 64)
	}
	l.primed[ref] = primedProfile{p: p}
}

// cached returns ref's primed entry, or else records that ref goes to the dataloader.
func (l *Loaders) cached(ref inbox.ProfileRef) (primedProfile, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.primed[ref]; ok {
		return e, true
	}
	if l.loaded == nil {
		l.loaded = make(map[inbox.ProfileRef]bool)
	}
	l.loaded[ref] = true
	return primedProfile{}, false
}

// acquire takes one of the operation's MaxConcurrent store-call slots (see MaxConcurrent);
// the caller calls release when its store call returned. Nothing that holds a slot waits
// for another one.
func (l *Loaders) acquire(ctx context.Context) (release func(), err error) {
	select {
	case l.sem <- struct{}{}:
		return l.release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *Loaders) release() { <-l.sem }

// Bounded runs fn holding one of the operation's store-call slots (see MaxConcurrent); it
// runs fn at once when ctx has no loaders.
func Bounded[V any](ctx context.Context, fn func(context.Context) (V, error)) (V, error) {
	l := For(ctx)
	if l == nil {
		return fn(ctx)
	}
	release, err := l.acquire(ctx)
	if err != nil {
		var zero V
		return zero, err
	}
	defer release()
	return fn(ctx)
}

// memoCall is one memoized read: done closes when it ended.
type memoCall struct {
	done chan struct{}
	val  any
	err  error
}

// Once returns fn's result for key, running fn at most once at a time per key in ctx's
// operation: callers that ask for a key already read, or being read, share that result.
// fn takes no store-call slot by itself: it wraps its store call in Bounded. A failed read is not kept: the callers waiting for it
// get its error, and a later call reads again. key must name everything fn's result
// depends on (the operation has one viewer). Without loaders in ctx it runs fn.
func Once[V any](ctx context.Context, key string, fn func(context.Context) (V, error)) (V, error) {
	var zero V
	l := For(ctx)
	if l == nil {
		return fn(ctx)
	}
	l.mu.Lock()
	if c, ok := l.memo[key]; ok {
		l.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
		if c.err != nil {
			return zero, c.err
		}
		return c.val.(V), nil
	}
	if l.memo == nil {
		l.memo = make(map[string]*memoCall)
	}
	c := &memoCall{done: make(chan struct{})}
	l.memo[key] = c
	l.mu.Unlock()
	v, err := fn(ctx)
	c.val, c.err = v, err
	if err != nil {
		l.mu.Lock()
		delete(l.memo, key)
		l.mu.Unlock()
	}
	close(c.done)
	return v, err
}

// Wait is how long a batch waits for more keys after its first one. Resolvers of one
// level of a query enqueue their keys within microseconds of each other.
const Wait = 500 * time.Microsecond

// Option adjusts New.
type Option func(*options)

type options struct {
	wait     time.Duration
	capacity int
}

// WithBatch sets how long a batch waits for more keys after its first one (default Wait)
// and how many distinct keys close it at once (default and most BatchCapacity). A test
// that starts its loads from goroutines closes the batch by its keys, not by a clock: a
// long wait and a capacity of the keys it loads (with the 500 µs default, on a loaded
// machine the goroutines did not all run in time and the loads split into two batches).
func WithBatch(wait time.Duration, capacity int) Option {
	return func(o *options) { o.wait, o.capacity = wait, min(max(capacity, 1), BatchCapacity) }
}

// BatchCapacity is the most keys of one batch: one BatchGetItem reads at most 100 items.
const BatchCapacity = 100

// New returns the loaders for one operation of tenantID.
func New(src ProfileSource, tenantID string, opts ...Option) *Loaders {
	o := options{wait: Wait, capacity: BatchCapacity}
	for _, opt := range opts {
		opt(&o)
	}
	l := &Loaders{badge: &BadgeShare{done: make(chan struct{})}, sem: make(chan struct{}, MaxConcurrent),
		requests: make(chan struct{}, MaxRequests)}
	batch := func(ctx context.Context, refs []inbox.ProfileRef) []*dataloader.Result[*inbox.Profile] {
		out := make([]*dataloader.Result[*inbox.Profile], len(refs))
		got, err := Bounded(ctx, func(ctx context.Context) ([]*inbox.Profile, error) {
			return src.Profiles(ctx, tenantID, refs)
		})
		for i := range refs {
			if err != nil {
				out[i] = &dataloader.Result[*inbox.Profile]{Error: err}
				continue
			}
			out[i] = &dataloader.Result[*inbox.Profile]{Data: got[i]}
		}
		return out
	}
	l.Profiles = dataloader.NewBatchedLoader(batch,
		dataloader.WithBatchCapacity[inbox.ProfileRef, *inbox.Profile](o.capacity),
		dataloader.WithWait[inbox.ProfileRef, *inbox.Profile](o.wait),
	)
	if ns, ok := src.(NodeSource); ok {
		nodeBatch := func(ctx context.Context, refs []inbox.NodeRef) []*dataloader.Result[inbox.NodeResult] {
			out := make([]*dataloader.Result[inbox.NodeResult], len(refs))
			got, err := Bounded(ctx, func(ctx context.Context) ([]inbox.NodeResult, error) {
				return ns.Nodes(ctx, l.viewer, refs)
			})
			for i := range refs {
				if err != nil {
					out[i] = &dataloader.Result[inbox.NodeResult]{Error: err}
					continue
				}
				out[i] = &dataloader.Result[inbox.NodeResult]{Data: got[i]}
			}
			return out
		}
		l.nodes = dataloader.NewBatchedLoader(nodeBatch,
			dataloader.WithBatchCapacity[inbox.NodeRef, inbox.NodeResult](o.capacity),
			dataloader.WithWait[inbox.NodeRef, inbox.NodeResult](o.wait),
		)
	}
	return l
}

// Nodes resolves refs of viewer v through ctx's node loader: the refs of every caller
// within a batch window go to src in one call (≤100 refs a batch), and a ref asked
// again in the operation is answered from the cache (a failed one is not kept). Without
// loaders in ctx (or when they hold another viewer) it calls src directly.
func Nodes(ctx context.Context, src NodeSource, v inbox.Viewer, refs []inbox.NodeRef) ([]inbox.NodeResult, error) {
	l := For(ctx)
	if l == nil || l.nodes == nil || !l.bindViewer(v) {
		return Bounded(ctx, func(ctx context.Context) ([]inbox.NodeResult, error) { return src.Nodes(ctx, v, refs) })
	}
	// Load, not LoadMany: LoadMany hands each key to the loader from a goroutine of its
	// own, so keys asked together could fall into different batches.
	thunks := make([]dataloader.Thunk[inbox.NodeResult], len(refs))
	for i, r := range refs {
		thunks[i] = l.nodes.Load(ctx, r)
	}
	out := make([]inbox.NodeResult, len(refs))
	for i, th := range thunks {
		v, err := th()
		if err != nil {
			for _, r := range refs {
				l.nodes.Clear(ctx, r)
			}
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Preload reads refs of viewer v with one call to src (holding a store-call slot) and
// primes ctx's node loader with the results, so that later Nodes calls for them answer
// from its cache: a caller that knows every ref the operation will ask (the ids of all
// its root node and nodes fields) preloads them, and aliases share that one read however
// their resolvers are scheduled (a dataloader batch closes Wait after its first key, and a
// busy machine can stretch a loop of Loads past it). Without a node loader it does
// nothing; on an error nothing is primed.
func Preload(ctx context.Context, src NodeSource, v inbox.Viewer, refs []inbox.NodeRef) error {
	l := For(ctx)
	if l == nil || l.nodes == nil || len(refs) == 0 || !l.bindViewer(v) {
		return nil
	}
	got, err := Bounded(ctx, func(ctx context.Context) ([]inbox.NodeResult, error) { return src.Nodes(ctx, v, refs) })
	if err != nil {
		return err
	}
	for i, r := range refs {
		l.nodes.Prime(ctx, r, got[i])
	}
	return nil
}

// bindViewer records v as the operation's viewer and reports whether it is the one
// recorded (an operation has one viewer; the node loader's batches are read as it).
func (l *Loaders) bindViewer(v inbox.Viewer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.viewer == (inbox.Viewer{}) {
		l.viewer = v
	}
	return l.viewer == v
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
	if e, ok := l.cached(ref); ok {
		if e.f == nil {
			return e.p, nil
		}
		// Another resolver's Prefetch is reading it: wait for that read.
		select {
		case <-e.f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.f.err != nil {
			return nil, e.f.err
		}
		return Profile(ctx, src, tenantID, ref)
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
// of waiting for a batch window. Missing profiles are primed as nil. Refs this operation
// already has (primed, being prefetched by another resolver, or asked of the dataloader)
// are not read again, so aliases of one page or node prefetch once. Notifications that
// carry their actor and target (an announcement's, Notification.Embedded) are skipped:
// their actor and target resolvers read no profile. Without loaders in ctx it does nothing.
func Prefetch(ctx context.Context, src ProfileSource, tenantID string, ns []*inbox.Notification) error {
	l := For(ctx)
	if l == nil || len(ns) == 0 {
		return nil
	}
	refs := make([]inbox.ProfileRef, 0, 2*len(ns))
	f := &flight{done: make(chan struct{})}
	l.mu.Lock()
	add := func(r inbox.ProfileRef) {
		if r.ID == "" || l.loaded[r] {
			return
		}
		if _, ok := l.primed[r]; ok {
			return
		}
		if l.primed == nil {
			l.primed = make(map[inbox.ProfileRef]primedProfile, 64)
		}
		l.primed[r] = primedProfile{f: f}
		refs = append(refs, r)
	}
	for _, n := range ns {
		if n == nil || n.Embedded != nil {
			// An announcement carries its actor and target: no profile of them is
			// ever written, so reading them would be a call for nothing.
			continue
		}
		add(inbox.ProfileRef{ID: n.ActorID})
		if n.TargetID != "" {
			add(inbox.ProfileRef{TargetKind: n.TargetKind, ID: n.TargetID})
		}
	}
	l.mu.Unlock()
	if len(refs) == 0 {
		return nil
	}
	got, err := Bounded(ctx, func(ctx context.Context) ([]*inbox.Profile, error) {
		return src.Profiles(ctx, tenantID, refs)
	})
	l.mu.Lock()
	for i, r := range refs {
		if l.primed[r].f != f {
			continue // primed meanwhile: the first answer is kept
		}
		if err != nil {
			delete(l.primed, r) // not kept: a later Profile reads it again
			continue
		}
		l.primed[r] = primedProfile{p: got[i]}
	}
	f.err = err
	l.mu.Unlock()
	close(f.done)
	return err
}
