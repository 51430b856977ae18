package live

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Scheduler wake-ups (package sched): a writer of a scheduled task tells the instance
// holding the task's shard when it falls due, so that the holder arms a timer for it
// instead of polling. Both brokers carry them (PublishWake, OnWake): Local to the
// schedulers of this process, Redis to those of every instance. A wake-up is a hint: a
// lost one delays its task until the scheduler's safety-net poll, nothing more.

// wakeChannel is the Redis channel of the wake-ups, after the channel prefix. It has no
// '#', so it is never a viewer's channel.
const wakeChannel = "~sched-wake"

// wakes is the set of OnWake functions of one broker.
type wakes struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(shard int, due time.Time)
}

// add registers f and returns its removal.
func (w *wakes) add(f func(shard int, due time.Time)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = make(map[int]func(int, time.Time))
	}
	id := w.next
	w.next++
	w.fns[id] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// call hands a wake-up to every registered function.
func (w *wakes) call(shard int, due time.Time) {
	w.mu.Lock()
	fns := make([]func(int, time.Time), 0, len(w.fns))
	for _, f := range w.fns {
		fns = append(fns, f)
	}
	w.mu.Unlock()
	for _, f := range fns {
		f(shard, due)
	}
}

// PublishWake tells every OnWake function of this process that a task of shard falls
// due at due. It never blocks on them (they must not block either).
func (b *Local) PublishWake(_ context.Context, shard int, due time.Time) { b.wakes.call(shard, due) }

// OnWake registers f to receive the wake-ups published on this broker; the returned
// function unregisters it.
func (b *Local) OnWake(f func(shard int, due time.Time)) func() { return b.wakes.add(f) }

// PublishWake hands the wake-up to this process's OnWake functions, then publishes it for
// the other instances. A failed publish is logged: the holder's safety-net poll finds the
// task.
func (b *Redis) PublishWake(ctx context.Context, shard int, due time.Time) {
	b.wakes.call(shard, due)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := b.rdb.Publish(pctx, b.prefix+wakeChannel, encodeWake(b.origin, shard, due)).Err(); err != nil {
		b.log.Warn("redis broker: publish wake-up", "err", err)
	}
}

// OnWake registers f to receive the wake-ups published by any instance; the returned
// function unregisters it.
func (b *Redis) OnWake(f func(shard int, due time.Time)) func() { return b.wakes.add(f) }

// encodeWake is a wake-up's message: "origin shard dueUnixMs".
func encodeWake(origin string, shard int, due time.Time) string {
	return origin + " " + strconv.Itoa(shard) + " " + strconv.FormatInt(due.UnixMilli(), 10)
}

// decodeWake reads encodeWake's message. Its error quotes at most the message's first
// wakeQuote bytes (the subscriber logs it: a message on the channel may come from
// anyone who can publish to Redis, of any size and content).
func decodeWake(msg string) (origin string, shard int, due time.Time, err error) {
	if len(msg) > maxWake {
		return "", 0, time.Time{}, fmt.Errorf("wake-up %s: longer than %d bytes", quoteWake(msg), maxWake)
	}
	f := strings.Fields(msg)
	if len(f) != 3 {
		return "", 0, time.Time{}, fmt.Errorf("wake-up %s: want 3 fields", quoteWake(msg))
	}
	shard, err = strconv.Atoi(f[1])
	if err != nil || shard < 0 {
		return "", 0, time.Time{}, fmt.Errorf("wake-up %s: bad shard", quoteWake(msg))
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return "", 0, time.Time{}, fmt.Errorf("wake-up %s: bad due time", quoteWake(msg))
	}
	return f[0], shard, time.UnixMilli(ms).UTC(), nil
}

// maxWake bounds a wake-up message: an origin (a broker's id, under a hundred bytes), a
// shard and a Unix ms time fit well within it.
const maxWake = 512

// wakeQuote is how much of a bad wake-up message its error quotes.
const wakeQuote = 64

// quoteWake quotes msg's first wakeQuote bytes, saying how long it was when cut.
func quoteWake(msg string) string {
	if len(msg) <= wakeQuote {
		return strconv.Quote(msg)
	}
	return strconv.Quote(strings.ToValidUTF8(msg[:wakeQuote], "")) + "… (" + strconv.Itoa(len(msg)) + " bytes)"
}
