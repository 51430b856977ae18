package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The table is what -only and -skip select from and what -skip's help lists: every row
// has a distinct name, says what it measures and runs something; the memory scenarios
// come first, since scenario 5's figures are taken when the first other one starts.
func TestScenarioTableRows(t *testing.T) {
	seen := map[string]bool{}
	memoryDone := false
	for i, s := range scenarios {
		if s.name == "" || strings.ContainsAny(s.name, ", ") || s.about == "" || s.run == nil {
			t.Errorf("row %d (%q) lacks a name without commas or spaces, an about or a run", i, s.name)
		}
		if seen[s.name] {
			t.Errorf("row %d: name %q is taken by an earlier row", i, s.name)
		}
		seen[s.name] = true
		if !s.memory {
			memoryDone = true
		} else if memoryDone {
			t.Errorf("row %d (%s) counts toward the memory figures after a row that does not", i, s.name)
		}
	}
	if got := scenarioNames(scenarios); strings.Count(got, ",") != len(scenarios)-1 {
		t.Errorf("scenarioNames = %q, want %d names", got, len(scenarios))
	}
}

// selectScenarios keeps the table's order, takes -only's names or leaves -skip's out, and
// refuses any name not in the table (it used to be ignored: a typo ran everything, or
// skipped nothing), naming the valid ones.
func TestSelectScenarios(t *testing.T) {
	names := func(sel []scenario) string { return scenarioNames(sel) }
	all := scenarioNames(scenarios)
	for _, tc := range []struct{ only, skip, want string }{
		{"", "", all},
		{"deliver,e2e", "", "deliver,e2e"},
		{"e2e,deliver", "", "deliver,e2e"},
		{" e2e , deliver ,", "", "deliver,e2e"},
		{"inbox", "", "inbox"},
		{"", "inbox,naive", strings.TrimPrefix(all, "inbox,naive,")},
		{"", " ,", all},
	} {
		sel, err := selectScenarios(scenarios, tc.only, tc.skip)
		if err != nil {
			t.Errorf("-only %q -skip %q: %v", tc.only, tc.skip, err)
			continue
		}
		if got := names(sel); got != tc.want {
			t.Errorf("-only %q -skip %q selects %s, want %s", tc.only, tc.skip, got, tc.want)
		}
	}
	for _, tc := range []struct{ only, skip, bad string }{
		{"nope", "", `"nope"`},
		{"deliver,nope", "", `"nope"`},
		{"Deliver", "", `"Deliver"`},
		{"deliver e2e", "", `"deliver e2e"`},
		{"", "inbox,markal", `"markal"`},
		{"", "abuse;live", `"abuse;live"`},
		{",", "", "names no scenario"},
		{"inbox", "naive", "exclude each other"},
	} {
		_, err := selectScenarios(scenarios, tc.only, tc.skip)
		if err == nil {
			t.Errorf("-only %q -skip %q: no error", tc.only, tc.skip)
			continue
		}
		if !strings.Contains(err.Error(), tc.bad) {
			t.Errorf("-only %q -skip %q: error %q does not name %s", tc.only, tc.skip, err, tc.bad)
		}
		if strings.HasPrefix(tc.bad, `"`) && !strings.Contains(err.Error(), all) {
			t.Errorf("-only %q -skip %q: error %q does not list the scenarios", tc.only, tc.skip, err)
		}
	}
}

// The command refuses an unknown scenario before it starts anything (no engine: the
// config names none, and starting one would take seconds).
func TestRunRefusesUnknownScenario(t *testing.T) {
	for _, c := range []config{{only: "deliver,e2ee"}, {skipScenario: "inbox,grups"}} {
		err := run(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), "unknown scenario") {
			t.Errorf("run(-only %q -skip %q) = %v, want an unknown scenario error", c.only, c.skipScenario, err)
		}
	}
}

