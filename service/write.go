package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Writes is what the send loop needs of the store (*store.Store has it): the guards of
// a key, the profiles of actor and target, one read of a chunk of recipients and one
// transaction per recipient's plan.
type Writes interface {
	// CheckSend checks a send as the store would write it (BAD_USER_INPUT).
	CheckSend(in inbox.SendInput) error
	// Guards returns what the sends of key wrote so far, by recipient.
	Guards(ctx context.Context, tenantID, key string) (map[string]routing.Guard, error)
	UpsertActor(ctx context.Context, tenantID string, a *inbox.Actor) error
	UpsertTarget(ctx context.Context, tenantID string, t *inbox.Target) error
	// ReadRecipients reads what need names of users, and the tenant's configuration.
	ReadRecipients(ctx context.Context, tenantID string, users []string, need routing.Need) (routing.Read, error)
	// WriteRecipient writes one recipient's plan in one transaction.
	WriteRecipient(ctx context.Context, p routing.Plan) (routing.Written, error)
}

// RenderFunc renders a templated send's content (title, body, channel parts and the
// channels its template defines) for one locale ("" = the template's default).
type RenderFunc func(ctx context.Context, locale string) (inbox.Rendered, error)

// DefaultWriteConcurrency is how many recipients of one send a Writer writes at once
// unless Writer.Concurrency says otherwise.
const DefaultWriteConcurrency = 8

// Writer is the send loop over a store: it writes one send (at most
// inbox.MaxRecipients recipients; a chunk of a request, a page of a broadcast, an
// importer's notification) idempotently, and publishes what each recipient's
// transaction committed. The Service processes requests with one; tools, benches and
// tests that write notifications directly use one too.
type Writer struct {
	// Store reads and writes (required).
	Store Writes
	// Publisher hears of every recipient written (nil: nobody).
	Publisher inbox.Publisher
	// Concurrency is how many recipients are written at once (default
	// DefaultWriteConcurrency).
	Concurrency int
	// Written, when set, is told of each Write that succeeded: its tenant, its recipients
	// (deduplicated, in order) and its result (StatusIDs name each recipient's status).
	// Dev mode's mail page lists the recent ones with their channels' outcomes. It runs
	// in the caller's goroutine and must not block.
	Written func(tenantID string, recipients []string, res inbox.SendResult)
}

// Send writes in (no template: its own title and body), as Write with no render; it
// makes a Writer an inbox.Sender.
func (w Writer) Send(ctx context.Context, tenantID string, in inbox.SendInput) (inbox.SendResult, error) {
	return w.Write(ctx, tenantID, in, nil)
}

