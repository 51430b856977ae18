package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/metrics"
)

// The WebSocket transport: graphql-transport-ws (the graphql-ws library's protocol,
// https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md) and the legacy
// graphql-ws of subscriptions-transport-ws, over github.com/coder/websocket, executing
// operations with gqlgen's executor (so extensions, complexity, the error presenter and
// the per-response dataloaders apply as on every other transport).
//
// It is written for many idle subscribers: a connection holds one goroutine (its reader)
// and small socket buffers (smallBuffers), whatever its number of subscriptions. A subscription
// holds no goroutine: its stream signals through a live.StreamHook when a value is
// waiting, and the connection's flusher, a goroutine that exists only while there is
// something to write, renders and writes it. Timers (init timeout, keep-alive, token
// expiry) are runtime timers, not goroutines; a keep-alive tick runs on a goroutine of its
// own until the peer's WebSocket pong comes back (a round trip) or the peer is late. gqlgen's own WebSocket transport spends four
// goroutines and about 70 KiB on an idle subscriber.

// WebSocket close codes of the graphql-transport-ws protocol (and RFC 6455's going away).
const (
	CloseGoingAway           = 1001
	CloseInvalidMessage      = 4400
	CloseUnauthorized        = 4401
	CloseForbidden           = 4403
	CloseInitTimeout         = 4408
	CloseSubscriberExists    = 4409
	CloseTooManyInitRequests = 4429
)

const (
	subprotocolTransportWS = "graphql-transport-ws"
	subprotocolGraphQLWS   = "graphql-ws"

	closeReasonTokenExpired   = "token expired"
	closeReasonShuttingDown   = "server shutting down"
	closeReasonInitTimeout    = "Connection initialisation timeout"
	closeReasonTooManyInits   = "Too many initialisation requests"
	closeReasonUnauthorized   = "Unauthorized"
	closeReasonForbidden      = "Forbidden"
	closeReasonSubscriberDupe = "Subscriber for this id already exists"
	closeReasonInvalidMessage = "Invalid message received"

	// wsReadBuffer and wsWriteBuffer size a connection's socket buffers (see smallBuffers).
	wsReadBuffer  = 32
	wsWriteBuffer = 256
	// MaxOperationsPerConnection bounds the operations one connection runs at once; a
	// subscribe past it gets an error (BAD_REQUEST) and the connection goes on. A page
	// needs a handful; thousands on one socket are a client bug or an attack (each costs
	// memory and a render per event).
	MaxOperationsPerConnection = 100
	// wsMaxMessage bounds one client message (a subscribe with its query and variables).
	wsMaxMessage = 256 << 10
	// wsDrainMargin is added to the mutation deadline to bound how long, at token expiry,
	// the operations already running may take to answer before the connection closes:
	// each of them ends by its own deadline, so waiting for it costs no more than the
	// request it is, and a mutation that committed is answered. (A fixed 5 s drain, shorter
	// than the 30 s mutation deadline, answered "token expired" for a mutation that had
	// written, on a loaded machine.)
	wsDrainMargin = time.Second
	// wsWriteTimeout bounds one frame's write: a peer that reads nothing for this long is
	// gone, and its connection is closed.
	wsWriteTimeout = 10 * time.Second
	// wsPeerDeadlineIntervals is how many keep-alive intervals a connection may go without
	// hearing from its peer (any message, or a WebSocket pong) before it is dropped.
	wsPeerDeadlineIntervals = 2
)

// wsTransport is a gqlgen transport (graphql.Transport) for WebSocket upgrades.
type wsTransport struct {
	verifier    *auth.Verifier
	log         *slog.Logger
	origins     []string
	initTimeout time.Duration
	keepAlive   time.Duration
	drain       time.Duration // at token expiry, the longest wait for running operations (mutation deadline + wsDrainMargin)
	// clock runs a connection's timers (init timeout, keep-alive, token expiry) and
	// dates what it hears from its peer: the verifier's clock, on which a token's
	// ValidUntil is, so a test that advances it expires tokens and ticks keep-alives.
	// The drain at expiry waits on the wall clock, as the operations' own deadlines do.
	clock   clockwork.Clock
	reg     *connRegistry
	metrics *metrics.Registry // nil: none
}

