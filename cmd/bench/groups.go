package main

import (
	"context"
	"encoding/json"
)

// --- 11. a page of groups vs a page of the inbox ---------------------------------------

// groupsQuery is the groups page a UI renders: "Alice and 3 others commented on #42",
// with counts, the first actors, the target and the latest notification.
const groupsQuery = `query Groups { viewer { groups(first: 20) { edges { node { id count unreadCount read actorCount actors { name avatarUrl } target { title url } latest { title createdAt } updatedAt } } pageInfo { hasNextPage endCursor } } } }`

// GroupsResult is scenario 11: the same users' groups page (A) against their initial
// inbox page (B), both through the gateway. A page of groups is one Query plus one
// BatchGetItem, as an inbox page; the goal is a p50 within 1.25 times the inbox's.
type GroupsResult struct {
	Engine      string  `json:"engine"`
	Concurrency int     `json:"concurrency"`
	Duration    string  `json:"duration"`
	Query       string  `json:"query"`
	Groups      Side    `json:"groups"`
	Inbox       Side    `json:"inbox"`
	P50Ratio    float64 `json:"p50_ratio_groups_over_inbox"`
	GoalP50     bool    `json:"goal_p50_within_1_25x"`
}

// groupsScenario warms both queries up in turn, then measures them in halves: groups,
// inbox, inbox, groups (as scenario 1, so an engine still warming up weighs on both). It
// is nil when the data set has no regular users (-users 0).
func (b *harness) groupsScenario(ctx context.Context) (*GroupsResult, error) {
	inboxReqs, err := b.inboxRequests(ctx)
	if err != nil || len(inboxReqs) == 0 {
		return nil, noUsers("groups", err)
	}
	batched, err := b.gatewayOf(ctx, needGateway)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"query": groupsQuery})
	groupReqs := make([]loadRequest, len(inboxReqs))
	for i, rq := range inboxReqs {
		groupReqs[i] = loadRequest{Token: rq.Token, Body: string(body)}
	}
	c := b.c
	progress("groups vs inbox: warming up both for %s", b.warmup())
	if err := b.warmInTurn(ctx, 1, warmSide{name: "groups", load: b.postRandom(batched.url, groupReqs)},
		warmSide{name: "inbox", load: b.postRandom(batched.url, inboxReqs)}); err != nil {
		return nil, err
	}
	half := c.duration / 2
	progress("groups vs inbox: %s each at concurrency %d, in halves: groups, inbox, inbox, groups", c.duration, c.concurrency)
	side := func(reqs []loadRequest) func() (window, error) {
		return func() (window, error) { return b.gatewayWindow(ctx, batched.url, c.concurrency, half, reqs) }
	}
	gs, is, err := inHalves(side(groupReqs), side(inboxReqs))
	if err != nil {
		return nil, err
	}
	r := &GroupsResult{Engine: b.eng.name, Concurrency: c.concurrency, Duration: c.duration.String(), Query: groupsQuery,
		Groups: sideOf("groups page (HTTP+GraphQL)", gs...), Inbox: sideOf("inbox page (HTTP+GraphQL)", is...)}
	r.P50Ratio = ratio(r.Groups.Latency.P50, r.Inbox.Latency.P50)
	r.GoalP50 = r.P50Ratio <= 1.25
	return r, nil
}
