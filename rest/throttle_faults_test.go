package rest_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
	"github.com/inboxgw/gateway/store"
)

// loseOnce is a fault proxy that loses the answer of the first call of op whose body
// holds match (the call commits; the client gets a 500), once.
type loseOnce struct {
	*ddbfault.Proxy
	mu        sync.Mutex
	op, match string
	lost      int
}

func (p *loseOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	if p.match != "" && strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+p.op) && bytes.Contains(body, []byte(p.match)) {
		p.match = ""
		p.lost++
		p.FailNext(1, ddbfault.AnswerLost)
	}
	p.mu.Unlock()
	p.Proxy.ServeHTTP(w, r)
}

// TestThrottleCountsALostAnswerOnce: the transaction that counts a send in its throttle
// window commits and its answer is lost; the store's retry of it must not count the send
// again. Under a limit of 2, the send whose answer was lost and the next one land, the
// third is throttled.
func TestThrottleCountsALostAnswerOnce(t *testing.T) {
	t.Parallel()
	proxy := &loseOnce{Proxy: ddbfault.New(dynlocaltest.Endpoint(t), ddbfault.Config{})}
	ps := httptest.NewServer(proxy)
	t.Cleanup(func() { ps.Close(); proxy.Close() })
	s := testgw.NewWith(t, testgw.Options{Scheduler: true, DynamoDB: []func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(ps.URL)
		o.Retryer = store.NewSDKRetryer()
	}}})
	svc := s.Token(tenant, "svc", rest.ScopeSend)
	body := func(title string) map[string]any {
		return map[string]any{"recipientUserId": "tom", "type": "alert", "title": title,
			"throttle": map[string]any{"key": "cpu", "limit": 2, "window": "168h"}}
	}
	proxy.mu.Lock()
	proxy.op, proxy.match = "TransactWriteItems", "#THR#tom"
	proxy.mu.Unlock()
	ids := map[string]string{}
	for _, k := range []string{"thr-lost", "thr-2", "thr-3"} {
		var acc gen.Accepted
		mustUnmarshal(t, untilAccepted(t, s, svc, "/v1/notifications", k, body(k), 0), &acc)
		ids[k] = *acc.NotificationId
		testgw.WaitFor(t, 60*time.Second, k+" done", func() bool { return requestDone(t, s, k) })
	}
	proxy.mu.Lock()
	lost := proxy.lost
	proxy.mu.Unlock()
	if lost != 1 {
		t.Fatalf("%d answers lost: the case tests nothing", lost)
	}
	for k, want := range map[string]string{"thr-lost": "written", "thr-2": "written", "thr-3": "skipped"} {
		st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+ids[k]+"/status", svc, nil, nil), 200)
		if string(st.Status) != want {
			t.Errorf("%s: %s, want %s", k, mustJSON(t, st), want)
		}
	}
	if n := len(feed(t, s, svc, "tom")); n != 2 {
		t.Fatalf("tom's feed holds %d, want the limit of 2", n)
	}
}