var _ graphql.Transport = (*wsTransport)(nil)

// Supports claims WebSocket upgrade requests (an "Upgrade: h2c" request is an ordinary
// one for the other transports).
func (t *wsTransport) Supports(r *http.Request) bool { return isWebSocketUpgrade(r) }

// Do accepts the upgrade (subprotocol graphql-transport-ws or graphql-ws, Origin checked
// against the allow-list: same origin only when it is empty) and returns: the connection
// lives on in its own goroutine, so the HTTP server's goroutine and its stack are freed.
func (t *wsTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	heard := new(atomic.Int64) // the connection's lastHeard; pongs arrive through the reader
	heard.Store(t.clock.Now().UnixNano())
	sb := &smallBuffers{ResponseWriter: w}
	ws, err := websocket.Accept(sb, r, &websocket.AcceptOptions{
		Subprotocols:   []string{subprotocolTransportWS, subprotocolGraphQLWS},
		OriginPatterns: t.origins,
		// Any pong, the answer to keepAliveTick's ping or an unsolicited one, shows the
		// peer is there. Called synchronously by the reader: no goroutine.
		OnPongReceived: func(context.Context, []byte) { heard.Store(t.clock.Now().UnixNano()) },
	})
	if err != nil {
		t.log.DebugContext(r.Context(), "websocket upgrade refused", "err", err) // Accept wrote the response
		return
	}
	ws.SetReadLimit(wsMaxMessage)
	// The request's context ends when this handler returns; the connection's must not.
	// Operations need none of its values (the claims come with connection_init), and not
	// deriving from it lets net/http's per-request contexts go.
	ctx, cancel := context.WithCancel(metrics.WithTransport(context.Background(), metrics.TransportWebSocket))
	c := &wsConn{t: t, ws: ws, conn: sb.conn, exec: exec, ctx: ctx, cancel: cancel, lastHeard: heard,
		legacy: ws.Subprotocol() != subprotocolTransportWS}
	if !t.reg.add(c) {
		cancel()
		_ = ws.Close(CloseGoingAway, closeReasonShuttingDown)
		return
	}
	c.closed = t.metrics.ConnectionOpened(metrics.TransportWebSocket) // teardown calls it
	if t.initTimeout > 0 {
		c.mu.Lock()
		c.initTimer = t.clock.AfterFunc(t.initTimeout, func() {
			c.mu.Lock()
			late := !c.inited
			c.mu.Unlock()
			if late {
				c.closeWith(CloseInitTimeout, closeReasonInitTimeout)
			}
		})
		c.mu.Unlock()
	}
	go c.run()
}

// smallBuffers hands the WebSocket library a hijacked connection with a 32-byte read
// buffer and a 256-byte write buffer instead of net/http's 4 KiB ones, which it would
// otherwise keep for the connection's life: 7.7 KiB of every idle subscriber. The read
// buffer holds a frame's header (at most 14 bytes) and a small control frame; a payload
// longer than what is buffered is read straight into the message (bufio reads past its
// buffer), so a message costs one read more than with a big buffer, and subscribers
// send few. Protocol messages out are small (a badge frame is under 100 bytes, an
// unreadCount one under 70); a bigger one takes one write more. It keeps the hijacked
// net.Conn (conn) for write deadlines.
type smallBuffers struct {
	http.ResponseWriter
	conn net.Conn
}

func (s *smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	s.conn = conn
	// Bytes the client sent right behind its handshake are already in net/http's reader:
	// the new reader starts with them buffered (coder/websocket carries over what is
	// buffered, golang/go#32314).
	n := brw.Reader.Buffered()
	var src io.Reader = conn
	if n > 0 {
		early, _ := brw.Reader.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(early)), conn)
	}
	br := bufio.NewReaderSize(src, max(wsReadBuffer, n))
	if n > 0 {
		if _, err := br.Peek(n); err != nil {
			return nil, nil, err
		}
	}
	return conn, bufio.NewReadWriter(br, bufio.NewWriterSize(conn, wsWriteBuffer)), nil
}

