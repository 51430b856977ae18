package main

// Scenario 16, deliver: channel deliveries per second through the delivery path against
// the raw client loop making the same sends (issue 11's goal: ≥ 0.8×, side by side in
// one run, same concurrency, same local provider).
//
// Providers: a local SMTP server (go-smtp) and a local webhook receiver (net/http), both
// in this process on loopback listeners (sinks.go), accepting everything.
//
// The path side is the delivery handler the gateway's scheduler runs (package delivery,
// built as app builds it, with the email and webhook adapters of package channel) over
// real delivery records on DynamoDB Local: before each measured stretch, records are
// queued by real sends (service.Writer, 100 recipients a call, template channels IN_APP and
// the channel; users with an email address in their profile, the tenant's webhook URL
// and secret in its settings), then -deliver-concurrency callers hand their tasks
// (inbox.TaskDeliver: recipient, notification, channel) to the handler's Handle, which
// claims the record, sends through the adapter and records the provider's acceptance
// (SENT) — the scheduler's own polling is left out: this is the path's cost per
// delivery, not the scheduler's lag (scenario 17 has that). The provider rate limit is
// set far above what is reached (it would otherwise cap the path at its configured
// rate). The raw client + records side makes the same two record writes by hand
// (rawrecord.go: the claim's UpdateItem, the SENT UpdateItem) around the raw client's
// send, on records queued the same way: the least a durable, send-once delivery costs.
// The adapter side is the same adapters called directly with the same messages (no
// records): what the adapter costs over its library. The raw side is the client library
// alone: go-mail's DialAndSend of the same text message, and net/http's POST of the same
// body signed the Standard Webhooks way by hand. The goal is stated against the
// raw client alone; against a local provider that answers in about a millisecond, any
// path that writes its records to the engine is bound by the engine (two writes a
// delivery), so both ratios are reported.
//
// Each side sends -deliver-messages messages per channel, in halves ordered path,
// records, adapter, raw, raw, adapter, records, path after a warm-up of each;
// deliveries/s is messages over the halves' wall time. Every message must reach the sink (its count is checked
// after each half), and the path's records must end SENT (a sample of each half is read
// back with Store.Status). The path's DynamoDB calls and units per delivery are metered
// (ReturnConsumedCapacity on every call of its client).

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// deliverGoal is issue 11's bound on path deliveries/s over raw deliveries/s.
const deliverGoal = 0.8

// deliverConfig holds scenario 16's flags.
type deliverConfig struct {
	messages    int
	concurrency int
	channels    string
	latency     time.Duration
}

// DeliverResult is scenario 16.
type DeliverResult struct {
	Engine      string `json:"engine"`
	Concurrency int    `json:"concurrency"`
	// LatencyMS is how long the sinks waited before answering each message (-deliver-latency).
	LatencyMS float64          `json:"provider_latency_ms"`
	Messages  int              `json:"messages_per_side"`
	Channels  []DeliverChannel `json:"channels"`
	GoalRatio float64          `json:"goal_ratio"`
}

// DeliverChannel is one channel's three sides.
type DeliverChannel struct {
	Channel  string `json:"channel"`
	Provider string `json:"provider"`
	Path     Side   `json:"delivery_path"`
	Records  Side   `json:"raw_client_and_records"`
	Adapter  Side   `json:"adapter_alone"`
	Raw      Side   `json:"raw_client"`
	// Received is what the sink counted during the measured halves, against Expected.
	Received int64 `json:"received"`
	Expected int64 `json:"expected"`
	// Checked records read back after the path's halves, and how many were SENT.
	Checked int `json:"records_checked"`
	SentOK  int `json:"records_sent"`
	// PathCapacity is the path's engine work per delivery (calls, WCU, RCU), by
	// operation and partition kinds in PathByCall.
	PathCapacity Capacity            `json:"path_capacity_per_delivery"`
	PathByCall   map[string]Capacity `json:"path_capacity_by_operation_per_delivery"`
	// PrepareSeconds is the time the sends queueing the path's records took (unmeasured).
	PrepareSeconds float64 `json:"prepare_seconds"`
	// RecordsCapacity is the raw client + records side's engine work per delivery.
	RecordsCapacity Capacity `json:"raw_records_capacity_per_delivery"`
	Ratio           float64  `json:"path_over_raw"`
	RecordsRatio    float64  `json:"path_over_raw_and_records"`
	AdapterRatio    float64  `json:"adapter_over_raw"`
	// GoalMet is the goal as written (path ≥ 0.8× the raw client alone);
	// GoalRecordsMet the same bound against the raw client with the same record writes.
	GoalMet        bool `json:"goal_met"`
	GoalRecordsMet bool `json:"goal_against_raw_and_records_met"`
}

