package live

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Announcements in live badges (DESIGN.md "Announcements (v3)"): a badge is a user's own
// counters plus their tenant's active announcements that they have not read, archived or
// deleted (inbox.ComposeBadge). A badge stream keeps the user's own badge (with their
// marks, as META's changes carry them) and composes it with this instance's copy of the
// tenant's announcement set. When an announcement is created or withdrawn, the change is
// published once for the tenant (the pseudo-viewer with no user); each instance with a
// badge subscriber of the tenant reads the set ONCE (one Query) and recomposes every such
// subscriber's badge from memory: O(1) reads per instance per announcement, whatever the
// number of subscribers. An announcement's expiry changes the badges without any write:
// a timer per watched tenant recomposes them at the set's next expiry.

// AnnouncementSets is the instance's cache of tenants' announcement sets
// (*service.Announcements).
type AnnouncementSets interface {
	// Cached returns tenant's set as cached (nil when none), without reading.
	Cached(tenant string) *inbox.AnnouncementSet
	// Refresh reads tenant's set again when seq is newer than the cached one.
	Refresh(ctx context.Context, tenant string, seq int64) (*inbox.AnnouncementSet, error)
}

// Announced follows tenants' announcement changes for the badge streams of one process.
// The zero value is not usable; NewAnnounced makes one. A nil *Announced composes nothing.
type Announced struct {
	sets   AnnouncementSets
	broker Subscriber
	log    *slog.Logger
	now    func() time.Time

	// hooked: the broker hands tenant changes to onTenantChange (TenantChanges); else
	// each watch subscribes to its tenant's pseudo-viewer.
	hooked bool

	mu      sync.Mutex
	tenants map[string]*tenantWatch
}

// tenantWatch is one tenant's watch: its broker subscription, its badge streams here,
// and the refresh in progress.
type tenantWatch struct {
	tenant  string
	sub     *Subscription
	feeds   map[recomposer]struct{}
	seq     int64 // the newest sequence heard of
	running bool  // a refresh goroutine runs
	again   bool  // a newer sequence came while it ran
	resync  bool  // a resync came: read the set whatever its sequence
	timer   *time.Timer
}

// recomposer is a badge stream that composes its value again with the tenant's set.
type recomposer interface{ recompose() }

// NewAnnounced returns the announcement follower of a process over broker and sets.
func NewAnnounced(broker Subscriber, sets AnnouncementSets, log *slog.Logger) *Announced {
	if log == nil {
		log = slog.Default()
	}
	a := &Announced{sets: sets, broker: broker, log: log, now: time.Now, tenants: map[string]*tenantWatch{}}
	if tc, ok := broker.(TenantChanges); ok {
		// One function for every tenant: a watch takes no broker subscription.
		a.hooked = true
		tc.OnTenantChange(a.onTenantChange)
	}
	return a
}

// onTenantChange takes a tenant's change from the broker (on the publisher's goroutine:
// it never blocks); a change without a tenant is a resync of every tenant (the broker's
// connection came back: changes may have been missed).
func (a *Announced) onTenantChange(c inbox.Change) {
	if c.Kind != inbox.EventAnnouncements && c.Viewer.TenantID != "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.Viewer.TenantID == "" {
		for _, w := range a.tenants {
			a.heardLocked(w, 0)
		}
		return
	}
	if w := a.tenants[c.Viewer.TenantID]; w != nil {
		a.heardLocked(w, c.Version)
	}
}

// compose is own composed with tenant's cached set (own unchanged when there is none).
func (a *Announced) compose(tenant string, own inbox.Badge) inbox.Badge {
	if a == nil {
		return own
	}
	set := a.sets.Cached(tenant)
	if set == nil {
		return own
	}
	return inbox.ComposeBadge(own, set, a.now())
}

// active reports whether tenant has active announcements in the cached set (a badge
// without marks cannot be composed then).
func (a *Announced) active(tenant string) bool {
	if a == nil {
		return false
	}
	set := a.sets.Cached(tenant)
	return set != nil && len(set.Active(a.now())) > 0
}

// cold reports whether tenant's set is not cached here (nothing to compose a badge with:
// the store's read of the badge composes it, and caches the set).
func (a *Announced) cold(tenant string) bool {
	return a != nil && a.sets.Cached(tenant) == nil
}

// warm reads tenant's set, not cached here, for a new stream (a stream must know the
// announcements active when it began, or their withdrawal or expiry would be news to
// nobody; join arms the watch's expiry with it). A failed read is logged: the stream then
// learns the set at the tenant's next change.
func (a *Announced) warm(ctx context.Context, tenant string) {
	if _, err := a.sets.Refresh(ctx, tenant, 0); err != nil {
		a.log.Warn("announcements: read the tenant's set for a new stream", "err", err)
	}
}

// activeIDs returns the ids of tenant's announcements active in the cached set (none when
// it is not cached): what a stream knows as it begins, so that only later ones are new to
// it and only these can leave it.
func (a *Announced) activeIDs(tenant string) map[string]struct{} {
	ids := map[string]struct{}{}
	for _, an := range a.sets.Cached(tenant).Active(a.now()) {
		ids[an.ID] = struct{}{}
	}
	return ids
}