// wsConn is one WebSocket connection.
type wsConn struct {
	t      *wsTransport
	ws     *websocket.Conn
	conn   net.Conn // under ws: send sets its write deadline
	closed func()   // counts the connection closed (metrics), called by teardown
	exec   graphql.GraphExecutor
	legacy bool // graphql-ws (subscriptions-transport-ws), not graphql-transport-ws
	ctx    context.Context
	cancel context.CancelFunc // ends every operation of the connection
	// lastHeard is when the peer was last heard from (UnixNano): a message read, or a
	// WebSocket pong. keepAliveTick drops a peer silent for wsPeerDeadlineIntervals.
	lastHeard *atomic.Int64

	// writeMu is held by send around a message's write and its deadline.
	writeMu sync.Mutex

	mu      sync.Mutex
	inited  bool            // connection_init received
	opCtx   context.Context // ctx with the verified claims, once acknowledged
	closing bool
	expired bool // the token expired (closing too)
	// ops are the running operations (ids unique; at most MaxOperationsPerConnection, so
	// a slice searched costs less than a map, per connection of thousands).
	ops   []*wsOp
	queue []*wsOp // subscriptions with events to write
	// starting counts operations in run: being read and dispatched, and queries and
	// mutations until their result is written.
	starting    sync.WaitGroup
	flushing    bool // the flusher runs
	initTimer   clockwork.Timer
	kaTimer     clockwork.Timer
	expiryTimer clockwork.Timer
}

// wsMessage is a protocol message, both directions.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// run reads messages until the connection ends, then releases everything it holds.
func (c *wsConn) run() {
	defer c.teardown()
	for {
		// No context: a read waits for the peer; closing the socket ends it.
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			return
		}
		c.lastHeard.Store(c.t.clock.Now().UnixNano())
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing {
			continue // drain until the close handshake ends
		}
		onFreshStack(func() {
			var m wsMessage
			if typ != websocket.MessageText || json.Unmarshal(data, &m) != nil || m.Type == "" {
				c.invalid("invalid json")
				return
			}
			c.handle(m)
		})
	}
}

// onFreshStack runs f on a goroutine of its own and waits for it. The reader calls it for
// each message so that what a message needs (JSON decoding, a JWT's verification) grows
// that goroutine's stack, not the reader's: the reader spends its life waiting for the
// next frame, and a stack that once grew stays at least twice what it uses (the runtime
// halves a stack only when under a quarter of it is in use). Measured: an idle
// connection's stack is 4 KiB instead of 8.
func onFreshStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func (c *wsConn) handle(m wsMessage) {
	switch m.Type {
	case "connection_init":
		c.init(m.Payload)
	case "ping":
		if c.legacy {
			c.invalid("unexpected message ping")
			return
		}
		c.send(wsMessage{Type: "pong", Payload: m.Payload})
	case "pong":
		if c.legacy {
			c.invalid("unexpected message pong")
		}
	case "subscribe", "start":
		if (m.Type == "start") != c.legacy {
			c.invalid("unexpected message " + m.Type)
			return
		}
		c.start(m.ID, m.Payload)
	case "complete", "stop":
		if (m.Type == "stop") != c.legacy {
			c.invalid("unexpected message " + m.Type)
			return
		}
		if m.ID == "" {
			c.invalid("an operation needs an id")
			return
		}
		c.stop(m.ID)
	case "connection_terminate":
		if !c.legacy {
			c.invalid("unexpected message " + m.Type)
			return
		}
		c.closeWith(websocket.StatusNormalClosure, "terminated")
	default:
		c.invalid("unexpected message " + m.Type)
	}
}

// invalid ends the connection after a message the protocol does not allow: 4400 (the
// legacy protocol is told why first).
func (c *wsConn) invalid(why string) {
	if c.legacy {
		c.sendConnectionError(why)
	}
	c.closeWith(CloseInvalidMessage, closeReasonInvalidMessage)
}

