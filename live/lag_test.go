package live

import (
	"context"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// TestLocalReportsPublishLag: every change published on a Local broker with an observer
// reports one lag on path local; a broker without one reports nothing and still delivers.
func TestLocalReportsPublishLag(t *testing.T) {
	var paths []string
	b := NewLocal(WithLagObserver(func(path string, d time.Duration) {
		if d < 0 {
			t.Errorf("negative lag %v", d)
		}
		paths = append(paths, path)
	}))
	v := inbox.Viewer{TenantID: "t", UserID: "u"}
	s := b.Subscribe(v)
	defer s.Close()
	b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 1, Version: 1})
	b.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 2, Version: 2})
	if len(paths) != 2 || paths[0] != LagLocal || paths[1] != LagLocal {
		t.Fatalf("observed %v, want two %q", paths, LagLocal)
	}
	plain := NewLocal()
	ps := plain.Subscribe(v)
	defer ps.Close()
	plain.Publish(context.Background(), inbox.Change{Viewer: v, UnreadCount: 3, Version: 3})
	if c := ps.Latest(); c.UnreadCount != 3 {
		t.Fatalf("without an observer: latest %+v", c)
	}
}

// TestWireCarriesSentAt: a change on the Redis wire carries its publish time, which the
// receiver turns into the lag on path redis.
func TestWireCarriesSentAt(t *testing.T) {
	before := time.Now()
	b, err := encodeChange("o1", inbox.Change{Viewer: inbox.Viewer{TenantID: "t", UserID: "u"}, UnreadCount: 4, Version: 9})
	if err != nil {
		t.Fatal(err)
	}
	origin, sent, c, err := decodeChange(b)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "o1" || c.UnreadCount != 4 || c.Version != 9 {
		t.Fatalf("decoded %q %+v", origin, c)
	}
	if sent.Before(before.Add(-time.Millisecond)) || sent.After(time.Now()) {
		t.Fatalf("sentAt %v outside [%v, now]", sent, before)
	}
	// A message of an older publisher (no sentAt) decodes with a zero time: no lag.
	_, sent, _, err = decodeChange([]byte(`{"tenant":"t","user":"u","count":1,"version":1}`))
	if err != nil || !sent.IsZero() {
		t.Fatalf("without sentAt: %v %v", sent, err)
	}
}