// deliverRig is what one channel's three sides send through.
type deliverRig struct {
	channel  string // inbox.ChannelEmail or inbox.ChannelWebhook
	provider string
	// path delivers one queued record (the handler's Handle of its task).
	path func(ctx context.Context, t inbox.Task) error
	// records delivers one queued record by hand (rawRecords): claim, raw send, SENT.
	records func(ctx context.Context, t inbox.Task) error
	// adapter sends message i through the adapter alone; raw through the client alone.
	adapter func(ctx context.Context, i int64) error
	raw     func(ctx context.Context, i int64) error
	sink    *receipts
}

// countWindow runs fn n times from workers goroutines (each call gets the next index
// from 0) and returns the window: latencies, errors, wall time.
func countWindow(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) window {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		w        window
		firstErr error
	)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, n/workers+1)
			var errs int
			var fe error
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					break
				}
				s := time.Now()
				err := fn(ctx, i)
				lat = append(lat, time.Since(s))
				if err != nil {
					errs++
					if fe == nil {
						fe = err
					}
				}
			}
			mu.Lock()
			w.lat = append(w.lat, lat...)
			w.errors += errs
			if firstErr == nil {
				firstErr = fe
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	w.seconds = time.Since(t0).Seconds()
	w.requests = len(w.lat)
	if firstErr != nil {
		w.firstErr = firstErr.Error()
	}
	return w
}

// deliverUsers are the recipients of the path's sends (profiles with an email address).
const deliverUsers = inbox.MaxRecipients

func deliverUser(i int) string     { return fmt.Sprintf("dlv-%03d", i) }
func deliverEmail(u string) string { return u + "@bench.example" }

// deliverSend is the notification queued for the path and sent by the other sides: its
// title is the email's subject and its body the text (no template: store routing's
// defaults).
func deliverSend() inbox.SendInput {
	return inbox.SendInput{Type: "comment", Category: "social", Title: "Grace Hopper replied to your comment",
		Body:  "Have you tried the compiler? It saves a great deal of work. Reply on the thread to keep the conversation going.",
		Actor: &inbox.Actor{ActorID: "grace", Name: "Grace Hopper"}}
}

// deliverPayload is the webhook body the adapter and raw sides send: the shape the
// path's records carry ({"type","timestamp","data":{notification}}), of about its size.
func deliverPayload(i int64) []byte {
	in := deliverSend()
	b, _ := json.Marshal(map[string]any{"type": "notification.created", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"data": map[string]any{"id": ulid.Make().String(), "tenantId": tenant, "userId": deliverUser(int(i % deliverUsers)), "type": in.Type,
			"category": in.Category, "title": in.Title, "body": in.Body, "actor": map[string]string{"id": "grace", "name": "Grace Hopper"},
			"createdAt": time.Now().UTC().Format(time.RFC3339Nano)}})
	return b
}

