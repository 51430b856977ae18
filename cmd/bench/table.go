package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// scenario is one row of the bench: its name (for -only and -skip), what it measures,
// the harness parts it uses (built on first use), whether its load counts toward
// scenario 5's memory figures, and how it runs (filling its part of the results).
type scenario struct {
	name   string
	about  string
	needs  need
	memory bool
	run    func(ctx context.Context, h *harness, res *Results) error
}

// scenarios are the bench's scenarios in the order they run. The memory scenarios come
// first: scenario 5's figures are taken after them, before the live scenario's
// subscribers would move them.
var scenarios = []scenario{
	{name: "inbox", about: "1. the initial inbox load: gateway against a raw Query + BatchGetItem", needs: needDataset | needGateway, memory: true,
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Inbox)(h.inboxScenario(ctx)) }},
	{name: "naive", about: "2. the same load with dataloaders against without", needs: needDataset | needGateway | needNaive, memory: true,
		run: func(ctx context.Context, h *harness, r *Results) error {
			return set(&r.Naive)(h.naiveScenario(ctx, r.Inbox))
		}},
	{name: "cache", about: "6. the same load with the shared profile cache against without", needs: needDataset | needGateway | needCached, memory: true,
		run: func(ctx context.Context, h *harness, r *Results) error {
			return set(&r.Cache)(h.cacheScenario(ctx, r.Inbox))
		}},
	{name: "markall", about: "3. the mark-alls on 10 and on 10,000 notifications", needs: needDataset | needGateway, memory: true,
		run: func(ctx context.Context, h *harness, r *Results) error {
			return set(&r.MarkAll)(h.markAllScenario(ctx))
		}},
	{name: "groups", about: "11. a page of groups against a page of the inbox", needs: needDataset | needGateway, memory: true,
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Groups)(h.groupsScenario(ctx)) }},
	{name: "send", about: "4. sendNotification to 100 recipients against a raw TransactWriteItems loop", needs: needGateway, memory: true,
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Send)(h.sendScenario(ctx)) }},
	{name: "live", about: "7. unreadCount subscribers on the local and redis brokers", needs: needRedis,
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Live)(h.liveScenario(ctx)) }},
	{name: "relay", about: "8. an outside write through the stream relay to a subscriber", needs: needRedis,
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Relay)(h.relayScenario(ctx)) }},
	{name: "sched", about: "10. the durable scheduler's lag with many tasks due in one minute",
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Sched)(h.schedScenario(ctx)) }},
	{name: "snooze", about: "12. snooze wake-ups through the scheduler and Store.Wake",
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Snooze)(h.snoozeScenario(ctx)) }},
	{name: "broadcast", about: "13. a broadcast to a segment against raw transactions",
		run: func(ctx context.Context, h *harness, r *Results) error {
			return set(&r.Broadcast)(h.broadcastScenario(ctx))
		}},
	{name: "lanes", about: "14. a transactional send while a broadcast runs in the bulk lane",
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Lanes)(h.lanesScenario(ctx)) }},
	{name: "accept", about: "15. POST /v1/notifications against one raw PutItem",
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Accept)(h.acceptScenario(ctx)) }},
	{name: "deliver", about: "16. channel deliveries/s through the delivery path against raw clients",
		run: func(ctx context.Context, h *harness, r *Results) error {
			return set(&r.Deliver)(h.deliverScenario(ctx))
		}},
	{name: "e2e", about: "17. POST /v1/notifications to the email's arrival, idle and during a broadcast",
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.E2E)(h.e2eScenario(ctx)) }},
	{name: "workflows", about: "18. a batch of 1,000 joins and a throttled burst: calls and write units per send, the close's lag",
		run: func(ctx context.Context, h *harness, r *Results) error {
			return set(&r.Workflows)(h.workflowsScenario(ctx))
		}},
	{name: "announce", about: "19. an announcement to a whole tenant against a broadcast; reads with announcements; live fan-out",
		run: func(ctx context.Context, h *harness, r *Results) error {
			return set(&r.Announce)(h.announceScenario(ctx))
		}},
	{name: "abuse", about: "9. the attacks of issues 8 and 16 against the gateway binary", needs: needDataset,
		run: func(ctx context.Context, h *harness, r *Results) error { return set(&r.Abuse)(h.abuseScenario(ctx)) }},
}

