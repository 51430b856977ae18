package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Delivery records (AP22) through a delivery: the deliver task claims its QUEUED record
// (ClaimDelivery: one UpdateItem sets claimUntil and counts the attempt), calls the
// provider, then records what happened, each update conditioned on the claim's attempt:
// DeliverySent, DeliveryRetry (the claim is released and the next deliver task written
// in one transaction), DeliveryFailed. A claim found expired (ClaimOrphaned: a worker
// stopped during or right after the provider call) is never sent again:
// DeliveryUnconfirmed marks it SENT with an "unconfirmed" error. Providers' callbacks move
// SENT records on (ApplyProviderEvent), never backwards.

// Attribute names of delivery records that updates name (see statusItem).
const (
	attrAttempts          = "attempts"
	attrClaimUntil        = "claimUntil"
	attrClaimID           = "claimId"
	attrEventCallID       = "eventCallId"
	attrNextAttemptAt     = "nextAttemptAt"
	attrProvider          = "provider"
	attrProviderMessageID = "providerMessageId"
	attrError             = "error"
	attrSentAt            = "sentAt"
	attrDeliveredAt       = "deliveredAt"
	attrOpenedAt          = "openedAt"
)

// contentAttrs are the attributes a QUEUED record carries for its delivery (statusItem):
// dropped once the record is SENT, FAILED or SKIPPED.
var contentAttrs = []string{"to", "subject", "text", "html", "title", "body", "payload"}

// ClaimDelivery claims delivery record ref for lease (the attempt's timeout plus a
// margin): ONE UpdateItem on condition that the record is QUEUED and unclaimed sets
// claimUntil = now + lease and a random claim id and adds 1 to attempts; the job it
// returns is the record as updated (ALL_NEW), its Attempt the claim's number (1 = the
// first). When the condition fails, ONE strongly consistent GetItem tells why: ClaimOK
// after all when the claim is this call's (the UpdateItem committed, its answer was lost
// and the store's retry found its own claim), ClaimDone (not QUEUED, or no record),
// ClaimBusy (a live claim), ClaimOrphaned (an expired claim: the job with the orphaned
// Attempt). When the UpdateItem fails for the store's whole budget, the same GetItem
// looks for this call's claim (a call that committed and lost its answer): found, it is
// ClaimOK; else the error. Errors: BAD_USER_INPUT for a malformed ref or a lease ≤ 0.
func (s *Store) ClaimDelivery(ctx context.Context, ref inbox.DeliveryRef, lease time.Duration) (inbox.DeliveryJob, inbox.ClaimOutcome, error) {
	if err := ref.Check(); err != nil {
		return inbox.DeliveryJob{}, 0, err
	}
	if lease <= 0 {
		return inbox.DeliveryJob{}, 0, inbox.Errorf(inbox.CodeBadUserInput, "a claim needs a positive lease")
	}
	now := s.now()
	key := itemKey{notifStatusPK(ref.TenantID, ref.NotificationID), deliverySK(ref.Key)}
	// The claim's own id: when the UpdateItem commits but its answer is lost, the store's
	// retry finds the condition failed, and the read below recognises the claim as this
	// call's (not another worker's, which would leave it to expire and be marked
	// unconfirmed although nothing was sent).
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	claimID := hex.EncodeToString(nonce[:])
	cu := expression.Name(attrClaimUntil)
	x, err := buildUpdate(expression.Set(cu, expression.Value(now.Add(lease).UnixMilli())).
		Set(expression.Name(attrClaimID), expression.Value(claimID)).
		Set(expression.Name(statusAttrUpdatedAt), expression.Value(now.UnixMilli())).
		Add(expression.Name(attrAttempts), expression.Value(1)),
		[]expression.ConditionBuilder{expression.Name(statusAttrStatus).Equal(expression.Value(inbox.DeliveryQueued)), cu.AttributeNotExists()}, nil)
	if err != nil {
		return inbox.DeliveryJob{}, 0, fmt.Errorf("store: claim delivery: %w", err)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		job, err := decodeJob(ref, out.Attributes)
		return job, inbox.ClaimOK, err
	case !errors.As(err, &ccf):
		// The store's budget ran out, but a call whose answer was lost may have
		// committed: a claim nobody knows of would expire into "unconfirmed" (SENT)
		// although nothing was sent. ONE GetItem finds it (the claim id); when it is
		// not there, or the read fails too, the claim's error stands.
		got, rerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key.av(), ConsistentRead: aws.Bool(true)})
		if rerr == nil && got.Item != nil {
			var it statusItem
			if attributevalue.UnmarshalMap(got.Item, &it) == nil && it.Status == inbox.DeliveryQueued && it.ClaimUntil != 0 && it.ClaimID == claimID {
				job, jerr := decodeJob(ref, got.Item)
				return job, inbox.ClaimOK, jerr
			}
		}
		return inbox.DeliveryJob{}, 0, fmt.Errorf("claim delivery: %w", err)
	}
	got, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key.av(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return inbox.DeliveryJob{}, 0, fmt.Errorf("read claimed delivery: %w", err)
	}
	if got.Item == nil {
		return inbox.DeliveryJob{}, inbox.ClaimDone, nil
	}
	job, err := decodeJob(ref, got.Item)
	if err != nil {
		return inbox.DeliveryJob{}, 0, err
	}
	var it statusItem
	if err := attributevalue.UnmarshalMap(got.Item, &it); err != nil {
		return inbox.DeliveryJob{}, 0, fmt.Errorf("decode delivery: %w", err)
	}
	switch {
	case it.Status != inbox.DeliveryQueued:
		return inbox.DeliveryJob{}, inbox.ClaimDone, nil
	case it.ClaimUntil != 0 && it.ClaimID == claimID:
		// This call's own claim, whose answer was lost and retried.
		return job, inbox.ClaimOK, nil
	case it.ClaimUntil > now.UnixMilli():
		return inbox.DeliveryJob{}, inbox.ClaimBusy, nil
	case it.ClaimUntil == 0:
		// Released between the update and the read (a retry recorded): the record is
		// claimable again, but this run's task is not the one DeliveryRetry wrote.
		return inbox.DeliveryJob{}, inbox.ClaimBusy, nil
	}
	return job, inbox.ClaimOrphaned, nil
}

