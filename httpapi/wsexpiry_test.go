package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/coder/websocket"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
)

// slowCategory is a preferences category whose UpdateItem slowPrefs holds for slowFor.
const (
	slowCategory = "slow-at-expiry"
	slowFor      = 6 * time.Second
)

// slowPrefs is a DynamoDB client option holding every UpdateItem that names slowCategory
// for slowFor: a mutation still running when its connection's token expires.
func slowPrefs(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("slowprefs",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok {
					for _, n := range u.ExpressionAttributeNames {
						if strings.Contains(n, slowCategory) {
							time.Sleep(slowFor)
						}
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

// TestWebSocketTokenExpiryEndsSubscriptionsAtOnce: at token expiry the connection waits
// for running queries and mutations (up to the mutation deadline) before it closes, but a
// subscription has nothing to commit: it ends with "token expired" at expiry, and no event
// published during the drain reaches it. (A client holding a slow mutation open at expiry
// kept its subscriptions, and received their events, up to the mutation deadline + 1 s
// after its token had expired.) Both protocols; the slow mutation is still answered.
func TestWebSocketTokenExpiryEndsSubscriptionsAtOnce(t *testing.T) {
	t.Parallel()
	s := testgw.NewWith(t, testgw.Options{DynamoDB: []func(*dynamodb.Options){slowPrefs}})
	sender := s.Token("t1", "svc", auth.ScopeSend)
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			s := s.WithT(t)
			user := "expiring-" + protocol
			behind, err := auth.NewVerifier(auth.Config{Secret: testgw.Secret, Now: func() time.Time { return time.Now().Add(-30 * time.Second) }})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := behind.Sign(auth.Claims{TenantID: "t1", UserID: user}, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			claims, err := s.Verifier.Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := s.DialWS(ctx, protocol)
			c.Init(tok)
			c.Subscribe("sub", `subscription { unreadCount }`)
			if got := c.NextCount("sub"); got != 0 {
				t.Fatalf("first value %d", got)
			}
			// A mutation that runs past the expiry.
			time.Sleep(time.Until(claims.ValidUntil.Add(-500 * time.Millisecond)))
			typ := "subscribe"
			if protocol == "graphql-ws" {
				typ = "start"
			}
			payload, _ := json.Marshal(map[string]any{"query": `mutation { updatePreferences(input: {categories: [{category: "` + slowCategory + `", channels: {sms: false}}]}) { locale } }`})
			c.Send(testgw.WSMessage{ID: "mut", Type: typ, Payload: payload})
			// During the drain: an event for the subscription.
			time.Sleep(time.Until(claims.ValidUntil.Add(time.Second)))
			s.Send(sender, s.SendInput("after expiry", user))
			var subEnded time.Time // when its "token expired" error was read
			mutAnswered := false
			deadline := time.After(2 * slowFor)
		read:
			for {
				var m testgw.WSMessage
				select {
				case got, ok := <-c.Msgs:
					if !ok {
						break read
					}
					m = got
				case <-deadline:
					t.Fatal("the connection did not close")
				}
				switch {
				case m.ID == "sub" && (m.Type == "next" || m.Type == "data"):
					if subEnded.IsZero() {
						t.Errorf("subscription event after the token expired: %s", m.Payload)
					}
				case m.ID == "sub" && m.Type == "error":
					subEnded = time.Now()
					if !strings.Contains(string(m.Payload), "token expired") {
						t.Errorf("subscription error %s", m.Payload)
					}
				case m.ID == "mut" && (m.Type == "next" || m.Type == "data"):
					if subEnded.IsZero() {
						t.Error("the subscription outlived the token until the drained mutation answered")
					}
					mutAnswered = !strings.Contains(string(m.Payload), `"errors"`)
				}
			}
			if code := websocket.CloseStatus(<-c.ReadErr); code != 4403 {
				t.Fatalf("closed with %d, want 4403", code)
			}
			if subEnded.IsZero() {
				t.Fatal("the subscription never got its token expired error")
			}
			if !mutAnswered {
				t.Error("the mutation running at expiry was not answered")
			}
		})
	}
}
