package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v5"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/sched"

	"github.com/inboxgw/gateway/telemetry"
)

// Defaults of Options (the INBOX_DELIVERY_* defaults).
const (
	DefaultAttempts   = 6
	DefaultBackoff    = 30 * time.Second
	DefaultMaxBackoff = time.Hour
	DefaultTimeout    = 15 * time.Second
	// DefaultClaimMargin is what a claim lasts beyond the attempt's Timeout: the record's
	// update after the provider answered, and clock skew between instances.
	DefaultClaimMargin = 5 * time.Second
	// writeTimeout bounds each record update after a send; it runs even when the task's
	// context ended (a shutdown), so that an answered send is recorded.
	writeTimeout = 10 * time.Second
	// recordRetryBase and recordRetryMax bound the waits between repeats of a record
	// update the store gave up on (record): uniform in [w/2, w), w doubling from the base.
	recordRetryBase = 100 * time.Millisecond
	recordRetryMax  = time.Second
)

// ErrBusy is Handle's error when another run of the task holds a live claim on its record
// (a task run twice at once after a lease takeover): the scheduler tries the task again
// later, by when that claim has an outcome or has expired.
var ErrBusy = errors.New("delivery: the record is claimed by another attempt")

// Store is what the handler needs of the store (*store.Store implements it).
type Store interface {
	// ClaimDelivery claims a QUEUED, unclaimed record for lease (attempts + 1) and returns
	// what to send; see inbox.ClaimOutcome.
	ClaimDelivery(ctx context.Context, ref inbox.DeliveryRef, lease time.Duration) (inbox.DeliveryJob, inbox.ClaimOutcome, error)
	// DeliverySent, DeliveryRetry, DeliveryFailed and DeliveryUnconfirmed record an
	// attempt's outcome, each conditioned on the claim of attempt.
	DeliverySent(ctx context.Context, ref inbox.DeliveryRef, attempt int, provider, messageID string) error
	DeliveryRetry(ctx context.Context, ref inbox.DeliveryRef, userID string, attempt int, provider, errMsg string, at time.Time) error
	DeliveryFailed(ctx context.Context, ref inbox.DeliveryRef, attempt int, provider, errMsg string) error
	DeliveryUnconfirmed(ctx context.Context, ref inbox.DeliveryRef, attempt int) error
	// SkipDelivery marks a QUEUED record SKIPPED with reason; false when it was not QUEUED.
	SkipDelivery(ctx context.Context, tenantID, notificationID, key, reason string) (bool, error)
	// RecheckDelivery returns why the recipient's preferences now keep job's channel
	// ("" when they do not).
	RecheckDelivery(ctx context.Context, job inbox.DeliveryJob) (string, error)
	// RecheckDevice returns why a push job's device is no longer its recipient's
	// (inbox.ReasonDeviceMoved, inbox.ReasonNoDevice; "" while it is).
	RecheckDevice(ctx context.Context, job inbox.DeliveryJob) (string, error)
	// PruneDevice removes a device from v's profile (idempotent).
	PruneDevice(ctx context.Context, v inbox.Viewer, deviceID string) error
	// CachedTenantSettings returns a tenant's settings (webhook URL and secret), from the
	// instance's settings cache while it is fresh.
	CachedTenantSettings(ctx context.Context, tenantID string) (inbox.TenantSettings, error)
	// AddSuppression puts an address on the tenant's suppression list (false: it was on
	// it already).
	AddSuppression(ctx context.Context, tenantID string, sup inbox.Suppression) (bool, error)
	// Critical reports whether category is critical for tenantID (cached, as
	// CachedTenantSettings): a critical email carries no unsubscribe link.
	Critical(ctx context.Context, tenantID, category string) (bool, error)
}

