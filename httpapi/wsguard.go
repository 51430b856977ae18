package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
)

// WebSocket close codes of the graphql-transport-ws protocol (and RFC 6455's going away).
const (
	CloseGoingAway            = 1001
	CloseUnauthorized         = 4401
	CloseForbidden            = 4403
	CloseInitTimeout          = 4408
	CloseSubscriberExists     = 4409
	CloseTooManyInitRequests  = 4429
	transportWSSubprotocol    = "graphql-transport-ws"
	closeReasonTokenExpired   = "token expired"
	closeReasonShuttingDown   = "server shutting down"
	closeReasonInitTimeout    = "Connection initialisation timeout"
	closeReasonTooManyInits   = "Too many initialisation requests"
	closeReasonUnauthorized   = "Unauthorized"
	closeReasonSubscriberDupe = "Subscriber for this id already exists"
)

// gqlgen v0.17.98's WebSocket transport closes an init timeout, a second connection_init
// and a subscription before init with 1002 (protocol error), and lets a duplicate
// subscribe id replace the running operation. guardedConn wraps each connection to apply
// the graphql-transport-ws rules instead (4408, 4429, 4401, 4409), and to end connections
// when their token expires (4403) and when the server shuts down (1001). It sees every
// message gqlgen reads and writes, and closes the socket itself on a violation; gqlgen's
// own teardown then runs as for a client that went away.

// wsImplementation accepts upgrades through inner and wraps each connection.
type wsImplementation struct {
	inner       transport.WebsocketImplementation
	initTimeout time.Duration
	reg         *connRegistry
}

func (w wsImplementation) Accept(rw http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	c, err := w.inner.Accept(rw, r, o)
	if err != nil {
		return nil, err
	}
	g := &guardedConn{WebsocketConn: c, legacy: c.Subprotocol() != transportWSSubprotocol, active: map[string]struct{}{}, ending: map[string]struct{}{}}
	if slot, ok := r.Context().Value(slotKey{}).(*connSlot); ok {
		slot.conn = g
	}
	if !w.reg.add(g) {
		g.closeWith(CloseGoingAway, closeReasonShuttingDown)
		return g, nil
	}
	if w.initTimeout > 0 {
		g.mu.Lock()
		g.initTimer = time.AfterFunc(w.initTimeout, func() { g.closeWith(CloseInitTimeout, closeReasonInitTimeout) })
		g.mu.Unlock()
	}
	return g, nil
}

// slotKey keys the *connSlot of a WebSocket upgrade request: Accept fills it, the
// InitFunc (whose context derives from the request's) finds its connection there.
type slotKey struct{}

type connSlot struct{ conn *guardedConn }

// connFromContext returns the guarded connection of a WebSocket request's context.
func connFromContext(ctx context.Context) *guardedConn {
	if s, ok := ctx.Value(slotKey{}).(*connSlot); ok {
		return s.conn
	}
	return nil
}

// guardedConn is one WebSocket connection under the protocol rules above.
type guardedConn struct {
	transport.WebsocketConn
	legacy bool // graphql-ws (subscriptions-transport-ws), not graphql-transport-ws

	mu          sync.Mutex
	inited      bool
	closed      bool
	active      map[string]struct{} // running operation ids
	ending      map[string]struct{} // ids the client completed, until gqlgen's complete
	initTimer   *time.Timer
	expiryTimer *time.Timer
}

// wsPeek is the part of a protocol message the guard looks at.
type wsPeek struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func (g *guardedConn) NextReader() (int, io.Reader, error) {
	typ, r, err := g.WebsocketConn.NextReader()
	if err != nil {
		return typ, r, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return typ, nil, err
	}
	var m wsPeek
	if json.Unmarshal(data, &m) == nil { // invalid JSON: gqlgen answers it itself
		if code, reason := g.check(m); code != 0 {
			g.closeWith(code, reason)
			return typ, nil, transport.ErrWebsocketClosed
		}
	}
	return typ, bytes.NewReader(data), nil
}

// check applies the protocol rules to a message from the client; a non-zero code closes
// the connection.
func (g *guardedConn) check(m wsPeek) (int, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch m.Type {
	case "connection_init":
		if g.inited {
			if g.legacy {
				return 0, "" // gqlgen answers graphql-ws itself
			}
			return CloseTooManyInitRequests, closeReasonTooManyInits
		}
		g.inited = true
		if g.initTimer != nil {
			g.initTimer.Stop()
		}
	case "subscribe", "start": // graphql-transport-ws, graphql-ws
		if !g.legacy {
			if !g.inited {
				return CloseUnauthorized, closeReasonUnauthorized
			}
			if _, dup := g.active[m.ID]; dup {
				return CloseSubscriberExists, closeReasonSubscriberDupe
			}
		}
		g.active[m.ID] = struct{}{}
	case "complete", "stop":
		if _, ok := g.active[m.ID]; ok {
			delete(g.active, m.ID)
			g.ending[m.ID] = struct{}{}
		}
	}
	return 0, ""
}

