package main

// Scenario 17, e2e: a transactional email end to end, from POST /v1/notifications (202)
// to the provider's receipt, idle and while a bulk broadcast to a large segment runs
// (issue 11's "Measured": p50/p99, the broadcast of 100,000 recipients).
//
// One gateway as the serve command builds it, in this process: the HTTP surface
// of app.Build on a loopback listener, and its scheduler (Gateway.RunScheduler: the
// deliver handler with the adapters the configuration names, the
// broadcasts' shards, the sends' recovery) running on the same store, on a table of the
// scenario's own. Its email provider is a local SMTP server (sinks.go) named by the
// configuration's SMTP URL, at the gateway's default rate limit. The request: a service
// token, a fresh Idempotency-Key, recipientUserId (one of 100 users with an email
// address in their profile), template bench-e2e (title, body and an email part whose
// subject carries the request's sequence number), priority transactional. Each request
// is timed from just before it is sent: to its 202, and to the SMTP server's end of
// DATA for the message with its subject (which includes the send pipeline's processing,
// the deliver task's wait for the scheduler's poll, the claim, the SMTP exchange and
// nothing after it). Requests go out open loop at -e2e-rate. After each phase every
// received request's status is read back (Store.Status): the store's clock when its
// send's transaction was built (createdAt) and when its EMAIL record became SENT (sentAt),
// relative to the request, split the receipt latency between processing and delivery.
//
// Phases: idle (-e2e-duration in two halves, before the broadcast and after it), busy
// (-e2e-duration while a broadcast to a segment of -e2e-members members, filled through
// Store.UpdateSegment beforehand, runs in the bulk lane; cancelled after the phase, as
// it would outlast it). The broadcast is in-app only (its members have no email
// address): it loads the engine, the scheduler and the bulk lane, not the SMTP server.
// An email not received -e2e-timeout after its phase counts as lost.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/caarlos0/env/v11"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/store"
)

// e2eConfig holds scenario 17's flags.
type e2eConfig struct {
	members int
	rate    float64
	phase   time.Duration
	timeout time.Duration
	poll    time.Duration
}

// E2EResult is scenario 17.
type E2EResult struct {
	Engine   string  `json:"engine"`
	Rate     float64 `json:"requests_per_sec"`
	Duration string  `json:"phase_duration"`
	Members  int     `json:"broadcast_members"`
	// SchedPoll is the gateway scheduler's poll interval; RateEmail its email rate limit.
	SchedPoll string   `json:"sched_poll"`
	RateEmail float64  `json:"rate_email"`
	Idle      E2EPhase `json:"idle"`
	Busy      E2EPhase `json:"busy"`
	// IdleHalves are the idle phase's halves (before the broadcast, after it).
	IdleHalves []E2EPhase `json:"idle_halves"`
	// FillSeconds is how long adding the members took.
	FillSeconds float64 `json:"segment_fill_seconds"`
	// BroadcastWritten is what the broadcast wrote during the busy phase, at
	// BroadcastPerSec; BroadcastStatus its status at the phase's end.
	BroadcastWritten int     `json:"broadcast_written_during_busy"`
	BroadcastPerSec  float64 `json:"broadcast_recipients_per_sec"`
	BroadcastStatus  string  `json:"broadcast_status_at_end_of_busy"`
	P50Ratio         float64 `json:"p50_busy_over_idle"`
	P99Ratio         float64 `json:"p99_busy_over_idle"`
}

// E2EPhase is one phase's requests.
type E2EPhase struct {
	Requests   int    `json:"requests"`
	Errors     int    `json:"errors"`
	Lost       int    `json:"lost"`
	FirstError string `json:"first_error,omitempty"`
	// Accept is request → 202; Receipt request → the SMTP server's end of DATA;
	// AfterAccept 202 → end of DATA (processing, the deliver task's wait for the
	// scheduler, the claim and the SMTP exchange).
	Accept      Latency `json:"accept_latency"`
	Receipt     Latency `json:"receipt_latency"`
	AfterAccept Latency `json:"after_accept_latency"`
	// Written and Sent are request → the store's clock (milliseconds) when the send's
	// transaction was built (the status summary's createdAt) and when the EMAIL record
	// was recorded SENT (sentAt), read back with Store.Status after the phase: the split
	// of Receipt between processing and delivery.
	Written Latency `json:"written_latency"`
	Sent    Latency `json:"record_sent_latency"`
}

// e2eUsers are the transactional recipients (profiles with an email address).
const e2eUsers = 100

func e2eUser(i int64) string { return fmt.Sprintf("e2e-%03d", i%e2eUsers) }