// join registers f as a badge stream of tenant: the first of a tenant subscribes to its
// announcement changes.
func (a *Announced) join(tenant string, f recomposer) {
	if a == nil {
		return
	}
	a.mu.Lock()
	w := a.tenants[tenant]
	if w == nil {
		w = &tenantWatch{tenant: tenant, feeds: map[recomposer]struct{}{}}
		a.tenants[tenant] = w
		if !a.hooked {
			w.sub = a.broker.Subscribe(inbox.Viewer{TenantID: tenant}, BadgeOnly())
			w.sub.OnChange(func() { a.heard(w) })
		}
		a.armLocked(w)
	} else if w.timer == nil {
		// The watch began before the set was cached here (a stream that reads nothing):
		// arm its expiry now that it may be.
		a.armLocked(w)
	}
	w.feeds[f] = struct{}{}
	a.mu.Unlock()
}

// leave unregisters f; the last of a tenant ends the tenant's watch.
func (a *Announced) leave(tenant string, f recomposer) {
	if a == nil {
		return
	}
	a.mu.Lock()
	w := a.tenants[tenant]
	if w == nil {
		a.mu.Unlock()
		return
	}
	delete(w.feeds, f)
	var sub *Subscription
	if len(w.feeds) == 0 {
		delete(a.tenants, tenant)
		sub = w.sub
		if w.timer != nil {
			w.timer.Stop()
		}
	}
	a.mu.Unlock()
	if sub != nil {
		go sub.Close() // not under the publisher's lock
	}
}

// heard takes a change of w's tenant (on the publisher's goroutine: it never blocks).
func (a *Announced) heard(w *tenantWatch) {
	select {
	case <-w.sub.BadgeChanged():
	default:
		return
	}
	c := w.sub.Latest()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.heardLocked(w, c.Version)
}

// heardLocked takes w's tenant's sequence seq (0: a resync) and starts a refresh unless
// it was heard already. a.mu is held.
func (a *Announced) heardLocked(w *tenantWatch, seq int64) {
	// Version 0 is a resync (Redis came back): read the set again all the same.
	if seq == 0 {
		w.resync = true
	} else if seq <= w.seq && !w.running {
		return // the relay's copy of a change heard already
	}
	w.seq = max(w.seq, seq)
	if w.running {
		w.again = true
		return
	}
	w.running = true
	go a.refresh(w)
}

// refresh reads w's tenant's set (one Query) and recomposes every stream of the tenant,
// again while newer changes came meanwhile. A failed read is retried with backoff.
func (a *Announced) refresh(w *tenantWatch) {
	for failures := 0; ; {
		a.mu.Lock()
		seq, force := w.seq, w.resync
		w.again, w.resync = false, false
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if seq == 0 || force {
			seq = -1 // a resync: read it whatever the cached sequence
		}
		set, err := a.sets.Refresh(ctx, w.tenant, seq)
		cancel()
		if err != nil {
			if failures == 0 {
				a.log.Warn("announcements: read the tenant's set; retrying", "err", err)
			}
			failures++
			time.Sleep(min(time.Second, rereadBaseDelay<<min(failures, 10)))
			a.mu.Lock()
			gone := a.tenants[w.tenant] != w
			a.mu.Unlock()
			if gone {
				a.mu.Lock()
				w.running = false
				a.mu.Unlock()
				return
			}
			continue
		}
		failures = 0
		a.mu.Lock()
		if set != nil && seq > set.Seq && w.seq == seq {
			// The read, begun after the change was heard, is the table's: a sequence it
			// did not reach was bogus (forged or corrupt on the broker). Forget it, or
			// every real change below it would be taken for one heard already. A change
			// heard meanwhile set again, so it is read in the next round.
			w.seq = set.Seq
		}
		a.mu.Unlock()
		a.recomposeAll(w)
		a.mu.Lock()
		if a.tenants[w.tenant] == w {
			a.armLocked(w) // not for a watch that ended meanwhile: its timer would outlive it
		}
		if !w.again {
			w.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
	}
}

// recomposeAll recomposes every badge stream of w's tenant from memory.
func (a *Announced) recomposeAll(w *tenantWatch) {
	a.mu.Lock()
	feeds := make([]recomposer, 0, len(w.feeds))
	for f := range w.feeds {
		feeds = append(feeds, f)
	}
	a.mu.Unlock()
	for _, f := range feeds {
		f.recompose()
	}
}

// armLocked sets w's timer to the cached set's next expiry, when the tenant's badges change
// without a write. a.mu is held.
func (a *Announced) armLocked(w *tenantWatch) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	set := a.sets.Cached(w.tenant)
	next := set.NextExpiry(a.now())
	if next.IsZero() {
		return
	}
	w.timer = time.AfterFunc(next.Sub(a.now())+time.Millisecond, func() {
		a.recomposeAll(w)
		a.mu.Lock()
		if a.tenants[w.tenant] == w {
			a.armLocked(w)
		}
		a.mu.Unlock()
	})
}

// Watched returns how many tenants this process follows (for tests and metrics).
func (a *Announced) Watched() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.tenants)
}
