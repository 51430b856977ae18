package live

import (
	"fmt"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// interleavings returns every merge of a and b that keeps each one's order.
func interleavings(a, b []inbox.Change) [][]inbox.Change {
	if len(a) == 0 {
		return [][]inbox.Change{b}
	}
	if len(b) == 0 {
		return [][]inbox.Change{a}
	}
	var out [][]inbox.Change
	for _, rest := range interleavings(a[1:], b) {
		out = append(out, append([]inbox.Change{a[0]}, rest...))
	}
	for _, rest := range interleavings(a, b[1:]) {
		out = append(out, append([]inbox.Change{b[0]}, rest...))
	}
	return out
}

// TestDedupEveryInterleaving: a READ, an UNREAD and a READ again of one notification
// through the gateway (versioned) and the relay's copies of the same three writes
// (Version 0) reach a subscriber in any order that keeps each path's own order; the
// subscriber gets exactly READ, UNREAD, READ: never a copy twice, never a change lost.
func TestDedupEveryInterleaving(t *testing.T) {
	kinds := []inbox.EventKind{inbox.EventRead, inbox.EventUnread, inbox.EventRead}
	var writer, relay []inbox.Change
	for i, k := range kinds {
		writer = append(writer, inbox.Change{Kind: k, IDs: []string{"N1"}, Version: int64(i + 2)})
		relay = append(relay, inbox.Change{Kind: k, IDs: []string{"N1"}})
	}
	now := time.Now()
	for _, seq := range interleavings(writer, relay) {
		var d eventDedup
		var got []inbox.EventKind
		var order string
		for _, c := range seq {
			order += fmt.Sprintf("%s/v%d ", c.Kind, c.Version)
			if ids, ok := d.filter(c, now); ok && len(ids) == 1 {
				got = append(got, c.Kind)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(kinds) {
			t.Errorf("arrival %s: delivered %v, want %v", order, got, kinds)
		}
	}
}
