package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// TaskSend is the scheduler task kind that runs an accepted send request (recovery after
// a crash, and scheduled sends). Its Viewer.TenantID is the tenant, Ref the idempotency
// key, Token the request's content hash.
const TaskSend = "send"

// Limits of a send.
const (
	// MaxRecipients is the most users one send lists.
	MaxRecipients = 1000
	// MaxSchedule is how far ahead sendAt may lie.
	MaxSchedule = 365 * 24 * time.Hour
	// DefaultIdempotencyTTL is how long an idempotency key is remembered by default.
	DefaultIdempotencyTTL = 24 * time.Hour
	// DefaultRecoveryDelay is how long after an accept its recovery task is due.
	DefaultRecoveryDelay = 10 * time.Second
)

// Priority is a send's lane.
type Priority string

// Lanes.
const (
	// Transactional is processed at once, on workers bulk work never takes (the default
	// of a send).
	Transactional Priority = "transactional"
	// Bulk is worked off by its own bounded pool (large lists, campaigns).
	Bulk Priority = "bulk"
)

// Templates is what the service needs of the template store (the templates piece).
type Templates interface {
	// Pin checks that template id of tenant exists and renders data for locale in strict
	// mode (an undefined variable is an error), and returns its current version, which
	// the send keeps. Errors: BAD_USER_INPUT (or NOT_FOUND) for a missing template or an
	// undefined variable.
	Pin(ctx context.Context, tenant, id string, locale string, data inbox.JSON) (version int, err error)
	// Render renders version of template id for locale (falling back to the template's
	// default locale) with data.
	Render(ctx context.Context, tenant, id string, version int, locale string, data inbox.JSON) (Rendered, error)
	// Resolve returns the stored content that serves locale at version of template id:
	// its stored locale and that locale's version. Locales with the same answer render
	// the same with the same data, so a send renders once per answer. It must be cheap
	// (no store read per distinct locale asked for): it runs once per distinct locale of
	// a send's recipients. Errors: as Render's.
	Resolve(ctx context.Context, tenant, id string, version int, locale string) (storedLocale string, storedVersion int, err error)
}

// Rendered is one locale's rendering of a template: title, body and the channels the
// template defines.
type Rendered = inbox.Rendered

// Broadcaster starts broadcasts to segments (the broadcasts piece).
type Broadcaster interface {
	// Start starts (durably) the broadcast to spec.Segment's members and returns its id
	// (BroadcastID of spec.IdempotencyKey); starting the same spec again starts nothing
	// new and returns the same id.
	Start(ctx context.Context, tenant string, spec BroadcastSpec) (broadcastID string, err error)
}

// Store is what the service needs of the store (*store.Store): the send loop's reads and
// writes (Writes), and the requests' records.
type Store interface {
	Writes
	NewID() string
	AcceptRequest(ctx context.Context, r inbox.Request, ttl time.Duration, task inbox.Task) (inbox.Request, bool, error)
	GetRequest(ctx context.Context, tenantID, key string) (inbox.Request, bool, error)
	CompleteRequest(ctx context.Context, tenantID, key string, result []byte, task inbox.Task) error
	Schedule(ctx context.Context, t inbox.Task) error
	// SegmentCount is the segment's member count (0 for an unknown segment).
	SegmentCount(ctx context.Context, tenantID, id string) (int, error)
}

// Options configures a Service; zero values take the defaults.
type Options struct {
	// Templates renders templated sends; nil: a send naming a template is refused.
	Templates Templates
	// Broadcaster starts segment sends; nil: a segment send is refused.
	Broadcaster Broadcaster
	// Transactional and Bulk are the lanes' worker counts (default 16 and 4).
	Transactional, Bulk int
	// IdempotencyTTL is how long a key is remembered (default DefaultIdempotencyTTL).
	IdempotencyTTL time.Duration
	// RecoveryDelay is how long after an accept its recovery task is due (default
	// DefaultRecoveryDelay): it should exceed the usual processing time.
	RecoveryDelay time.Duration
	// Chunk is the most recipients of one store send (default and most
	// inbox.MaxRecipients). Every instance on a table must use the same value: a chunk's
	// idempotency key names its place among the request's chunks. Tests use a small chunk
	// to walk many chunks with few recipients.
	Chunk int
	// AcceptOnly leaves every request to its recovery task (no processing in this
	// process: the scheduler's workers run them).
	AcceptOnly bool
	// Publisher hears of every recipient written (nil: nobody); see Writer.
	Publisher inbox.Publisher
	// Written is told of every write's result (nil: nobody); see Writer.Written.
	Written func(tenantID string, recipients []string, res inbox.SendResult)
	// WriteConcurrency is how many recipients of one chunk are written at once (default
	// DefaultWriteConcurrency).
	WriteConcurrency int
	// Logger receives processing failures (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service sends notifications; see the package doc. Build it with New, register its
// Handler with the scheduler (TaskSend), and Close it after the transports stopped.
type Service struct {
	st       Store
	batches  Batches // st's, when it has them (nil: batched sends are refused)
	w        Writer
	o        Options
	lanes    map[Priority]*lane
	mu       sync.Mutex
	inflight map[string]*run // by tenant + "\x00" + key
	closed   chan struct{}
	wg       sync.WaitGroup
}

// New returns a Service over st with its lanes started.
func New(st Store, o Options) *Service {
	if o.Transactional <= 0 {
		o.Transactional = 16
	}
	if o.Bulk <= 0 {
		o.Bulk = 4
	}
	if o.IdempotencyTTL <= 0 {
		o.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if o.Chunk <= 0 || o.Chunk > inbox.MaxRecipients {
		o.Chunk = inbox.MaxRecipients
	}
	if o.RecoveryDelay <= 0 {
		o.RecoveryDelay = DefaultRecoveryDelay
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Service{st: st, o: o, inflight: map[string]*run{}, closed: make(chan struct{}),
		w: Writer{Store: st, Publisher: o.Publisher, Concurrency: o.WriteConcurrency, Written: o.Written}}
	s.batches, _ = st.(Batches)
	s.lanes = map[Priority]*lane{
		Transactional: newLane(o.Transactional),
		Bulk:          newLane(o.Bulk),
	}
	return s
}

// Close stops taking work and waits for the requests being processed; requests queued
// and not started are left to their recovery tasks.
func (s *Service) Close() {
	s.mu.Lock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.mu.Unlock()
	for _, l := range s.lanes {
		l.stop()
	}
	s.wg.Wait()
}
