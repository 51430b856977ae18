package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/coder/websocket"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/clocktest"
	"github.com/inboxgw/gateway/internal/testgw"
)

// slowCategory is a preferences category whose UpdateItem prefsGate holds.
const slowCategory = "slow-at-expiry"

// prefsGate holds every UpdateItem that names slowCategory until the test releases it:
// a mutation still running when its connection's token expires, for exactly as long as
// the test needs, with no sleep.
type prefsGate struct {
	mu      sync.Mutex
	entered chan struct{} // closed when a held UpdateItem arrives
	release chan struct{} // closed by the test: the held UpdateItem goes on
}

// arm makes the next UpdateItem naming slowCategory wait; it returns the channel closed
// when that call arrives and the func that lets it go.
func (g *prefsGate) arm() (entered <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	r := g.release
	var once sync.Once
	return g.entered, func() { once.Do(func() { close(r) }) }
}

// option is the DynamoDB client option that applies the gate.
func (g *prefsGate) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("prefsgate",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && namesSlowCategory(u) {
					g.mu.Lock()
					entered, release := g.entered, g.release
					g.entered = nil // one held call per arm
					g.mu.Unlock()
					if entered != nil {
						close(entered)
						select {
						case <-release:
						case <-ctx.Done():
						}
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

func namesSlowCategory(u *dynamodb.UpdateItemInput) bool {
	for _, n := range u.ExpressionAttributeNames {
		if strings.Contains(n, slowCategory) {
			return true
		}
	}
	return false
}

// TestWebSocketTokenExpiryEndsSubscriptionsAtOnce: at token expiry the connection waits
// for running queries and mutations (up to the mutation deadline) before it closes, but a
// subscription has nothing to commit: it ends with "token expired" at expiry, and no event
// published during the drain reaches it. (A client holding a slow mutation open at expiry
// kept its subscriptions, and received their events, up to the mutation deadline + 1 s
// after its token had expired.) Both protocols; the held mutation is still answered.
func TestWebSocketTokenExpiryEndsSubscriptionsAtOnce(t *testing.T) {
	t.Parallel()
	gate := &prefsGate{}
	clk := clocktest.New()
	s := newExpiryGateway(t, clk, testgw.Options{DynamoDB: []func(*dynamodb.Options){gate.option}})
	sender := s.Token("t1", "svc", auth.ScopeSend)
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.WithT(t)
			user := "expiring-" + protocol
			tok, claims := expiringToken(t, s, auth.Claims{TenantID: "t1", UserID: user})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := s.DialWS(ctx, protocol)
			c.Init(tok)
			c.Subscribe("sub", `subscription { unreadCount }`)
			if got := c.NextCount("sub"); got != 0 {
				t.Fatalf("first value %d", got)
			}
			// A mutation held in its write across the expiry.
			entered, release := gate.arm()
			defer release()
			typ := "subscribe"
			if protocol == "graphql-ws" {
				typ = "start"
			}
			payload, _ := json.Marshal(map[string]any{"query": `mutation { updatePreferences(input: {categories: [{category: "` + slowCategory + `", channels: {sms: false}}]}) { locale } }`})
			c.Send(testgw.WSMessage{ID: "mut", Type: typ, Payload: payload})
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatal("the mutation never reached its write")
			}
			// The token expires (the verifier's clock reaches its end): the subscription
			// ends while the mutation is still held. Before the fix it ended only after
			// the drain, which the held mutation makes last until the timeout below.
			clk.Advance(clk.Until(claims.ValidUntil))
			next := func(what string) testgw.WSMessage {
				select {
				case m, ok := <-c.Msgs:
					if !ok {
						t.Fatalf("the connection closed while waiting for %s", what)
					}
					return m
				case <-time.After(testgw.EventTimeout):
					t.Fatalf("no %s within %v of the token's expiry", what, testgw.EventTimeout)
				}
				return testgw.WSMessage{}
			}
			for {
				m := next("the subscription's token expired error")
				if m.ID == "sub" && m.Type == "error" {
					if !strings.Contains(string(m.Payload), "token expired") {
						t.Errorf("subscription error %s", m.Payload)
					}
					break
				}
				if m.ID == "sub" {
					t.Fatalf("subscription message %s %s before its end", m.Type, m.Payload)
				}
				if m.ID == "mut" {
					t.Fatalf("the held mutation answered before the subscription ended: %s %s", m.Type, m.Payload)
				}
			}
			// During the drain: an event for the user, published before the mutation goes on.
			s.Send(sender, s.SendInput("after expiry", user))
			release()
			mutAnswered := false
			for m := range c.Msgs {
				switch {
				case m.ID == "sub":
					t.Errorf("subscription message after its end: %s %s", m.Type, m.Payload)
				case m.ID == "mut" && (m.Type == "next" || m.Type == "data"):
					mutAnswered = !strings.Contains(string(m.Payload), `"errors"`)
				}
			}
			if code := websocket.CloseStatus(<-c.ReadErr); code != 4403 {
				t.Fatalf("closed with %d, want 4403", code)
			}
			if !mutAnswered {
				t.Error("the mutation running at expiry was not answered")
			}
		})
	}
}
