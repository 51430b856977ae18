package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// Broadcasts: a send to a segment (or to a list of up to 1,000 users) fanned out
// asynchronously, shard by shard, by scheduler tasks (inbox.TaskBroadcast). See
// store/broadcasts.go for the items; this file holds the rules: validation, the
// broadcast id derived from the idempotency key, and the shard runs.
//
// A shard's run pages its members (one Query per page of 100, from the shard's cursor),
// fixes each page in the shard's progress item, writes it through the send function
// (Writer.Write) under an idempotency key derived from the broadcast id, shard and page
// number, in the broadcast's lane, and checkpoints: ONE TransactWriteItems moves the
// cursor and adds the page's written/skipped/failed to the head, on condition of the
// page it started from. So a run killed anywhere redoes at most its page, which
// duplicates nobody (the recipients' guards exist) and is counted once. A run does a
// bounded slice of pages, then schedules its own continuation and ends, so one shard
// never holds a scheduler slot for long; the shards run in parallel on the scheduler's
// instances. Cancellation is checked before every page.

// Lanes a broadcast may run in.
const (
	broadcastLaneBulk          = "bulk"
	broadcastLaneTransactional = "transactional"
)

// BroadcastSpec is a broadcast to start: Send goes to every member of Segment, or to
// Recipients (a list broadcast, at most 1,000 distinct users; repeats count once).
// Exactly one of Segment and Recipients is set.
type BroadcastSpec struct {
	// IdempotencyKey identifies the broadcast (inbox.CheckID rules): starting it again
	// with the same spec returns the same broadcast id; with another spec, CONFLICT.
	IdempotencyKey string
	// ID, when set, is the broadcast's id instead of BroadcastID(IdempotencyKey): the send
	// service's segment sends take SendBroadcastID, so that a key used by POST
	// /v1/notifications and by POST /v1/broadcasts names two broadcasts, not one.
	ID string
	// Segment is a segment id (e.g. "followers:{actorId}"); it must have members.
	Segment    string
	Recipients []string
	// Send is the notification. Its IdempotencyKey and Recipients are ignored: each
	// page is sent under a key derived from the broadcast to that page's members.
	Send inbox.SendInput
	// Lane is "bulk" (the default) or "transactional".
	Lane string
	// Template, TemplateVersion and Data, when Template is set, render each recipient's
	// title and body (in their locale) through BroadcastOptions.Templates; they are kept
	// with the broadcast, so a run after a restart renders the same pinned version.
	Template        string
	TemplateVersion int
	Data            inbox.JSON
	// SendAt, when set and in the future (at most MaxSendAhead), is when the broadcast
	// starts: it is written at once (queued, so Get and Cancel see it) and its shard
	// tasks are due then. A time not ahead of now starts it at once.
	SendAt time.Time
	// Hash, when set, identifies the request instead of the hash of the spec itself: a
	// caller that derives Send from something that may change (a template rendered at
	// its latest version) gives the hash of what it was asked, so that a replay after a
	// new template version is still the same request, not a CONFLICT.
	Hash string
}

// broadcastRequest is what a broadcast keeps of its spec to write its pages.
type broadcastRequest struct {
	Send            inbox.SendInput
	Template        string     `json:",omitempty"`
	TemplateVersion int        `json:",omitempty"`
	Data            inbox.JSON `json:",omitempty"`
}

// MaxSendAhead is how far ahead SendAt may be (a year).
const MaxSendAhead = 366 * 24 * time.Hour

// BroadcastStore is what broadcasts need of the store (*store.Store has it).
type BroadcastStore interface {
	SegmentCount(ctx context.Context, tenantID, id string) (int, error)
	SegmentShardPage(ctx context.Context, tenantID, id string, n int, after string, limit int) ([]string, bool, error)
	CreateBroadcast(ctx context.Context, tenantID string, nb inbox.NewBroadcast) (inbox.Broadcast, bool, error)
	GetBroadcast(ctx context.Context, tenantID, id string) (inbox.Broadcast, error)
	CancelBroadcast(ctx context.Context, tenantID, id string) (inbox.Broadcast, error)
	BroadcastShardState(ctx context.Context, tenantID, id string, shard int) (inbox.BroadcastShard, error)
	SetBroadcastPending(ctx context.Context, tenantID, id string, shard, page int, pending []string, end string, last bool) (bool, error)
	CheckpointBroadcast(ctx context.Context, tenantID, id string, shard, page int, end string, last bool, c inbox.BroadcastCounts) (bool, error)
	MarkBroadcastRunning(ctx context.Context, tenantID, id string) (bool, error)
	FinishBroadcast(ctx context.Context, tenantID, id, status string) (bool, error)
	Schedule(ctx context.Context, t inbox.Task) error
	// BroadcastPage is the most recipients of one page (store.WithBroadcastPageSize).
	BroadcastPage() int
}