// e2eWindow is one stretch of requests.
type e2eWindow struct {
	accept, receipt, after []time.Duration
	written, sent          []time.Duration
	errors, lost           int
	firstErr               string
}

func (b *harness) e2eScenario(ctx context.Context) (*E2EResult, error) {
	c := b.c.e2e
	if c.rate <= 0 || c.phase <= 0 || c.members < 1 {
		return nil, fmt.Errorf("-e2e-rate, -e2e-duration and -e2e-members must be positive")
	}
	table := b.c.table + "_e2e"
	sink, err := startSMTPSink()
	if err != nil {
		return nil, err
	}
	defer sink.close()
	cfg, err := e2eGatewayConfig(table, "smtp://"+sink.addr, c.poll)
	if err != nil {
		return nil, err
	}
	// One gateway as serve composes it (app.Build: its store creates the table, its
	// scheduler runs below).
	createTable := true
	cfg.CreateTable = &createTable
	gw, err := b.serve(ctx, dynamodb.New(b.eng.db.Options()), func(c *app.Config) { *c = cfg }, app.Deps{Broker: live.NewLocal()})
	if err != nil {
		return nil, err
	}
	defer b.dropTable(ctx, table) // after the gateway closed
	defer gw.close()
	g, st := gw.app, gw.app.Store
	res := &E2EResult{Engine: b.eng.name, Rate: c.rate, Duration: c.phase.String(), Members: c.members,
		SchedPoll: cfg.SchedPoll.String(), RateEmail: cfg.RateEmail}

	progress("e2e: %d users with an email address, template bench-e2e", e2eUsers)
	for i := range int64(e2eUsers) {
		u := e2eUser(i)
		if _, err := st.PutUserProfile(ctx, inbox.Viewer{TenantID: tenant, UserID: u}, inbox.UserProfile{Addresses: map[string]string{"email": u + "@bench.example"}}); err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
	}
	if _, err := g.Templates.Put(ctx, tenant, "bench-e2e", inbox.TemplateInput{
		Title: "Grace Hopper replied to your comment ({{ seq }})",
		Body:  "Have you tried the compiler? It saves a great deal of work.",
		Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "e2e {{ seq }}",
			Text: "Grace Hopper replied to your comment:\n\nHave you tried the compiler? It saves a great deal of work.\n",
			HTML: "<p>Grace Hopper replied to your comment:</p><blockquote>Have you tried the compiler? It saves a great deal of work.</blockquote>"}},
	}); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}

	// The gateway's scheduler (it releases its shards when stopped).
	defer background(ctx, g.RunScheduler, nil)()
	base := strings.TrimSuffix(gw.url, "/graphql")
	token, err := b.serviceToken()
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()

	// The segment, filled before anything is measured.
	seg := "followers:e2e"
	if res.FillSeconds, err = fillSegmentTimed(ctx, st, "e2e", seg, "em", c.members); err != nil {
		return nil, err
	}
	progress("e2e: letting the engine settle")
	time.Sleep(5 * time.Second)
	// The fill keeps the engine so busy that lease renewals time out: the idle phase
	// starts on a scheduler holding every shard again (a task on a shard nobody holds
	// waits for its lease to be taken back).
	if err := waitHeld(ctx, time.Minute, "after the fill, the gateway's scheduler", cfg.SchedShards, func() int { return len(g.Scheduler.Held()) }); err != nil {
		return nil, err
	}

	var seq atomic.Int64
	phase := func(d time.Duration) e2eWindow {
		return b.e2eWindow(ctx, st, client, base, token, sink, &seq, c.rate, d, c.timeout)
	}
	warm := 2 * b.warmup()
	progress("e2e: warming up (%.0f requests/s for %s)", c.rate, warm)
	if w := phase(warm); w.errors+w.lost > 0 {
		return nil, fmt.Errorf("warm-up: %d errors, %d lost (first error: %s)", w.errors, w.lost, w.firstErr)
	}
	// The broadcast, through the REST API (priority bulk).
	i1, busy, i2, bb, err := idleBusyIdle(ctx, "e2e", c.phase/2, c.phase, 2*time.Minute, phase,
		func() (string, error) { return e2eStartBroadcast(ctx, client, base, token, seg) },
		func(id string) (inbox.Broadcast, error) { return st.GetBroadcast(ctx, tenant, id) },
		func(id string) error { _, err := st.CancelBroadcast(ctx, tenant, id); return err })
	if err != nil {
		return nil, err
	}
	res.BroadcastWritten, res.BroadcastPerSec, res.BroadcastStatus = bb.written, bb.perSec, bb.status

	res.Idle = e2ePhaseOf(i1, i2)
	res.IdleHalves = []E2EPhase{e2ePhaseOf(i1), e2ePhaseOf(i2)}
	res.Busy = e2ePhaseOf(busy)
	res.P50Ratio = ratio(res.Busy.Receipt.P50, res.Idle.Receipt.P50)
	res.P99Ratio = ratio(res.Busy.Receipt.P99, res.Idle.Receipt.P99)
	progress("e2e: to receipt p50/p99 idle %.1f/%.1f ms, busy %.1f/%.1f ms", res.Idle.Receipt.P50, res.Idle.Receipt.P99, res.Busy.Receipt.P50, res.Busy.Receipt.P99)
	return res, nil
}

