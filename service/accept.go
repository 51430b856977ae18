package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// SendRequest is one send as a transport received it. Exactly one of Recipients and
// Segment is set.
type SendRequest struct {
	// IdempotencyKey is unique per logical send within the tenant (inbox.CheckID rules).
	IdempotencyKey string `json:"-"`
	// Recipients are 1..MaxRecipients user ids (repeats count once).
	Recipients []string `json:"recipients,omitempty"`
	// Segment is a segment id: the send becomes a broadcast to its members.
	Segment  string        `json:"segment,omitempty"`
	Type     string        `json:"type"`
	Category string        `json:"category,omitempty"`
	Title    string        `json:"title,omitempty"`
	Body     string        `json:"body,omitempty"`
	Actor    *inbox.Actor  `json:"actor,omitempty"`
	Target   *inbox.Target `json:"target,omitempty"`
	Payload  inbox.JSON    `json:"payload,omitempty"`
	// ExpiresAt, GroupKey and Actions are as in inbox.SendInput.
	ExpiresAt time.Time      `json:"expiresAt,omitzero"`
	GroupKey  string         `json:"groupKey,omitempty"`
	Actions   []inbox.Action `json:"actions,omitempty"`
	// Template names a template (its title and body replace Title and Body), rendered
	// with Data for each recipient's locale (else Locale).
	Template string     `json:"template,omitempty"`
	Data     inbox.JSON `json:"data,omitempty"`
	Locale   string     `json:"locale,omitempty"`
	// Priority is the lane (default Transactional for a list, Bulk for a segment).
	Priority Priority `json:"priority,omitempty"`
	// SendAt, when set, schedules the send (in the future, at most MaxSchedule ahead).
	SendAt time.Time `json:"sendAt,omitzero"`
	// Channels is the channel hint (inbox.Channel* constants).
	Channels []string `json:"channels,omitempty"`
	// IncludeActor notifies the actor too when the send goes to several recipients or to
	// a segment; by default they are left out of such a send (reason inbox.ReasonActor),
	// as no one needs telling of their own action. A send to one recipient always
	// reaches them.
	IncludeActor bool `json:"includeActor,omitempty"`
	// Throttle, when set, keeps at most Throttle.Limit notifications per recipient and
	// key in each window (inbox.Throttle; the key defaults to Type): the rest are
	// skipped with reason throttled.
	Throttle *inbox.Throttle `json:"throttle,omitempty"`
	// Batch, when set, collects the send into one notification per recipient with the
	// other sends of its type and Batch.Key within Batch.Window (inbox.Batch; the key
	// defaults to Type, MaxItems to inbox.DefaultBatchMaxItems): the answer names each
	// recipient's batch notification, written at the batch's close. Not with SendAt, a
	// segment or the bulk lane.
	Batch *inbox.Batch `json:"batch,omitempty"`
}

// Accepted is the answer to an accepted send (REST's 202 body).
type Accepted struct {
	// RequestID identifies the accepted request.
	RequestID string `json:"requestId"`
	// Recipients are the distinct recipients in order, NotificationIDs their
	// notifications' ids (aligned; empty for a segment send).
	Recipients      []string `json:"recipients,omitempty"`
	NotificationIDs []string `json:"notificationIds"`
	// BroadcastID is the broadcast of a segment send.
	BroadcastID string    `json:"broadcastId,omitempty"`
	Priority    Priority  `json:"priority"`
	SendAt      time.Time `json:"sendAt,omitzero"`
	// Replayed is true when the key had been accepted before: this is the first answer.
	Replayed bool `json:"-"`
}

// document is a request as stored: the normalized request, what accept decided, and
// the task that recovers it.
type document struct {
	Request         SendRequest `json:"request"`
	Answer          Accepted    `json:"answer"`
	TemplateVersion int         `json:"templateVersion,omitempty"`
	TaskDue         time.Time   `json:"taskDue"`
}