// init handles connection_init: the payload's Authorization ("Bearer <JWT>") is verified,
// and the connection is acknowledged, or closed with 4403.
func (c *wsConn) init(payload json.RawMessage) {
	c.mu.Lock()
	if c.inited {
		c.mu.Unlock()
		if c.legacy {
			// Not acknowledged: the operations run as the first init's user, and a client
			// that re-inits to switch users must not be told it worked.
			c.sendConnectionError("the connection is already initialised")
			return
		}
		c.closeWith(CloseTooManyInitRequests, closeReasonTooManyInits)
		return
	}
	c.inited = true
	if c.initTimer != nil {
		c.initTimer.Stop()
		c.initTimer = nil
	}
	c.mu.Unlock()

	var p map[string]any
	_ = json.Unmarshal(payload, &p) // not an object: no token
	header, _ := p["Authorization"].(string)
	if header == "" {
		header, _ = p["authorization"].(string)
	}
	claims, err := c.t.verifier.FromHeader(header)
	if err != nil {
		why := inbox.ErrorMessage(err)
		if strings.TrimSpace(header) == "" {
			why = `no token: send {"Authorization": "Bearer <JWT>"} as connection_init's payload`
		}
		if c.legacy {
			c.sendConnectionError(why)
		}
		c.closeWith(CloseForbidden, forbiddenReason(why))
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	// Not a child of c.ctx: a cancellable parent would get a map of its children and a
	// channel, for each connection of thousands; teardown cancels the operations itself.
	c.opCtx = auth.WithClaims(context.WithoutCancel(c.ctx), claims)
	if !claims.ValidUntil.IsZero() {
		// The connection ends with its token (exp plus the verifier's leeway, as on every
		// request): 4403 "token expired".
		c.expiryTimer = c.t.clock.AfterFunc(c.t.clock.Until(claims.ValidUntil), c.expire)
	}
	// The keep-alive is armed before the acknowledgement is written: a client that has
	// read the ack knows the interval is running (a test advancing a fake clock right
	// after the ack would otherwise race the timer's creation and tick nothing).
	if c.t.keepAlive > 0 {
		c.kaTimer = c.t.clock.AfterFunc(c.t.keepAlive, c.keepAliveTick)
	}
	c.mu.Unlock()
	c.send(wsMessage{Type: "connection_ack"})
	if c.t.keepAlive > 0 && c.legacy {
		c.send(wsMessage{Type: "ka"})
	}
}

// keepAliveTick drops a peer that has been silent for wsPeerDeadlineIntervals keep-alive
// intervals; otherwise it schedules the next tick and sends graphql-ws's "ka", or
// graphql-transport-ws's ping, followed by a WebSocket ping (RFC 6455 section 5.5.2).
//
// The traffic keeps proxies and load balancers from closing an idle subscription (an
// ALB's idle timeout is 60 s by default). The answers are how a dead peer is found: behind
// a silent network (no FIN, no RST) writes keep landing in the kernel's socket buffer for
// minutes, so a failed write cannot be waited for. Anything heard counts: a message (a
// graphql-transport-ws pong, or any message on the legacy protocol, which has no pong)
// or a WebSocket pong, which browsers and WebSocket libraries send by themselves while
// they read. A peer heard from at no point in the last two intervals is closed at once
// (no close handshake: it would wait on the silent peer), which tears the connection down
// and releases its subscriptions; it happens between two and three intervals after the
// peer was last heard from.
//
// The timer is re-armed before anything is written, so a tick blocked in a write to a
// stalled peer does not hold back the next one, whose check then ends that write.
func (c *wsConn) keepAliveTick() {
	silent := time.Duration(c.t.clock.Now().UnixNano() - c.lastHeard.Load())
	c.mu.Lock()
	if c.closing || c.kaTimer == nil {
		c.mu.Unlock()
		return
	}
	if silent >= wsPeerDeadlineIntervals*c.t.keepAlive {
		c.closing = true
		c.stopTimersLocked()
		c.mu.Unlock()
		c.t.log.DebugContext(c.ctx, "websocket peer unresponsive: closing", "silent", silent)
		_ = c.ws.CloseNow() // the reader ends and tears down
		return
	}
	c.kaTimer.Reset(c.t.keepAlive)
	c.mu.Unlock()
	if c.legacy {
		c.send(wsMessage{Type: "ka"})
	} else {
		c.send(wsMessage{Type: "ping"})
	}
	// Ping waits for its pong (OnPongReceived records it); this timer goroutine does the
	// waiting, for at most the deadline, and ends with the connection (Ping returns when
	// the socket closes). Not derived from c.ctx, which would keep a map of its children
	// for the connection's life.
	ctx, cancel := context.WithTimeout(context.Background(), wsPeerDeadlineIntervals*c.t.keepAlive)
	defer cancel()
	_ = c.ws.Ping(ctx)
}

// expire ends the connection when its token expires. It takes no new operation and ends
// the subscriptions at once with an UNAUTHENTICATED "token expired" error (they commit
// nothing, and an event must not reach a client whose token expired); the queries and
// mutations already running finish and answer (a mutation that started commits: telling
// its client "token expired" would hide a write that happened), for at most the mutation
// deadline (wsTransport.drain); then every operation left gets the same error, and the
// socket closes with 4403 "token expired".
func (c *wsConn) expire() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing, c.expired = true, true
	c.stopTimersLocked()
	var subs []*wsOp
	for _, op := range c.ops {
		if op.subscription {
			subs = append(subs, op)
		}
	}
	c.mu.Unlock()
	// A subscription has nothing to commit: it ends now, so that no event reaches a
	// client whose token expired while a mutation drains.
	for _, op := range subs {
		op.end(func() { c.sendErrors(op.id, tokenExpiredErrors()) })
	}
	drained := make(chan struct{})
	go func() {
		c.starting.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(c.t.drain):
	}
	c.mu.Lock()
	ops := slices.Clone(c.ops)
	c.mu.Unlock()
	if c.legacy {
		c.sendConnectionError(closeReasonTokenExpired)
	}
	for _, op := range ops {
		op.end(func() { c.sendErrors(op.id, tokenExpiredErrors()) })
	}
	go func() { _ = c.ws.Close(CloseForbidden, closeReasonTokenExpired) }()
}

