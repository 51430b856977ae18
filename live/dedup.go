package live

import (
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// De-duplication of inbox events.
//
// A change made through a gateway reaches a subscription twice when the stream relay
// runs: once from the writer (it publishes right after its commit) and once from the relay,
// which reads the same write from the table's DynamoDB Stream a little later. The two
// copies are told apart by their version: the writer's event carries META's version after
// the write (Version > 0), while the relay's event derived from a notification record
// carries Version 0 (a notification record does not say which META version its
// transaction wrote). So:
//
//   - ADDED events are de-duplicated by notification id (a notification is added once).
//   - Versioned events are de-duplicated by (version, kind): a write publishes one event.
//   - An unversioned event (from the relay) is matched, id by id, against the (kind, id)
//     pairs of versioned events delivered in the last relayWindow; each pair cancels one
//     relay copy (a multiset, so READ, UNREAD, READ of one id through the gateway cancel
//     exactly the relay's READ, UNREAD, READ). Ids left unmatched are delivered; an event
//     with none left is dropped. DELETED and EXPIRED count as one (a removal the scheduler
//     made by deleting an expired item is DELETED on the stream). A change by a writer
//     outside the gateway has no versioned twin and is delivered.
//   - The relay's copy may also come first (the writer publishes after reading META back;
//     the relay may poll the stream in between): the (kind, id) pairs of unversioned events
//     delivered are remembered too, and a versioned event's id matching one is dropped. A
//     versioned event of another kind for that id forgets the id's unversioned pairs (the
//     state moved on, so they cannot be this write's copies: an outside READ followed by a
//     gateway UNREAD and READ delivers all three).
//
// What this cannot tell apart, by design: a copy arriving more than relayWindow after its
// twin is delivered twice. Both copies describe the same committed state, so a client
// applying events idempotently (set read, remove id) is unaffected.
const (
	// relayWindow is how long a versioned event's (kind, id) pairs wait for their relay copy.
	relayWindow = time.Minute
	// pairCap bounds the pairs remembered per subscription (oldest forgotten first).
	pairCap = 256
	// versionCap bounds the (version, kind) keys remembered per subscription.
	versionCap = 64
)

type eventPair struct {
	kind inbox.EventKind
	id   string
	at   time.Time
}

type versionKey struct {
	version int64
	kind    inbox.EventKind
}

// eventDedup remembers what one subscription delivered; the zero value is ready. Not safe
// for concurrent use (the subscription's lock guards it).
type eventDedup struct {
	versions []versionKey // ring of the last versionCap versioned events
	vnext    int
	pairs    []eventPair // versioned (kind, id) pairs not yet matched, oldest first
	relayed  []eventPair // unversioned (kind, id) pairs delivered, not yet matched
}

// take removes the pair (kind, id) from *ps and reports whether it was there.
func take(ps *[]eventPair, kind inbox.EventKind, id string) bool {
	for i, p := range *ps {
		if p.id == id && p.kind == kind {
			*ps = append((*ps)[:i], (*ps)[i+1:]...)
			return true
		}
	}
	return false
}

// remember appends a pair to *ps, forgetting the oldest past pairCap.
func remember(ps *[]eventPair, p eventPair) {
	if len(*ps) == pairCap {
		*ps = append((*ps)[:0], (*ps)[1:]...)
	}
	*ps = append(*ps, p)
}

// expirePairs forgets pairs older than relayWindow.
func expirePairs(ps *[]eventPair, now time.Time) {
	n := 0
	for n < len(*ps) && now.Sub((*ps)[n].at) > relayWindow {
		n++
	}
	if n > 0 {
		*ps = append((*ps)[:0], (*ps)[n:]...)
	}
}

// dedupClass maps kinds that the two paths may name differently to one.
func dedupClass(k inbox.EventKind) inbox.EventKind {
	if k == inbox.EventExpired {
		return inbox.EventDeleted
	}
	return k
}

// filter returns the ids of c (kind != EventNone, not ADDED) still to deliver, and whether
// anything is left; it records what it lets through. now is the clock.
func (d *eventDedup) filter(c inbox.Change, now time.Time) ([]string, bool) {
	kind := dedupClass(c.Kind)
	expirePairs(&d.pairs, now)
	expirePairs(&d.relayed, now)
	var left []string
	if c.Version > 0 {
		k := versionKey{c.Version, kind}
		for _, v := range d.versions {
			if v == k {
				return nil, false
			}
		}
		if len(d.versions) < versionCap {
			d.versions = append(d.versions, k)
		} else {
			d.versions[d.vnext] = k
			d.vnext = (d.vnext + 1) % versionCap
		}
		if len(c.IDs) == 0 {
			return nil, true // ALL_READ, ALL_SEEN: the write's one event
		}
		for _, id := range c.IDs {
			if take(&d.relayed, kind, id) {
				continue // the relay's copy came first
			}
			// The state of id moved on: its older relayed pairs are no copies of this.
			n := 0
			for _, p := range d.relayed {
				if p.id != id {
					d.relayed[n] = p
					n++
				}
			}
			d.relayed = d.relayed[:n]
			remember(&d.pairs, eventPair{kind: kind, id: id, at: now})
			left = append(left, id)
		}
		return left, len(left) > 0
	}
	if len(c.IDs) == 0 {
		return nil, true
	}
	for _, id := range c.IDs {
		if take(&d.pairs, kind, id) {
			continue // the writer's event came first
		}
		remember(&d.relayed, eventPair{kind: kind, id: id, at: now})
		left = append(left, id)
	}
	return left, len(left) > 0
}