// BroadcastSendFunc writes one page: Writer.Write's shape (idempotent by
// in.IdempotencyKey; render, when set, renders a templated broadcast's content per
// locale; Accepted counts the recipients that got a notification, new or found written).
type BroadcastSendFunc func(ctx context.Context, tenantID string, in inbox.SendInput, render RenderFunc) (inbox.SendResult, error)

// LaneFunc runs work in lane's bounded worker pool and returns its error, once it ran
// (or ctx's error if it could not start).
type LaneFunc func(ctx context.Context, lane string, work func(context.Context) error) error

// BroadcastOptions configures Broadcasts.
type BroadcastOptions struct {
	// Store and Send are required.
	Store BroadcastStore
	Send  BroadcastSendFunc
	// Lane runs each page's writes in the broadcast's lane; nil runs them in the
	// scheduler's goroutine.
	Lane LaneFunc
	// Register, when set, is called once by NewBroadcasts with inbox.TaskBroadcast and
	// the handler (Broadcasts.Handle), e.g. to register it with a sched.Scheduler.
	Register func(kind string, handle func(context.Context, inbox.Task) error)
	// PagesPerRun bounds the pages of one task run (default 20, i.e. 2,000 recipients);
	// RunFor bounds its time (default 10s; checked between pages). Then the run
	// schedules its continuation and ends.
	PagesPerRun int
	RunFor      time.Duration
	// Templates renders templated broadcasts (required for a spec with a Template).
	Templates Templates
	// Now is the clock (default time.Now); Logger gets warnings (default slog.Default()).
	Now    func() time.Time
	Logger *slog.Logger
}

// Broadcasts starts, runs, reports and cancels broadcasts. Safe for concurrent use.
type Broadcasts struct {
	o BroadcastOptions
}