// tokenExpiredErrors is the UNAUTHENTICATED "token expired" error an operation ends with
// when its connection's token expires.
func tokenExpiredErrors() gqlerror.List {
	return gqlerror.List{{Message: closeReasonTokenExpired, Extensions: map[string]any{"code": inbox.CodeUnauthenticated}}}
}

// start handles subscribe (graphql-ws: start): a new operation under id.
func (c *wsConn) start(id string, payload json.RawMessage) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock() // the token expired or the connection is ending: no new operation
		return
	}
	if c.opCtx == nil {
		c.mu.Unlock()
		if c.legacy {
			c.sendConnectionError("connection_init first")
		}
		c.closeWith(CloseUnauthorized, closeReasonUnauthorized)
		return
	}
	if id == "" {
		c.mu.Unlock()
		c.invalid("an operation needs an id")
		return
	}
	if old := c.opLocked(id); old != nil {
		if !c.legacy {
			c.mu.Unlock()
			c.closeWith(CloseSubscriberExists, closeReasonSubscriberDupe)
			return
		}
		// subscriptions-transport-ws replaces the operation of a reused id.
		c.removeOpLocked(old)
		old.cancel()
	} else if len(c.ops) >= MaxOperationsPerConnection {
		c.mu.Unlock()
		c.sendErrors(id, gqlerror.List{{Message: fmt.Sprintf("at most %d operations may run on one connection", MaxOperationsPerConnection),
			Extensions: map[string]any{"code": inbox.CodeBadRequest}}})
		return
	}
	op := &wsOp{c: c, id: id}
	ctx, cancel := context.WithCancel(c.opCtx)
	op.ctx = ctx
	op.cancel = func() { cancel(); op.hook.Stop() } // nothing else cancels ctx
	op.hook.Ready, op.hook.Stops = op.ready, true
	c.ops = append(c.ops, op)
	c.starting.Add(1) // under c.mu, before expire (which sets closing under it) can Wait
	c.mu.Unlock()
	go func() {
		defer c.starting.Done()
		op.run(payload)
	}()
}

// stop handles complete (graphql-ws: stop): the client ends the operation. Nothing more
// is sent for its id (graphql-ws: a complete).
func (c *wsConn) stop(id string) {
	c.mu.Lock()
	op := c.opLocked(id)
	c.mu.Unlock()
	if op == nil {
		return
	}
	var last func()
	if c.legacy {
		last = func() { c.send(wsMessage{ID: id, Type: "complete"}) }
	}
	op.end(last)
}