// Options configures a Handler. Zero values take the defaults.
type Options struct {
	// Channels are the provider adapters by channel (and, for push, by the device's
	// platform); a channel without one has no provider configured: its records become
	// SKIPPED no_provider. Wrap each adapter in channel.Limit for a per-provider rate.
	Channels *channel.Registry
	// Attempts bounds the sends of one record (default DefaultAttempts): a transient
	// failure of the last one fails the record.
	Attempts int
	// Backoff is the retry delay's base and MaxBackoff its cap (see the package doc).
	Backoff, MaxBackoff time.Duration
	// Timeout is the deadline of one send, the rate limit's wait included (default
	// DefaultTimeout).
	Timeout time.Duration
	// ClaimMargin is what a claim lasts beyond Timeout (default DefaultClaimMargin).
	ClaimMargin time.Duration
	// Logger receives one line per failed or unconfirmed send (default slog.Default()).
	Logger *slog.Logger
	// Clock tells the time a retry is due from (default the real clock); it must agree
	// with the store's clock (store.WithClock), which times the claims. Jitter returns a
	// uniform int64 in [0, n) (default math/rand/v2's Int64N).
	Clock  clockwork.Clock
	Jitter func(n int64) int64
	// OnConfigError is called with the provider's name for each send the provider
	// refused for the gateway's own configuration (a *channel.Error with Config set: a
	// revoked or invalid credential), after the record failed; nil: none. Such a send
	// is also logged at error level.
	OnConfigError func(provider string)
	// Tracer, when set, gives each provider send a client span ("{provider} send", under
	// the task's span); nil: none.
	Tracer trace.Tracer
	// Unsubscribe, when set, returns the one-click unsubscribe URL (RFC 8058) of an email
	// to userID of tenantID in category ("" for none: the email carries no link). It is
	// asked only for a category that is not critical for the tenant.
	Unsubscribe func(tenantID, userID, category string) string
}

// Handler handles inbox.TaskDeliver tasks (see the package doc). It is safe for
// concurrent use.
type Handler struct {
	st  Store
	o   Options
	log *slog.Logger
}

// NewHandler returns the deliver handler over st with o.
func NewHandler(st Store, o Options) *Handler {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	def(&o.Backoff, DefaultBackoff)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	def(&o.Timeout, DefaultTimeout)
	def(&o.ClaimMargin, DefaultClaimMargin)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Jitter == nil {
		o.Jitter = rand.Int64N
	}
	return &Handler{st: st, o: o, log: o.Logger}
}

// Register registers h for inbox.TaskDeliver on s (before s.Run).
func (h *Handler) Register(s *sched.Scheduler) { s.Register(inbox.TaskDeliver, h) }

// HandlerTimeout is the least deadline a scheduler must give one Handle call: a send's
// Timeout, then the record's update.
func (h *Handler) HandlerTimeout() time.Duration { return h.o.Timeout + 2*writeTimeout }

// IdempotencyKey is the key every attempt of the record ref sends (Message.IdempotencyKey):
// 32 hex digits of SHA-256 of ref, the same on every instance and attempt.
func IdempotencyKey(ref inbox.DeliveryRef) string {
	sum := sha256.Sum256([]byte(ref.String()))
	return hex.EncodeToString(sum[:16])
}