// decodeJob returns the job of delivery record item (ref's).
func decodeJob(ref inbox.DeliveryRef, item map[string]types.AttributeValue) (inbox.DeliveryJob, error) {
	var it statusItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return inbox.DeliveryJob{}, fmt.Errorf("decode delivery: %w", err)
	}
	return inbox.DeliveryJob{Ref: ref, UserID: it.UserID, Channel: it.Channel, Attempt: it.Attempts, To: it.To,
		Platform: it.Platform, DeviceID: it.DeviceID, Subject: it.Subject, Text: it.Text, HTML: it.HTML,
		Title: it.Title, Body: it.Body, Payload: it.Payload, Category: it.Category,
		TargetKind: it.TargetKind, TargetID: it.TargetID, Deferred: it.DeferredUntil != 0}, nil
}

// RecheckDelivery decides again, when job is delivered, whether its recipient's
// preferences still let its channel through: "" when they do, else the skip reason
// (inbox.ReasonMuted, ReasonOptedOut, ReasonCategoryOptedOut). A category the tenant
// lists as critical bypasses them, as at send. The delivery worker calls it for a record
// that waited (quiet hours, a retry): a user who opted out of email during the wait gets
// none (the send decided with the preferences of its time). ONE strongly consistent
// GetItem of the user's PREFS (AP13's item); the tenant's defaults come from the settings
// cache (a GetItem when it has none fresh).
func (s *Store) RecheckDelivery(ctx context.Context, job inbox.DeliveryJob) (string, error) {
	v := inbox.Viewer{TenantID: job.Ref.TenantID, UserID: job.UserID}
	if err := checkViewer(v); err != nil {
		return "", err
	}
	set, err := s.tenantSettings(ctx, v.TenantID)
	if err != nil {
		return "", err
	}
	cfg := s.config(v.TenantID, set)
	if cfg.Critical(job.Category) {
		return "", nil
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table),
		Key: itemKey{userPK(v), skPrefs}.av(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("read preferences: %w", err)
	}
	own, err := decodePrefs(out.Item)
	if err != nil {
		return "", err
	}
	var target *inbox.ProfileRef
	if job.TargetKind != "" || job.TargetID != "" {
		target = &inbox.ProfileRef{TargetKind: job.TargetKind, ID: job.TargetID}
	}
	return routing.Recheck(cfg, own, job.Category, job.Channel, target), nil
}

// claimCond is the condition of an outcome of claim attempt :attempt: the record is
// QUEUED and claimed by that attempt.
func claimCond(attempt int) expression.ConditionBuilder {
	return expression.Name(statusAttrStatus).Equal(expression.Value(inbox.DeliveryQueued)).
		And(expression.Name(attrAttempts).Equal(expression.Value(attempt))).
		And(expression.AttributeExists(expression.Name(attrClaimUntil)))
}

