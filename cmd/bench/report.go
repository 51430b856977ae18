package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Results is one run of the bench, as written to bench/results/*.json.
type Results struct {
	Engine    string           `json:"engine"`
	Command   string           `json:"command"`
	StartedAt time.Time        `json:"started_at"`
	Elapsed   string           `json:"elapsed"`
	Host      Host             `json:"host"`
	Settings  Settings         `json:"settings"`
	Seed      SeedStats        `json:"seed"`
	Inbox     *InboxResult     `json:"gateway_vs_raw,omitempty"`
	Naive     *NaiveResult     `json:"batched_vs_naive,omitempty"`
	Cache     *CacheResult     `json:"profile_cache,omitempty"`
	MarkAll   *MarkAllResult   `json:"mark_all_read,omitempty"`
	Send      *SendResult      `json:"send_throughput,omitempty"`
	Memory    Memory           `json:"memory"`
	Live      *LiveResult      `json:"live,omitempty"`
	Relay     *RelayResult     `json:"relay,omitempty"`
	Abuse     *AbuseResult     `json:"abuse,omitempty"`
	Sched     *SchedResult     `json:"sched,omitempty"`
	Groups    *GroupsResult    `json:"groups_vs_inbox,omitempty"`
	Snooze    *SnoozeResult    `json:"snooze,omitempty"`
	Broadcast *BroadcastResult `json:"broadcast,omitempty"`
	Lanes     *LanesResult     `json:"lanes,omitempty"`
	Accept    *AcceptResult    `json:"accept,omitempty"`
	Deliver   *DeliverResult   `json:"deliver,omitempty"`
	E2E       *E2EResult       `json:"e2e,omitempty"`
	Workflows *WorkflowsResult `json:"workflows,omitempty"`
	Announce  *AnnounceResult  `json:"announce,omitempty"`
}

// Host describes the machine.
type Host struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model,omitempty"`
	Go       string `json:"go"`
}

// Settings are the flags that shape the figures.
type Settings struct {
	Duration    string `json:"duration"`
	Concurrency int    `json:"concurrency"`
	// The shared profile cache of scenario 6's gateway (the other gateways have none).
	ProfileCacheSize int    `json:"profile_cache_size"`
	ProfileCacheTTL  string `json:"profile_cache_ttl"`
}

// SeedStats describes the data set.
type SeedStats struct {
	Sends               int     `json:"sends"`
	RegularSends        int     `json:"regular_sends"`
	Notifications       int64   `json:"notifications"`
	BulkLoaded          int64   `json:"bulk_loaded_into_big_inboxes"`
	BulkSeconds         float64 `json:"bulk_seconds"`
	RegularUsers        int     `json:"regular_users"`
	PerUser             int     `json:"notifications_per_regular_user"`
	Fanout              int     `json:"recipients_per_regular_send"`
	BigUsers            int     `json:"big_users"`
	BigSize             int     `json:"big_user_notifications"`
	FewSize             int     `json:"few_user_notifications"`
	Actors              int     `json:"actors_zipf"`
	Targets             int     `json:"targets_zipf"`
	Seconds             float64 `json:"seconds"`
	NotificationsPerSec float64 `json:"notifications_per_sec"`
}

// Cost is what one request cost this process (and the engine).
type Cost struct {
	CPUMicros       float64            `json:"cpu_us_per_request"`
	Allocs          float64            `json:"allocs_per_request"`
	AllocKB         float64            `json:"alloc_kib_per_request"`
	EngineCPUMs     float64            `json:"engine_cpu_ms_per_request,omitempty"`
	CallsPerRequest float64            `json:"dynamodb_calls_per_request"`
	DynamoDBCalls   map[string]float64 `json:"dynamodb_calls_by_operation"`
}

// Side is one side of a read comparison.
type Side struct {
	Name       string  `json:"name"`
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	ReqPerSec  float64 `json:"req_per_sec"`
	Latency    Latency `json:"latency"`
	Cost       Cost    `json:"cost"`
}

// Ratios compare the gateway with raw (gateway / raw).
type Ratios struct {
	ReqPerSec float64 `json:"req_per_sec"`
	P50       float64 `json:"p50"`
	P99       float64 `json:"p99"`
	CPU       float64 `json:"cpu_per_request"`
	Allocs    float64 `json:"allocs_per_request"`
}

// InboxResult is scenario 1.
type InboxResult struct {
	Engine      string `json:"engine"`
	Concurrency int    `json:"concurrency"`
	Duration    string `json:"duration"`
	Query       string `json:"query"`
	Gateway     Side   `json:"gateway"`
	Raw         Side   `json:"raw"`
	Ratios      Ratios `json:"ratios_gateway_over_raw"`
	// GatewaySerial and RawSerial are latencies at concurrency 1 (an idle machine).
	GatewaySerial Latency `json:"gateway_latency_concurrency_1"`
	RawSerial     Latency `json:"raw_latency_concurrency_1"`
	GoalP50       bool    `json:"goal_p50_within_1_25x"`
	GoalCPU       bool    `json:"goal_cpu_within_2x"`
}

// NaiveResult is scenario 2.
type NaiveResult struct {
	Engine      string  `json:"engine"`
	Concurrency int     `json:"concurrency"`
	Duration    string  `json:"duration"`
	Batched     Side    `json:"batched"`
	Naive       Side    `json:"naive"`
	P50Ratio    float64 `json:"p50_naive_over_batched"`
	CallsRatio  float64 `json:"calls_naive_over_batched"`
}

// CacheResult is scenario 6: the inbox load with the shared profile cache on and off.
type CacheResult struct {
	Engine      string `json:"engine"`
	Concurrency int    `json:"concurrency"`
	Duration    string `json:"duration"`
	Size        int    `json:"cache_size"`
	TTL         string `json:"cache_ttl"`
	On          Side   `json:"on"`
	Off         Side   `json:"off"`
	Hits        uint64 `json:"hits"`
	Misses      uint64 `json:"misses"`
	// ColdHits and ColdMisses count from the empty cache: warm-up and measured window.
	ColdHits   uint64  `json:"hits_from_empty"`
	ColdMisses uint64  `json:"misses_from_empty"`
	HitRate    float64 `json:"hit_rate"`
	P50Ratio   float64 `json:"p50_on_over_off"`
	CallsRatio float64 `json:"calls_on_over_off"`
}

// MarkAllUser is one mark-all on one inbox.
type MarkAllUser struct {
	User         string `json:"user"`
	UnreadBefore int    `json:"unread_before_each_call"`
	UnseenBefore int    `json:"unseen_before_each_call"`
	// Category and CategoryUnreadBefore: the category marked read, and its unread count
	// before each call (category markAllRead only).
	Category             string  `json:"category,omitempty"`
	CategoryUnreadBefore int     `json:"category_unread_before_each_call,omitempty"`
	Latency              Latency `json:"latency"`
}

// MarkAllOp is one mutation of scenario 3 on the inbox with few notifications and the
// one with many (Users[0] and Users[1]).
type MarkAllOp struct {
	Name     string        `json:"name"`
	Mutation string        `json:"request"`
	Users    []MarkAllUser `json:"users"`
	P50Ratio float64       `json:"p50_ratio_many_over_few"`
	GoalMet  bool          `json:"goal_p50_ratio_met"`
}

// MarkAllResult is scenario 3: markAllRead, markAllSeen and category markAllRead. Users
// and P50Ratio repeat markAllRead's figures (Ops[0]), as earlier results had them.
type MarkAllResult struct {
	Engine       string        `json:"engine"`
	Duration     string        `json:"duration"`
	Method       string        `json:"method"`
	Users        []MarkAllUser `json:"users"`
	P50Ratio     float64       `json:"p50_ratio_many_over_few"`
	GoalP50Ratio float64       `json:"goal_p50_ratio"`
	Ops          []MarkAllOp   `json:"ops"`
}

// SendSide is one side of the send comparison.
type SendSide struct {
	Name          string  `json:"name"`
	Calls         int     `json:"calls"`
	Errors        int     `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	Notifications int64   `json:"notifications"`
	Seconds       float64 `json:"seconds"`
	PerSec        float64 `json:"notifications_per_sec"`
	CallLatency   Latency `json:"call_latency"`
	// PerCall is this process's CPU and allocations, the engine's CPU and the DynamoDB
	// calls by operation, per call of the side (the bench process's whole use in the
	// side's window: the gateway's scheduler included on the gateway's side).
	PerCall Cost `json:"per_call"`
	// OpMeanMs is the mean time of a DynamoDB call by operation, timed at the client.
	OpMeanMs map[string]float64 `json:"dynamodb_mean_ms_by_operation"`
}

// SendResult is scenario 4.
type SendResult struct {
	Engine            string   `json:"engine"`
	Concurrency       int      `json:"concurrency"`
	RecipientsPerCall int      `json:"recipients_per_call"`
	Duration          string   `json:"duration"`
	Gateway           SendSide `json:"gateway"`
	Raw               SendSide `json:"raw"`
	Ratio             float64  `json:"throughput_gateway_over_raw"`
	// RawSame is a raw loop writing the gateway's items: one recipient's transaction of
	// the same send (SameTransaction), recorded from service.Writer, for fresh users.
	RawSame         SendSide `json:"raw_same_items"`
	SameTransaction string   `json:"raw_same_items_transaction"`
	RatioSame       float64  `json:"throughput_gateway_over_raw_same_items"`
	// Costs are the write units per recipient of each kind of send (sendcost.go).
	Costs []SendCost `json:"write_units_per_recipient,omitempty"`
}

// Memory is scenario 5 (this process only).
type Memory struct {
	Engine          string  `json:"engine"`
	RSSAtRestMiB    float64 `json:"rss_at_rest_mib"`
	RSSUnderLoadMiB float64 `json:"rss_peak_under_load_mib"`
	HeapInUseMiB    float64 `json:"heap_in_use_at_end_mib"`
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (r *Results) finish() {
	if i := r.Inbox; i != nil {
		g, w := i.Gateway, i.Raw
		i.Ratios = Ratios{ReqPerSec: ratio(g.ReqPerSec, w.ReqPerSec), P50: ratio(g.Latency.P50, w.Latency.P50), P99: ratio(g.Latency.P99, w.Latency.P99),
			CPU: ratio(g.Cost.CPUMicros, w.Cost.CPUMicros), Allocs: ratio(g.Cost.Allocs, w.Cost.Allocs)}
		i.GoalP50 = i.Ratios.P50 <= 1.25
		i.GoalCPU = i.Ratios.CPU <= 2
	}
	if n := r.Naive; n != nil {
		n.P50Ratio = ratio(n.Naive.Latency.P50, n.Batched.Latency.P50)
		n.CallsRatio = ratio(n.Naive.Cost.CallsPerRequest, n.Batched.Cost.CallsPerRequest)
	}
	if c := r.Cache; c != nil {
		c.HitRate = ratio(float64(c.Hits), float64(c.Hits+c.Misses))
		c.P50Ratio = ratio(c.On.Latency.P50, c.Off.Latency.P50)
		c.CallsRatio = ratio(c.On.Cost.CallsPerRequest, c.Off.Cost.CallsPerRequest)
	}
	if m := r.MarkAll; m != nil && len(m.Users) == 2 {
		m.P50Ratio = ratio(m.Users[1].Latency.P50, m.Users[0].Latency.P50)
	}
	if s := r.Send; s != nil {
		s.Ratio = ratio(s.Gateway.PerSec, s.Raw.PerSec)
		s.RatioSame = ratio(s.Gateway.PerSec, s.RawSame.PerSec)
	}
}

func calls(c Cost) string {
	ops := make([]string, 0, len(c.DynamoDBCalls))
	for k := range c.DynamoDBCalls {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	parts := make([]string, len(ops))
	for i, k := range ops {
		parts[i] = fmt.Sprintf("%.2f %s", c.DynamoDBCalls[k], k)
	}
	return fmt.Sprintf("%.2f (%s)", c.CallsPerRequest, strings.Join(parts, " + "))
}

func yes(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// Table renders the results as a markdown table (also what the command prints).
func (r *Results) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Engine: %s. Host: %s, %d CPUs%s, %s. Each side: %s at concurrency %s.\n\n", r.Engine, r.Host.OS, r.Host.CPUs,
		cpuModel(r.Host.CPUModel), r.Host.Go, r.Settings.Duration, fmt.Sprint(r.Settings.Concurrency))
	if r.Seed == (SeedStats{}) {
		fmt.Fprintf(&b, "Data set: none seeded (no scenario of this run reads it).\n\n")
	} else {
		fmt.Fprintf(&b, "Data set: %d notifications (%d regular users x ~%d, %d x %d, 1 x %d), actors and targets from Zipf tails of %d and %d; %d sent through the store (%.0f notifications/s), %d bulk-loaded into the big inboxes; %.0fs in all.\n\n",
			r.Seed.Notifications, r.Seed.RegularUsers, r.Seed.PerUser, r.Seed.BigUsers, r.Seed.BigSize, r.Seed.FewSize, r.Seed.Actors, r.Seed.Targets,
			r.Seed.Notifications-r.Seed.BulkLoaded, r.Seed.NotificationsPerSec, r.Seed.BulkLoaded, r.Seed.Seconds)
	}
	// The summary's rows come from the request-load scenarios (1 to 6, 11) only: a
	// run of none of them (-only sched) prints no summary, not an empty table and a note
	// about scenario 1.
	var rows strings.Builder
	row := func(scn, metric, a, bb, rat string) {
		fmt.Fprintf(&rows, "| %s | %s | %s | %s | %s | %s |\n", scn, metric, a, bb, rat, r.Engine)
	}
	if i := r.Inbox; i != nil {
		s := "1. initial inbox load: A gateway (HTTP+GraphQL), B raw SDK + JSON"
		g, w := i.Gateway, i.Raw
		row(s, "requests (errors)", fmt.Sprintf("%d (%d)", g.Requests, g.Errors), fmt.Sprintf("%d (%d)", w.Requests, w.Errors), "")
		row(s, "req/s", f1(g.ReqPerSec), f1(w.ReqPerSec), f2(i.Ratios.ReqPerSec))
		row(s, "p50 ms", f2(g.Latency.P50), f2(w.Latency.P50), f2(i.Ratios.P50)+" (goal ≤ 1.25: "+yes(i.GoalP50)+")")
		row(s, "p99 ms", f2(g.Latency.P99), f2(w.Latency.P99), f2(i.Ratios.P99))
		row(s, "p50 ms at concurrency 1", f2(i.GatewaySerial.P50), f2(i.RawSerial.P50), f2(ratio(i.GatewaySerial.P50, i.RawSerial.P50)))
		row(s, "p99 ms at concurrency 1", f2(i.GatewaySerial.P99), f2(i.RawSerial.P99), f2(ratio(i.GatewaySerial.P99, i.RawSerial.P99)))
		row(s, "our CPU µs/request", f1(g.Cost.CPUMicros), f1(w.Cost.CPUMicros), f2(i.Ratios.CPU)+" (goal ≤ 2: "+yes(i.GoalCPU)+")")
		row(s, "allocations/request", f1(g.Cost.Allocs), f1(w.Cost.Allocs), f2(i.Ratios.Allocs))
		row(s, "KiB allocated/request", f1(g.Cost.AllocKB), f1(w.Cost.AllocKB), f2(ratio(g.Cost.AllocKB, w.Cost.AllocKB)))
		if g.Cost.EngineCPUMs > 0 {
			row(s, "engine (JVM) CPU ms/request", f2(g.Cost.EngineCPUMs), f2(w.Cost.EngineCPUMs), f2(ratio(g.Cost.EngineCPUMs, w.Cost.EngineCPUMs)))
		}
		row(s, "DynamoDB calls/request", calls(g.Cost), calls(w.Cost), "")
	}
	if n := r.Naive; n != nil {
		s := "2. same query: A naive (no dataloaders), B batched"
		row(s, "DynamoDB calls/request", calls(n.Naive.Cost), calls(n.Batched.Cost), f2(n.CallsRatio))
		row(s, "p50 ms", f2(n.Naive.Latency.P50), f2(n.Batched.Latency.P50), f2(n.P50Ratio))
		row(s, "p99 ms", f2(n.Naive.Latency.P99), f2(n.Batched.Latency.P99), f2(ratio(n.Naive.Latency.P99, n.Batched.Latency.P99)))
		row(s, "req/s", f1(n.Naive.ReqPerSec), f1(n.Batched.ReqPerSec), f2(ratio(n.Naive.ReqPerSec, n.Batched.ReqPerSec)))
		row(s, "our CPU µs/request", f1(n.Naive.Cost.CPUMicros), f1(n.Batched.Cost.CPUMicros), f2(ratio(n.Naive.Cost.CPUMicros, n.Batched.Cost.CPUMicros)))
	}
	if m := r.MarkAll; m != nil {
		for _, o := range m.Ops {
			if len(o.Users) != 2 {
				continue
			}
			many, few := o.Users[1], o.Users[0]
			var s string
			switch {
			case many.Category != "":
				s = fmt.Sprintf("3. %s: A %d unread in %s, B %d unread in %s", o.Name, many.CategoryUnreadBefore, many.Category, few.CategoryUnreadBefore, few.Category)
			case o.Name == "markAllSeen":
				s = fmt.Sprintf("3. %s: A %d unseen, B %d unseen", o.Name, many.UnseenBefore, few.UnseenBefore)
			default:
				s = fmt.Sprintf("3. %s: A %d unread, B %d unread", o.Name, many.UnreadBefore, few.UnreadBefore)
			}
			row(s, "calls", fmt.Sprint(many.Latency.N), fmt.Sprint(few.Latency.N), "")
			row(s, "p50 ms", f2(many.Latency.P50), f2(few.Latency.P50), fmt.Sprintf("%s (goal ≤ %.2g: %s)", f2(o.P50Ratio), m.GoalP50Ratio, yes(o.GoalMet)))
			row(s, "p99 ms", f2(many.Latency.P99), f2(few.Latency.P99), f2(ratio(many.Latency.P99, few.Latency.P99)))
		}
	}
	if sr := r.Send; sr != nil {
		s := fmt.Sprintf("4. send, %d recipients a call: A sendNotification, B raw TransactWriteItems loop", sr.RecipientsPerCall)
		row(s, "notifications/s", f1(sr.Gateway.PerSec), f1(sr.Raw.PerSec), f2(sr.Ratio))
		row(s, "calls (errors)", fmt.Sprintf("%d (%d)", sr.Gateway.Calls, sr.Gateway.Errors), fmt.Sprintf("%d (%d)", sr.Raw.Calls, sr.Raw.Errors), "")
		row(s, "p50 ms a call", f1(sr.Gateway.CallLatency.P50), f1(sr.Raw.CallLatency.P50), f2(ratio(sr.Gateway.CallLatency.P50, sr.Raw.CallLatency.P50)))
		if sr.RawSame.Calls > 0 {
			s := fmt.Sprintf("4. send, %d recipients a call: A sendNotification, B raw loop of the gateway's items (%s)", sr.RecipientsPerCall, sr.SameTransaction)
			row(s, "notifications/s", f1(sr.Gateway.PerSec), f1(sr.RawSame.PerSec), fmt.Sprintf("%s (goal ≥ 0.8)", f2(sr.RatioSame)))
			row(s, "p50 ms a call", f1(sr.Gateway.CallLatency.P50), f1(sr.RawSame.CallLatency.P50), f2(ratio(sr.Gateway.CallLatency.P50, sr.RawSame.CallLatency.P50)))
			row(s, "engine (JVM) CPU ms a call", f1(sr.Gateway.PerCall.EngineCPUMs), f1(sr.RawSame.PerCall.EngineCPUMs), f2(ratio(sr.Gateway.PerCall.EngineCPUMs, sr.RawSame.PerCall.EngineCPUMs)))
			row(s, "our CPU ms a call (gateway + bench)", f1(sr.Gateway.PerCall.CPUMicros/1000), f1(sr.RawSame.PerCall.CPUMicros/1000), f2(ratio(sr.Gateway.PerCall.CPUMicros, sr.RawSame.PerCall.CPUMicros)))
			row(s, "DynamoDB calls a call, by operation", byOp(sr.Gateway.PerCall.DynamoDBCalls, "%.2f"), byOp(sr.RawSame.PerCall.DynamoDBCalls, "%.2f"), "")
			row(s, "mean ms of a DynamoDB call, by operation", byOp(sr.Gateway.OpMeanMs, "%.1f"), byOp(sr.RawSame.OpMeanMs, "%.1f"), "")
		}
		for _, c := range sr.Costs {
			s := fmt.Sprintf("4. send write units per recipient, %s (%d recipients): A the gateway (service.Writer; a broadcast: service.Broadcasts, every write from its start), B raw loop of its recorded transaction (%s)", c.Case, c.Recipients, c.Transaction)
			row(s, "WCU/recipient (all writes; the transactions')", fmt.Sprintf("%s (%s)", f2(c.GatewayWCU), f2(c.GatewayTxnWCU)), f2(c.RawWCU), f2(ratio(c.GatewayTxnWCU, c.RawWCU)))
			row(s, "raw guard + notification + META + group only", "", f2(c.FloorWCU), fmt.Sprintf("A's transactions / it: %s", f2(ratio(c.GatewayTxnWCU, c.FloorWCU))))
			row(s, "WCU/recipient by DynamoDB's documented rule: A the transaction, B its guard + notification + META + group", fmt.Sprintf("%.0f", c.DocWCU), fmt.Sprintf("%.0f", c.FloorDocWCU), f2(ratio(c.DocWCU, c.FloorDocWCU)))
		}
	}
	if r.Memory.RSSUnderLoadMiB > 0 { // 0 when scenarios 1-4 and 6 were all skipped
		row("5. memory (this process: gateway + bench)", "RSS MiB: A under load (peak), B at rest", f1(r.Memory.RSSUnderLoadMiB), f1(r.Memory.RSSAtRestMiB), f2(ratio(r.Memory.RSSUnderLoadMiB, r.Memory.RSSAtRestMiB)))
	}
	if c := r.Cache; c != nil {
		s := fmt.Sprintf("6. initial inbox load: A shared profile cache on (size %d, ttl %s), B off", c.Size, c.TTL)
		row(s, "hit rate, measured window (hits / lookups)", fmt.Sprintf("%.1f%% (%d / %d)", 100*c.HitRate, c.Hits, c.Hits+c.Misses), "", "")
		row(s, "hit rate from an empty cache (warm-up + measured)", fmt.Sprintf("%.1f%% (%d / %d)", 100*ratio(float64(c.ColdHits), float64(c.ColdHits+c.ColdMisses)), c.ColdHits, c.ColdHits+c.ColdMisses), "", "")
		row(s, "DynamoDB calls/request", calls(c.On.Cost), calls(c.Off.Cost), f2(c.CallsRatio))
		row(s, "req/s", f1(c.On.ReqPerSec), f1(c.Off.ReqPerSec), f2(ratio(c.On.ReqPerSec, c.Off.ReqPerSec)))
		row(s, "p50 ms", f2(c.On.Latency.P50), f2(c.Off.Latency.P50), f2(c.P50Ratio))
		row(s, "p99 ms", f2(c.On.Latency.P99), f2(c.Off.Latency.P99), f2(ratio(c.On.Latency.P99, c.Off.Latency.P99)))
		row(s, "our CPU µs/request", f1(c.On.Cost.CPUMicros), f1(c.Off.Cost.CPUMicros), f2(ratio(c.On.Cost.CPUMicros, c.Off.Cost.CPUMicros)))
		if c.On.Cost.EngineCPUMs > 0 {
			row(s, "engine (JVM) CPU ms/request", f2(c.On.Cost.EngineCPUMs), f2(c.Off.Cost.EngineCPUMs), f2(ratio(c.On.Cost.EngineCPUMs, c.Off.Cost.EngineCPUMs)))
		}
	}
	if gr := r.Groups; gr != nil {
		s := "11. a page of 20: A groups (\"Alice and 3 others\"), B inbox, both HTTP+GraphQL"
		row(s, "requests (errors)", fmt.Sprintf("%d (%d)", gr.Groups.Requests, gr.Groups.Errors), fmt.Sprintf("%d (%d)", gr.Inbox.Requests, gr.Inbox.Errors), "")
		row(s, "req/s", f1(gr.Groups.ReqPerSec), f1(gr.Inbox.ReqPerSec), f2(ratio(gr.Groups.ReqPerSec, gr.Inbox.ReqPerSec)))
		row(s, "p50 ms", f2(gr.Groups.Latency.P50), f2(gr.Inbox.Latency.P50), f2(gr.P50Ratio)+" (goal ≤ 1.25: "+yes(gr.GoalP50)+")")
		row(s, "p99 ms", f2(gr.Groups.Latency.P99), f2(gr.Inbox.Latency.P99), f2(ratio(gr.Groups.Latency.P99, gr.Inbox.Latency.P99)))
		row(s, "our CPU µs/request", f1(gr.Groups.Cost.CPUMicros), f1(gr.Inbox.Cost.CPUMicros), f2(ratio(gr.Groups.Cost.CPUMicros, gr.Inbox.Cost.CPUMicros)))
		row(s, "DynamoDB calls/request", calls(gr.Groups.Cost), calls(gr.Inbox.Cost), "")
	}
	if rows.Len() > 0 {
		fmt.Fprintln(&b, "| scenario | metric | A | B | A/B | engine |")
		fmt.Fprintln(&b, "| --- | --- | ---: | ---: | ---: | --- |")
		b.WriteString(rows.String())
		fmt.Fprintln(&b)
		fmt.Fprintln(&b, "Our CPU and allocations are this process's (getrusage RUSAGE_SELF, runtime.MemStats) over the measured window divided by requests: the gateway side's load comes from a child process, and DynamoDB Local is a separate JVM, so neither is counted. Engine CPU is the JVM's, from /proc. Scenario 1's sides warm up in turn (twice each), then each runs its time in two halves, in the order gateway, raw, raw, gateway, so that the engine's JIT, still warming up after the seeding, does not weigh on one side only.")
	}
	if i := r.Inbox; i != nil {
		fmt.Fprintf(&b, "\nQuery: `%s`\n", i.Query)
	}
	if m := r.MarkAll; m != nil {
		fmt.Fprintf(&b, "\nMark-all method: %s.\n", m.Method)
	}
	if l := r.Live; l != nil {
		b.WriteString(l.Table())
	}
	if x := r.Relay; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Abuse; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Sched; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Snooze; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Workflows; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Broadcast; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Lanes; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Accept; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Deliver; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.E2E; x != nil {
		b.WriteString(x.Table())
	}
	if x := r.Announce; x != nil {
		b.WriteString(x.Table())
	}
	return b.String()
}

// Table renders scenario 7.
func (l *LiveResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 7. live: `subscription { unreadCount }`\n\n")
	fmt.Fprintf(&b, "Engine: %s. Transport: %s. Each subscriber is a distinct user seeded with %d unread notifications (seeding %.1fs). "+
		"Load: %.0f mutations/s for %s to random subscribed users, %.0f%% sendNotification (one recipient), the rest markRead/markUnread; never two changes in flight for one user. RLIMIT_NOFILE %d: a subscriber is a socket, so one gateway process holds fewer subscribers than that (issue 21's 50,000 on one instance need a higher limit than this machine allows).\n\n",
		l.Engine, l.Transport, l.Notifications, l.SeedSeconds, l.Rate, l.Duration, 100*l.SendShare, l.RLimitNoFile)
	fmt.Fprintf(&b, "Latency measured: %s.\n\n", l.Measures)
	fmt.Fprintln(&b, "RSS KiB/subscriber is (connected − at rest) / S. The at-rest RSS is taken after a GC and a scavenge; the connected one twice: as the process stands once the connections settled (conservative: it counts the connections' garbage and the GC's headroom, GOGC 100 letting the heap reach twice its live size, at-rest heap included), and again after a GC and a scavenge, like the at-rest one. Go live heap is HeapAlloc after that GC.")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| broker | subscribers (connected) | connect s | RSS MiB rest → connected (peak under load) | RSS KiB/subscriber, as it stands / after a GC | Go heap+stacks (of which stacks) KiB/subscriber | Go live heap KiB/subscriber | goroutines/subscriber | changes (errors) | delivered / lost | delivery p50 ms | delivery p99 ms | p99 mark / send ms | mutation HTTP p50 / p99 ms | goals |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range l.Runs {
		s := r.Steady
		goals := fmt.Sprintf("p99 ≤ %.0f ms: %s", r.GoalP99Ms, yes(r.GoalP99Met))
		if r.GoalRSSMet != nil {
			goals += "; ≤ 32 KiB/subscriber: " + yes(*r.GoalRSSMet) + " as it stands"
			if r.GoalRSSAfterGCMet != nil {
				goals += ", " + yes(*r.GoalRSSAfterGCMet) + " after a GC"
			}
			goals += "; ≤ 16 KiB/subscriber (issue 21): " + yes(r.Connected == r.Subscribers && r.RSSPerSubKiB <= 16) +
				" as it stands, " + yes(r.Connected == r.Subscribers && r.RSSPerSubAfterGCKiB <= 16) + " after a GC"
		}
		fmt.Fprintf(&b, "| %s | %d (%d) | %.1f | %.1f → %.1f (%.1f) | %.1f / %.1f | %.1f (%.1f) | %.1f | %.2f | %d (%d) | %d / %d | %.2f | %.2f | %.2f / %.2f | %.2f / %.2f | %s |\n",
			r.Broker, r.Subscribers, r.Connected, r.ConnectSeconds, r.RSSAtRestMiB, r.RSSConnectedMiB, r.RSSPeakLoadMiB,
			r.RSSPerSubKiB, r.RSSPerSubAfterGCKiB, r.GoHeapStackPerSubKiB, r.GoStackPerSubKiB, r.GoLiveHeapPerSubKiB, r.GoroutinesPerSub, s.Mutations, s.MutationErrs, s.Delivered, s.Lost,
			s.Delivery.P50, s.Delivery.P99, s.DeliveryMarks.P99, s.DeliverySends.P99, s.MutationRTT.P50, s.MutationRTT.P99, goals)
	}
	fmt.Fprintln(&b)
	for _, r := range l.Runs {
		fmt.Fprintf(&b, "- %s, %d: %s.", r.Broker, r.Subscribers, r.Topology)
		if r.Steady.FirstError != "" {
			fmt.Fprintf(&b, " First mutation error: %s.", r.Steady.FirstError)
		}
		if r.FirstError != "" {
			fmt.Fprintf(&b, " First connect error: %s.", r.FirstError)
		}
		fmt.Fprintf(&b, " %d of %d frames arrived before the mutation's HTTP response; %d ticks found no idle user; %d frames nobody waited for.\n",
			r.Steady.FramesBefore, r.Steady.Delivered, r.Steady.Skipped, r.Steady.Unexpected)
	}
	if l.RedisSkipped != "" {
		fmt.Fprintf(&b, "- redis: skipped: %s.\n", l.RedisSkipped)
	}
	if x := l.Burst; x != nil {
		fmt.Fprintf(&b, "\nCoalescing (%s broker): one user, %d markRead/markUnread toggles sent one after another as fast as one client can (%.2fs). "+
			"Frames after the initial value: fast subscriber %d, slow subscriber (sleeps %s a frame) %d; last value fast %d, slow %d; "+
			"final count %d (last mutation), %d (store); both end on the final count: %s. The slow subscriber's last frame came %.2fs after the burst ended. "+
			"The slow subscriber %s.\n",
			x.Broker, x.Changes, x.Seconds, x.FastFrames, x.SlowDelay, x.SlowFrames, x.FastLast, x.SlowLast, x.Final, x.StoreFinal,
			map[bool]string{true: "yes", false: "NO"}[x.Correct], x.SlowDrainSecs, x.How)
		if x.Errors > 0 {
			fmt.Fprintf(&b, "Burst errors: %d (first: %s).\n", x.Errors, x.FirstError)
		}
	}
	if x := l.Events; x != nil {
		fmt.Fprintf(&b, "\ninboxEvents delivery (%s; %s): all p50 %.1f ms, p99 %.1f ms (n %d; goal p99 <= %.0f ms: %s); "+
			"ADDED p50 %.1f / p99 %.1f ms (n %d); READ p50 %.1f / p99 %.1f ms (n %d); lost %d; from the mutation's request: p50 %.1f ms, p99 %.1f ms.\n",
			x.Transport, x.Measures, x.All.P50, x.All.P99, x.All.N, x.GoalP99Ms, map[bool]string{true: "met", false: "NOT met"}[x.GoalP99Met],
			x.Added.P50, x.Added.P99, x.Added.N, x.Read.P50, x.Read.P99, x.Read.N, x.Lost, x.FromRequest.P50, x.FromRequest.P99)
		if x.ReadSkipped != "" {
			fmt.Fprintf(&b, "READ not measured: %s.\n", x.ReadSkipped)
		}
	}
	return b.String()
}

func cpuModel(m string) string {
	if m == "" {
		return ""
	}
	return " (" + m + ")"
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func (r *Results) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	md := fmt.Sprintf("# Inbox gateway benchmark, %s\n\n`%s`\n\n%s", r.StartedAt.Format("2006-01-02 15:04 MST"), r.Command, r.Table())
	stamp := r.StartedAt.Format("2006-01-02T150405Z")
	for _, name := range []string{"latest", stamp} {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), append(js, '\n'), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(md), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func hostInfo() Host {
	h := Host{OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	h.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				h.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	return h
}

func settingsOf(c config) Settings {
	return Settings{Duration: c.duration.String(), Concurrency: c.concurrency, ProfileCacheSize: c.cacheSize, ProfileCacheTTL: c.cacheTTL.String()}
}

// byOp formats figures by operation ("BatchGetItem 2.00, TransactWriteItems 101.00"),
// sorted by operation, each with format.
func byOp(m map[string]float64, format string) string {
	ops := make([]string, 0, len(m))
	for op := range m {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = op + " " + fmt.Sprintf(format, m[op])
	}
	return strings.Join(parts, ", ")
}