// NewBroadcasts returns Broadcasts over o (Store and Send required) and registers its
// handler through o.Register, if set.
func NewBroadcasts(o BroadcastOptions) *Broadcasts {
	if o.PagesPerRun <= 0 {
		o.PagesPerRun = 20
	}
	if o.RunFor <= 0 {
		o.RunFor = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	b := &Broadcasts{o: o}
	if o.Register != nil {
		o.Register(inbox.TaskBroadcast, b.Handle)
	}
	return b
}

// BroadcastID is the id of the broadcast started with idempotencyKey: "bc" and 32 hex
// digits of its SHA-256, so a repeated start finds the first broadcast.
func BroadcastID(idempotencyKey string) string {
	sum := sha256.Sum256([]byte(idempotencyKey))
	return "bc" + hex.EncodeToString(sum[:16])
}

// SendBroadcastID is the id of the broadcast of the segment send accepted with
// idempotencyKey: "bc" and 32 hex digits of a SHA-256 whose input no key given to
// BroadcastID can produce (keys have no control characters), so a segment send and
// POST /v1/broadcasts under one key never share a broadcast: each key space is its
// endpoint's.
func SendBroadcastID(idempotencyKey string) string {
	sum := sha256.Sum256([]byte("send\x00" + idempotencyKey))
	return "bc" + hex.EncodeToString(sum[:16])
}

// Start validates spec and writes the broadcast durably (the head, a progress item and
// a scheduler task per shard, in one transaction) before it returns its id; the shards
// run on the scheduler (at spec.SendAt when set). A repeat with the same spec returns
// the same id.
//
// Errors: BAD_USER_INPUT for invalid ids, both or neither of segment and recipients,
// more than 1,000 recipients, a segment without members ("unknown segment"), an
// invalid Send (inbox.SendInput.Validate) or lane, a SendAt more than MaxSendAhead
// ahead; CONFLICT for a key already used with another spec; else the store's failure.
func (b *Broadcasts) Start(ctx context.Context, tenant string, spec BroadcastSpec) (string, error) {
	id, _, err := b.Begin(ctx, tenant, spec)
	return id, err
}

// Begin is Start that also reports whether this call created the broadcast (false for
// a replay of the same spec): what an API answers as a replay.
func (b *Broadcasts) Begin(ctx context.Context, tenant string, spec BroadcastSpec) (id string, created bool, err error) {
	if err := inbox.CheckID("tenant", tenant); err != nil {
		return "", false, err
	}
	if err := inbox.CheckID("idempotencyKey", spec.IdempotencyKey); err != nil {
		return "", false, err
	}
	if !spec.SendAt.IsZero() && spec.SendAt.Sub(b.o.Now()) > MaxSendAhead {
		return "", false, inbox.Errorf(inbox.CodeBadUserInput, "sendAt is more than a year ahead")
	}
	var list []string
	switch {
	case spec.Segment != "" && len(spec.Recipients) > 0, spec.Segment == "" && len(spec.Recipients) == 0:
		return "", false, inbox.Errorf(inbox.CodeBadUserInput, "a broadcast goes to a segment or to recipients, exactly one")
	case spec.Segment != "":
		if err := inbox.CheckID("segment", spec.Segment); err != nil {
			return "", false, err
		}
	default:
		if len(spec.Recipients) > inbox.MaxSegmentChange {
			return "", false, inbox.Errorf(inbox.CodeBadUserInput, "at most %d recipients per call", inbox.MaxSegmentChange)
		}
		for _, r := range spec.Recipients {
			if err := inbox.CheckID("recipient", r); err != nil {
				return "", false, err
			}
			if !slices.Contains(list, r) {
				list = append(list, r)
			}
		}
	}
	lane := spec.Lane
	switch lane {
	case "":
		lane = broadcastLaneBulk
	case broadcastLaneBulk, broadcastLaneTransactional:
	default:
		return "", false, inbox.Errorf(inbox.CodeBadUserInput, "lane must be %s or %s", broadcastLaneBulk, broadcastLaneTransactional)
	}
	send := spec.Send
	send.IdempotencyKey, send.Recipients = "", nil
	probe := send
	probe.IdempotencyKey, probe.Recipients = spec.IdempotencyKey, []string{"recipient"}
	if err := probe.Validate(); err != nil {
		return "", false, err
	}
	if spec.Template != "" && b.o.Templates == nil {
		return "", false, inbox.Errorf(inbox.CodeBadUserInput, "templates are not available")
	}
	req, err := json.Marshal(broadcastRequest{Send: send, Template: spec.Template, TemplateVersion: spec.TemplateVersion, Data: spec.Data})
	if err != nil {
		return "", false, inbox.Errorf(inbox.CodeBadUserInput, "the notification cannot be encoded: %v", err)
	}
	id = BroadcastID(spec.IdempotencyKey)
	if spec.ID != "" {
		if err := inbox.CheckID("broadcast id", spec.ID); err != nil {
			return "", false, err
		}
		id = spec.ID
	}
	hash := spec.Hash
	if hash == "" {
		// SendAt is hashed only when set, so broadcasts started before it existed keep
		// their hashes.
		var sendAt string
		if !spec.SendAt.IsZero() {
			sendAt = spec.SendAt.UTC().Format(time.RFC3339Nano)
		}
		hashed, _ := json.Marshal(struct {
			Segment    string
			Recipients []string
			Lane       string
			Send       json.RawMessage
			SendAt     string `json:",omitempty"`
		}{spec.Segment, slices.Sorted(slices.Values(list)), lane, req, sendAt})
		sum := sha256.Sum256(hashed)
		hash = hex.EncodeToString(sum[:16])
	}
	nb := inbox.NewBroadcast{ID: id, Segment: spec.Segment, List: list, Recipients: len(list), Lane: lane,
		Hash: hash, Request: req, Due: spec.SendAt}
	if spec.Segment != "" {
		n, err := b.o.Store.SegmentCount(ctx, tenant, spec.Segment)
		if err != nil {
			return "", false, err
		}
		if n == 0 {
			// A replay of a broadcast whose segment has emptied since still finds it.
			if bc, err := b.o.Store.GetBroadcast(ctx, tenant, id); err == nil {
				if bc.Hash != nb.Hash {
					return "", false, inbox.Errorf(inbox.CodeConflict, "this idempotency key was already used for a different broadcast (a retry must repeat the same body; new content needs a new key)")
				}
				return id, false, nil
			}
			return "", false, inbox.Errorf(inbox.CodeBadUserInput, "unknown segment %q (it has no members)", spec.Segment)
		}
		nb.Recipients = n
	}
	_, created, err = b.o.Store.CreateBroadcast(ctx, tenant, nb)
	if err != nil {
		return "", false, err
	}
	return id, created, nil
}

// Get returns broadcast id's progress: one GetItem. Errors: NOT_FOUND.
func (b *Broadcasts) Get(ctx context.Context, tenant, id string) (inbox.Broadcast, error) {
	return b.o.Store.GetBroadcast(ctx, tenant, id)
}

// Cancel cancels broadcast id (when queued or running) and returns it as it stands:
// the recipients written stay written, and each shard's run stops before its next page.
// Cancelling a finished broadcast changes nothing. Errors: NOT_FOUND.
func (b *Broadcasts) Cancel(ctx context.Context, tenant, id string) (inbox.Broadcast, error) {
	return b.o.Store.CancelBroadcast(ctx, tenant, id)
}

// Handle runs one task of kind inbox.TaskBroadcast: a bounded slice of its shard's
// pages (see the file comment), then the continuation task or, after the shard's last
// page, the broadcast's end when every shard is done. It is idempotent: any number of
// runs of a shard, concurrent or after crashes, write each recipient once and count it
// once. An error (a storage failure) has the scheduler run the task again later.
func (b *Broadcasts) Handle(ctx context.Context, t inbox.Task) error {
	tenant, id := t.Viewer.TenantID, t.Ref
	shard, err := strconv.Atoi(t.Token)
	if err != nil {
		b.o.Logger.WarnContext(ctx, "broadcast: a task without a shard; dropped", "task", t.ID, "token", t.Token)
		return nil
	}
	log := b.o.Logger.With("broadcast", id, "tenant", tenant, "shard", shard)
	deadline := b.o.Now().Add(b.o.RunFor)
	var in inbox.SendInput
	var render RenderFunc
	for pages := 0; ; {
		bc, err := b.o.Store.GetBroadcast(ctx, tenant, id)
		if inbox.ErrorCode(err) == inbox.CodeNotFound {
			log.WarnContext(ctx, "broadcast: task of an unknown broadcast; dropped")
			return nil
		}
		if err != nil {
			return err
		}
		if pages == 0 {
			var br broadcastRequest
			if err := json.Unmarshal(bc.Request, &br); err != nil {
				return fmt.Errorf("broadcast %s: decode its request: %w", id, err)
			}
			in = br.Send
			if br.Template != "" {
				if b.o.Templates == nil {
					return fmt.Errorf("broadcast %s: templated, and no Templates configured", id)
				}
				tpl, ver, data := br.Template, br.TemplateVersion, br.Data
				render = renderHook(b.o.Templates, tenant, tpl, ver, data)
			}
		}
		if bc.Status == inbox.BroadcastCancelled {
			// A page fixed before the cancel may be partly written (a run that died in
			// it): it is completed and counted, so written stays the number of
			// recipients notified. Nothing after it is written.
			return b.settlePending(ctx, tenant, bc, shard, in, render)
		}
		if bc.Status != inbox.BroadcastQueued && bc.Status != inbox.BroadcastRunning {
			return nil // done or failed: nothing more to write
		}
		if pages == 0 && bc.Status == inbox.BroadcastQueued {
			if _, err := b.o.Store.MarkBroadcastRunning(ctx, tenant, id); err != nil {
				return err
			}
		}
		sh, err := b.o.Store.BroadcastShardState(ctx, tenant, id, shard)
		if err != nil {
			return err
		}
		if sh.Done {
			return b.finish(ctx, tenant, id)
		}
		if pages >= b.o.PagesPerRun || !b.o.Now().Before(deadline) {
			return b.o.Store.Schedule(ctx, inbox.BroadcastTask(tenant, id, shard, sh.Page, b.o.Now()))
		}
		if sh.Pending == nil {
			ok, err := b.fixPage(ctx, tenant, bc, shard, &sh)
			if err != nil {
				return err
			}
			if !ok {
				continue // another run moved the shard: read it again
			}
		}
		var c inbox.BroadcastCounts
		if len(sh.Pending) > 0 {
			if c, err = b.writePage(ctx, tenant, bc, shard, sh, in, render); err != nil {
				return err
			}
		}
		ok, err := b.o.Store.CheckpointBroadcast(ctx, tenant, id, shard, sh.Page, sh.PendingEnd, sh.PendingLast, c)
		if err != nil {
			return err
		}
		pages++
		if ok && sh.PendingLast {
			return b.finish(ctx, tenant, id)
		}
	}
}

// settlePending completes and checkpoints shard's pending page of cancelled broadcast
// bc, if it has one (writing it again is idempotent: its recipients' guards).
func (b *Broadcasts) settlePending(ctx context.Context, tenant string, bc inbox.Broadcast, shard int, in inbox.SendInput, render RenderFunc) error {
	sh, err := b.o.Store.BroadcastShardState(ctx, tenant, bc.ID, shard)
	if err != nil || sh.Done || sh.Pending == nil {
		return err
	}
	var c inbox.BroadcastCounts
	if len(sh.Pending) > 0 {
		if c, err = b.writePage(ctx, tenant, bc, shard, sh, in, render); err != nil {
			return err
		}
	}
	_, err = b.o.Store.CheckpointBroadcast(ctx, tenant, bc.ID, shard, sh.Page, sh.PendingEnd, sh.PendingLast, c)
	return err
}

// fixPage reads shard's next page (its list, or one Query of the segment's shard from
// the cursor) and fixes it as the shard's pending page (sh gets it). An empty page is
// fixed too, as the last one with no recipients. It reports false when another run
// fixed or finished the page first.
func (b *Broadcasts) fixPage(ctx context.Context, tenant string, bc inbox.Broadcast, shard int, sh *inbox.BroadcastShard) (bool, error) {
	var members []string
	last := true
	switch {
	case bc.Segment == "":
		if sh.Page == 0 {
			members = sh.List
		}
	default:
		var more bool
		var err error
		members, more, err = b.o.Store.SegmentShardPage(ctx, tenant, bc.Segment, shard, sh.Cursor, b.o.Store.BroadcastPage())
		if err != nil {
			return false, err
		}
		last = !more
	}
	end := sh.Cursor
	if len(members) > 0 {
		end = members[len(members)-1]
	}
	if members == nil {
		members = []string{}
	}
	ok, err := b.o.Store.SetBroadcastPending(ctx, tenant, bc.ID, shard, sh.Page, members, end, last)
	if err != nil || !ok {
		return false, err
	}
	sh.Pending, sh.PendingEnd, sh.PendingLast = members, end, last
	return true, nil
}

// pageKey is the idempotency key of page page of shard of broadcast id.
func pageKey(id string, shard, page int) string {
	return fmt.Sprintf("%s:%02d:%d", id, shard, page)
}

// writePage sends sh's pending page in the broadcast's lane and returns its counts:
// written = the recipients with a notification (Accepted; a redone page finds its
// earlier ones by their guards), skipped = the others (their preferences kept it out),
// failed = all of them when the send refuses the request (BAD_USER_INPUT, e.g. an
// expiresAt that has passed since the start). Other errors are returned (retried).
func (b *Broadcasts) writePage(ctx context.Context, tenant string, bc inbox.Broadcast, shard int, sh inbox.BroadcastShard, in inbox.SendInput, render RenderFunc) (inbox.BroadcastCounts, error) {
	in.IdempotencyKey = pageKey(bc.ID, shard, sh.Page)
	in.Recipients = sh.Pending
	var res inbox.SendResult
	work := func(ctx context.Context) error {
		var err error
		res, err = b.o.Send(ctx, tenant, in, render)
		return err
	}
	var err error
	if b.o.Lane != nil {
		err = b.o.Lane(ctx, bc.Lane, work)
	} else {
		err = work(ctx)
	}
	var ie *inbox.Error
	switch {
	case err == nil:
		return inbox.BroadcastCounts{Written: res.Accepted, Skipped: len(sh.Pending) - res.Accepted}, nil
	case errors.As(err, &ie) && ie.Code == inbox.CodeBadUserInput:
		b.o.Logger.WarnContext(ctx, "broadcast: a page was refused; its recipients count as failed",
			"broadcast", bc.ID, "shard", shard, "page", sh.Page, "recipients", len(sh.Pending), "err", err)
		return inbox.BroadcastCounts{Failed: len(sh.Pending)}, nil
	}
	return inbox.BroadcastCounts{}, err
}

// finish ends broadcast id once every shard is done: done, or failed when every
// recipient failed. Until then (other shards still running) it does nothing.
func (b *Broadcasts) finish(ctx context.Context, tenant, id string) error {
	bc, err := b.o.Store.GetBroadcast(ctx, tenant, id)
	if err != nil {
		return err
	}
	if bc.ShardsDone < bc.Shards || (bc.Status != inbox.BroadcastQueued && bc.Status != inbox.BroadcastRunning) {
		return nil
	}
	status := inbox.BroadcastDone
	if bc.Failed > 0 && bc.Written == 0 && bc.Skipped == 0 {
		status = inbox.BroadcastFailed
	}
	_, err = b.o.Store.FinishBroadcast(ctx, tenant, id, status)
	return err
}