// wsOp is one operation of a connection.
type wsOp struct {
	c      *wsConn
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	hook   live.StreamHook
	// sendMu is held while a frame of the operation is written, from the check that the
	// operation is still running to the end of the write, so that no frame follows its
	// end (the client's complete, a replacing start, the server's complete or error).
	sendMu sync.Mutex

	// Under c.mu:
	responses  graphql.ResponseHandler   // set once dispatched
	rctx       context.Context           // the context the responses are read with
	rc         *graphql.OperationContext // in rctx (a dispatched subscription's)
	dispatched bool
	// subscription: the operation is a subscription (known once parsed), which the
	// token's expiry ends at once instead of draining.
	subscription bool
	pending      int  // Ready calls not yet consumed
	queued       bool // in c.queue
}

// run parses, validates and dispatches the operation. A query or mutation is answered
// here; a subscription whose stream signals through the hook is left to the flusher and
// this goroutine ends.
func (op *wsOp) run(payload json.RawMessage) {
	c := op.c
	start := graphql.Now()
	ctx := graphql.StartOperationTrace(op.ctx)
	params := &graphql.RawParams{}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(params); err != nil {
		op.fail(gqlerror.List{{Message: "the subscribe payload is not a GraphQL request",
			Extensions: map[string]any{"code": inbox.CodeBadUserInput}}})
		return
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	rc, errs := c.exec.CreateOperationContext(ctx, params)
	if errs != nil {
		resp := c.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		if errcode.GetErrorKind(errs) == errcode.KindProtocol {
			op.fail(resp.Errors)
			return
		}
		op.sendNext(resp)
		op.finish()
		return
	}
	if rc.Operation.Operation == ast.Subscription {
		// Marked before it subscribes: expire ends it at once, or, when the token
		// expired first, it ends here without subscribing.
		c.mu.Lock()
		op.subscription = true
		closing, expired := c.closing, c.expired
		c.mu.Unlock()
		if closing {
			var last func()
			if expired {
				last = func() { c.sendErrors(op.id, tokenExpiredErrors()) }
			}
			op.end(last)
			return
		}
	}
	ctx = graphql.WithOperationContext(ctx, rc)
	ctx = live.WithStreamHook(ctx, &op.hook)
	responses, rctx := c.exec.DispatchOperation(ctx, rc)
	if rc.Operation.Operation == ast.Subscription && op.hook.Bound() {
		leanOperationContext(rc) // before the flusher may read it
		c.mu.Lock()
		op.responses, op.rctx, op.rc, op.dispatched = responses, rctx, rc, true
		c.enqueueLocked(op)
		c.mu.Unlock()
		return
	}
	// A query, a mutation, an error response, or a stream that does not signal.
	for {
		resp := responses(rctx)
		if resp == nil {
			break
		}
		op.sendNext(resp)
	}
	op.finish()
}

// leanOperationContext drops what an operation context holds only for its dispatch, as a
// subscription keeps it for its life (once per subscriber of thousands): the complexity
// extension's statistics (a map) and gqlgen's cache of collected fields (another; the first
// event that needs an entry fills it again). Every exported field but Stats is kept, and
// Stats' timings.
func leanOperationContext(rc *graphql.OperationContext) {
	*rc = graphql.OperationContext{
		RawQuery: rc.RawQuery, Variables: rc.Variables, OperationName: rc.OperationName, Doc: rc.Doc,
		Extensions: rc.Extensions, Headers: rc.Headers, Operation: rc.Operation,
		DisableIntrospection: rc.DisableIntrospection, RecoverFunc: rc.RecoverFunc,
		ResolverMiddleware: rc.ResolverMiddleware, RootResolverMiddleware: rc.RootResolverMiddleware,
		Stats: graphql.Stats{OperationStart: rc.Stats.OperationStart, Read: rc.Stats.Read,
			Parsing: rc.Stats.Parsing, Validation: rc.Stats.Validation},
	}
}

// ready is the hook's Ready: one more value is waiting on the stream.
func (op *wsOp) ready() {
	c := op.c
	c.mu.Lock()
	op.pending++
	c.enqueueLocked(op)
	c.mu.Unlock()
}

// enqueueLocked queues a dispatched operation with pending values and starts the flusher
// when it is not running. c.mu is held.
func (c *wsConn) enqueueLocked(op *wsOp) {
	if !op.dispatched || op.pending == 0 || op.queued || !c.runningLocked(op) {
		return
	}
	op.queued = true
	c.queue = append(c.queue, op)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
}

// flush writes the queued subscriptions' values, one response per Ready, and ends when
// the queue is empty. While a slow peer blocks a write, badge values coalesce in their
// streams and notifications wait in their bounded buffers.
func (c *wsConn) flush() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.flushing = false
			c.queue = nil
			c.mu.Unlock()
			return
		}
		op := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		op.queued = false
		n := op.pending
		op.pending = 0
		current := c.runningLocked(op)
		c.mu.Unlock()
		if !current {
			continue // the client completed it, or the connection ended
		}
		for range n {
			resp := op.responses(op.rctx)
			if resp == nil {
				op.finish()
				break
			}
			op.sendNext(resp)
		}
		// Rendering filled the operation context's caches again; only the flusher reads
		// it now.
		leanOperationContext(op.rc)
	}
}