// DeliverySent records that attempt's provider call succeeded: QUEUED and claimed by
// attempt → SENT with provider, its messageID ("" when it gives none) and sentAt; the
// claim, error, nextAttemptAt, deferredUntil and the content are removed. One UpdateItem.
// Errors: ErrClaimLost (wrapped) when the claim is not attempt's; BAD_USER_INPUT for a
// malformed ref.
func (s *Store) DeliverySent(ctx context.Context, ref inbox.DeliveryRef, attempt int, provider, messageID string) error {
	if err := ref.Check(); err != nil {
		return err
	}
	now := s.now()
	u := newRecordUpdate(now).set(statusAttrStatus, inbox.DeliverySent).set(attrProvider, provider).
		set(attrSentAt, now.UnixMilli()).remove(attrClaimUntil, attrError, attrNextAttemptAt, statusAttrDeferred).removeContent()
	if messageID != "" {
		u.set(attrProviderMessageID, messageID)
	}
	return s.claimOutcome(ctx, ref, u, claimCond(attempt), "sent")
}

// DeliveryRetry records that attempt failed transiently and is tried again at at: the
// record stays QUEUED with provider, errMsg and nextAttemptAt = at, its claim released;
// and the deliver task of the record (Token: its key; Viewer: the tenant and userID, the
// record's recipient as the claim's job gave it) is written due at at. Both in ONE
// TransactWriteItems, the record's update conditioned on attempt's claim. Errors:
// ErrClaimLost (wrapped) when the claim is not attempt's (nothing written);
// BAD_USER_INPUT for a malformed ref or user.
func (s *Store) DeliveryRetry(ctx context.Context, ref inbox.DeliveryRef, userID string, attempt int, provider, errMsg string, at time.Time) error {
	if err := ref.Check(); err != nil {
		return err
	}
	v := inbox.Viewer{TenantID: ref.TenantID, UserID: userID}
	if err := checkViewer(v); err != nil {
		return err
	}
	key := itemKey{notifStatusPK(ref.TenantID, ref.NotificationID), deliverySK(ref.Key)}
	u := newRecordUpdate(s.now()).set(attrProvider, provider).set(attrError, errMsg).
		set(attrNextAttemptAt, at.UnixMilli()).remove(attrClaimUntil)
	up, err := u.input(s.table, key, claimCond(attempt))
	if err != nil {
		return err
	}
	t := &txn{}
	t.add(key, types.TransactWriteItem{Update: &types.Update{TableName: up.TableName, Key: up.Key,
		UpdateExpression: up.UpdateExpression, ConditionExpression: up.ConditionExpression,
		ExpressionAttributeNames: up.ExpressionAttributeNames, ExpressionAttributeValues: up.ExpressionAttributeValues}})
	t.add(s.taskAction(inbox.TaskDeliver, v, ref.NotificationID, at, ref.Key))
	_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
	switch {
	case err == nil:
		return nil
	case t.conditionFailed(err, key):
		return fmt.Errorf("delivery retry: %w", inbox.ErrClaimLost)
	}
	return fmt.Errorf("delivery retry: %w", err)
}

// DeliveryFailed records that attempt failed for good (a permanent error, the attempts
// spent, an unregistered device): QUEUED and claimed by attempt → FAILED with provider
// and errMsg; the claim, nextAttemptAt, deferredUntil and the content are removed. One
// UpdateItem. Errors: ErrClaimLost (wrapped) when the claim is not attempt's;
// BAD_USER_INPUT for a malformed ref.
func (s *Store) DeliveryFailed(ctx context.Context, ref inbox.DeliveryRef, attempt int, provider, errMsg string) error {
	if err := ref.Check(); err != nil {
		return err
	}
	u := newRecordUpdate(s.now()).set(statusAttrStatus, inbox.DeliveryFailed).set(attrProvider, provider).
		set(attrError, errMsg).remove(attrClaimUntil, attrNextAttemptAt, statusAttrDeferred).removeContent()
	return s.claimOutcome(ctx, ref, u, claimCond(attempt), "failed")
}

