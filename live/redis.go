package live

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inboxgw/gateway/inbox"
)

// DefaultChannelPrefix starts every Redis channel name: a viewer's channel is
// prefix + tenant + "#" + user (ids never contain '#', so names cannot collide).
const DefaultChannelPrefix = "inbox:"

// RedisOptions configures a Redis broker.
type RedisOptions struct {
	// URL is the Redis URL, e.g. redis://127.0.0.1:6379/0 (see redis.ParseURL).
	URL string
	// ChannelPrefix defaults to DefaultChannelPrefix.
	ChannelPrefix string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// PollInterval is how often, while Redis is unreachable, every subscription is told
	// to re-read its badge from the store (default 5s), so no badge stays stale silently.
	PollInterval time.Duration
	// HealthInterval is how long the subscriber connection may stay silent before it is
	// pinged (default 5s).
	HealthInterval time.Duration
	// Lag, when set, receives the publish lag of every change delivered here.
	Lag LagObserver
}

// Redis is a broker over Redis pub/sub, for many gateway instances (and the stream relay)
// sharing one Redis. Publish delivers to this process's subscriptions at once and
// publishes the change on its viewer's channel; the broker subscribes only to the channels
// of viewers with a subscription in this process (SUBSCRIBE on the first, UNSUBSCRIBE
// after the last). When Redis becomes unreachable, or a channel's subscription is
// (re)confirmed, the affected subscriptions are told to resynchronise (Latest returns
// Version 0: re-read the store); while Redis stays down they are told again every
// PollInterval. Changes are state (count + META version) and notifications are
// de-duplicated per subscription, so a change arriving twice is harmless.
type Redis struct {
	h      *hub
	rdb    *redis.Client
	ps     *redis.PubSub
	prefix string
	origin string
	log    *slog.Logger
	poll   time.Duration
	health time.Duration

	// dirty holds viewers whose Redis subscription may have to change; kick wakes the
	// subscription manager.
	dmu   sync.Mutex
	dirty map[inbox.Viewer]struct{}
	kick  chan struct{}

	mu   sync.Mutex
	up   bool
	subd map[inbox.Viewer]bool // channels this broker asked Redis for (manager only)

	wakes wakes // OnWake functions

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ Broker = (*Redis)(nil)

// NewRedis connects to Redis (it must answer a PING within ctx) and starts the broker's
// subscriber. Close it when done.
func NewRedis(ctx context.Context, o RedisOptions) (*Redis, error) {
	opt, err := redis.ParseURL(o.URL)
	if err != nil {
		// url.Parse's error quotes the whole URL, password included, and the error goes
		// to the log stream: keep its reason only.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	b := &Redis{
		h:      newHub(),
		rdb:    rdb,
		prefix: o.ChannelPrefix,
		origin: hex.EncodeToString(id[:]),
		log:    o.Logger,
		poll:   o.PollInterval,
		health: o.HealthInterval,
		dirty:  make(map[inbox.Viewer]struct{}),
		kick:   make(chan struct{}, 1),
		subd:   make(map[inbox.Viewer]bool),
		up:     true,
	}
	if b.prefix == "" {
		b.prefix = DefaultChannelPrefix
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.poll <= 0 {
		b.poll = 5 * time.Second
	}
	if b.health <= 0 {
		b.health = 5 * time.Second
	}
	b.h.lag = o.Lag
	b.h.onFirst = b.markDirty
	b.h.onLast = b.markDirty
	runCtx, stop := context.WithCancel(context.Background())
	b.cancel = stop
	// The wake-up channel only: the manager adds the viewers'.
	b.ps = rdb.Subscribe(runCtx, b.prefix+wakeChannel)
	b.wg.Add(2)
	go b.manage(runCtx)
	go b.receive(runCtx)
	return b, nil
}

// channel returns v's channel name.
func (b *Redis) channel(v inbox.Viewer) string {
	return b.prefix + v.TenantID + "#" + v.UserID
}

// viewerOf returns the viewer of a channel name of this broker.
func (b *Redis) viewerOf(ch string) (inbox.Viewer, bool) {
	rest, ok := strings.CutPrefix(ch, b.prefix)
	if !ok {
		return inbox.Viewer{}, false
	}
	t, u, ok := strings.Cut(rest, "#")
	return inbox.Viewer{TenantID: t, UserID: u}, ok
}

// Publish delivers c to this process's subscriptions, then publishes it on c.Viewer's
// channel for the other instances. A failed publish is logged: the other instances' own
// resynchronisation (and the stream relay, when it runs) repairs their badges.
func (b *Redis) Publish(ctx context.Context, c inbox.Change) {
	b.h.deliverSince(c, time.Now(), LagLocal)
	payload, err := encodeChange(b.origin, c)
	if err != nil {
		b.log.Error("redis broker: encode change", "err", err)
		return
	}
	// The write committed: publish even if the caller's request is cancelled.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := b.rdb.Publish(pctx, b.channel(c.Viewer), payload).Err(); err != nil {
		b.log.Warn("redis broker: publish", "err", err)
	}
}

// Subscribe registers a subscription to v's changes; the first one of v subscribes this
// broker to v's channel. Close it when done.
func (b *Redis) Subscribe(v inbox.Viewer, opts ...SubscribeOption) *Subscription {
	return b.h.subscribe(v, opts)
}

// Subscribers returns how many subscriptions are registered (for tests and metrics).
func (b *Redis) Subscribers() int { return b.h.count() }

// Channels returns how many viewer channels the broker is subscribed to (or about to be).
func (b *Redis) Channels() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, on := range b.subd {
		if on {
			n++
		}
	}
	return n
}