// set stores a scenario's result in *field and passes its error on.
func set[T any](field **T) func(*T, error) error {
	return func(v *T, err error) error { *field = v; return err }
}

// scenarioNames are the names of table, comma-separated.
func scenarioNames(table []scenario) string {
	names := make([]string, len(table))
	for i, s := range table {
		names[i] = s.name
	}
	return strings.Join(names, ",")
}

// scenarioList is one line per scenario: its name and what it measures (the usage text).
func scenarioList(table []scenario) string {
	var b strings.Builder
	for _, s := range table {
		fmt.Fprintf(&b, "  %-10s %s\n", s.name, s.about)
	}
	return b.String()
}

// selectScenarios picks the scenarios of table that -only and -skip leave, in the
// table's order: only's when it is set, all but skip's otherwise. A name that is not in
// the table is an error naming the valid ones, and so is setting both.
func selectScenarios(table []scenario, only, skip string) ([]scenario, error) {
	names := func(flag, list string) (map[string]bool, error) {
		set := map[string]bool{}
		for _, n := range strings.Split(list, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if !slices.ContainsFunc(table, func(s scenario) bool { return s.name == n }) {
				return nil, fmt.Errorf("-%s: unknown scenario %q (the scenarios: %s)", flag, n, scenarioNames(table))
			}
			set[n] = true
		}
		return set, nil
	}
	on, err := names("only", only)
	if err != nil {
		return nil, err
	}
	off, err := names("skip", skip)
	if err != nil {
		return nil, err
	}
	if len(on) > 0 && len(off) > 0 {
		return nil, fmt.Errorf("-only and -skip exclude each other (-only names what runs)")
	}
	if strings.TrimSpace(only) != "" && len(on) == 0 {
		return nil, fmt.Errorf("-only %q names no scenario (the scenarios: %s)", only, scenarioNames(table))
	}
	var sel []scenario
	for _, s := range table {
		if (len(on) > 0 && on[s.name]) || (len(on) == 0 && !off[s.name]) {
			sel = append(sel, s)
		}
	}
	return sel, nil
}

// needsOf is what the selection's scenarios use, together.
func needsOf(sel []scenario) need {
	var n need
	for _, s := range sel {
		n |= s.needs
	}
	return n
}

// runScenarios runs sel in order on h, each allowed the parts it declared. Scenario 5's
// memory figures: at rest after the memory scenarios' parts are built (before any of them
// runs), under load as the peak while they ran, taken once they are done.
func runScenarios(ctx context.Context, h *harness, sel []scenario, res *Results) error {
	var mem []scenario
	for _, s := range sel {
		if s.memory {
			mem = append(mem, s)
		}
	}
	h.allowed = needsOf(mem)
	if err := h.prepare(ctx, h.allowed); err != nil {
		return err
	}
	runtime.GC()
	res.Memory.RSSAtRestMiB = rssMiB()
	memTaken := false
	takeMemory := func() {
		memTaken = true
		res.Memory.RSSUnderLoadMiB = h.rssPeak.max()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		res.Memory.HeapInUseMiB = float64(ms.HeapInuse) / (1 << 20)
		res.Memory.Engine = res.Engine
	}
	for _, s := range sel {
		if !s.memory && !memTaken {
			takeMemory()
		}
		h.allowed = s.needs
		if err := s.run(ctx, h, res); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if !memTaken {
		takeMemory()
	}
	h.allowed = 0
	if ds, ok := h.ds.peek(); ok {
		res.Seed = ds.stats
	}
	return nil
}
