package live

import (
	"sync"

	"github.com/inboxgw/gateway/inbox"
)

// Tenant changes: a change published for a tenant's pseudo-viewer (inbox.Viewer with no
// user; service.AnnouncementViewer), such as an announcement created or withdrawn, concerns
// every instance, whether or not one of its subscribers is of that tenant: each keeps a
// cache of the tenant's announcements that the change invalidates. Both brokers hand such
// changes to the OnTenantChange functions of every instance (Local: this process's;
// Redis: one channel, tenantChannel, that every instance subscribes to once), besides
// delivering them to the pseudo-viewer's subscriptions as any change.

// tenantChannel is the Redis channel of the tenant changes, after the channel prefix. It
// has no '#', so it is never a viewer's channel.
const tenantChannel = "~tenants"

// TenantChanges is a broker that hands tenant changes to functions (Local and Redis).
type TenantChanges interface {
	// OnTenantChange registers f to receive every tenant change published by any
	// instance (this one included), and a change with no tenant when changes may have
	// been missed (the broker's connection came back); the returned function unregisters
	// it. f must not block.
	OnTenantChange(f func(inbox.Change)) func()
}

var (
	_ TenantChanges = (*Local)(nil)
	_ TenantChanges = (*Redis)(nil)
)

// tenantFuncs is the set of OnTenantChange functions of one broker.
type tenantFuncs struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(inbox.Change)
}

// add registers f and returns its removal.
func (t *tenantFuncs) add(f func(inbox.Change)) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fns == nil {
		t.fns = make(map[int]func(inbox.Change))
	}
	id := t.next
	t.next++
	t.fns[id] = f
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.fns, id)
	}
}

// call hands c to every registered function.
func (t *tenantFuncs) call(c inbox.Change) {
	t.mu.Lock()
	fns := make([]func(inbox.Change), 0, len(t.fns))
	for _, f := range t.fns {
		fns = append(fns, f)
	}
	t.mu.Unlock()
	for _, f := range fns {
		f(c)
	}
}

// isTenantChange reports whether c is a tenant's change (its viewer has no user).
func isTenantChange(c inbox.Change) bool { return c.Viewer.UserID == "" && c.Viewer.TenantID != "" }

// OnTenantChange registers f for the tenant changes published on this broker.
func (b *Local) OnTenantChange(f func(inbox.Change)) func() { return b.tenants.add(f) }

// OnTenantChange registers f for the tenant changes published by any instance.
func (b *Redis) OnTenantChange(f func(inbox.Change)) func() { return b.tenants.add(f) }