// Handle delivers the record task t names (see the package doc). A malformed task (no
// tenant, notification or known record key) is dropped: nil, since retrying cannot mend
// it. Errors are the store's (the scheduler retries the task) or ErrBusy.
func (h *Handler) Handle(ctx context.Context, t inbox.Task) error {
	ref := inbox.DeliveryRef{TenantID: t.Viewer.TenantID, NotificationID: t.Ref, Key: t.Token}
	chName, _, err := inbox.ParseDeliveryKey(t.Token)
	if err != nil || ref.Check() != nil || chName == inbox.ChannelInApp {
		return nil
	}
	// The platform is the claimed record's (push): until then, whether the channel has a
	// provider at all decides whether there is anything to claim for.
	var settings inbox.TenantSettings
	if !h.o.Channels.Has(chName) {
		return h.skip(ctx, ref, inbox.ReasonNoProvider)
	}
	if chName == inbox.ChannelWebhook {
		if settings, err = h.st.CachedTenantSettings(ctx, ref.TenantID); err != nil {
			return fmt.Errorf("delivery: %s: tenant settings: %w", ref.Key, err)
		}
		if settings.WebhookURL == "" {
			return h.skip(ctx, ref, inbox.ReasonNoWebhook)
		}
	}

	job, outcome, err := h.st.ClaimDelivery(ctx, ref, h.o.Timeout+h.o.ClaimMargin)
	if err != nil {
		return fmt.Errorf("delivery: claim %s of %s: %w", ref.Key, ref.NotificationID, err)
	}
	switch outcome {
	case inbox.ClaimDone:
		return nil
	case inbox.ClaimBusy:
		return ErrBusy
	case inbox.ClaimOrphaned:
		// A worker stopped after claiming: the provider may have the message. Never resend.
		h.log.WarnContext(ctx, "delivery: unconfirmed (a worker stopped during the send); not sent again",
			"tenant", ref.TenantID, "notification", ref.NotificationID, "key", ref.Key, "attempt", job.Attempt)
		return h.record(ctx, ref, func(wctx context.Context) error {
			return h.st.DeliveryUnconfirmed(wctx, ref, job.Attempt)
		})
	case inbox.ClaimOK:
	default:
		return fmt.Errorf("delivery: claim %s of %s: unknown outcome %d", ref.Key, ref.NotificationID, outcome)
	}

	// A record that waited (quiet hours, a retry) is sent under the preferences of now,
	// not only those of its send: an opt-out or a mute made meanwhile holds. A failed
	// read is a transient failure of this attempt (the claim is released for a retry).
	if job.Deferred || job.Attempt > 1 {
		reason, err := h.st.RecheckDelivery(ctx, job)
		if err != nil {
			return h.outcome(ctx, ref, t.Due, job, "", channel.Result{}, fmt.Errorf("re-check preferences: %w", err))
		}
		if reason != "" {
			return h.skip(ctx, ref, reason)
		}
	}
	adapter := h.o.Channels.Lookup(chName, job.Platform)
	if adapter == nil {
		return h.skip(ctx, ref, inbox.ReasonNoProvider)
	}
	if chName == inbox.ChannelPush {
		// A device belongs to one user: a token another user registered since the send
		// (or one unregistered since) is not pushed to, whatever the record says.
		reason, err := h.st.RecheckDevice(ctx, job)
		if err != nil {
			return h.outcome(ctx, ref, t.Due, job, "", channel.Result{}, fmt.Errorf("re-check device: %w", err))
		}
		if reason != "" {
			return h.skip(ctx, ref, reason)
		}
	}
	m := channel.Message{
		TenantID: ref.TenantID, UserID: job.UserID, NotificationID: ref.NotificationID, Key: ref.Key,
		Attempt: job.Attempt, IdempotencyKey: IdempotencyKey(ref), CallbackRef: ref.String(),
		To: job.To, Platform: job.Platform,
		Subject: job.Subject, Text: job.Text, HTML: job.HTML,
		Title: job.Title, Body: job.Body,
		Payload: job.Payload,
	}
	if chName == inbox.ChannelPush {
		m.Data = map[string]string{"notificationId": ref.NotificationID}
	}
	if chName == inbox.ChannelEmail && h.o.Unsubscribe != nil {
		crit, err := h.st.Critical(ctx, ref.TenantID, job.Category)
		if err != nil {
			return h.outcome(ctx, ref, t.Due, job, "", channel.Result{}, fmt.Errorf("tenant settings: %w", err))
		}
		if !crit {
			m.Unsubscribe = h.o.Unsubscribe(ref.TenantID, job.UserID, job.Category)
		}
	}
	if chName == inbox.ChannelWebhook {
		m.To, m.Secret = settings.WebhookURL, settings.WebhookSecret
	}
	sctx, cancel := context.WithTimeout(ctx, h.o.Timeout)
	sctx, span := telemetry.StartClient(sctx, h.o.Tracer, adapter.Provider()+" send",
		attribute.String("inbox.channel", chName), attribute.String("inbox.provider", adapter.Provider()),
		attribute.Int("inbox.attempt", job.Attempt))
	res, sendErr := adapter.Send(sctx, m)
	if sendErr != nil {
		span.RecordError(sendErr)
		span.SetStatus(codes.Error, "send failed")
	}
	span.End()
	cancel()
	return h.outcome(ctx, ref, t.Due, job, adapter.Provider(), res, sendErr)
}