// What a selection uses, from the table: the scenarios that set up their own data
// (-only deliver,e2e and the like) use none of the harness's expensive parts, so such a
// run seeds nothing and starts no shared gateway.
func TestSelectionNeeds(t *testing.T) {
	for _, tc := range []struct {
		only string
		want need
	}{
		{"deliver,e2e", 0},
		{"sched,snooze,broadcast,lanes,accept,deliver,e2e", 0},
		{"send", needGateway},
		{"live,relay", needRedis},
		{"inbox", needDataset | needGateway},
		{"naive", needDataset | needGateway | needNaive},
		{"abuse", needDataset},
	} {
		sel, err := selectScenarios(scenarios, tc.only, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := needsOf(sel); got != tc.want {
			t.Errorf("-only %s uses %s, want %s", tc.only, got, tc.want)
		}
	}
}

// fakeHarness is a harness without an engine whose builders count what they build.
func fakeHarness() (*harness, map[string]int) {
	calls := map[string]int{}
	h := &harness{builders: builders{
		seed: func(context.Context) (*dataset, error) {
			calls["seed"]++
			return &dataset{users: []string{"u1"}, stats: SeedStats{Sends: 7}}, nil
		},
		gateway: func(_ context.Context, kind need) (*gateway, error) {
			calls[kind.String()]++
			return &gateway{url: "http://" + kind.String(), close: func() { calls["closed "+kind.String()]++ }}, nil
		},
		redis: func(context.Context) (string, func(), error) {
			calls["redis"]++
			return "", nil, errRedisMissing
		},
	}}
	return h, calls
}

// The harness builds a part on its first use by a scenario that declared it, once, and
// nothing else: a selection of scenarios that need no data set does not seed. A scenario
// that uses a part it did not declare fails, so the table cannot understate a selection.
func TestHarnessBuildsOnlyWhatTheSelectionUses(t *testing.T) {
	ctx := context.Background()
	use := func(n need) func(context.Context, *harness, *Results) error {
		return func(ctx context.Context, h *harness, _ *Results) error {
			if n&needDataset != 0 {
				if _, err := h.dataset(ctx); err != nil {
					return err
				}
			}
			if n&needGateway != 0 {
				if _, err := h.gatewayOf(ctx, needGateway); err != nil {
					return err
				}
			}
			if n&needRedis != 0 {
				if _, err := h.redisURL(ctx); !errors.Is(err, errRedisMissing) {
					return err
				}
			}
			return nil
		}
	}
	table := []scenario{
		{name: "reads", needs: needDataset | needGateway, memory: true, run: use(needDataset | needGateway)},
		{name: "reads-again", needs: needDataset, memory: true, run: use(needDataset)},
		{name: "own", run: use(0)},
		{name: "pubsub", needs: needRedis, run: use(needRedis)},
		{name: "sneaky", run: use(needDataset)},
	}
	for _, tc := range []struct {
		only      string
		built     []string
		seeds     int
		wantError string
	}{
		{only: "own", built: nil},
		{only: "pubsub", built: nil}, // redis-server missing: nothing started
		{only: "own,pubsub", built: nil},
		{only: "reads", built: []string{"dataset", "gateway"}, seeds: 1},
		{only: "reads,reads-again,own", built: []string{"dataset", "gateway"}, seeds: 1},
		{only: "reads-again", built: []string{"dataset"}, seeds: 1},
		{only: "sneaky", wantError: "without declaring"},
		{only: "own,sneaky", wantError: "without declaring"},
	} {
		sel, err := selectScenarios(table, tc.only, "")
		if err != nil {
			t.Fatal(err)
		}
		h, calls := fakeHarness()
		res := &Results{}
		err = runScenarios(ctx, h, sel, res)
		switch {
		case tc.wantError != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("-only %s: error %v, want one saying %q", tc.only, err, tc.wantError)
			}
		case err != nil:
			t.Errorf("-only %s: %v", tc.only, err)
		}
		if !slices.Equal(h.built, tc.built) {
			t.Errorf("-only %s built %q, want %q", tc.only, h.built, tc.built)
		}
		if calls["seed"] != tc.seeds {
			t.Errorf("-only %s seeded %d times, want %d", tc.only, calls["seed"], tc.seeds)
		}
		if want := map[bool]int{true: 7}[tc.seeds > 0]; res.Seed.Sends != want {
			t.Errorf("-only %s reports %d seed sends, want %d", tc.only, res.Seed.Sends, want)
		}
		h.close()
		if slices.Contains(tc.built, "gateway") && calls["closed gateway"] != 1 {
			t.Errorf("-only %s: the gateway was closed %d times, want once", tc.only, calls["closed gateway"])
		}
	}
}

// The summary table and its note about scenario 1 are printed only when a request-load
// scenario (1 to 6, 11) filled a row: a run of others (-only sched, -only deliver) printed
// a table header with no rows under it.
func TestSummaryTableOnlyWithRows(t *testing.T) {
	const header = "| scenario | metric |"
	for _, c := range []struct {
		name string
		r    Results
		want bool
	}{
		{"nothing", Results{}, false},
		{"sched", Results{Sched: &SchedResult{}}, false},
		{"deliver", Results{Deliver: &DeliverResult{}}, false},
		{"send", Results{Send: &SendResult{}}, true},
		{"memory", Results{Memory: Memory{RSSUnderLoadMiB: 100, RSSAtRestMiB: 50}}, true},
		{"groups", Results{Groups: &GroupsResult{}}, true},
	} {
		table := c.r.Table()
		if got := strings.Contains(table, header); got != c.want {
			t.Errorf("%s: table has the summary header = %v, want %v:\n%s", c.name, got, c.want, table)
		}
		if got := strings.Contains(table, "Our CPU and allocations"); got != c.want {
			t.Errorf("%s: table has the note on CPU and allocations = %v, want %v", c.name, got, c.want)
		}
	}
}