// opLocked returns the running operation id, or nil. c.mu is held.
func (c *wsConn) opLocked(id string) *wsOp {
	for _, op := range c.ops {
		if op.id == id {
			return op
		}
	}
	return nil
}

// runningLocked reports whether op is still one of the connection's operations. c.mu is
// held.
func (c *wsConn) runningLocked(op *wsOp) bool {
	return slices.Contains(c.ops, op)
}

// removeOpLocked removes op from the running operations and reports whether it was
// there. c.mu is held.
func (c *wsConn) removeOpLocked(op *wsOp) bool {
	i := slices.Index(c.ops, op)
	if i < 0 {
		return false
	}
	last := len(c.ops) - 1
	c.ops[i] = c.ops[last]
	c.ops[last] = nil
	c.ops = c.ops[:last]
	return true
}

// running reports whether the operation is still the connection's under its id.
func (op *wsOp) running() bool {
	c := op.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runningLocked(op)
}

// finish ends an operation that ended on the server's side: complete, or error when its
// stream ended with one. Nothing is sent if the client completed it first.
func (op *wsOp) finish() {
	c := op.c
	op.end(func() {
		if err := op.hook.Err(); err != nil {
			resp := c.exec.DispatchError(op.ctx, gqlerror.List{gqlerror.WrapIfUnwrapped(err)})
			c.sendErrors(op.id, resp.Errors)
			return
		}
		c.send(wsMessage{ID: op.id, Type: "complete"})
	})
}

// fail ends an operation that could not start (an unreadable or invalid request) with an
// error message.
func (op *wsOp) fail(errs gqlerror.List) {
	op.end(func() { op.c.sendErrors(op.id, errs) })
}

// end ends op, once, whoever ends it (the client's complete, the stream's end, a failed
// start, the token's expiry): it leaves the connection's operations, so no frame of it is
// written after this one, its context is cancelled (its stream unsubscribes), and last,
// when not nil, writes its final message, after any frame of it being written. When op
// had ended already, last does not run.
func (op *wsOp) end(last func()) {
	c := op.c
	op.sendMu.Lock()
	defer op.sendMu.Unlock()
	c.mu.Lock()
	mine := c.removeOpLocked(op)
	c.mu.Unlock()
	op.cancel()
	if mine && last != nil {
		last()
	}
}

// sendNext writes a result of the operation, unless it ended.
func (op *wsOp) sendNext(resp *graphql.Response) {
	op.sendMu.Lock()
	defer op.sendMu.Unlock()
	if !op.running() {
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		op.c.t.log.ErrorContext(op.c.ctx, "websocket: encode response", "err", err)
		return
	}
	typ := "next"
	if op.c.legacy {
		typ = "data"
	}
	op.c.send(wsMessage{ID: op.id, Type: typ, Payload: b})
}

func (c *wsConn) sendErrors(id string, errs gqlerror.List) {
	b, err := json.Marshal(errs)
	if err != nil {
		c.t.log.ErrorContext(c.ctx, "websocket: encode errors", "err", err)
		return
	}
	c.send(wsMessage{ID: id, Type: "error", Payload: b})
}