// outcome records what the provider answered the claimed job's send, made by the task
// due at due.
func (h *Handler) outcome(ctx context.Context, ref inbox.DeliveryRef, due time.Time, job inbox.DeliveryJob, provider string, res channel.Result, sendErr error) error {
	if sendErr == nil {
		if res.Provider != "" {
			provider = res.Provider
		}
		return h.record(ctx, ref, func(wctx context.Context) error {
			return h.st.DeliverySent(wctx, ref, job.Attempt, provider, res.MessageID)
		})
	}
	kind, retryAfter := channel.Classify(sendErr)
	if errors.Is(sendErr, context.DeadlineExceeded) && kind == channel.Transient {
		sendErr = fmt.Errorf("%s: no answer within %v: %w", provider, h.o.Timeout, sendErr)
	}
	msg := clipError(sendErr.Error())
	log := h.log.With("tenant", ref.TenantID, "notification", ref.NotificationID, "key", ref.Key,
		"attempt", job.Attempt, "provider", provider, "kind", kind.String(), "err", msg)
	switch {
	case kind == channel.Unregistered:
		log.InfoContext(ctx, "delivery: device unregistered; removing it", "device", job.DeviceID)
		if job.DeviceID != "" {
			v := inbox.Viewer{TenantID: ref.TenantID, UserID: job.UserID}
			if err := h.record(ctx, ref, func(wctx context.Context) error { return h.st.PruneDevice(wctx, v, job.DeviceID) }); err != nil {
				return err
			}
		}
		return h.record(ctx, ref, func(wctx context.Context) error {
			return h.st.DeliveryFailed(wctx, ref, job.Attempt, provider, msg)
		})
	case kind == channel.Permanent && isConfigError(sendErr):
		log.ErrorContext(ctx, "delivery: the provider refused the gateway's credentials; check its configuration")
		if err := h.record(ctx, ref, func(wctx context.Context) error {
			return h.st.DeliveryFailed(wctx, ref, job.Attempt, provider, msg)
		}); err != nil {
			return err
		}
		if h.o.OnConfigError != nil {
			h.o.OnConfigError(provider)
		}
		return nil
	case kind == channel.Permanent && suppress(sendErr) && inbox.SuppressibleChannel(job.Channel) && job.To != "":
		// A hard bounce or an SMS STOP: the address goes on the tenant's suppression list
		// (later sends skip it, suppressed) before the record fails, so a retry of this
		// task after a crash adds it still.
		reason := "smtp_5xx"
		if job.Channel == inbox.ChannelSMS {
			reason = "sms_stop"
		}
		log.WarnContext(ctx, "delivery: failed (permanent); the address is suppressed", "reason", reason)
		if err := h.record(ctx, ref, func(wctx context.Context) error {
			_, err := h.st.AddSuppression(wctx, ref.TenantID, inbox.Suppression{Channel: job.Channel, Address: job.To, Reason: reason, Detail: msg})
			if inbox.ErrorCode(err) == inbox.CodeBadUserInput {
				return nil // an address the list cannot hold: the record fails all the same
			}
			return err
		}); err != nil {
			return err
		}
		return h.record(ctx, ref, func(wctx context.Context) error {
			return h.st.DeliveryFailed(wctx, ref, job.Attempt, provider, msg)
		})
	case kind == channel.Permanent:
		log.WarnContext(ctx, "delivery: failed (permanent)")
		return h.record(ctx, ref, func(wctx context.Context) error {
			return h.st.DeliveryFailed(wctx, ref, job.Attempt, provider, msg)
		})
	case job.Attempt >= h.o.Attempts:
		log.WarnContext(ctx, "delivery: failed (no attempts left)")
		msg = fmt.Sprintf("%s (after %d attempts)", msg, job.Attempt)
		return h.record(ctx, ref, func(wctx context.Context) error {
			return h.st.DeliveryFailed(wctx, ref, job.Attempt, provider, msg)
		})
	}
	at := h.o.Clock.Now().Add(max(retryAfter, h.Backoff(job.Attempt)))
	// The retry's task has the running task's id (one per record), and task items are
	// keyed by id and due millisecond: a retry due in the running task's millisecond (a
	// backoff under a millisecond, or a clock behind the writer's) would be the same item,
	// which the scheduler deletes as done once this run returns, leaving the record
	// QUEUED with no task. It is due a millisecond later at the soonest.
	if soonest := due.Truncate(time.Millisecond).Add(time.Millisecond); at.Before(soonest) {
		at = soonest
	}
	log.InfoContext(ctx, "delivery: transient failure; retrying", "at", at)
	return h.record(ctx, ref, func(wctx context.Context) error {
		return h.st.DeliveryRetry(wctx, ref, job.UserID, job.Attempt, provider, msg, at)
	})
}