// Close stops the subscriber and closes the connections.
func (b *Redis) Close() error {
	b.cancel()
	err := b.ps.Close()
	b.wg.Wait()
	return errors.Join(err, b.rdb.Close())
}

func (b *Redis) markDirty(v inbox.Viewer) {
	b.dmu.Lock()
	b.dirty[v] = struct{}{}
	b.dmu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// manage reconciles Redis subscriptions with the hub: SUBSCRIBE for viewers that gained a
// subscription, UNSUBSCRIBE for those that lost their last, in batches. Commands issued
// while Redis is down are remembered by go-redis and re-sent when it reconnects.
func (b *Redis) manage(ctx context.Context) {
	defer b.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		b.dmu.Lock()
		dirty := b.dirty
		b.dirty = make(map[inbox.Viewer]struct{})
		b.dmu.Unlock()
		var sub, unsub []string
		b.mu.Lock()
		for v := range dirty {
			want := b.h.has(v)
			if want == b.subd[v] {
				continue
			}
			if want {
				b.subd[v] = true
				sub = append(sub, b.channel(v))
			} else {
				delete(b.subd, v)
				unsub = append(unsub, b.channel(v))
			}
		}
		b.mu.Unlock()
		for len(sub) > 0 {
			n := min(len(sub), 500)
			if err := b.ps.Subscribe(ctx, sub[:n]...); err != nil && ctx.Err() == nil {
				b.log.Warn("redis broker: subscribe (re-sent on reconnect)", "err", err)
			}
			sub = sub[n:]
		}
		for len(unsub) > 0 {
			n := min(len(unsub), 500)
			if err := b.ps.Unsubscribe(ctx, unsub[:n]...); err != nil && ctx.Err() == nil {
				b.log.Warn("redis broker: unsubscribe", "err", err)
			}
			unsub = unsub[n:]
		}
	}
}

// receive reads the subscriber connection: messages go to the hub; a subscription
// confirmation resynchronises that viewer (changes published before it took effect may
// have been missed); a broken connection marks the broker down, resynchronises everyone
// and keeps doing so every PollInterval until Redis answers again.
func (b *Redis) receive(ctx context.Context) {
	defer b.wg.Done()
	retry := 50 * time.Millisecond
	pinged := false
	var lastPoll time.Time
	for ctx.Err() == nil {
		msg, err := b.ps.ReceiveTimeout(ctx, b.health)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				// Silent for a while: make sure the connection is alive.
				pinged = true
				if perr := b.ps.Ping(ctx); perr == nil {
					continue
				}
			}
			if b.setUp(false) {
				b.log.Warn("redis broker: connection lost; subscribers re-read the store until it returns", "err", err)
				b.h.resync(nil)
				lastPoll = time.Now()
			} else if time.Since(lastPoll) >= b.poll {
				b.h.resync(nil)
				lastPoll = time.Now()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
			retry = min(retry*2, time.Second)
			pinged = false
			continue
		}
		retry = 50 * time.Millisecond
		pinged = false
		if b.setUp(true) {
			b.log.Info("redis broker: connection restored; resynchronising subscribers")
			b.h.resync(nil)
		}
		switch m := msg.(type) {
		case *redis.Message:
			if m.Channel == b.prefix+wakeChannel {
				origin, shard, due, err := decodeWake(m.Payload)
				if err != nil {
					b.log.Warn("redis broker: bad wake-up", "err", err)
				} else if origin != b.origin {
					b.wakes.call(shard, due)
				}
				continue
			}
			origin, sent, c, err := decodeChange([]byte(m.Payload))
			if err != nil {
				b.log.Warn("redis broker: bad message", "channel", m.Channel, "err", err)
				continue
			}
			if origin == b.origin {
				continue // delivered locally when published
			}
			if v, ok := b.viewerOf(m.Channel); !ok || v != c.Viewer {
				b.log.Warn("redis broker: message viewer does not match its channel", "channel", m.Channel)
				continue
			}
			b.h.deliverSince(c, sent, LagRedis)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if v, ok := b.viewerOf(m.Channel); ok {
					b.h.resync(&v)
				}
			}
		}
	}
}

// setUp records whether Redis is reachable and reports whether that changed.
func (b *Redis) setUp(up bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	changed := b.up != up
	b.up = up
	return changed
}

// Connected reports whether the subscriber connection to Redis currently works.
func (b *Redis) Connected() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up
}