// normalize checks r completely (nothing is written for a refused request) and returns
// it normalized: recipients and channels without repeats, the priority set, JSON
// compacted. Errors: BAD_USER_INPUT.
func (s *Service) normalize(tenant string, r SendRequest, now time.Time) (SendRequest, error) {
	if err := inbox.CheckID("tenant", tenant); err != nil {
		return r, err
	}
	if err := inbox.CheckID("idempotencyKey", r.IdempotencyKey); err != nil {
		return r, err
	}
	if reservedKey(r.IdempotencyKey) {
		return r, inbox.Errorf(inbox.CodeBadUserInput, "idempotencyKey %q has the form of a key the gateway derives (\"chunk~...\", \"batch~...\", \"bc{32 hex}:{shard}:{page}\"); choose another", r.IdempotencyKey)
	}
	switch {
	case r.Segment != "" && len(r.Recipients) > 0:
		return r, inbox.Errorf(inbox.CodeBadUserInput, "give recipients or a segment, not both")
	case r.Segment == "" && len(r.Recipients) == 0:
		return r, inbox.Errorf(inbox.CodeBadUserInput, "recipients must not be empty")
	case len(r.Recipients) > MaxRecipients:
		return r, inbox.Errorf(inbox.CodeBadUserInput, "at most %d recipients per send", MaxRecipients)
	}
	var distinct []string
	for _, u := range r.Recipients {
		if err := inbox.CheckID("recipient", u); err != nil {
			return r, err
		}
		if !slices.Contains(distinct, u) {
			distinct = append(distinct, u)
		}
	}
	r.Recipients = distinct
	if r.Segment != "" {
		if err := inbox.CheckID("segment", r.Segment); err != nil {
			return r, err
		}
		if s.o.Broadcaster == nil {
			return r, inbox.Errorf(inbox.CodeBadUserInput, "segment sends are not available on this server")
		}
	}
	switch r.Priority {
	case "":
		r.Priority = Transactional
		if r.Segment != "" {
			r.Priority = Bulk
		}
	case Transactional, Bulk:
	default:
		return r, inbox.Errorf(inbox.CodeBadUserInput, "priority must be transactional or bulk")
	}
	if !r.SendAt.IsZero() {
		if !r.SendAt.After(now) {
			return r, inbox.Errorf(inbox.CodeBadUserInput, "sendAt must be in the future")
		}
		if r.SendAt.After(now.Add(MaxSchedule)) {
			return r, inbox.Errorf(inbox.CodeBadUserInput, "sendAt must be at most %d days ahead", int(MaxSchedule.Hours()/24))
		}
		if !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(r.SendAt) {
			return r, inbox.Errorf(inbox.CodeBadUserInput, "expiresAt must be after sendAt")
		}
		r.SendAt = r.SendAt.Truncate(time.Millisecond)
	}
	var chans []string
	for _, c := range r.Channels {
		if !inbox.ValidChannel(c) {
			return r, inbox.Errorf(inbox.CodeBadUserInput, "unknown channel %q", c)
		}
		if !slices.Contains(chans, c) {
			chans = append(chans, c)
		}
	}
	r.Channels = chans
	if r.Locale != "" {
		if err := inbox.CheckID("locale", r.Locale); err != nil {
			return r, err
		}
		if len(r.Locale) > 64 {
			return r, inbox.Errorf(inbox.CodeBadUserInput, "locale must be at most 64 bytes")
		}
	}
	if r.Throttle != nil {
		t := *r.Throttle
		if t.Key == "" {
			t.Key = r.Type
		}
		if err := routing.CheckThrottle(t); err != nil {
			return r, err
		}
		r.Throttle = &t
	}
	if r.Batch != nil {
		b := *r.Batch
		if b.Key == "" {
			b.Key = r.Type
		}
		if b.MaxItems == 0 {
			b.MaxItems = inbox.DefaultBatchMaxItems
		}
		if err := routing.CheckBatch(b); err != nil {
			return r, err
		}
		switch {
		case s.batches == nil:
			return r, inbox.Errorf(inbox.CodeBadUserInput, "batched sends are not available on this server")
		case r.Segment != "":
			return r, inbox.Errorf(inbox.CodeBadUserInput, "batch is not available on a segment send (a broadcast is one notification already)")
		case !r.SendAt.IsZero():
			return r, inbox.Errorf(inbox.CodeBadUserInput, "batch and sendAt cannot be combined")
		case r.Priority != Transactional:
			return r, inbox.Errorf(inbox.CodeBadUserInput, "a batched send goes in the transactional lane")
		case !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now.Add(b.Window)):
			return r, inbox.Errorf(inbox.CodeBadUserInput, "expiresAt must be after the batch's window")
		}
		r.Batch = &b
	}
	var err error
	if r.Data, err = compact("data", r.Data); err != nil {
		return r, err
	}
	if r.Payload, err = compact("payload", r.Payload); err != nil {
		return r, err
	}
	if r.Template != "" {
		if err := inbox.CheckID("template", r.Template); err != nil {
			return r, err
		}
		if s.o.Templates == nil {
			return r, inbox.Errorf(inbox.CodeBadUserInput, "templates are not available on this server")
		}
	}
	// The store's rules on the content, checked on the first chunk's recipients.
	probe := s.Input(tenant, r, 0)
	probe.Recipients = r.Recipients[:min(len(r.Recipients), inbox.MaxRecipients)]
	if len(probe.Recipients) == 0 {
		probe.Recipients = []string{r.Segment}
	}
	if err := s.st.CheckSend(probe); err != nil {
		return r, err
	}
	return r, nil
}