func (c *wsConn) sendConnectionError(message string) {
	b, _ := json.Marshal(map[string]string{"message": message})
	c.send(wsMessage{Type: "connection_error", Payload: b})
}

// send writes one message. A write that fails or times out (wsWriteTimeout) ends the
// connection.
//
// The timeout is the socket's write deadline, set and cleared around the write under
// writeMu (so that a later send cannot extend it), not a context: the WebSocket library
// keeps the context of a message's write until the next one, and a context with a
// deadline is a timer that the runtime keeps for a while after it was stopped, both for
// every subscriber of thousands.
func (c *wsConn) send(m wsMessage) {
	b, err := json.Marshal(m)
	if err != nil {
		c.t.log.ErrorContext(c.ctx, "websocket: encode message", "err", err)
		return
	}
	c.writeMu.Lock()
	if c.ctx.Err() != nil {
		c.writeMu.Unlock()
		return // torn down: the socket is closed
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	err = c.ws.Write(context.Background(), websocket.MessageText, b)
	_ = c.conn.SetWriteDeadline(time.Time{})
	c.writeMu.Unlock()
	if err != nil {
		_ = c.ws.CloseNow()
	}
}

// closeWith starts the close handshake with code and reason, once; the reader then ends
// and tears the connection down. It does not wait for the handshake.
// forbiddenReason is the 4403 close reason of a refused connection_init: "Forbidden: "
// and why (the verifier's message), cut to the 123 bytes a close frame's reason may hold.
// A browser's WebSocket shows its client only the close code and this reason.
func forbiddenReason(why string) string {
	r := closeReasonForbidden + ": " + why
	for len(r) > maxCloseReason {
		_, size := utf8.DecodeLastRuneInString(r)
		r = r[:len(r)-size]
	}
	return r
}

// maxCloseReason is the longest close reason a close frame carries (RFC 6455 5.5: a
// control frame's payload is at most 125 bytes, 2 of them the code).
const maxCloseReason = 123

func (c *wsConn) closeWith(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.stopTimersLocked()
	c.mu.Unlock()
	go func() { _ = c.ws.Close(code, reason) }()
}

func (c *wsConn) stopTimersLocked() {
	for _, t := range []clockwork.Timer{c.initTimer, c.kaTimer, c.expiryTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// teardown runs when the reader ended: every operation is cancelled (their streams
// unsubscribe), the timers stop and the socket is released.
func (c *wsConn) teardown() {
	c.mu.Lock()
	c.closing = true
	c.stopTimersLocked()
	ops := c.ops
	c.ops = nil
	c.queue = nil
	c.mu.Unlock()
	for _, op := range ops {
		op.cancel() // their contexts do not derive from c.ctx (see init)
	}
	c.cancel()
	_ = c.ws.CloseNow()
	c.closed()
	c.t.reg.done(c)
}

// shutdown closes the connection with 1001 (going away).
func (c *wsConn) shutdown() { c.closeWith(CloseGoingAway, closeReasonShuttingDown) }

// connRegistry tracks the open WebSocket connections, for shutdown.
type connRegistry struct {
	mu       sync.Mutex
	conns    map[*wsConn]struct{}
	shutdown bool
	empty    chan struct{} // closed when shutdown began and no connection is left
}

func newConnRegistry() *connRegistry {
	return &connRegistry{conns: map[*wsConn]struct{}{}, empty: make(chan struct{})}
}

// add registers c; false once shutdown began.
func (r *connRegistry) add(c *wsConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shutdown {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// done unregisters c once it was torn down.
func (r *connRegistry) done(c *wsConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
	if r.shutdown && len(r.conns) == 0 {
		r.closeEmptyLocked()
	}
}

func (r *connRegistry) closeEmptyLocked() {
	select {
	case <-r.empty:
	default:
		close(r.empty)
	}
}

// closeAll refuses new connections, closes every open one with 1001 and returns a channel
// closed once all of them ended.
func (r *connRegistry) closeAll() <-chan struct{} {
	r.mu.Lock()
	r.shutdown = true
	conns := make([]*wsConn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	if len(r.conns) == 0 {
		r.closeEmptyLocked()
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.shutdown()
	}
	return r.empty
}

// count returns how many WebSocket connections are open.
func (r *connRegistry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}
