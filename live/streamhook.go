package live

import (
	"context"
	"sync"
)

// StreamHook lets a transport deliver a subscription's events without a goroutine
// blocked on the stream's channel. gqlgen's subscription resolvers return a channel that
// the transport drains by calling the operation's response handler, which blocks until the
// next value; a transport holding thousands of idle subscriptions would need a goroutine
// (and its stack) for each. With a hook in the operation's context, the stream instead
// tells the transport when a value is waiting:
//
//   - Bind is called by the resolver when its stream will call Ready. A transport that
//     finds the hook unbound after dispatching the operation (an error response, a stream
//     that does not know hooks) must drain it the usual way.
//   - Ready is called once for every value put on the channel, after it is there, and
//     once when the channel is closed. A value that replaces one still waiting (a
//     coalesced badge) does not call Ready again. So each Ready allows exactly one call of
//     the response handler that does not block.
//   - End records why the stream ended before its context did (a subscriber that fell
//     behind); the transport reports it as the operation's error instead of completing.
//
// Ready is set by the transport before the operation is dispatched and may be called from
// any goroutine, before dispatch returns too; it must not block. A transport that sets a
// hook also ends the operation's context when the connection's token expires (the
// streams then keep no expiry timer of their own).
//
// A transport that sets Stops calls Stop right after it cancels the operation's context
// (and the context ends in no other way): the streams then tie their end to Stop instead
// of registering a context.AfterFunc, and their first read of the store does not derive
// from the context, so that the operation's context, cancellable, gets no children (it
// would keep a map of them, and a channel, for each subscriber of thousands).
type StreamHook struct {
	Ready func()
	Stops bool

	mu      sync.Mutex
	bound   bool
	err     error
	stopped bool
	onStop  []func()
}

// Stop runs what the streams opened with h do when their context ends, each on a
// goroutine of its own (as context.AfterFunc does), once; it is for a transport that set
// Stops. What a stream registers after Stop runs at once.
func (h *StreamHook) Stop() {
	h.mu.Lock()
	fs := h.onStop
	h.stopped, h.onStop = true, nil
	h.mu.Unlock()
	for _, f := range fs {
		go f()
	}
}

type streamHookKey struct{}

// WithStreamHook returns ctx carrying h for the streams opened with it (OpenBadge,
// OpenEvents, OpenAdded).
func WithStreamHook(ctx context.Context, h *StreamHook) context.Context {
	return context.WithValue(ctx, streamHookKey{}, h)
}

// Bound reports whether the operation's stream signals through the hook.
func (h *StreamHook) Bound() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bound
}

// Err returns the error the stream ended with, or nil.
func (h *StreamHook) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// HookFrom returns the hook ctx carries, or nil.
func HookFrom(ctx context.Context) *StreamHook {
	h, _ := ctx.Value(streamHookKey{}).(*StreamHook)
	return h
}

// streamSignal is the streams' side of a hook: bind it when the stream starts, then call
// ready after each value and at the end. Without a hook in ctx (gqlgen's own transports,
// SSE) they do nothing.
type streamSignal struct{ h *StreamHook }

func signalOf(ctx context.Context) streamSignal { return streamSignal{HookFrom(ctx)} }

// stops reports whether the transport calls the hook's Stop when ctx ends.
func (s streamSignal) stops() bool { return s.h != nil && s.h.Stops }

// afterEnd runs f (on a goroutine of its own) when the stream's context ends: through the
// hook's Stop when the transport calls it, otherwise context.AfterFunc.
func (s streamSignal) afterEnd(ctx context.Context, f func()) {
	if !s.stops() {
		context.AfterFunc(ctx, f)
		return
	}
	s.h.mu.Lock()
	if !s.h.stopped {
		s.h.onStop = append(s.h.onStop, f)
		s.h.mu.Unlock()
		return
	}
	s.h.mu.Unlock()
	go f()
}

func (s streamSignal) bind() {
	if s.h != nil {
		s.h.mu.Lock()
		s.h.bound = true
		s.h.mu.Unlock()
	}
}

func (s streamSignal) ready() {
	if s.h != nil && s.h.Ready != nil {
		s.h.Ready()
	}
}

func (s streamSignal) end(err error) {
	if s.h != nil {
		s.h.mu.Lock()
		s.h.err = err
		s.h.mu.Unlock()
	}
}
