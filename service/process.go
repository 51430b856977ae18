package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/telemetry"
)

// Result is what processing a request wrote.
type Result struct {
	// NotificationIDs are the notifications written or found written, one per recipient
	// whose preferences let it into their inbox, in recipient order.
	NotificationIDs []string `json:"notificationIds"`
	// Accepted is len(NotificationIDs).
	Accepted int `json:"accepted"`
	// Duplicate is true when every recipient had been written before (a replay).
	Duplicate bool `json:"duplicate"`
	// BroadcastID is the broadcast a segment send started.
	BroadcastID string `json:"broadcastId,omitempty"`
	// Error is why a request was given up (its content became invalid before it ran,
	// e.g. an expiresAt passed while it waited for sendAt).
	Error string `json:"error,omitempty"`
}

// Sent is the answer of Send: the accept's, and the processing's when Send waited.
type Sent struct {
	Accepted
	// Processed is true when Result is the processing's outcome.
	Processed bool
	Result    Result
}

// processTimeout bounds one processing run of a request.
const processTimeout = 5 * time.Minute

// run is one processing of a request in this process.
type run struct {
	done chan struct{}
	res  Result
	err  error
}

// errNotQueued is a run that found no room in its lane (its recovery task runs it).
var errNotQueued = inbox.Errorf(inbox.CodeThrottled, "the send lane is full; the request is accepted and runs shortly")

// Send accepts r (Accept) and, for a transactional send to recipients without sendAt
// (on a service that is not AcceptOnly), processes it in its lane, waits, and returns
// the outcome (as GraphQL's sendNotification answers). A replay of a request already processed answers its stored outcome with
// Duplicate set. When processing fails the request stays accepted (its recovery task
// runs it again) and the error is returned.
func (s *Service) Send(ctx context.Context, tenant string, r SendRequest) (Sent, error) {
	a, stored, err := s.accept(ctx, tenant, r, true)
	if err != nil {
		return Sent{}, err
	}
	out := Sent{Accepted: a}
	if s.o.AcceptOnly || a.Priority != Transactional || !a.SendAt.IsZero() || a.BroadcastID != "" {
		return out, nil
	}
	if stored.State == inbox.RequestDone {
		var res Result
		if err := json.Unmarshal(stored.Result, &res); err != nil {
			return Sent{}, fmt.Errorf("decode send result: %w", err)
		}
		if res.Error != "" {
			return Sent{}, inbox.Errorf(inbox.CodeBadUserInput, "%s", res.Error)
		}
		res.Duplicate = true
		out.Processed, out.Result = true, res
		return out, nil
	}
	var doc document
	if err := json.Unmarshal(stored.Body, &doc); err != nil {
		return Sent{}, fmt.Errorf("decode send request: %w", err)
	}
	doc.Request.IdempotencyKey = stored.Key
	ru := s.start(ctx, tenant, stored.Key, &doc, true)
	select {
	case <-ru.done:
	case <-ctx.Done():
		return Sent{}, ctx.Err()
	}
	if ru.err != nil {
		return Sent{}, ru.err
	}
	out.Processed, out.Result = true, ru.res
	return out, nil
}

