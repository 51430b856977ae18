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
//
// What this cannot tell apart, by design: a relay copy that overtakes the writer's own
// publish (the relay polls the stream, the writer publishes at once, so it happens only
// when the writer's publish is delayed by more than the relay's poll), and a relay copy
// arriving after relayWindow; both are delivered twice. Both copies describe the same
// committed state, so a client applying events idempotently (set read, remove id) is
// unaffected.
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
		d.expire(now)
		for _, id := range c.IDs {
			if len(d.pairs) == pairCap {
				d.pairs = append(d.pairs[:0], d.pairs[1:]...)
			}
			d.pairs = append(d.pairs, eventPair{kind: kind, id: id, at: now})
		}
		return c.IDs, true
	}
	d.expire(now)
	var left []string
	for _, id := range c.IDs {
		matched := false
		for i, p := range d.pairs {
			if p.id == id && p.kind == kind {
				d.pairs = append(d.pairs[:i], d.pairs[i+1:]...)
				matched = true
				break
			}
		}
		if !matched {
			left = append(left, id)
		}
	}
	return left, len(left) > 0
}

// expire forgets pairs older than relayWindow.
func (d *eventDedup) expire(now time.Time) {
	n := 0
	for n < len(d.pairs) && now.Sub(d.pairs[n].at) > relayWindow {
		n++
	}
	if n > 0 {
		d.pairs = append(d.pairs[:0], d.pairs[n:]...)
	}
}