// e2eWindow sends at rate for d (open loop) and waits for every email (up to timeout
// after the window).
func (b *harness) e2eWindow(ctx context.Context, st *store.Store, client *http.Client, base, token string, sink *smtpSink, seq *atomic.Int64, rate float64, d, timeout time.Duration) e2eWindow {
	var (
		mu sync.Mutex
		w  e2eWindow
		wg sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		w.errors++
		if w.firstErr == "" {
			w.firstErr = err.Error()
		}
		mu.Unlock()
	}
	end := time.Now().Add(d)
	giveUp := end.Add(timeout)
	type done struct {
		t0  time.Time
		nid string
	}
	var received []done
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for time.Now().Before(end) && ctx.Err() == nil {
		<-tick.C
		n := seq.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			subject := fmt.Sprintf("e2e %d", n)
			arrived := sink.expect(subject)
			t0 := time.Now()
			nid, err := e2ePost(ctx, client, base, token, n)
			if err != nil {
				sink.forget(subject)
				fail(err)
				return
			}
			accepted := time.Since(t0)
			select {
			case at := <-arrived:
				mu.Lock()
				w.accept = append(w.accept, accepted)
				w.receipt = append(w.receipt, at.Sub(t0))
				w.after = append(w.after, at.Sub(t0)-accepted)
				received = append(received, done{t0, nid})
				mu.Unlock()
			case <-time.After(time.Until(giveUp)):
				sink.forget(subject)
				mu.Lock()
				w.lost++
				mu.Unlock()
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
	for _, d := range received {
		s, err := st.Status(ctx, tenant, d.nid)
		if err != nil {
			fail(fmt.Errorf("status of %s: %w", d.nid, err))
			continue
		}
		w.written = append(w.written, s.CreatedAt.Sub(d.t0))
		for _, ch := range s.Channels {
			if ch.Channel == inbox.ChannelEmail && !ch.SentAt.IsZero() {
				w.sent = append(w.sent, ch.SentAt.Sub(d.t0))
			}
		}
	}
	return w
}

// e2ePost sends request n: one recipient, template bench-e2e, priority transactional;
// it returns the notification's id.
func e2ePost(ctx context.Context, client *http.Client, base, token string, n int64) (string, error) {
	body, _ := json.Marshal(map[string]any{"recipientUserId": e2eUser(n), "type": "comment", "category": "social",
		"template": "bench-e2e", "data": map[string]any{"seq": fmt.Sprint(n)}, "priority": "transactional"})
	var out struct {
		NotificationID string `json:"notificationId"`
	}
	if err := e2eCall(ctx, client, base+"/v1/notifications", token, body, &out); err != nil {
		return "", err
	}
	if out.NotificationID == "" {
		return "", fmt.Errorf("202 without a notificationId")
	}
	return out.NotificationID, nil
}

// e2eStartBroadcast starts an in-app broadcast to seg through POST /v1/broadcasts.
func e2eStartBroadcast(ctx context.Context, client *http.Client, base, token, seg string) (string, error) {
	in := broadcastSend()
	body, _ := json.Marshal(map[string]any{"segment": seg, "type": in.Type, "category": in.Category, "title": in.Title, "body": in.Body, "priority": "bulk"})
	var out struct {
		BroadcastID string `json:"broadcastId"`
	}
	if err := e2eCall(ctx, client, base+"/v1/broadcasts", token, body, &out); err != nil {
		return "", fmt.Errorf("start the broadcast: %w", err)
	}
	return out.BroadcastID, nil
}

// e2eCall POSTs body with the service token and a fresh Idempotency-Key; 202 expected.
func e2eCall(ctx context.Context, client *http.Client, url, token string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "e2e-"+ulid.Make().String())
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func e2ePhaseOf(ws ...e2eWindow) E2EPhase {
	var p E2EPhase
	var acc, rec, aft, wr, se []time.Duration
	for _, w := range ws {
		p.Requests += len(w.receipt) + w.lost + w.errors
		p.Errors += w.errors
		p.Lost += w.lost
		if p.FirstError == "" {
			p.FirstError = w.firstErr
		}
		acc = append(acc, w.accept...)
		rec = append(rec, w.receipt...)
		aft = append(aft, w.after...)
		wr = append(wr, w.written...)
		se = append(se, w.sent...)
	}
	p.Accept, p.Receipt, p.AfterAccept = summarize(acc), summarize(rec), summarize(aft)
	p.Written, p.Sent = summarize(wr), summarize(se)
	return p
}

// Table renders scenario 17.
func (x *E2EResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 17. e2e: POST /v1/notifications (202) to the SMTP server's receipt, idle and during a %d-member broadcast\n\n", x.Members)
	fmt.Fprintf(&b, "Engine: %s. One gateway in this process as serve builds it (app.Build: its HTTP surface on a loopback listener, its scheduler on the same store, poll %s), "+
		"its email provider a local SMTP server (go-smtp) at the default rate limit (%.0f/s). Transactional requests at %.0f/s (open loop): service token, one recipient "+
		"with an email address, template bench-e2e (title, body, email subject/text/HTML), priority transactional; each timed from just before the request to its 202 and to the "+
		"end of DATA of its email at the SMTP server; written and record SENT are the store's clock (milliseconds) at the send's transaction (the status summary's createdAt) and at the EMAIL record's SENT, read back after each phase. Idle: %s in halves before and after the broadcast; busy: %s while an in-app broadcast (POST /v1/broadcasts, priority bulk) "+
		"to a segment of %d members (filled in %.1fs) ran; it wrote %d recipients during the busy phase (%.0f/s) and was %s at its end (then cancelled if still running).\n\n",
		x.Engine, x.SchedPoll, x.RateEmail, x.Rate, x.Duration, x.Duration, x.Members, x.FillSeconds, x.BroadcastWritten, x.BroadcastPerSec, x.BroadcastStatus)
	fmt.Fprintln(&b, "| phase | requests (errors, lost) | 202 p50 ms | 202 p99 ms | receipt p50 ms | receipt p90 ms | receipt p99 ms | receipt mean ms | 202 → receipt p50 / p99 ms | written p50 / p99 ms | record SENT p50 / p99 ms |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	row := func(name string, p E2EPhase) {
		fmt.Fprintf(&b, "| %s | %d (%d, %d) | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f |\n", name, p.Requests, p.Errors, p.Lost,
			p.Accept.P50, p.Accept.P99, p.Receipt.P50, p.Receipt.P90, p.Receipt.P99, p.Receipt.Mean, p.AfterAccept.P50, p.AfterAccept.P99,
			p.Written.P50, p.Written.P99, p.Sent.P50, p.Sent.P99)
	}
	row("idle (both halves)", x.Idle)
	if len(x.IdleHalves) == 2 {
		row("idle, before the broadcast", x.IdleHalves[0])
		row("idle, after the broadcast", x.IdleHalves[1])
	}
	row("busy (broadcast running)", x.Busy)
	fmt.Fprintf(&b, "\nBusy / idle, to receipt: p50 %.2f×, p99 %.2f×.", x.P50Ratio, x.P99Ratio)
	for _, p := range []struct {
		n string
		p E2EPhase
	}{{"idle", x.Idle}, {"busy", x.Busy}} {
		if p.p.FirstError != "" {
			fmt.Fprintf(&b, " %s: first error %q.", p.n, p.p.FirstError)
		}
	}
	fmt.Fprintln(&b)
	return b.String()
}

// e2eGatewayConfig is the gateway's configuration with every default (Config's env
// tags, parsed from a private environment, not this process's, and the tenant
// preferences app.LoadConfig derives from them), its table, and its email provider at
// smtpURL; poll > 0 overrides the scheduler's poll interval.
func e2eGatewayConfig(table, smtpURL string, poll time.Duration) (app.Config, error) {
	var cfg app.Config
	envs := map[string]string{"INBOX_TABLE": table, "INBOX_SMTP_URL": smtpURL, "INBOX_EMAIL_FROM": deliverFrom}
	if poll > 0 {
		envs["INBOX_SCHED_POLL"] = poll.String()
	}
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: envs}); err != nil {
		return cfg, fmt.Errorf("gateway configuration: %w", err)
	}
	// What app.LoadConfig derives from the parsed values.
	prefs, err := inbox.ParseTenantPreferences(cfg.DefaultPreferences, cfg.CriticalCategories)
	if err != nil {
		return cfg, fmt.Errorf("gateway configuration: preferences: %w", err)
	}
	cfg.TenantPreferences = prefs
	return cfg, nil
}