// derivedKeyRE matches the store idempotency keys the gateway derives for a broadcast's
// pages (pageKey).
var derivedKeyRE = regexp.MustCompile(`^bc[0-9a-f]{32}:[0-9]{2,}:[0-9]+$`)

// reservedKey reports whether a client's key has the form of a key the gateway derives
// for its own store sends (chunkKey, pageKey): a send under it would take the guards of
// a chunk or a broadcast page, which would then meet a key reused with another body.
func reservedKey(k string) bool {
	return strings.HasPrefix(k, "chunk~") || strings.HasPrefix(k, batchCloseKeyPrefix) || derivedKeyRE.MatchString(k)
}

// compact returns j compacted (nil for JSON null); BAD_USER_INPUT when it is not JSON or
// is over inbox.MaxPayloadBytes.
func compact(field string, j inbox.JSON) (inbox.JSON, error) {
	if len(j) == 0 {
		return nil, nil
	}
	if len(j) > inbox.MaxPayloadBytes {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "%s must be at most %d bytes of JSON", field, inbox.MaxPayloadBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, j); err != nil {
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "%s must be valid JSON", field)
	}
	if buf.String() == "null" {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// checkSegment refuses a segment send to a segment without members (BAD_USER_INPUT
// "unknown segment", as a broadcast refuses it) before anything is written, unless the
// key was accepted already: a replay answers the first answer even after the segment
// emptied.
func (s *Service) checkSegment(ctx context.Context, tenant string, r SendRequest) error {
	n, err := s.st.SegmentCount(ctx, tenant, r.Segment)
	if err != nil || n > 0 {
		return err
	}
	if _, ok, err := s.st.GetRequest(ctx, tenant, r.IdempotencyKey); err != nil || ok {
		return err
	}
	return inbox.Errorf(inbox.CodeBadUserInput, "unknown segment %q (it has no members)", r.Segment)
}

// hash identifies a normalized request's content (the key aside).
func hash(r SendRequest) string {
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// taskID is the recovery task's id of key in tenant.
func taskID(tenant, key string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + key))
	return TaskSend + ":" + hex.EncodeToString(sum[:16])
}

// Accept validates r, writes it durably with its recovery task, and hands it to its lane
// (a send with sendAt only waits for its task). The answer carries the notification ids
// chosen for the recipients. A replay of the key with the same body answers the first
// answer with Replayed set. Errors: BAD_USER_INPUT for anything invalid (nothing is
// written), CONFLICT when the key was accepted with another body, else the store's.
func (s *Service) Accept(ctx context.Context, tenant string, r SendRequest) (Accepted, error) {
	a, _, err := s.accept(ctx, tenant, r, false)
	return a, err
}

// waits reports whether Send waits for the processing of a (normalized) request: a
// transactional send to recipients without sendAt, on a service that processes.
func (s *Service) waits(r SendRequest) bool {
	return !s.o.AcceptOnly && r.Priority == Transactional && r.SendAt.IsZero() && r.Segment == ""
}