func (g *guardedConn) WriteJSON(v any) error {
	if typ, id, ok := peekOutgoing(v); ok && (typ == "complete" || typ == "error") && id != "" {
		// The operation ended: the client may reuse its id. After the client's own
		// complete nothing more may be sent for it (gqlgen sends a complete, which could
		// reach the client after it reused the id): drop it.
		g.mu.Lock()
		_, ending := g.ending[id]
		delete(g.ending, id)
		if !ending {
			delete(g.active, id)
		}
		g.mu.Unlock()
		if ending && !g.legacy {
			return nil
		}
	}
	return g.WebsocketConn.WriteJSON(v)
}

// peekOutgoing returns the type and id of a message gqlgen writes (a struct with string
// fields Type and ID), without encoding it twice.
func peekOutgoing(v any) (typ, id string, ok bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Struct {
		t, i := rv.FieldByName("Type"), rv.FieldByName("ID")
		if t.IsValid() && i.IsValid() && t.Kind() == reflect.String && i.Kind() == reflect.String {
			return t.String(), i.String(), true
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", "", false
	}
	var m wsPeek
	if json.Unmarshal(b, &m) != nil {
		return "", "", false
	}
	return m.Type, m.ID, true
}

// closeWith starts the close handshake with code and reason (once; later closes, ours or
// gqlgen's, do nothing). gqlgen's read loop then ends and cancels the operations.
func (g *guardedConn) closeWith(code int, reason string) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.stopTimersLocked()
	g.mu.Unlock()
	_ = g.WebsocketConn.WriteClose(code, reason)
}

func (g *guardedConn) WriteClose(code int, reason string) error {
	g.mu.Lock()
	g.closed = true
	g.stopTimersLocked()
	g.mu.Unlock()
	return g.WebsocketConn.WriteClose(code, reason)
}

func (g *guardedConn) stopTimersLocked() {
	if g.initTimer != nil {
		g.initTimer.Stop()
	}
	if g.expiryTimer != nil {
		g.expiryTimer.Stop()
	}
}

// expireAt ends the connection when its token expires: every running operation gets an
// UNAUTHENTICATED "token expired" error, then the socket closes with 4403 "token expired".
func (g *guardedConn) expireAt(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	if g.expiryTimer != nil {
		g.expiryTimer.Stop()
	}
	g.expiryTimer = time.AfterFunc(time.Until(t), g.expire)
}

func (g *guardedConn) expire() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(g.active))
	for id := range g.active {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	errs := json.RawMessage(`[{"message":"token expired","extensions":{"code":"UNAUTHENTICATED"}}]`)
	if g.legacy {
		_ = g.WebsocketConn.WriteJSON(map[string]any{"type": "connection_error", "payload": map[string]string{"message": closeReasonTokenExpired}})
	}
	for _, id := range ids {
		_ = g.WebsocketConn.WriteJSON(map[string]any{"id": id, "type": "error", "payload": errs})
	}
	g.closeWith(CloseForbidden, closeReasonTokenExpired)
}

// connRegistry tracks the open WebSocket connections, for shutdown.
type connRegistry struct {
	mu       sync.Mutex
	conns    map[*guardedConn]struct{}
	shutdown bool
	empty    chan struct{} // closed when shutdown began and no connection is left
}

func newConnRegistry() *connRegistry {
	return &connRegistry{conns: map[*guardedConn]struct{}{}, empty: make(chan struct{})}
}

// add registers g; false once shutdown began.
func (r *connRegistry) add(g *guardedConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shutdown {
		return false
	}
	r.conns[g] = struct{}{}
	return true
}

// done unregisters g after its handler returned, and releases its timers and socket.
func (r *connRegistry) done(g *guardedConn) {
	g.mu.Lock()
	g.stopTimersLocked()
	g.mu.Unlock()
	_ = g.Close() // no-op while a close handshake runs; frees a socket gqlgen left open
	r.mu.Lock()
	delete(r.conns, g)
	if r.shutdown && len(r.conns) == 0 {
		select {
		case <-r.empty:
		default:
			close(r.empty)
		}
	}
	r.mu.Unlock()
}

// closeAll refuses new connections, closes every open one with 1001 and returns a channel
// closed once all of them ended.
func (r *connRegistry) closeAll() <-chan struct{} {
	r.mu.Lock()
	r.shutdown = true
	conns := make([]*guardedConn, 0, len(r.conns))
	for g := range r.conns {
		conns = append(conns, g)
	}
	if len(r.conns) == 0 {
		select {
		case <-r.empty:
		default:
			close(r.empty)
		}
	}
	r.mu.Unlock()
	for _, g := range conns {
		g.closeWith(CloseGoingAway, closeReasonShuttingDown)
	}
	return r.empty
}

// count returns how many WebSocket connections are open.
func (r *connRegistry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}
