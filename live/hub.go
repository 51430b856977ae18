package live

import (
	"slices"
	"sync"

	"github.com/inboxgw/gateway/inbox"
)

// hub is the registry of a process's subscriptions by viewer, shared by the brokers.
// onFirst and onLast, when set, run (outside the lock) after a viewer gains its first
// subscription or loses its last one; they must not block for long.
type hub struct {
	mu sync.RWMutex
	// subs are each viewer's subscriptions: a slice, not a set, as a viewer has a few
	// (a map would cost about 130 bytes for each of thousands).
	subs    map[inbox.Viewer][]*Subscription
	onFirst func(inbox.Viewer)
	onLast  func(inbox.Viewer)
	lag     LagObserver // nil: lag is not measured
}

func newHub() *hub {
	return &hub{subs: make(map[inbox.Viewer][]*Subscription)}
}

// deliver hands c to every subscription of c.Viewer; it never blocks.
func (h *hub) deliver(c inbox.Change) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.subs[c.Viewer] {
		s.deliver(c)
	}
}

// resync tells every subscription of v (every viewer when v is nil) to re-read the store.
func (h *hub) resync(v *inbox.Viewer) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if v != nil {
		for _, s := range h.subs[*v] {
			s.resync()
		}
		return
	}
	for _, m := range h.subs {
		for _, s := range m {
			s.resync()
		}
	}
}

// has reports whether v has a subscription here.
func (h *hub) has(v inbox.Viewer) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[v]) > 0
}

// subscribe registers a new subscription of v.
func (h *hub) subscribe(v inbox.Viewer, opts []SubscribeOption) *Subscription {
	s := newSubscription(opts)
	s.close = func() {
		h.mu.Lock()
		last := false
		m := h.subs[v]
		if i := slices.Index(m, s); i >= 0 {
			end := len(m) - 1
			m[i], m[end] = m[end], nil
			if m = m[:end]; len(m) == 0 {
				delete(h.subs, v)
				last = true
			} else {
				h.subs[v] = m
			}
		}
		h.mu.Unlock()
		if last && h.onLast != nil {
			h.onLast(v)
		}
	}
	h.mu.Lock()
	first := len(h.subs[v]) == 0
	h.subs[v] = append(h.subs[v], s)
	h.mu.Unlock()
	if first && h.onFirst != nil {
		h.onFirst(v)
	}
	return s
}

// count returns how many subscriptions are registered.
func (h *hub) count() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, m := range h.subs {
		n += len(m)
	}
	return n
}
