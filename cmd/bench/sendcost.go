package main

// Write units per recipient of a send (scenario 4's second part, issue 22): what one
// recipient costs in DynamoDB write units, as DynamoDB Local reports them
// (ReturnConsumedCapacity on every call, capacity.go), for an in-app-only send, an
// in-app + email send and a broadcast to a segment (-send-broadcast-members, 10,000 by
// default; sendBroadcastCost), side by side with a raw loop writing the same items: the
// recipient's transaction recorded from a real service.Writer of the same notification
// (recordRecipientTxnFor), written again for as many fresh users; and, as the floor the
// issue sets, the same transaction cut down to its guard, notification, META counter
// and group (the actions in the idempotency key's and the user's partitions).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// SendCost is the write units one recipient of one kind of send costs.
type SendCost struct {
	// Case names the send ("in-app only", "in-app + email").
	Case       string `json:"case"`
	Recipients int    `json:"recipients"`
	// Transaction describes one recipient's transaction (its actions' partitions).
	Transaction string `json:"recipient_transaction"`
	// GatewayWCU is the gateway's write units per recipient: every write of the sends
	// (the recipients' transactions, the actor and target upserts; a broadcast's also
	// its head, its pages' tasks and its scheduler's leases while it ran).
	GatewayWCU float64 `json:"gateway_wcu_per_recipient"`
	// GatewayTxnWCU is the recipients' transactions' share of GatewayWCU (perRecipient).
	GatewayTxnWCU float64 `json:"gateway_transaction_wcu_per_recipient"`
	// RawWCU is the raw loop's: the recorded transaction written for fresh users.
	RawWCU float64 `json:"raw_same_items_wcu_per_recipient"`
	// FloorWCU is the raw loop's of the guard, notification, META and group only.
	FloorWCU float64 `json:"raw_guard_notification_meta_group_wcu_per_recipient"`
	// DocWCU and FloorDocWCU are the recorded transaction's write units and those of
	// its guard, notification, META and group, by DynamoDB's documented rule (2 per KB
	// of each item, rounded up, plus 1 per KB for each global secondary index it is
	// in): DynamoDB Local charges a transaction by its total size, so it cannot tell
	// a small item more or less.
	DocWCU      float64 `json:"transaction_wcu_documented_rule"`
	FloorDocWCU float64 `json:"guard_notification_meta_group_wcu_documented_rule"`
	// GatewaySeconds and RawSeconds are how long each side took to write its
	// recipients (sends of 100 one after the other, 8 recipients at once; the raw loop
	// 8 at once), for where a gap between sendNotification and the raw loop comes from.
	GatewaySeconds float64 `json:"gateway_seconds"`
	RawSeconds     float64 `json:"raw_same_items_seconds"`
	// ByCall is GatewayWCU by operation and partition kinds, per recipient.
	ByCall map[string]Capacity `json:"gateway_by_operation_and_partition_kinds"`
}

// sendCostRecipients is how many recipients each side of each case writes (sends of
// 100, as scenario 4's).
const sendCostRecipients = 200