// Handler runs TaskSend tasks: a request not done yet is processed (in its lane), one
// done, expired or superseded (another body under the key since) is left alone. A
// request already running in this process is checked again later.
func (s *Service) Handler() func(ctx context.Context, t inbox.Task) error {
	return func(ctx context.Context, t inbox.Task) error {
		tenant, key := t.Viewer.TenantID, t.Ref
		req, ok, err := s.st.GetRequest(ctx, tenant, key)
		if err != nil {
			return err
		}
		if !ok || req.State == inbox.RequestDone || req.Hash != t.Token {
			return nil
		}
		var doc document
		if err := json.Unmarshal(req.Body, &doc); err != nil {
			return fmt.Errorf("decode send request: %w", err)
		}
		doc.Request.IdempotencyKey = key
		s.mu.Lock()
		_, busy := s.inflight[tenant+"\x00"+key]
		s.mu.Unlock()
		if busy {
			// Running here: look again later, in case this process dies.
			nt := t
			nt.Due, nt.Attempts = s.o.Now().Add(s.o.RecoveryDelay).Truncate(time.Millisecond), 0
			return s.st.Schedule(ctx, nt)
		}
		ru := s.start(ctx, tenant, key, &doc, true)
		select {
		case <-ru.done:
			return ru.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// start processes doc in its lane unless it is running in this process already, and
// returns the run to wait for. wait says whether to wait for room in the lane (until
// ctx ends).
func (s *Service) start(ctx context.Context, tenant, key string, doc *document, wait bool) *run {
	id := tenant + "\x00" + key
	s.mu.Lock()
	if ru, ok := s.inflight[id]; ok {
		s.mu.Unlock()
		return ru
	}
	ru := &run{done: make(chan struct{})}
	select {
	case <-s.closed:
		s.mu.Unlock()
		ru.err = errNotQueued
		close(ru.done)
		return ru
	default:
	}
	s.inflight[id] = ru
	s.wg.Add(1)
	s.mu.Unlock()
	finish := func(res Result, err error) {
		s.mu.Lock()
		delete(s.inflight, id)
		s.mu.Unlock()
		ru.res, ru.err = res, err
		close(ru.done)
		s.wg.Done()
	}
	job := func() {
		// Not the request's deadline (the 202 may be answered already) but its trace:
		// the lane's work is a span of the send's trace.
		pctx, cancel := context.WithTimeout(telemetry.Detach(ctx), processTimeout)
		defer cancel()
		pctx, span := telemetry.StartInternal(pctx, "send process", attribute.String("inbox.lane", string(doc.Request.Priority)))
		defer span.End()
		res, err := s.process(pctx, tenant, doc)
		if err != nil {
			span.RecordError(err)
			s.o.Logger.WarnContext(pctx, "send: processing failed; its recovery task retries", "tenant", tenant, "key", key, "err", err)
		}
		finish(res, err)
	}
	if !s.lanes[doc.Request.Priority].submit(ctx, job, wait, func() { finish(Result{}, errNotQueued) }) {
		finish(Result{}, errNotQueued)
	}
	return ru
}

// process writes doc's notifications (chunks of inbox.MaxRecipients through the store,
// with the pre-assigned ids) or starts its broadcast, then marks the request done and
// drops its recovery task.
func (s *Service) process(ctx context.Context, tenant string, doc *document) (Result, error) {
	r := doc.Request
	task := inbox.Task{ID: taskID(tenant, r.IdempotencyKey), Due: doc.TaskDue}
	var res Result
	if r.Segment != "" {
		// The broadcast renders through its own Templates, after a restart too.
		in := s.Input(tenant, r, doc.TemplateVersion)
		id, err := s.o.Broadcaster.Start(ctx, tenant, BroadcastSpec{Segment: r.Segment, IdempotencyKey: r.IdempotencyKey,
			ID: SendBroadcastID(r.IdempotencyKey), Send: in, Lane: string(r.Priority), Template: r.Template,
			TemplateVersion: doc.TemplateVersion, Data: r.Data, SendAt: r.SendAt})
		switch code := inbox.ErrorCode(err); {
		case code == inbox.CodeBadUserInput || code == inbox.CodeConflict:
			// It will never pass (e.g. the key's broadcast was started with another body
			// by a request whose key has expired since): give the request up, with the
			// reason, rather than retry it until the scheduler drops it.
			res = Result{Error: inbox.ErrorMessage(err)}
		case err != nil:
			return Result{}, err
		default:
			res.BroadcastID = id
		}
	} else if r.Batch != nil {
		var err error
		res, err = s.joinBatches(ctx, tenant, doc)
		switch {
		case inbox.ErrorCode(err) == inbox.CodeBadUserInput:
			// It will never pass (e.g. its document is over the store's bound): give
			// the request up, with the reason, rather than retry it for ever.
			res = Result{Error: inbox.ErrorMessage(err)}
		case err != nil:
			return Result{}, err
		}
	} else {
		res.Duplicate = true
		size := s.o.Chunk
		chunks := (len(r.Recipients) + size - 1) / size
		render := s.render(tenant, r, doc.TemplateVersion)
		for c := range chunks {
			lo, hi := c*size, min((c+1)*size, len(r.Recipients))
			in := s.Input(tenant, r, doc.TemplateVersion)
			in.IdempotencyKey = chunkKey(r.IdempotencyKey, c, chunks)
			in.Recipients = r.Recipients[lo:hi]
			in.NotificationIDs = make(map[string]string, hi-lo)
			for i := lo; i < hi; i++ {
				in.NotificationIDs[r.Recipients[i]] = doc.Answer.NotificationIDs[i]
			}
			out, err := s.w.Write(ctx, tenant, in, render)
			if inbox.ErrorCode(err) == inbox.CodeBadUserInput {
				// It will never pass: give the request up, with the reason.
				res = Result{Error: inbox.ErrorMessage(err)}
				break
			}
			if err != nil {
				return Result{}, err
			}
			res.NotificationIDs = append(res.NotificationIDs, out.NotificationIDs...)
			res.Duplicate = res.Duplicate && out.Duplicate
		}
		res.Accepted = len(res.NotificationIDs)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return Result{}, err
	}
	if err := s.st.CompleteRequest(ctx, tenant, r.IdempotencyKey, b, task); err != nil {
		return Result{}, err
	}
	if res.Error != "" {
		return res, inbox.Errorf(inbox.CodeBadUserInput, "%s", res.Error)
	}
	return res, nil
}

// chunkKey is the store's idempotency key of chunk c of n of a request under key: the
// key itself for a single chunk (as a send before the service wrote it), else one
// derived per chunk, so each chunk's guards hold its own content hash.
func chunkKey(key string, c, n int) string {
	if n == 1 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "chunk~" + hex.EncodeToString(sum[:16]) + "~" + strconv.Itoa(c)
}

// Input returns the send's input for r's content (no recipients; the key is r's), with
// the render key of its template at version when it names one (see render). The
// broadcasts piece writes its pages with it.
func (s *Service) Input(tenant string, r SendRequest, version int) inbox.SendInput {
	in := inbox.SendInput{IdempotencyKey: r.IdempotencyKey, Type: r.Type, Category: r.Category, Title: r.Title,
		Body: r.Body, Actor: r.Actor, Target: r.Target, Payload: r.Payload, ExpiresAt: r.ExpiresAt,
		GroupKey: r.GroupKey, Actions: r.Actions, Channels: r.Channels, Locale: r.Locale, LeaveOut: leaveOut(r), Throttle: r.Throttle}
	if r.Template != "" && s.o.Templates != nil {
		sum := sha256.Sum256(r.Data)
		in.RenderKey = r.Template + "@" + strconv.Itoa(version) + "@" + hex.EncodeToString(sum[:8])
	}
	return in
}

// leaveOut is the user id r's send skips with inbox.ReasonActor: its actor, when it goes
// to a segment or to more than one recipient and does not ask for IncludeActor; "" when
// it skips no one. (The request's hash covers IncludeActor, so the store's content hash
// of a chunk need not: a key reused with the flag changed is a CONFLICT at accept.)
func leaveOut(r SendRequest) string {
	if r.IncludeActor || r.Actor == nil || (r.Segment == "" && len(r.Recipients) < 2) {
		return ""
	}
	return r.Actor.ActorID
}

// render is the render function of r's template at version (nil when r names none): one
// per processing of a request, shared by its chunks.
func (s *Service) render(tenant string, r SendRequest, version int) RenderFunc {
	if r.Template == "" || s.o.Templates == nil {
		return nil
	}
	return renderHook(s.o.Templates, tenant, r.Template, version, r.Data)
}

// RunInLane runs work in lane's bounded pool ("transactional" or "bulk"; anything else
// is bulk), waiting for room in its queue while ctx lasts, and returns work's error.
// Broadcasts write their pages through it, so a campaign only ever takes bulk workers.
// Errors: THROTTLED when the lane is stopping, ctx's error when it ended first.
func (s *Service) RunInLane(ctx context.Context, lane string, work func(context.Context) error) error {
	l := s.lanes[Priority(lane)]
	if l == nil {
		l = s.lanes[Bulk]
	}
	done := make(chan error, 1)
	if !l.submit(ctx, func() { done <- work(ctx) }, true, func() { done <- errNotQueued }) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errNotQueued
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sender is the service as an inbox.Sender, for importers and tools that build
// inbox.SendInput values: each Send is accepted durably and processed in the
// transactional lane like any list send, and answers once processed.
type Sender struct{ S *Service }

// Send accepts in (at most MaxRecipients recipients; content rules as for SendRequest)
// and waits for its processing. The result's Duplicate is true when the key had been
// sent before. Errors: as Service.Send; a request accepted but not processed in time
// is left to its recovery task and answers the processing's error.
func (a Sender) Send(ctx context.Context, tenant string, in inbox.SendInput) (inbox.SendResult, error) {
	r := SendRequest{IdempotencyKey: in.IdempotencyKey, Recipients: in.Recipients, Type: in.Type, Category: in.Category,
		Title: in.Title, Body: in.Body, Actor: in.Actor, Target: in.Target, Payload: in.Payload, ExpiresAt: in.ExpiresAt,
		GroupKey: in.GroupKey, Actions: in.Actions, Channels: in.Channels, Locale: in.Locale, Priority: Transactional}
	sent, err := a.S.Send(ctx, tenant, r)
	if err != nil {
		return inbox.SendResult{}, err
	}
	if !sent.Processed {
		// Accepted, and left to its recovery task: the ids the accept assigned.
		return inbox.SendResult{NotificationIDs: sent.NotificationIDs, Accepted: len(sent.NotificationIDs),
			Duplicate: sent.Replayed}, nil
	}
	return inbox.SendResult{NotificationIDs: sent.Result.NotificationIDs, Accepted: sent.Result.Accepted,
		Duplicate: sent.Replayed || sent.Result.Duplicate}, nil
}