// Write fans in out to its recipients of tenantID (AP8), idempotently.
//
// The guards of in.IdempotencyKey are read first (one Query): recipients that have one
// are not written again, so a replay after a complete send writes nothing and returns
// the first result with Duplicate set, and a replay after a send that failed part-way
// completes the remaining recipients and duplicates none. A key reused with different
// content is refused. Actor and target are upserted as profiles before any notification,
// by the first call of a key only (one that finds no guard).
//
// What the decisions and the writes need of the remaining recipients (their preferences,
// profiles and devices, their group, the tenant's settings) is read in ONE call
// (Writes.ReadRecipients), so a templated send reads each recipient's items once. With
// render (a template): each recipient's locale is routing.Locale's (their preferences'
// locale, else their channel profile's, else in.Locale, else the tenant's default), render
// runs once per distinct locale, and each recipient's notification carries its locale's
// title, body and channel parts; the template's channels are those of any locale rendered
// (unless in.TemplateChannels names them). Each recipient's channels are then decided
// (routing.Decide, at the read's time) and their plan written in one transaction
// (Writes.WriteRecipient), a bounded number of recipients at a time. Recipients whose
// in-app is skipped get a guard and status records and no notification, and are not
// counted in Accepted; SendResult.Skipped counts every skip this call wrote.
//
// Publishing follows each commit: a new notification as an ADDED change; a recipient
// found already written (a replay, or a transaction whose answer was lost) and a failed
// write (it may have committed) as a re-read hint, since the call that wrote it may have
// lost its answer before publishing.
//
// Errors: BAD_USER_INPUT for invalid input (Writes.CheckSend) or a reused key; render's
// error; the first write error of a recipient otherwise (recipients written before it
// stay written, and a replay completes the rest).
func (w Writer) Write(ctx context.Context, tenantID string, in inbox.SendInput, render RenderFunc) (inbox.SendResult, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.SendResult{}, err
	}
	if err := w.Store.CheckSend(in); err != nil {
		return inbox.SendResult{}, err
	}
	in.Payload = compactPayload(in.Payload)
	recipients := make([]string, 0, len(in.Recipients))
	for _, r := range in.Recipients {
		if !slices.Contains(recipients, r) {
			recipients = append(recipients, r)
		}
	}
	hash := inputHash(in, recipients)

	guards, err := w.Store.Guards(ctx, tenantID, in.IdempotencyKey)
	if err != nil {
		return inbox.SendResult{}, err
	}
	var pending []string
	for _, r := range recipients {
		g, ok := guards[r]
		if ok && g.InputHash != hash {
			return inbox.SendResult{}, inbox.Errorf(inbox.CodeBadUserInput,
				"idempotencyKey was already used for a different notification")
		}
		if !ok {
			pending = append(pending, r)
		}
	}
	for _, g := range guards {
		if g.InputHash != hash {
			return inbox.SendResult{}, inbox.Errorf(inbox.CodeBadUserInput,
				"idempotencyKey was already used for a different notification")
		}
	}
	deliveries := make(map[string]inbox.Delivery, len(recipients))
	for r, g := range guards {
		if g.NotificationID != "" {
			deliveries[r] = inbox.Delivery{UserID: r, Notification: &inbox.Notification{ID: g.NotificationID}}
		}
	}
	for r, g := range guards {
		if g.NotificationID != "" && !slices.Contains(pending, r) {
			// A replay: the first send may have committed this recipient's notification
			// and lost its answer before publishing. Subscribers re-read the badge.
			w.publish(ctx, inbox.Change{Viewer: inbox.Viewer{TenantID: tenantID, UserID: r}})
		}
	}
	// Actor and target are upserted before any guard is written, so a key with guards
	// (a replay) has written them already: a replay writes nothing the first send wrote.
	// A batch's close names profiles its joins upserted already. The upserts and the
	// recipients' read touch different items (profiles under ACTOR# and TARGET#, the
	// recipients' items under their user), so they run at once: the send's first
	// recipient waits for one round trip of the three, not three in turn.
	var read routing.Read
	rg, rctx := errgroup.WithContext(ctx)
	if len(pending) > 0 && len(guards) == 0 && in.BatchClose == nil {
		if in.Actor != nil {
			rg.Go(func() error { return w.Store.UpsertActor(rctx, tenantID, in.Actor) })
		}
		if in.Target != nil {
			rg.Go(func() error { return w.Store.UpsertTarget(rctx, tenantID, in.Target) })
		}
	}
	if len(pending) > 0 {
		category, templated := in.Category, render != nil
		rg.Go(func() error {
			var err error
			read, err = w.Store.ReadRecipients(rctx, tenantID, pending, routing.Need{
				// A template's locale comes from the preferences, critical or not.
				Prefs:    func(t routing.Tenant) bool { return templated || !t.Critical(category) },
				Profile:  templated || routing.NeedsProfile(in),
				GroupKey: routing.GroupKey(in),
			})
			return err
		})
	}
	if err := rg.Wait(); err != nil {
		return inbox.SendResult{}, err
	}
	var content map[string]inbox.Rendered
	if len(pending) > 0 && render != nil {
		if content, err = renderByLocale(ctx, pending, in, read, render); err != nil {
			return inbox.SendResult{}, err
		}
	}
	if render != nil && in.TemplateChannels == nil {
		// The template's channels: those of any locale rendered.
		in.TemplateChannels = routing.TemplateChannels(content)
	}
	skipped := inbox.SkipCounts{}
	statusIDs := make(map[string]string, len(recipients))
	for r, g := range guards {
		if g.NotificationID != "" {
			statusIDs[r] = g.NotificationID
		} else if g.StatusID != "" {
			statusIDs[r] = g.StatusID
		}
	}
	if len(pending) > 0 {
		plans := make([]routing.Plan, len(pending))
		for i, r := range pending {
			p := routing.Plan{TenantID: tenantID, UserID: r, Send: in, InputHash: hash, NotificationID: in.NotificationIDs[r],
				Decisions: routing.Decide(in, read.Tenant, read.Recipients[r], read.At), Retention: read.Tenant.Retention}
			if c, ok := content[r]; ok {
				p.Send.Title, p.Send.Body = c.Title, c.Body
				p.Content = &c
			}
			if g, ok := read.Groups[r]; ok && routing.InApp(p.Decisions).Queued() {
				p.Group = &g
			}
			if in.Throttle != nil && routing.Counts(p.Decisions) {
				slot := routing.ThrottleSlot(*in.Throttle, read.At)
				p.Throttle = &slot
			}
			plans[i] = p
		}
		results := make([]routing.Written, len(pending))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(positiveOr(w.Concurrency, DefaultWriteConcurrency))
		for i := range plans {
			g.Go(func() error {
				v := inbox.Viewer{TenantID: tenantID, UserID: plans[i].UserID}
				out, err := w.Store.WriteRecipient(gctx, plans[i])
				if errors.Is(err, routing.ErrThrottled) {
					// The window was full when the transaction ran (nothing written): the
					// recipient's guard and status records, every channel throttled.
					p := plans[i]
					p.Decisions, p.Throttle, p.Group = routing.Throttled(p.Decisions), nil, nil
					plans[i] = p
					out, err = w.Store.WriteRecipient(gctx, p)
				}
				results[i] = out
				switch d := out.Delivery; {
				case err != nil:
					// A transaction may have committed with its answer lost: subscribers re-read.
					w.publish(ctx, inbox.Change{Viewer: v})
					return fmt.Errorf("send to a recipient: %w", err)
				case d.New:
					w.publish(ctx, inbox.Change{Viewer: v, Notification: d.Notification, Kind: inbox.EventAdded, IDs: []string{d.Notification.ID}})
				case d.Notification != nil:
					// The guard was there: another call with this key, or this call's own commit
					// whose answer was lost (and so never published). Subscribers re-read the badge.
					w.publish(ctx, inbox.Change{Viewer: v})
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return inbox.SendResult{}, err
		}
		for i, r := range pending {
			if results[i].Delivery.Notification != nil {
				deliveries[r] = results[i].Delivery
			}
			if results[i].StatusID != "" {
				statusIDs[r] = results[i].StatusID
			}
			if results[i].Wrote {
				for _, d := range plans[i].Decisions {
					if d.Reason != "" {
						skipped.Add(d.Channel, d.Reason)
					}
				}
			}
		}
	}
	res := inbox.SendResult{Duplicate: len(pending) == 0, Skipped: skipped, StatusIDs: statusIDs}
	for _, r := range recipients {
		if d, ok := deliveries[r]; ok {
			res.NotificationIDs = append(res.NotificationIDs, d.Notification.ID)
			res.Delivered = append(res.Delivered, d)
		}
	}
	res.Accepted = len(res.NotificationIDs)
	if w.Written != nil {
		w.Written(tenantID, recipients, res)
	}
	return res, nil
}

// publish hands c to the publisher, if any.
func (w Writer) publish(ctx context.Context, c inbox.Change) {
	if w.Publisher != nil {
		w.Publisher.Publish(ctx, c)
	}
}

// positiveOr is n when positive, else def.
func positiveOr(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// renderByLocale renders in's content for each of users with render, once per distinct
// locale: a user's locale is routing.Locale's (their preferences' locale, else their
// channel profile's, else in.Locale, else the tenant's default preferences' locale; ""
// leaves the choice to the template), from what read found.
func renderByLocale(ctx context.Context, users []string, in inbox.SendInput, read routing.Read, render RenderFunc) (map[string]inbox.Rendered, error) {
	tenantLocale := read.Tenant.Prefs.Locale
	byLocale := map[string]inbox.Rendered{}
	out := make(map[string]inbox.Rendered, len(users))
	for _, u := range users {
		rc := read.Recipients[u]
		loc := routing.Locale(rc.Own.Locale, rc.Profile.Locale, in.Locale, tenantLocale)
		r, ok := byLocale[loc]
		if !ok {
			var err error
			if r, err = render(ctx, loc); err != nil {
				return nil, err
			}
			byLocale[loc] = r
		}
		out[u] = r
	}
	return out, nil
}

// inputHash identifies a send's content, so a reused key with other content is caught.
// It is the hash the store's send kept in its guards before the loop moved here, byte
// for byte: a replay of a send written then is the same content.
func inputHash(in inbox.SendInput, recipients []string) string {
	sorted := slices.Sorted(slices.Values(recipients))
	// The v2 fields are omitted when empty, so a send without them hashes as before.
	var exp int64
	if !in.ExpiresAt.IsZero() {
		exp = in.ExpiresAt.UnixMilli()
	}
	b, _ := json.Marshal(struct {
		Recipients                  []string
		Type, Category, Title, Body string
		Actor                       *inbox.Actor
		Target                      *inbox.Target
		Payload                     json.RawMessage
		ExpiresAt                   int64           `json:",omitempty"`
		GroupKey                    string          `json:",omitempty"`
		Actions                     []inbox.Action  `json:",omitempty"`
		TemplateChannels            []string        `json:",omitempty"`
		Channels                    []string        `json:",omitempty"`
		Locale                      string          `json:",omitempty"`
		RenderKey                   string          `json:",omitempty"`
		Throttle                    *inbox.Throttle `json:",omitempty"`
	}{sorted, in.Type, in.Category, in.Title, in.Body, in.Actor, in.Target, json.RawMessage(in.Payload), exp, in.GroupKey, in.Actions,
		in.TemplateChannels, in.Channels, in.Locale, in.RenderKey, in.Throttle})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// compactPayload returns p compacted (nil for JSON null); p is valid JSON (CheckSend).
func compactPayload(p inbox.JSON) inbox.JSON {
	if len(p) == 0 {
		return p
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, p); err != nil || buf.String() == "null" {
		return nil
	}
	return buf.Bytes()
}