// DeliveryUnconfirmed settles an orphaned claim (ClaimOrphaned) of attempt: QUEUED and
// claimed by attempt with the claim expired → SENT with error "unconfirmed: ..." (the
// provider may or may not have accepted it; it is never sent again, so it got it at most
// once); the claim, nextAttemptAt, deferredUntil and the content are removed. One
// UpdateItem. Errors: ErrClaimLost (wrapped) when the record is not so; BAD_USER_INPUT
// for a malformed ref.
func (s *Store) DeliveryUnconfirmed(ctx context.Context, ref inbox.DeliveryRef, attempt int) error {
	if err := ref.Check(); err != nil {
		return err
	}
	now := s.now()
	u := newRecordUpdate(now).set(statusAttrStatus, inbox.DeliverySent).set(attrSentAt, now.UnixMilli()).
		set(attrError, fmt.Sprintf("unconfirmed: attempt %d stopped during the provider call; not resent (the provider got it at most once)", attempt)).
		remove(attrClaimUntil, attrNextAttemptAt, statusAttrDeferred).removeContent()
	cond := claimCond(attempt).And(expression.Name(attrClaimUntil).LessThanEqual(expression.Value(now.UnixMilli())))
	return s.claimOutcome(ctx, ref, u, cond, "unconfirmed")
}

// claimOutcome applies u to ref's record on cond; a failed condition is ErrClaimLost.
func (s *Store) claimOutcome(ctx context.Context, ref inbox.DeliveryRef, u *recordUpdate, cond expression.ConditionBuilder, what string) error {
	ok, err := s.updateRecord(ctx, ref, u, cond)
	switch {
	case err != nil:
		return fmt.Errorf("delivery %s: %w", what, err)
	case !ok:
		return fmt.Errorf("delivery %s: %w", what, inbox.ErrClaimLost)
	}
	return nil
}

// eventFrom lists the statuses a provider event moves a record from (never backwards):
// DELIVERED from SENT; OPENED from SENT or DELIVERED; FAILED (a bounce, also after
// delivery) from SENT or DELIVERED.
var eventFrom = map[string][]string{
	inbox.DeliveryDelivered: {inbox.DeliverySent},
	inbox.DeliveryOpened:    {inbox.DeliverySent, inbox.DeliveryDelivered},
	inbox.DeliveryFailed:    {inbox.DeliverySent, inbox.DeliveryDelivered},
}

// ApplyProviderEvent applies a provider's report ev to its record: ONE UpdateItem, on
// condition that the move is forward (SENT → DELIVERED | OPENED | FAILED, DELIVERED →
// OPENED | FAILED), that the record's provider is ev.Provider (a record without one, as
// DeliveryUnconfirmed leaves it, takes ev's) and, when ev has a MessageID and the record
// a providerMessageId, that they are equal (a record without one takes ev's). DELIVERED sets
// deliveredAt, OPENED openedAt (and deliveredAt if unset), FAILED the error (ev.Error);
// each at ev.At (zero, after now or before 1970: now; see eventAt). It reports whether
// the record changed: false for an event matching no record, a stale or repeated event,
// another provider's or message's; true also when the store's retry of an update that
// committed and lost its answer finds the update done (the old item the failed condition
// returns carries this call's random id, kept in the record's eventCallId).
// Errors: BAD_USER_INPUT for a malformed ref, an unknown status or no provider.
func (s *Store) ApplyProviderEvent(ctx context.Context, ev inbox.ProviderEvent) (bool, error) {
	if err := ev.Ref.Check(); err != nil {
		return false, err
	}
	from, ok := eventFrom[ev.Status]
	if !ok {
		return false, inbox.Errorf(inbox.CodeBadUserInput, "a provider event's status must be %s, %s or %s",
			inbox.DeliveryDelivered, inbox.DeliveryOpened, inbox.DeliveryFailed)
	}
	if ev.Provider == "" {
		return false, inbox.Errorf(inbox.CodeBadUserInput, "a provider event needs its provider")
	}
	now := s.now()
	u := newRecordUpdate(now).set(statusAttrStatus, ev.Status)
	at := eventAt(ev.At, now)
	switch ev.Status {
	case inbox.DeliveryDelivered:
		u.set(attrDeliveredAt, at.UnixMilli())
	case inbox.DeliveryOpened:
		u.set(attrOpenedAt, at.UnixMilli()).setIfNotExists(attrDeliveredAt, at.UnixMilli())
	case inbox.DeliveryFailed:
		msg := ev.Error
		if msg == "" {
			msg = ev.Provider + " reported the message failed"
		}
		u.set(attrError, msg)
	}
	var in []expression.OperandBuilder
	for _, st := range from {
		in = append(in, expression.Value(st))
	}
	// The call's own id: a failed condition after an update that committed and lost its
	// answer (the store retried it) is recognised as this call's change.
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	callID := hex.EncodeToString(nonce[:])
	u.set(attrEventCallID, callID)
	// A record without a provider is one settled unconfirmed (the orphaned attempt's
	// provider is not known): the event's provider, authenticated by its signature, is
	// taken.
	u.setIfNotExists(attrProvider, ev.Provider)
	status := expression.Name(statusAttrStatus)
	cond := status.In(in[0], in[1:]...).And(expression.AttributeNotExists(expression.Name(attrProvider)).
		Or(expression.Name(attrProvider).Equal(expression.Value(ev.Provider))))
	if ev.MessageID != "" {
		u.setIfNotExists(attrProviderMessageID, ev.MessageID)
		cond = cond.And(expression.AttributeNotExists(expression.Name(attrProviderMessageID)).
			Or(expression.Name(attrProviderMessageID).Equal(expression.Value(ev.MessageID))))
	}
	key := itemKey{notifStatusPK(ev.Ref.TenantID, ev.Ref.NotificationID), deliverySK(ev.Ref.Key)}
	upd, err := u.input(s.table, key, cond)
	if err != nil {
		return false, err
	}
	upd.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err = s.db.UpdateItem(ctx, upd)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case !errors.As(err, &ccf):
		return false, fmt.Errorf("apply provider event: %w", err)
	}
	// A failed condition after a call that committed and lost its answer (the store
	// retried it): the record carries this call's id. That is a change, reported as one.
	if id, ok := ccf.Item[attrEventCallID].(*types.AttributeValueMemberS); ok && id.Value == callID {
		return true, nil
	}
	return false, nil
}