// accept is Accept, also returning the stored request (with its state). When wait is
// true and Send waits for r (waits), the caller starts its processing.
func (s *Service) accept(ctx context.Context, tenant string, r SendRequest, wait bool) (Accepted, inbox.Request, error) {
	now := s.o.Now()
	r, err := s.normalize(tenant, r, now)
	if err != nil {
		return Accepted{}, inbox.Request{}, err
	}
	if r.Segment != "" {
		if err := s.checkSegment(ctx, tenant, r); err != nil {
			return Accepted{}, inbox.Request{}, err
		}
	}
	h := hash(r)
	doc := document{Request: r, Answer: Accepted{RequestID: ulid.Make().String(), Priority: r.Priority, SendAt: r.SendAt}}
	if r.Template != "" {
		data := r.Data
		if r.Batch != nil {
			// A batch renders at its close with its activities: checked with this send's.
			if data, err = routing.BatchData(r.Data, []inbox.Activity{batchActivity(r, now)}, 1); err != nil {
				return Accepted{}, inbox.Request{}, err
			}
		}
		if doc.TemplateVersion, err = s.o.Templates.Pin(ctx, tenant, r.Template, r.Locale, data); err != nil {
			return Accepted{}, inbox.Request{}, err
		}
	}
	if r.Segment != "" {
		doc.Answer.BroadcastID = SendBroadcastID(r.IdempotencyKey)
	}
	doc.Answer.Recipients = r.Recipients
	doc.Answer.NotificationIDs = make([]string, len(r.Recipients))
	if r.Batch != nil {
		// A batch's notification id is known once each recipient joined (Send's result).
		doc.Answer.NotificationIDs = []string{}
	}
	for i := range doc.Answer.NotificationIDs {
		if r.SendAt.IsZero() {
			doc.Answer.NotificationIDs[i] = s.st.NewID()
		} else {
			// Sorted where the notification will be: at sendAt.
			doc.Answer.NotificationIDs[i] = ulid.MustNew(ulid.Timestamp(r.SendAt), rand.Reader).String()
		}
	}
	doc.TaskDue = r.SendAt
	if doc.TaskDue.IsZero() {
		doc.TaskDue = now.Add(s.o.RecoveryDelay).Truncate(time.Millisecond)
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return Accepted{}, inbox.Request{}, err
	}
	answer, err := json.Marshal(doc.Answer)
	if err != nil {
		return Accepted{}, inbox.Request{}, err
	}
	task := inbox.Task{ID: taskID(tenant, r.IdempotencyKey), Kind: TaskSend, Due: doc.TaskDue,
		Viewer: inbox.Viewer{TenantID: tenant}, Ref: r.IdempotencyKey, Token: h}
	stored, created, err := s.st.AcceptRequest(ctx, inbox.Request{TenantID: tenant, Key: r.IdempotencyKey, Hash: h,
		Body: body, Answer: answer}, s.o.IdempotencyTTL, task)
	if err != nil {
		return Accepted{}, inbox.Request{}, err
	}
	if !created {
		if stored.Hash != h {
			return Accepted{}, inbox.Request{}, inbox.Errorf(inbox.CodeConflict,
				"this idempotency key was already used for a different request (a retry must repeat the same body; new content needs a new key)")
		}
		var first Accepted
		if err := json.Unmarshal(stored.Answer, &first); err != nil {
			return Accepted{}, inbox.Request{}, err
		}
		first.Replayed = true
		return first, stored, nil
	}
	if r.Segment != "" && !s.o.AcceptOnly {
		// A segment send's processing only starts its durable broadcast (queued until
		// sendAt, if any): done before the answer, so that the broadcast the answer
		// names is there to read at once. Should it fail, the recovery task starts it.
		if _, err := s.process(ctx, tenant, &doc); err != nil {
			s.o.Logger.WarnContext(ctx, "send: starting the broadcast failed; its recovery task retries", "tenant", tenant,
				"key", r.IdempotencyKey, "err", err)
		}
		return doc.Answer, stored, nil
	}
	if r.SendAt.IsZero() && !s.o.AcceptOnly && !(wait && s.waits(r)) {
		// Not queued (the lane's queue is full): the recovery task runs it.
		s.start(context.WithoutCancel(ctx), tenant, r.IdempotencyKey, &doc, false)
	}
	return doc.Answer, stored, nil
}