// queueDeliveries queues n records of channel through real sends on st (100 recipients
// a call, 4 calls at once) and returns their tasks, in no particular order.
func queueDeliveries(ctx context.Context, st *store.Store, channel string, n int) ([]inbox.Task, error) {
	var mu sync.Mutex
	tasks := make([]inbox.Task, 0, n)
	calls := (n + deliverUsers - 1) / deliverUsers
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range 4 {
		g.Go(func() error {
			for {
				c := int(next.Add(1) - 1)
				if c >= calls {
					return nil
				}
				k := min(deliverUsers, n-c*deliverUsers)
				in := deliverSend()
				in.IdempotencyKey = "dlv-" + ulid.Make().String()
				in.TemplateChannels = []string{inbox.ChannelInApp, channel}
				for u := range k {
					in.Recipients = append(in.Recipients, deliverUser(u))
				}
				res, err := service.Writer{Store: st}.Send(gctx, tenant, in)
				if err != nil {
					return err
				}
				if len(res.Delivered) != k {
					return fmt.Errorf("queue %s: a send of %d recipients delivered %d (skipped %v)", channel, k, len(res.Delivered), res.Skipped)
				}
				mu.Lock()
				for _, d := range res.Delivered {
					tasks = append(tasks, inbox.Task{Kind: inbox.TaskDeliver, Viewer: inbox.Viewer{TenantID: tenant, UserID: d.UserID},
						Ref: d.Notification.ID, Token: channel})
				}
				mu.Unlock()
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return tasks, nil
}

func (b *harness) deliverScenario(ctx context.Context) (*DeliverResult, error) {
	c := b.c.deliver
	if c.messages < 2 || c.concurrency < 1 {
		return nil, fmt.Errorf("-deliver-messages must be at least 2 and -deliver-concurrency positive")
	}
	// A table of its own: the sends queue scheduler tasks nobody runs here, which would
	// otherwise wait for a later scenario's scheduler.
	table := b.c.table + "_dlv"
	meter := &capacityMeter{}
	db := dynamodb.New(b.eng.db.Options(), meter.option())
	st := store.New(db, table, store.WithLogger(b.log), store.WithSweepWorkers(0))
	defer st.Close()
	if err := st.CreateTable(ctx); err != nil {
		return nil, err
	}
	defer b.dropTable(ctx, table)

	sinkLatency = c.latency
	smtpS, err := startSMTPSink()
	if err != nil {
		return nil, err
	}
	defer smtpS.close()
	hookS, err := startWebhookSink()
	if err != nil {
		return nil, err
	}
	defer hookS.close()
	secretKey := make([]byte, 32)
	_, _ = rand.Read(secretKey)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(secretKey)

	progress("deliver: %d users with an email address; the tenant's webhook %s", deliverUsers, hookS.url)
	for i := range deliverUsers {
		u := deliverUser(i)
		if _, err := st.PutUserProfile(ctx, inbox.Viewer{TenantID: tenant, UserID: u}, inbox.UserProfile{Addresses: map[string]string{"email": deliverEmail(u)}}); err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
	}
	if _, err := st.PutTenantSettings(ctx, tenant, inbox.TenantSettings{WebhookURL: hookS.url, WebhookSecret: secret}); err != nil {
		return nil, fmt.Errorf("tenant settings: %w", err)
	}
	rigs, err := b.deliverRigs(st, &rawRecords{db: db, table: table, lease: 20 * time.Second}, smtpS, hookS, secret, secretKey, c.concurrency)
	if err != nil {
		return nil, err
	}

	res := &DeliverResult{Engine: b.eng.name, Concurrency: c.concurrency, Messages: c.messages, GoalRatio: deliverGoal,
		LatencyMS: float64(c.latency) / float64(time.Millisecond)}
	want := map[string]bool{}
	for _, s := range strings.Split(c.channels, ",") {
		want[strings.ToUpper(strings.TrimSpace(s))] = true
	}
	for _, rig := range rigs {
		if !want[rig.channel] {
			continue
		}
		r, err := b.deliverChannel(ctx, st, meter, rig)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rig.channel, err)
		}
		res.Channels = append(res.Channels, r)
	}
	return res, nil
}

// deliverChannel measures one channel's three sides.
func (b *harness) deliverChannel(ctx context.Context, st *store.Store, meter *capacityMeter, rig deliverRig) (DeliverChannel, error) {
	c := b.c.deliver
	half := c.messages / 2
	warm := max(half/5, 2*c.concurrency)
	r := DeliverChannel{Channel: rig.channel, Provider: rig.provider}

	// Queue the records of the path and of the raw client + records side: a warm-up's
	// and both halves' each.
	t0 := time.Now()
	per := warm + 2*half
	progress("deliver %s: queueing %d records through service.Writer", rig.channel, 2*per)
	tasks, err := queueDeliveries(ctx, st, rig.channel, 2*per)
	if err != nil {
		return r, err
	}
	r.PrepareSeconds = time.Since(t0).Seconds()
	// The queueing's burst of writes is left to settle before anything is measured.
	time.Sleep(2 * time.Second)
	warmTasks, h1, h2 := tasks[:warm], tasks[warm:warm+half], tasks[warm+half:per]
	rtasks := tasks[per:]
	rwarm, rh1, rh2 := rtasks[:warm], rtasks[warm:warm+half], rtasks[warm+half:]

	var seq atomic.Int64
	path := func(ts []inbox.Task) window {
		return countWindow(ctx, c.concurrency, len(ts), func(ctx context.Context, i int) error { return rig.path(ctx, ts[i]) })
	}
	records := func(ts []inbox.Task) window {
		return countWindow(ctx, c.concurrency, len(ts), func(ctx context.Context, i int) error { return rig.records(ctx, ts[i]) })
	}
	other := func(fn func(context.Context, int64) error, n int) window {
		return countWindow(ctx, c.concurrency, n, func(ctx context.Context, _ int) error { return fn(ctx, seq.Add(1)) })
	}
	progress("deliver %s: warming up each side (%d messages)", rig.channel, warm)
	if w := path(warmTasks); w.errors > 0 {
		return r, fmt.Errorf("path warm-up: %d errors, first: %s", w.errors, w.firstErr)
	}
	if w := records(rwarm); w.errors > 0 {
		return r, fmt.Errorf("raw client + records warm-up: %d errors, first: %s", w.errors, w.firstErr)
	}
	if w := other(rig.adapter, warm); w.errors > 0 {
		return r, fmt.Errorf("adapter warm-up: %d errors, first: %s", w.errors, w.firstErr)
	}
	if w := other(rig.raw, warm); w.errors > 0 {
		return r, fmt.Errorf("raw warm-up: %d errors, first: %s", w.errors, w.firstErr)
	}

	n0 := rig.sink.n.Load()
	var pcap Capacity
	pby := map[string]Capacity{}
	pathHalf := func(ts []inbox.Task) window {
		meter.take()
		w := path(ts)
		t, by := meter.take()
		pcap.WCU, pcap.RCU, pcap.Calls = pcap.WCU+t.WCU, pcap.RCU+t.RCU, pcap.Calls+t.Calls
		for k, v := range by {
			e := pby[k]
			e.WCU, e.RCU, e.Calls = e.WCU+v.WCU, e.RCU+v.RCU, e.Calls+v.Calls
			pby[k] = e
		}
		return w
	}
	var rcap Capacity
	recordsHalf := func(ts []inbox.Task) window {
		meter.take()
		w := records(ts)
		t, _ := meter.take()
		rcap.WCU, rcap.RCU, rcap.Calls = rcap.WCU+t.WCU, rcap.RCU+t.RCU, rcap.Calls+t.Calls
		return w
	}
	progress("deliver %s: %d messages a side at concurrency %d, in halves: path, records, adapter, raw, raw, adapter, records, path", rig.channel, 2*half, c.concurrency)
	p1 := pathHalf(h1)
	k1 := recordsHalf(rh1)
	a1 := other(rig.adapter, half)
	w1 := other(rig.raw, half)
	w2 := other(rig.raw, half)
	a2 := other(rig.adapter, half)
	k2 := recordsHalf(rh2)
	p2 := pathHalf(h2)
	r.Received = rig.sink.n.Load() - n0
	r.Expected = int64(8 * half)
	r.Path = sideOf("delivery path (delivery handler: claim, adapter, record)", p1, p2)
	r.Records = sideOf("raw client + the same record writes by hand", k1, k2)
	r.Adapter = sideOf("adapter alone (no records)", a1, a2)
	r.Raw = sideOf("raw client loop", w1, w2)
	perDelivery := func(x Capacity, n int) Capacity {
		return Capacity{WCU: ratio(x.WCU, float64(n)), RCU: ratio(x.RCU, float64(n)), Calls: x.Calls}
	}
	r.PathCapacity = perDelivery(pcap, r.Path.Requests)
	r.RecordsCapacity = perDelivery(rcap, r.Records.Requests)
	r.PathByCall = map[string]Capacity{}
	for k, v := range pby {
		r.PathByCall[k] = perDelivery(v, r.Path.Requests)
	}

	// Read a sample of the path's records back: each must be SENT.
	for _, ts := range [][]inbox.Task{h1, h2} {
		for i := 0; i < len(ts); i += max(1, len(ts)/50) {
			s, err := st.Status(ctx, tenant, ts[i].Ref)
			if err != nil {
				return r, fmt.Errorf("status of %s: %w", ts[i].Ref, err)
			}
			r.Checked++
			for _, ch := range s.Channels {
				if ch.Channel == rig.channel && ch.Status == inbox.DeliverySent {
					r.SentOK++
				}
			}
		}
	}
	r.Ratio = ratio(r.Path.ReqPerSec, r.Raw.ReqPerSec)
	r.RecordsRatio = ratio(r.Path.ReqPerSec, r.Records.ReqPerSec)
	r.AdapterRatio = ratio(r.Adapter.ReqPerSec, r.Raw.ReqPerSec)
	ok := r.Path.Errors == 0 && r.Raw.Errors == 0 && r.Records.Errors == 0 && r.Received == r.Expected && r.SentOK == r.Checked
	r.GoalMet = ok && r.Ratio >= deliverGoal
	r.GoalRecordsMet = ok && r.RecordsRatio >= deliverGoal
	progress("deliver %s: path %.0f/s, raw + records %.0f/s, adapter %.0f/s, raw %.0f/s (path/raw %.2f, path/(raw + records) %.2f); received %d of %d; %d of %d records SENT",
		rig.channel, r.Path.ReqPerSec, r.Records.ReqPerSec, r.Adapter.ReqPerSec, r.Raw.ReqPerSec, r.Ratio, r.RecordsRatio, r.Received, r.Expected, r.SentOK, r.Checked)
	return r, nil
}

// Table renders scenario 16.
func (x *DeliverResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 16. deliver: channel deliveries/s, delivery path vs raw client loop\n\n")
	fmt.Fprintf(&b, "Engine: %s. Local providers in this process: an SMTP server (go-smtp, no TLS, no auth) and a webhook receiver (net/http, 204), "+
		"answering each message after %.0f ms (-deliver-latency). "+
		"Path: the delivery handler as the gateway builds it (claim the record, send through the channel adapter, record SENT) called by %d callers with the tasks of records "+
		"queued beforehand by real sends (service.Writer, 100 recipients a call), its DynamoDB client on DynamoDB Local; the provider rate limit set far above what is reached; "+
		"the scheduler's polling is not part of it (scenario 17). Raw client + records: the same two record writes by hand around the raw client's send "+
		"(UpdateItem claiming the QUEUED record, ALL_NEW; UpdateItem to SENT on the claim), on records queued the same way. Adapter: the same adapter called directly "+
		"with the same messages (no records). Raw: the client library alone (go-mail DialAndSend of the same text message; net/http POST of the same body, "+
		"signed the Standard Webhooks way by hand). %d messages a side, in halves path, records, adapter, raw, raw, adapter, records, path after a warm-up each.\n\n", x.Engine, x.LatencyMS, x.Concurrency, x.Messages)
	fmt.Fprintln(&b, "| channel | side | messages (errors) | deliveries/s | p50 ms | p99 ms | / raw |")
	fmt.Fprintln(&b, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, c := range x.Channels {
		for _, s := range []Side{c.Path, c.Records, c.Adapter, c.Raw} {
			fmt.Fprintf(&b, "| %s (%s) | %s | %d (%d) | %.1f | %.2f | %.2f | %.2f |\n", c.Channel, c.Provider, s.Name, s.Requests, s.Errors, s.ReqPerSec,
				s.Latency.P50, s.Latency.P99, ratio(s.ReqPerSec, c.Raw.ReqPerSec))
		}
	}
	fmt.Fprintln(&b)
	for _, c := range x.Channels {
		fmt.Fprintf(&b, "- %s: path / raw client **%.2f** (goal ≥ %.1f: %s); path / (raw client + the same record writes) **%.2f** (≥ %.1f: %s); adapter / raw %.2f. "+
			"The sink received %d of %d messages; %d of %d records read back SENT. "+
			"Engine work per delivery: raw client + records %.2f calls, %.2f WCU; path %.2f calls, %.2f WCU, %.2f RCU (",
			c.Channel, c.Ratio, x.GoalRatio, yes(c.GoalMet), c.RecordsRatio, x.GoalRatio, yes(c.GoalRecordsMet), c.AdapterRatio, c.Received, c.Expected, c.SentOK, c.Checked,
			ratio(float64(c.RecordsCapacity.Calls), float64(c.Records.Requests)), c.RecordsCapacity.WCU,
			ratio(float64(c.PathCapacity.Calls), float64(c.Path.Requests)), c.PathCapacity.WCU, c.PathCapacity.RCU)
		keys := make([]string, 0, len(c.PathByCall))
		for k := range c.PathByCall {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteString("; ")
			}
			v := c.PathByCall[k]
			fmt.Fprintf(&b, "%s %.2f calls %.2f WCU", k, ratio(float64(v.Calls), float64(c.Path.Requests)), v.WCU)
		}
		fmt.Fprintf(&b, "). Queueing the records took %.1fs (not measured).", c.PrepareSeconds)
		for _, s := range []Side{c.Path, c.Records, c.Adapter, c.Raw} {
			if s.FirstError != "" {
				fmt.Fprintf(&b, " %s: first error %q.", s.Name, s.FirstError)
			}
		}
		fmt.Fprintln(&b)
	}
	return b.String()
}
