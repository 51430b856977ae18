package service

import (
	"context"
	"errors"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/inboxgw/gateway/inbox"
)

// AnnouncementStore is what announcements need of the store (*store.Store): the writes
// of AP29 and the read of a tenant's set.
type AnnouncementStore interface {
	NewID() string
	CreateAnnouncement(ctx context.Context, tenantID string, in inbox.AnnouncementInput, id, hash string, seq int64) (*inbox.Announcement, bool, error)
	Announcement(ctx context.Context, tenantID, id string) (*inbox.Announcement, error)
	WithdrawAnnouncement(ctx context.Context, tenantID, id string) (*inbox.Announcement, bool, error)
	LoadAnnouncements(ctx context.Context, tenantID string) (*inbox.AnnouncementSet, error)
	ReplayAnnouncement(ctx context.Context, tenantID, key, hash string) (*inbox.Announcement, bool, error)
}

// AnnouncementOptions configure Announcements.
type AnnouncementOptions struct {
	// Templates render an announcement's template (nil: templates are refused).
	Templates Templates
	// Publisher carries a tenant's announcement change to every instance (the broker):
	// an inbox.Change for the tenant's pseudo-viewer (AnnouncementViewer) with Kind
	// inbox.EventAnnouncements and Version the tenant's new sequence.
	Publisher inbox.Publisher
	// Hash identifies an announcement's content for its idempotency key (store.AnnouncementHash).
	Hash func(inbox.AnnouncementInput) string
	// MaxAge is how long a cached set serves without a read (default 30s): the backstop
	// should an invalidation be lost; invalidations (the broker, the relay) come first.
	MaxAge time.Duration
	// Tenants is how many tenants' sets the cache keeps (default 10,000; least recently
	// used go first).
	Tenants int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Announcements is the announcement service of one instance: creating, reading and
// withdrawing a tenant's announcements, and the instance's cache of each tenant's active
// set, which the store merges into every inbox page and badge (store.AnnouncementSource).
// A set is read once (one Query) per tenant and instance, again only when an
// invalidation says it moved (Invalidate: from the broker or the stream relay), when an id
// asked for is not in it, or after MaxAge.
type Announcements struct {
	st    AnnouncementStore
	o     AnnouncementOptions
	cache *lru.Cache[string, *cachedSet]
	sf    singleflight.Group
	// mu orders a load's result against Invalidate: a load that began before an
	// invalidation of a newer sequence is not kept as fresh.
	mu    sync.Mutex
	stale map[string]staleMark // tenant -> the newest sequence an invalidation announced
	// inflight counts the loads of each tenant running (a.mu): an invalidation of a tenant
	// neither cached nor loading has nothing to make stale and is not kept, so that stale
	// holds only tenants this instance reads, however many tenants the fleet announces to.
	inflight map[string]int
	// resyncAt: a set read before it is stale (InvalidateAll: changes may have been missed).
	resyncAt time.Time
}

// staleMark is the newest sequence an invalidation announced for a tenant, and when it
// came: a (strongly consistent) load begun after it that reads less proves it wrong.
type staleMark struct {
	seq int64
	at  time.Time
}

// cachedSet is one tenant's set as this instance read it, and when.
type cachedSet struct {
	set *inbox.AnnouncementSet
	at  time.Time
}

// NewAnnouncements returns the announcement service over st.
func NewAnnouncements(st AnnouncementStore, o AnnouncementOptions) *Announcements {
	if o.MaxAge <= 0 {
		o.MaxAge = 30 * time.Second
	}
	if o.Tenants <= 0 {
		o.Tenants = 10_000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c, _ := lru.New[string, *cachedSet](o.Tenants)
	return &Announcements{st: st, o: o, cache: c, stale: map[string]staleMark{}, inflight: map[string]int{}}
}

// AnnouncementViewer is the pseudo-viewer a tenant's announcement changes are published
// for: the tenant with no user (user ids are never empty).
func AnnouncementViewer(tenant string) inbox.Viewer { return inbox.Viewer{TenantID: tenant} }

// Announcements returns tenant's set: the cached one while fresh, else one Query
// (concurrent callers share it). fresh reads it now unless the cached one was read less
// than 100ms ago (so an id that does not exist costs one read, never one per retry).
func (a *Announcements) Announcements(ctx context.Context, tenant string, fresh bool) (*inbox.AnnouncementSet, error) {
	now := a.o.Now()
	if c, ok := a.cache.Get(tenant); ok {
		age := now.Sub(c.at)
		if (!fresh && age < a.o.MaxAge) || (fresh && age < 100*time.Millisecond) {
			if !a.isStale(tenant, c) {
				return c.set, nil
			}
		}
	}
	return a.load(ctx, tenant)
}

// Cached returns tenant's set as cached, without reading (nil when none): what a live
// stream composes badges with.
func (a *Announcements) Cached(tenant string) *inbox.AnnouncementSet {
	if c, ok := a.cache.Peek(tenant); ok {
		return c.set
	}
	return nil
}

func (a *Announcements) isStale(tenant string, c *cachedSet) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stale[tenant].seq > c.set.Seq || c.at.Before(a.resyncAt)
}

// InvalidateAll makes every cached set stale (each is read again by its next caller;
// Cached still returns it meanwhile): the broker's connection came back, and
// invalidations may have been missed.
func (a *Announcements) InvalidateAll() {
	a.mu.Lock()
	a.resyncAt = a.o.Now()
	a.mu.Unlock()
}

// load reads tenant's set (one Query; concurrent loads of a tenant share one).
func (a *Announcements) load(ctx context.Context, tenant string) (*inbox.AnnouncementSet, error) {
	ch := a.sf.DoChan(tenant, func() (any, error) {
		// The read outlives one caller's cancellation: others wait on it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		a.mu.Lock()
		a.inflight[tenant]++
		at := a.o.Now()
		a.mu.Unlock()
		set, err := a.st.LoadAnnouncements(rctx, tenant)
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.inflight[tenant]--; a.inflight[tenant] <= 0 {
			delete(a.inflight, tenant)
		}
		if err != nil {
			return nil, err
		}
		// An invalidation is published after its commit: a load begun after it came reads
		// its sequence at least, so one announcing more than that load read is bogus (a
		// forged or corrupt broker message) and must not make every read a Query forever.
		if st := a.stale[tenant]; st.seq <= set.Seq || at.After(st.at) {
			delete(a.stale, tenant)
		}
		// Added under a.mu: an invalidation either finds the set cached or the load still
		// counted in flight, never neither.
		a.cache.Add(tenant, &cachedSet{set: set, at: at})
		return set, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*inbox.AnnouncementSet), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Invalidate tells the cache that tenant's sequence reached seq (a change published by
// an instance or relayed from the table's stream): a cached set older than it is read
// again by the next caller. It returns whether the cached set was older.
func (a *Announcements) Invalidate(tenant string, seq int64) bool {
	a.mu.Lock()
	c, ok := a.cache.Peek(tenant)
	if (ok || a.inflight[tenant] > 0) && seq > a.stale[tenant].seq {
		a.stale[tenant] = staleMark{seq: seq, at: a.o.Now()}
		if len(a.stale) > a.o.Tenants {
			// Marks of tenants the cache evicted since: nothing left for them to guard.
			for t := range a.stale {
				if a.inflight[t] == 0 && !a.cache.Contains(t) {
					delete(a.stale, t)
				}
			}
		}
	}
	a.mu.Unlock()
	return !ok || c.set.Seq < seq
}

// StaleMarks returns how many tenants have an invalidation recorded that no load has
// answered yet (bounded by the cache's tenants and the loads running; for tests and
// metrics).
func (a *Announcements) StaleMarks() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.stale)
}

// Refresh reads tenant's set again when seq is newer than the cached one (for a live
// change: one Query per instance, whatever its subscribers), or whatever it is when seq
// is negative (a broker's resync), and returns the set.
func (a *Announcements) Refresh(ctx context.Context, tenant string, seq int64) (*inbox.AnnouncementSet, error) {
	if seq < 0 {
		return a.load(ctx, tenant)
	}
	if !a.Invalidate(tenant, seq) {
		if c, ok := a.cache.Peek(tenant); ok {
			return c.set, nil
		}
	}
	return a.load(ctx, tenant)
}

// Now is the service's clock (an announcement's status is judged at it).
func (a *Announcements) Now() time.Time { return a.o.Now() }

// CreateRequest is an announcement to create: the input, or a template with its data.
type CreateRequest struct {
	Input    inbox.AnnouncementInput
	Template string
	Data     inbox.JSON
	Locale   string
}

// Create creates tenant's announcement r (POST /v1/announcements, sendAnnouncement):
// rendered once from its template when it names one, then stored with at most three
// writes whatever the tenant's size (store.CreateAnnouncement), and published so that
// every instance refreshes its set and every badge subscriber of the tenant hears of it.
// A replay of the idempotency key answers the first announcement (created false).
//
// Errors: BAD_USER_INPUT for invalid input, an unknown template or variable, or a tenant
// with inbox.MaxActiveAnnouncements active already; CONFLICT for a key reused with other
// content; UNAVAILABLE when the tenant's sequence kept moving.
func (a *Announcements) Create(ctx context.Context, tenant string, r CreateRequest) (*inbox.Announcement, bool, error) {
	in := r.Input
	now := a.o.Now()
	if r.Template != "" {
		if a.o.Templates == nil {
			return nil, false, inbox.Errorf(inbox.CodeBadUserInput, "templates are not available")
		}
		ver, err := a.o.Templates.Pin(ctx, tenant, r.Template, r.Locale, r.Data)
		if err != nil {
			return nil, false, err
		}
		out, err := a.o.Templates.Render(ctx, tenant, r.Template, ver, r.Locale, r.Data)
		if err != nil {
			return nil, false, err
		}
		in.Title, in.Body = out.Title, out.Body
		if in.Payload == nil && len(r.Data) > 0 {
			in.Payload = r.Data
		}
	}
	if err := in.Validate(now); err != nil {
		return nil, false, err
	}
	hash := a.o.Hash(in)
	id := a.st.NewID()
	for attempt := 0; attempt < 8; attempt++ {
		set, err := a.load(ctx, tenant)
		if err != nil {
			return nil, false, err
		}
		if len(set.Active(now)) >= inbox.MaxActiveAnnouncements {
			// Full: only a replay of this key is answered (its first announcement).
			ann, found, err := a.st.ReplayAnnouncement(ctx, tenant, in.IdempotencyKey, hash)
			if err != nil {
				return nil, false, err
			}
			if !found {
				return nil, false, tooMany()
			}
			return ann, false, nil
		}
		ann, created, err := a.st.CreateAnnouncement(ctx, tenant, in, id, hash, set.Seq)
		if err == nil {
			if created {
				a.changed(ctx, tenant, set.Seq+1)
			} else {
				// A replay, perhaps of this very call whose answer was lost after the
				// commit: the change may never have been published. Publish what the
				// table holds now (one Query), so no instance keeps a set without it.
				a.republish(ctx, tenant)
			}
			return ann, created, nil
		}
		if !isSeqMoved(err) {
			return nil, false, err
		}
		// Another create or withdraw committed since the read: read the set again (the
		// cap is checked on it).
		a.Invalidate(tenant, set.Seq+1)
	}
	return nil, false, inbox.Errorf(inbox.CodeUnavailable, "the tenant's announcements kept changing; retry")
}

func tooMany() error {
	return inbox.Errorf(inbox.CodeBadUserInput, "a tenant may have at most %d active announcements: withdraw one first", inbox.MaxActiveAnnouncements)
}

func isSeqMoved(err error) bool { return errors.Is(err, inbox.ErrAnnouncementSeqMoved) }

// Get reads tenant's announcement id. NOT_FOUND when there is none.
func (a *Announcements) Get(ctx context.Context, tenant, id string) (*inbox.Announcement, error) {
	return a.st.Announcement(ctx, tenant, id)
}

// Withdraw withdraws tenant's announcement id: it leaves every inbox and badge, and every
// instance hears of it. Withdrawing one already withdrawn changes nothing.
func (a *Announcements) Withdraw(ctx context.Context, tenant, id string) (*inbox.Announcement, error) {
	ann, changed, err := a.st.WithdrawAnnouncement(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	// Published even when this call changed nothing: an earlier attempt whose answer was
	// lost after the commit withdrew it, and its change may never have been published.
	_ = changed
	a.republish(ctx, tenant)
	return ann, nil
}

// republish reads tenant's set (one Query) and publishes its sequence (changed). A failed
// read publishes nothing: MaxAge and the stream relay are the backstops.
// The read is its own (not one shared with a load begun before the commit).
// It counts as a load in flight (a.inflight): an invalidation that comes while it runs is
// kept, so the set it caches is stale when the invalidation named a newer sequence.
func (a *Announcements) republish(ctx context.Context, tenant string) {
	a.mu.Lock()
	a.inflight[tenant]++
	at := a.o.Now()
	a.mu.Unlock()
	set, err := a.st.LoadAnnouncements(ctx, tenant)
	a.mu.Lock()
	if a.inflight[tenant]--; a.inflight[tenant] <= 0 {
		delete(a.inflight, tenant)
	}
	if err != nil {
		a.mu.Unlock()
		return
	}
	if st := a.stale[tenant]; st.seq <= set.Seq || at.After(st.at) {
		delete(a.stale, tenant)
	}
	if c, ok := a.cache.Peek(tenant); !ok || c.set.Seq < set.Seq {
		a.cache.Add(tenant, &cachedSet{set: set, at: at})
	}
	a.mu.Unlock()
	a.changed(ctx, tenant, set.Seq)
}

// changed publishes tenant's new sequence to every instance (this one included).
func (a *Announcements) changed(ctx context.Context, tenant string, seq int64) {
	a.Invalidate(tenant, seq)
	if a.o.Publisher != nil {
		a.o.Publisher.Publish(ctx, inbox.Change{Viewer: AnnouncementViewer(tenant), Kind: inbox.EventAnnouncements, Version: seq})
	}
}
