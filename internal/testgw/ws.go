package testgw

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// WSMessage is a message of graphql-transport-ws or the legacy graphql-ws protocol.
type WSMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// WSClient is a real WebSocket client of one GraphQL subprotocol. Its read loop puts
// every message but graphql-transport-ws pings (which it answers) on Msgs; when the
// connection ends, the error is sent on ReadErr and Msgs is closed.
type WSClient struct {
	T        *testing.T
	Conn     *websocket.Conn
	Protocol string
	Msgs     chan WSMessage
	ReadErr  chan error
}

// DialWS opens a WebSocket to the server's /graphql with protocol ("graphql-transport-ws"
// or "graphql-ws") and starts its read loop; the connection is closed when the test ends.
func (s *Server) DialWS(ctx context.Context, protocol string) *WSClient {
	s.T.Helper()
	wsURL := "ws" + strings.TrimPrefix(s.URL, "http")
	conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{protocol}})
	if err != nil {
		s.T.Fatalf("dial %s (%s): %v", wsURL, protocol, err)
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != protocol || conn.Subprotocol() != protocol {
		s.T.Fatalf("server chose subprotocol %q, want %q", conn.Subprotocol(), protocol)
	}
	c := &WSClient{T: s.T, Conn: conn, Protocol: protocol, Msgs: make(chan WSMessage, 64), ReadErr: make(chan error, 1)}
	s.T.Cleanup(func() { _ = conn.CloseNow() })
	go func() {
		for {
			var m WSMessage
			if err := wsjson.Read(context.Background(), conn, &m); err != nil {
				c.ReadErr <- err
				close(c.Msgs)
				return
			}
			if m.Type == "ping" {
				_ = wsjson.Write(context.Background(), conn, WSMessage{Type: "pong"})
				continue
			}
			c.Msgs <- m
		}
	}()
	return c
}

// Send writes m as JSON.
func (c *WSClient) Send(m any) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), EventTimeout)
	defer cancel()
	if err := wsjson.Write(ctx, c.Conn, m); err != nil {
		c.T.Fatalf("websocket write: %v", err)
	}
}

// Next returns the next message that is not a keep-alive, failing on timeout or close.
func (c *WSClient) Next() WSMessage {
	c.T.Helper()
	timer := time.NewTimer(EventTimeout)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-c.Msgs:
			if !ok {
				c.T.Fatalf("websocket closed: %v", <-c.ReadErr)
			}
			if m.Type == "ka" || m.Type == "pong" {
				continue
			}
			return m
		case <-timer.C:
			c.T.Fatalf("no websocket message within %v", EventTimeout)
		}
	}
}

// NextRaw returns the next message, pongs and keep-alives included.
func (c *WSClient) NextRaw() WSMessage {
	c.T.Helper()
	select {
	case m, ok := <-c.Msgs:
		if !ok {
			c.T.Fatalf("websocket closed: %v", <-c.ReadErr)
		}
		return m
	case <-time.After(EventTimeout):
		c.T.Fatalf("no websocket message within %v", EventTimeout)
	}
	return WSMessage{}
}

// Init sends connection_init with the bearer token and expects connection_ack.
func (c *WSClient) Init(token string) {
	c.T.Helper()
	c.Send(WSMessage{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + token + `"}`)})
	if m := c.Next(); m.Type != "connection_ack" {
		c.T.Fatalf("after connection_init: got %+v, want connection_ack", m)
	}
}

// Subscribe starts operation id with query ("subscribe", or "start" in graphql-ws).
func (c *WSClient) Subscribe(id, query string) {
	c.T.Helper()
	typ := "subscribe"
	if c.Protocol == "graphql-ws" {
		typ = "start"
	}
	payload, _ := json.Marshal(map[string]any{"query": query})
	c.Send(WSMessage{ID: id, Type: typ, Payload: payload})
}

// NextData decodes into dst the data of the next result of operation id (next in
// graphql-transport-ws, data in graphql-ws), failing on errors or another message.
func (c *WSClient) NextData(id string, dst any) {
	c.T.Helper()
	want := "next"
	if c.Protocol == "graphql-ws" {
		want = "data"
	}
	m := c.Next()
	if m.Type != want || m.ID != id {
		c.T.Fatalf("got %s message %s (id %q), want %s of %q", m.Type, m.Payload, m.ID, want, id)
	}
	var p struct {
		Data   json.RawMessage `json:"data"`
		Errors []GQLError      `json:"errors"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil || len(p.Errors) > 0 {
		c.T.Fatalf("result %s: %v %+v", m.Payload, err, p.Errors)
	}
	if err := json.Unmarshal(p.Data, dst); err != nil {
		c.T.Fatalf("decode %s: %v", p.Data, err)
	}
}

// NextCount returns the next unreadCount of operation id.
func (c *WSClient) NextCount(id string) int {
	c.T.Helper()
	var d struct {
		UnreadCount *int `json:"unreadCount"`
	}
	c.NextData(id, &d)
	if d.UnreadCount == nil {
		c.T.Fatalf("result of %s has no unreadCount", id)
	}
	return *d.UnreadCount
}

// ExpectClose waits for the server to close c with code (and, when reason is not empty,
// that reason); messages other than keep-alives and those allowed fail the test. It
// returns the allowed messages received before the close.
func (c *WSClient) ExpectClose(code websocket.StatusCode, reason string, within time.Duration, allowed ...string) []WSMessage {
	c.T.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var got []WSMessage
	for {
		select {
		case m, ok := <-c.Msgs:
			if !ok {
				err := <-c.ReadErr
				var ce websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != code || (reason != "" && ce.Reason != reason) {
					c.T.Fatalf("connection ended with %v, want close %d %q", err, code, reason)
				}
				return got
			}
			if m.Type == "ka" {
				continue
			}
			ok = false
			for _, a := range allowed {
				ok = ok || a == m.Type
			}
			if !ok {
				c.T.Fatalf("before close %d: unexpected %s message (id %q) %s", code, m.Type, m.ID, m.Payload)
			}
			got = append(got, m)
		case <-timer.C:
			c.T.Fatalf("connection not closed with %d within %v", code, within)
		}
	}
}