// Backoff is the delay before the retry that follows attempt n (1 = the first send):
// uniform in [0, min(MaxBackoff, Backoff·2^(n-1))] ("full jitter"), so that records
// failing together (a provider's outage) do not come back together.
func (h *Handler) Backoff(n int) time.Duration {
	ceiling := h.o.Backoff
	for i := 1; i < n && ceiling < h.o.MaxBackoff; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, h.o.MaxBackoff)
	return time.Duration(h.o.Jitter(int64(ceiling) + 1))
}

// skip marks ref SKIPPED with reason (nothing when it is no longer QUEUED).
func (h *Handler) skip(ctx context.Context, ref inbox.DeliveryRef, reason string) error {
	if _, err := h.st.SkipDelivery(ctx, ref.TenantID, ref.NotificationID, ref.Key, reason); err != nil {
		return fmt.Errorf("delivery: skip %s of %s: %w", ref.Key, ref.NotificationID, err)
	}
	return nil
}

// record runs the record update write with a deadline of its own (writeTimeout),
// detached from ctx's cancellation: a send that was answered is recorded even while the
// scheduler stops. A write the store gave up on as THROTTLED or UNAVAILABLE (its budget
// of calls spent) is tried again, with backoff, until that deadline: a claim left behind
// would expire into "unconfirmed" (SENT), which loses the provider's message id, marks a
// message the provider refused as sent and keeps an unregistered device. Every write
// here is conditional on the claim, so a repeat is harmless. A claim lost meanwhile
// (inbox.ErrClaimLost: another run settled the record, e.g. it found this claim expired)
// leaves nothing to do.
func (h *Handler) record(ctx context.Context, ref inbox.DeliveryRef, write func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.RandomizationFactor = recordRetryBase, recordRetryMax, 2, 0.5
	_, err := backoff.Retry(wctx, func() (struct{}, error) {
		err := write(wctx)
		if code := inbox.ErrorCode(err); err != nil && code != inbox.CodeThrottled && code != inbox.CodeUnavailable {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(writeTimeout))
	if perm, ok := errors.AsType[*backoff.PermanentError](err); ok {
		err = perm.Unwrap()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, inbox.ErrClaimLost):
		h.log.WarnContext(ctx, "delivery: the record was settled by another run meanwhile",
			"tenant", ref.TenantID, "notification", ref.NotificationID, "key", ref.Key, "err", err)
		return nil
	}
	return fmt.Errorf("delivery: record %s of %s: %w", ref.Key, ref.NotificationID, err)
}

// MaxErrorBytes bounds the text of a send's error that a record keeps and its log line
// shows: the provider writes it (Slack's "error", Twilio's message, a body quoted in a
// transport error), and one too long for the record's item would fail the record's
// write, the retry's included (providerhook.MaxErrorBytes bounds a callback's alike).
const MaxErrorBytes = 512

// clipError returns s as valid UTF-8 (a bad byte is U+FFFD) cut to at most
// MaxErrorBytes bytes at a character boundary, the cut marked with "…".
func clipError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxErrorBytes {
		return s
	}
	n := MaxErrorBytes - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// suppress reports whether err is a provider's refusal of the address itself
// (channel.Error.Suppress).
func suppress(err error) bool {
	var ce *channel.Error
	return errors.As(err, &ce) && ce.Suppress
}

// isConfigError reports whether err is a provider's refusal of the gateway's own
// configuration (channel.Error.Config).
func isConfigError(err error) bool {
	var ce *channel.Error
	return errors.As(err, &ce) && ce.Config
}