// eventAt is the time a provider event is recorded at: at, or now when at is zero, after
// now (nothing is seen delivered or opened before it happens: a provider's clock ahead,
// or a time such as year 9999 or 1e18 seconds that a provider hook let through), or
// before the Unix epoch (which no record predates). Whatever an event carries, the stored
// time is one a status can show.
func eventAt(at, now time.Time) time.Time {
	if at.IsZero() || at.After(now) || at.Before(time.UnixMilli(1)) {
		return now
	}
	return at
}

// recordUpdate is the update of a delivery record: an expression.UpdateBuilder that
// always sets updatedAt.
type recordUpdate struct{ up expression.UpdateBuilder }

// newRecordUpdate starts an update at now (updatedAt).
func newRecordUpdate(now time.Time) *recordUpdate {
	return &recordUpdate{up: expression.Set(expression.Name(statusAttrUpdatedAt), expression.Value(now.UnixMilli()))}
}

// set adds SET attr = v.
func (u *recordUpdate) set(attr string, v any) *recordUpdate {
	u.up = u.up.Set(expression.Name(attr), expression.Value(v))
	return u
}

// setIfNotExists adds SET attr = if_not_exists(attr, v).
func (u *recordUpdate) setIfNotExists(attr string, v any) *recordUpdate {
	u.up = u.up.Set(expression.Name(attr), expression.Name(attr).IfNotExists(expression.Value(v)))
	return u
}

// remove adds REMOVE attrs.
func (u *recordUpdate) remove(attrs ...string) *recordUpdate {
	for _, a := range attrs {
		u.up = u.up.Remove(expression.Name(a))
	}
	return u
}

// removeContent removes what a QUEUED record carries for its delivery (contentAttrs).
func (u *recordUpdate) removeContent() *recordUpdate { return u.remove(contentAttrs...) }

// input returns the UpdateItem of u on the record at key on condition cond.
func (u *recordUpdate) input(table string, key itemKey, cond expression.ConditionBuilder) (*dynamodb.UpdateItemInput, error) {
	x, err := buildUpdate(u.up, []expression.ConditionBuilder{cond}, nil)
	if err != nil {
		return nil, fmt.Errorf("build delivery record update: %w", err)
	}
	return &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key.av(), UpdateExpression: x.Update(),
		ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}, nil
}

// updateRecord applies u to ref's record on cond; false when the condition failed.
func (s *Store) updateRecord(ctx context.Context, ref inbox.DeliveryRef, u *recordUpdate, cond expression.ConditionBuilder) (bool, error) {
	key := itemKey{notifStatusPK(ref.TenantID, ref.NotificationID), deliverySK(ref.Key)}
	in, err := u.input(s.table, key, cond)
	if err != nil {
		return false, err
	}
	_, err = s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	}
	return false, err
}
