package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Batches is what the service needs of the store for batched sends (*store.Store has
// it): a recipient's join (with the send's guard, in one transaction) and the close's
// freeze of the batch.
type Batches interface {
	JoinBatch(ctx context.Context, j inbox.BatchJoin) (inbox.BatchJoined, error)
	FreezeBatch(ctx context.Context, v inbox.Viewer, ref, id string) (inbox.FrozenBatch, bool, error)
	AbandonBatch(ctx context.Context, v inbox.Viewer, ref, id string) (bool, error)
}

// batchCloseKeyPrefix starts the store idempotency key of a batch's close ("batch~" and
// the batch's notification id): its guard makes the close write once.
const batchCloseKeyPrefix = "batch~"

// batchDoc is what a batch keeps of its first send for its close.
type batchDoc struct {
	Request         SendRequest `json:"request"`
	TemplateVersion int         `json:"templateVersion,omitempty"`
}

// maxJoinAttempts bounds the closes a join runs before it gives up with THROTTLED (a
// batch that fills again at once each time it is closed).
const maxJoinAttempts = 4

// joinBatches processes a batched request: each recipient (but the actor left out, see
// leaveOut) joins their batch of (type, batch key), opening it when none is open; the
// answer names each batch's notification id. A join that fills its batch (maxItems)
// closes it at once; the others close at the end of their window (TaskBatch).
func (s *Service) joinBatches(ctx context.Context, tenant string, doc *document) (Result, error) {
	r := doc.Request
	h := hash(r)
	if r.Actor != nil {
		if err := s.st.UpsertActor(ctx, tenant, r.Actor); err != nil {
			return Result{}, err
		}
	}
	if r.Target != nil {
		if err := s.st.UpsertTarget(ctx, tenant, r.Target); err != nil {
			return Result{}, err
		}
	}
	kept := r
	kept.Recipients, kept.IdempotencyKey = nil, ""
	// Not HTML-escaped: a '<' would take six bytes of the store's bound on the document.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(batchDoc{Request: kept, TemplateVersion: doc.TemplateVersion}); err != nil {
		return Result{}, err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	act := batchActivity(r, s.o.Now())
	ref := routing.BatchRef(r.Type, r.Batch.Key)
	skip := leaveOut(r)
	ids := make([]string, len(r.Recipients))
	dups := make([]bool, len(r.Recipients))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(positiveOr(s.o.WriteConcurrency, DefaultWriteConcurrency))
	for i, u := range r.Recipients {
		if u == skip {
			continue
		}
		g.Go(func() error {
			j := inbox.BatchJoin{TenantID: tenant, UserID: u, IdempotencyKey: r.IdempotencyKey, InputHash: h, Ref: ref,
				Batch: *r.Batch, Activity: act, Doc: body}
			for try := 1; ; try++ {
				out, err := s.batches.JoinBatch(gctx, j)
				var closing *inbox.BatchClosing
				if errors.As(err, &closing) && try < maxJoinAttempts {
					if err := s.closeBatch(gctx, tenant, u, closing.Ref, closing.ID); err != nil {
						return err
					}
					continue
				}
				if closing != nil {
					// The batch filled or began closing again at each attempt: contention,
					// answered as such (a retry with the same key joins once).
					return inbox.Errorf(inbox.CodeThrottled, "too many concurrent sends to this batch; retry shortly")
				}
				if err != nil {
					return fmt.Errorf("join a batch: %w", err)
				}
				ids[i], dups[i] = out.ID, out.Duplicate
				if out.Full {
					return s.closeBatch(gctx, tenant, u, ref, out.ID)
				}
				return nil
			}
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	res := Result{Duplicate: true}
	for i, id := range ids {
		if id != "" {
			res.NotificationIDs = append(res.NotificationIDs, id)
			res.Duplicate = res.Duplicate && dups[i]
		}
	}
	res.Accepted = len(res.NotificationIDs)
	return res, nil
}

// batchActivity is what send r adds to its batches at time at: its actor, and its data
// (the template's variables, else its payload).
func batchActivity(r SendRequest, at time.Time) inbox.Activity {
	act := inbox.Activity{CreatedAt: at.UTC(), Data: r.Data}
	if len(act.Data) == 0 {
		act.Data = r.Payload
	}
	if r.Actor != nil {
		act.ActorID, act.ActorName = r.Actor.ActorID, r.Actor.Name
	}
	return act
}

// closeBatch closes user's batch ref whose notification is id, once: it freezes the batch
// (no send joins it any more) and writes its ONE notification through the send loop,
// routed as any send, with the batch's activity count and first activities (templates
// see them as `activities` and `total_activities`), under the store idempotency key
// "batch~{id}", whose transaction also marks the batch closed. A batch closed already (a
// second close, a late task) is left alone; one whose notification can never be written
// (BAD_USER_INPUT) is abandoned: closed with no notification, its status skipped with
// inbox.ReasonBatchAbandoned.
func (s *Service) closeBatch(ctx context.Context, tenant, user, ref, id string) error {
	fb, ok, err := s.batches.FreezeBatch(ctx, inbox.Viewer{TenantID: tenant, UserID: user}, ref, id)
	if err != nil || !ok {
		return err
	}
	var bd batchDoc
	if err := json.Unmarshal(fb.Doc, &bd); err != nil {
		return fmt.Errorf("decode batch document: %w", err)
	}
	r := bd.Request
	in := s.Input(tenant, r, bd.TemplateVersion)
	in.IdempotencyKey = batchCloseKeyPrefix + id
	in.Recipients = []string{user}
	in.NotificationIDs = map[string]string{user: id}
	in.LeaveOut = ""
	in.BatchClose = &inbox.BatchClose{Ref: ref, ID: id, Count: fb.Count, Activities: fb.Activities}
	var render RenderFunc
	if r.Template != "" && s.o.Templates != nil {
		data, err := routing.BatchData(r.Data, fb.Activities, fb.Count)
		if err != nil {
			return fmt.Errorf("batch template data: %w", err)
		}
		render = renderHook(s.o.Templates, tenant, r.Template, bd.TemplateVersion, data)
		in.RenderKey += "@" + strconv.Itoa(fb.Count)
	}
	_, err = s.w.Write(ctx, tenant, in, render)
	if inbox.ErrorCode(err) == inbox.CodeBadUserInput {
		// It will never pass (e.g. its expiresAt passed, its template is gone): the batch
		// closes without a notification rather than block the recipient's next ones.
		s.o.Logger.WarnContext(ctx, "batch: its close can never be written; abandoned", "tenant", tenant, "batch", id, "err", err)
		_, aerr := s.batches.AbandonBatch(ctx, inbox.Viewer{TenantID: tenant, UserID: user}, ref, id)
		return aerr
	}
	return err
}

// BatchHandler runs TaskBatch tasks: the close of a batch at the end of its window (see
// closeBatch; a batch closed already is left alone).
func (s *Service) BatchHandler() func(ctx context.Context, t inbox.Task) error {
	return func(ctx context.Context, t inbox.Task) error {
		return s.closeBatch(ctx, t.Viewer.TenantID, t.Viewer.UserID, t.Ref, t.Token)
	}
}