// sendCosts measures the write units per recipient of each case.
func (b *harness) sendCosts(ctx context.Context) ([]SendCost, error) {
	email := inbox.SendInput{Type: "comment", Category: "social", Title: "Ada commented on Notes",
		Body:  "What it can and cannot do, with a worked example of Bernoulli numbers.",
		Actor: &inbox.Actor{ActorID: "ada", Name: "Ada Lovelace"}, Target: &inbox.Target{TargetID: "post-1843", Kind: "post", Title: "Notes"},
		TemplateChannels: []string{inbox.ChannelInApp, inbox.ChannelEmail}}
	inApp := email
	inApp.TemplateChannels = nil
	var out []SendCost
	// The broadcast first: its scheduler would find the email case's deliver tasks (it
	// has no handler for them) and retry them, writing to its shards all along.
	if b.c.sendBroadcast > 0 {
		r, err := b.sendBroadcastCost(ctx, b.c.sendBroadcast)
		if err != nil {
			return nil, fmt.Errorf("broadcast: %w", err)
		}
		progress("send cost, %s: %.2f WCU per recipient (transactions %.2f), raw same items %.2f, guard + notification + META + group %.2f; documented rule %.0f and %.0f; %d recipients in %.1fs (broadcast), %d in %.1fs (raw same items)",
			r.Case, r.GatewayWCU, r.GatewayTxnWCU, r.RawWCU, r.FloorWCU, r.DocWCU, r.FloorDocWCU, r.Recipients, r.GatewaySeconds, sendCostRecipients, r.RawSeconds)
		out = append(out, r)
	}
	for i, c := range []struct {
		name string
		in   inbox.SendInput
	}{{"in-app only", inApp}, {"in-app + email", email}} {
		r, err := b.sendCost(ctx, c.name, fmt.Sprintf("sc%d", i), c.in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		progress("send cost, %s: gateway %.2f WCU per recipient (transaction %.2f), raw same items %.2f, guard + notification + META + group %.2f; documented rule %.0f and %.0f; %d recipients in %.1fs (service.Writer), %.1fs (raw same items)",
			c.name, r.GatewayWCU, r.GatewayTxnWCU, r.RawWCU, r.FloorWCU, r.DocWCU, r.FloorDocWCU, r.Recipients, r.GatewaySeconds, r.RawSeconds)
		out = append(out, r)
	}
	return out, nil
}

// sendBroadcastCost measures a broadcast to a segment of n fresh members (scb-N): the
// real pipeline of scenario 13 (service.Broadcasts on a sched.Scheduler, its pages
// through service.Writer) on a metered client, every write of it from Start to its end
// (the head, the shards' pages and their tasks, the recipients' transactions; the
// segment's filling before is not counted) divided by the recipients written; beside the
// raw loop of one recipient's transaction of the same notification for
// sendCostRecipients fresh users.
func (b *harness) sendBroadcastCost(ctx context.Context, n int) (SendCost, error) {
	name := fmt.Sprintf("broadcast, %d members", n)
	rig, err := b.startBroadcastRig(ctx, broadcastRigOptions{owner: "bench-send-broadcast"})
	if err != nil {
		return SendCost{}, err
	}
	defer rig.stop()
	seg := "followers:sc"
	if _, err := fillSegmentTimed(ctx, rig.st, "send cost, "+name, seg, "scb", n); err != nil {
		return SendCost{}, err
	}
	rig.meter.take()
	progress("send cost, %s: broadcasting", name)
	spec := service.BroadcastSpec{IdempotencyKey: "bench-send-broadcast-" + ulid.Make().String(), Segment: seg, Send: broadcastSend()}
	bc, el, err := rig.run(ctx, spec, b.c.broadcast.timeout)
	if err != nil {
		return SendCost{}, err
	}
	if bc.Written != n {
		return SendCost{}, fmt.Errorf("the broadcast wrote %d of %d (%d skipped, %d failed)", bc.Written, n, bc.Skipped, bc.Failed)
	}
	total, by := rig.meter.take()
	r := SendCost{Case: name, Recipients: n, GatewayWCU: total.WCU / float64(n), GatewaySeconds: el.Seconds()}
	r.GatewayTxnWCU, r.ByCall = perRecipient(by, n)
	users := func(side string) []string {
		us := make([]string, sendCostRecipients)
		for i := range us {
			// As long as the members' ids (segmentMembers: scb-NNNNNNN): the items' sizes match.
			us[i] = fmt.Sprintf("sc%s-%07d", side, i)
		}
		return us
	}
	if err := b.rawCost(ctx, &r, broadcastSend(), "scp-0000000", "scb", users("r"), users("m")); err != nil {
		return SendCost{}, err
	}
	return r, nil
}

// sendCost measures one case: users prefix-{gw,raw,min,probe}-N, each with an email
// address (the email case sends to it; the in-app case reads the profile and ignores it).
func (b *harness) sendCost(ctx context.Context, name, prefix string, in inbox.SendInput) (SendCost, error) {
	n := sendCostRecipients
	users := func(side string) []string {
		us := make([]string, n)
		for i := range us {
			us[i] = fmt.Sprintf("%s-%s-%04d", prefix, side, i)
		}
		return us
	}
	plain := store.New(b.eng.db, b.c.table, store.WithLogger(b.log), store.WithSweepWorkers(0))
	defer plain.Close()
	probe := prefix + "-probe"
	all := append(append(users("gw"), users("raw")...), users("min")...)
	for _, u := range append(all, probe) {
		if _, err := plain.PutUserProfile(ctx, inbox.Viewer{TenantID: tenant, UserID: u},
			inbox.UserProfile{Addresses: map[string]string{"email": u + "@bench.example"}}); err != nil {
			return SendCost{}, err
		}
	}
	// The gateway's side: service.Writer on a metered client, sends of 100.
	meter := &capacityMeter{}
	st := store.New(dynamodb.New(b.eng.db.Options(), meter.option()), b.c.table, store.WithLogger(b.log), store.WithSweepWorkers(0))
	defer st.Close()
	gw := users("gw")
	meter.take()
	t0 := time.Now()
	for i := 0; i < n; i += 100 {
		s := in
		s.IdempotencyKey, s.Recipients = fmt.Sprintf("%s-gw-%d-%s", prefix, i, ulid.Make()), gw[i:min(i+100, n)]
		if _, err := (service.Writer{Store: st}).Send(ctx, tenant, s); err != nil {
			return SendCost{}, err
		}
	}
	gwSecs := time.Since(t0).Seconds()
	total, by := meter.take()
	r := SendCost{Case: name, Recipients: n, GatewayWCU: total.WCU / float64(n), GatewaySeconds: gwSecs}
	r.GatewayTxnWCU, r.ByCall = perRecipient(by, n)
	if err := b.rawCost(ctx, &r, in, probe, prefix, users("raw"), users("min")); err != nil {
		return SendCost{}, err
	}
	return r, nil
}

// rawCost fills r's raw figures: one recipient's transaction of in, recorded from a real
// service.Writer send to probe (who has what the case's recipients have), written again
// for raw (sends of 100, a key each), then its guard, notification, META and group only
// for floor; each user once.
func (b *harness) rawCost(ctx context.Context, r *SendCost, in inbox.SendInput, probe, prefix string, raw, floorUsers []string) error {
	tpl, err := b.recordRecipientTxnFor(ctx, in, probe, "k-"+prefix+"-recorded")
	if err != nil {
		return err
	}
	r.Transaction = tpl.describe()
	rawMeter := &capacityMeter{}
	db := dynamodb.New(b.eng.db.Options(), rawMeter.option())
	t0 := time.Now()
	for i := 0; i < len(raw); i += 100 {
		if err := replayTxn(ctx, db, tpl, raw[i:min(i+100, len(raw))], fmt.Sprintf("%s-raw-%d", prefix, i)); err != nil {
			return err
		}
	}
	r.RawSeconds = time.Since(t0).Seconds()
	rc, _ := rawMeter.take()
	r.RawWCU = rc.WCU / float64(len(raw))
	floor := *tpl
	floor.in = &dynamodb.TransactWriteItemsInput{}
	for i, a := range tpl.in.TransactItems {
		kb := float64((tpl.sizes[i] + 1023) / 1024)
		w := 2*kb + float64(tpl.indexes[i])*kb
		r.DocWCU += w
		if k := actionKind(a); k == "IDEM" || k == "U" {
			floor.in.TransactItems = append(floor.in.TransactItems, a)
			r.FloorDocWCU += w
		}
	}
	if err := replayTxn(ctx, db, &floor, floorUsers, prefix+"-min"); err != nil {
		return err
	}
	fc, _ := rawMeter.take()
	r.FloorWCU = fc.WCU / float64(len(floorUsers))
	return nil
}

// perRecipient divides the capacity by operation and partition kinds (capacityMeter's)
// by the n recipients written, and returns the recipients' transactions' share: the
// TransactWriteItems with a guard (partition kind IDEM) among their actions. The others
// (a broadcast's page tasks, its scheduler's leases) are not a recipient's.
func perRecipient(by map[string]Capacity, n int) (txn float64, out map[string]Capacity) {
	out = make(map[string]Capacity, len(by))
	for k, c := range by {
		if op, kinds, _ := strings.Cut(k, " "); op == "TransactWriteItems" && slices.Contains(strings.Split(kinds, "+"), "IDEM") {
			txn += c.WCU / float64(n)
		}
		out[k] = Capacity{WCU: c.WCU / float64(n), RCU: c.RCU / float64(n), Calls: c.Calls}
	}
	return txn, out
}

// gsiCount is how many of the table's global secondary indexes item is in: GSI1 when
// it has gsi1pk, GSI2 (the type index, keys pk, type and id) when it has type and id.
func gsiCount(item map[string]types.AttributeValue) int {
	n := 0
	if _, ok := item["gsi1pk"]; ok {
		n++
	}
	_, typ := item["type"]
	_, id := item["id"]
	if typ && id {
		n++
	}
	return n
}

// actionKind is the partition kind (partitionKind) of a transaction action's key.
func actionKind(a types.TransactWriteItem) string {
	var key map[string]types.AttributeValue
	switch {
	case a.Put != nil:
		key = a.Put.Item
	case a.Update != nil:
		key = a.Update.Key
	case a.Delete != nil:
		key = a.Delete.Key
	case a.ConditionCheck != nil:
		key = a.ConditionCheck.Key
	}
	if pk, ok := key["pk"].(*types.AttributeValueMemberS); ok {
		return partitionKind(pk.Value)
	}
	return ""
}

// replayTxn writes tpl for each of users (8 at once, a key per 100 users), with a fresh
// notification id each, again after a cancellation (as the store does), at most 10 times.
func replayTxn(ctx context.Context, db *dynamodb.Client, tpl *recipientTxn, users []string, keyPrefix string) error {
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(storeSendConcurrency)
	for i, u := range users {
		key := fmt.Sprintf("%s-%d", keyPrefix, i/100)
		eg.Go(func() error {
			for attempt := 0; ; attempt++ {
				_, err := db.TransactWriteItems(ctx, tpl.instance(u, ulid.Make().String(), key))
				var tce *types.TransactionCanceledException
				if err != nil && errors.As(err, &tce) && attempt < 10 {
					time.Sleep(time.Duration(5<<attempt) * time.Millisecond / 2)
					continue
				}
				return err
			}
		})
	}
	return eg.Wait()
}
