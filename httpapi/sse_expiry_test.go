package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/internal/testgw"
)

// An SSE subscription ends when its token expires (with the resolvers' second of grace),
// not earlier and not later: the verifier's clock is advanced to just before that end,
// where an event still arrives, then to it, where the stream completes.
func TestSSESubscriptionEndsAtTokenExpiry(t *testing.T) {
	t.Parallel()
	clk := clocktest.New()
	s := newExpiryGateway(t, clk, testgw.Options{})
	tok, claims := expiringToken(t, s, auth.Claims{TenantID: "t1", UserID: "alice"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := s.SubscribeSSE(ctx, tok, `subscription { unreadCount }`)
	if got := st.NextCount(); got != 0 {
		t.Fatalf("first value %d", got)
	}
	end := claims.ValidUntil.Add(time.Second)
	clk.Advance(clk.Until(end) - time.Millisecond)
	s.Send(s.ServiceToken("t1", "svc"), s.SendInput("before the end", "alice"))
	if got := st.NextCount(); got != 1 {
		t.Fatalf("a millisecond before the end: value %d, want 1", got)
	}
	clk.Advance(time.Millisecond)
	select {
	case err := <-st.Done:
		if err != nil {
			t.Fatalf("the stream ended without complete: %v", err)
		}
	case raw := <-st.Events:
		t.Fatalf("event %s after the token's end", raw)
	case <-time.After(testgw.EventTimeout):
		t.Fatalf("the stream did not end within %v of its token's end", testgw.EventTimeout)
	}
	testgw.WaitFor(t, testgw.EventTimeout, "the subscription to end", func() bool { return s.Broker.Subscribers() == 0 })
}
