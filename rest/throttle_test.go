package rest_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// TestThrottleKeepsExactlyLimitUnderABurst: 100 sends at once to one user under a
// throttle of 10 an hour: exactly 10 reach the inbox (and the badge), the other 90 are
// skipped with reason throttled in every channel; a retry of a written send's key
// counts nothing more; another key and another user have their own windows; a bad
// throttle is refused and writes nothing.
func TestThrottleKeepsExactlyLimitUnderABurst(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	body := func(user, key string) map[string]any {
		return map[string]any{"recipientUserId": user, "type": "alert", "title": "CPU high",
			"throttle": map[string]any{"key": key, "limit": 10, "window": "1h"}}
	}
	const burst = 100
	ids := make([]string, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := send(t, s, svc, fmt.Sprintf("burst-%03d", i), body("tom", "cpu"))
			if a.Status != 202 {
				t.Errorf("send %d: %d %s", i, a.Status, a.Body)
				return
			}
			ids[i] = *decode[gen.Accepted](t, a, 202).NotificationId
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	testgw.WaitFor(t, 60*time.Second, "every burst send done", func() bool {
		for i := range burst {
			if !requestDone(t, s, fmt.Sprintf("burst-%03d", i)) {
				return false
			}
		}
		return true
	})
	items := feed(t, s, svc, "tom")
	if len(items) != 10 {
		t.Fatalf("tom's inbox holds %d notifications, want exactly the limit of 10", len(items))
	}
	written, throttled := 0, 0
	for _, id := range ids {
		st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+id+"/status", svc, nil, nil), 200)
		switch st.Status {
		case "written":
			written++
		case "skipped":
			throttled++
			for _, c := range st.Channels {
				if c.Status != "skipped" || c.Error == nil || *c.Error != "throttled" {
					t.Fatalf("a throttled send's %s record: %s", c.Channel, mustJSON(t, st))
				}
			}
		default:
			t.Fatalf("status: %s", mustJSON(t, st))
		}
	}
	if written != 10 || throttled != 90 {
		t.Fatalf("%d written, %d throttled; want 10 and 90", written, throttled)
	}
	// A retry of a key counts nothing more; another key, another user: windows of their own.
	send(t, s, svc, "burst-000", body("tom", "cpu"))
	decode[gen.Accepted](t, send(t, s, svc, "disk-1", body("tom", "disk")), 202)
	decode[gen.Accepted](t, send(t, s, svc, "cpu-uma", body("uma", "cpu")), 202)
	waitFeed(t, s, svc, "tom", 11)
	waitFeed(t, s, svc, "uma", 1)
	// Bad throttles: 400, nothing written.
	for i, th := range []map[string]any{
		{"limit": 0, "window": "1h"}, {"limit": 1001, "window": "1h"}, {"limit": 1, "window": "8d"},
		{"limit": 1, "window": "soon"}, {"limit": 1, "window": "500ms"}, {"limit": 1, "window": "200h"},
		{"limit": 1, "window": "1h", "key": "a#b"},
	} {
		b := map[string]any{"recipientUserId": "tom", "type": "alert", "title": "x", "throttle": th}
		key := fmt.Sprintf("bad-throttle-%d", i)
		a := send(t, s, svc, key, b)
		if a.Status != 400 {
			t.Fatalf("throttle %v: %d %s", th, a.Status, a.Body)
		}
		if requestWritten(t, s, tenant, key) {
			t.Fatalf("throttle %v: written", th)
		}
	}
}
