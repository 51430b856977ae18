package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// inboxQuery is the initial inbox load of issue 3.
const inboxQuery = `query InitialInbox { viewer { unreadCount inbox(first: 20) { edges { node { actor { name avatarUrl } target { title url } } } pageInfo { hasNextPage endCursor } } } }`

// inProcessLoad runs fn from `workers` goroutines for d and returns the latencies and
// how many calls failed (the first error kept).
func inProcessLoad(ctx context.Context, workers int, d time.Duration, fn func(ctx context.Context, w int, rng *rand.Rand) error) ([]time.Duration, int, error) {
	var (
		mu       sync.Mutex
		all      []time.Duration
		errs     int
		firstErr error
	)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 100))
			lat := make([]time.Duration, 0, 4096)
			var n int
			var fe error
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				err := fn(ctx, w, rng)
				lat = append(lat, time.Since(t0))
				if err != nil {
					n++
					if fe == nil {
						fe = err
					}
				}
			}
			mu.Lock()
			all = append(all, lat...)
			errs += n
			if firstErr == nil {
				firstErr = fe
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, errs, firstErr
}

// loadFunc is one call of an in-process load (inProcessLoad): worker w, its own rng.
type loadFunc = func(ctx context.Context, w int, rng *rand.Rand) error

// postRandom is a load of reqs, each call one at random, posted to url from this process.
func (b *harness) postRandom(url string, reqs []loadRequest) loadFunc {
	return func(ctx context.Context, _ int, rng *rand.Rand) error {
		rq := reqs[rng.Intn(len(reqs))]
		return postGraphQL(ctx, b.client, url, rq.Token, rq.Body, nil)
	}
}

// warmSide is one side's warm-up: its load, and what to wait for after it (nil: nothing).
type warmSide struct {
	name  string
	load  loadFunc
	after func() error
}

// warmInTurn warms the sides up in turn, rounds times, each for warmup() at
// concurrency: DynamoDB Local's JIT keeps compiling the read paths for tens of seconds
// after the seeding's writes, and measured back to back, the side that ran first would
// pay for it.
func (b *harness) warmInTurn(ctx context.Context, rounds int, sides ...warmSide) error {
	for range rounds {
		for _, s := range sides {
			if _, n, err := inProcessLoad(ctx, b.c.concurrency, b.warmup(), s.load); err != nil {
				return fmt.Errorf("%s warm-up (%d errors): %w", s.name, n, err)
			}
			if s.after != nil {
				if err := s.after(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// inHalves measures two sides in halves run a, b, b, a, so that a drift of the engine
// (a JIT still warming up) weighs on both alike, and returns each side's windows: a's
// first and last, b's second and third.
func inHalves(a, b func() (window, error)) (as, bs []window, err error) {
	for i, side := range []func() (window, error){a, b, b, a} {
		w, err := side()
		if err != nil {
			return nil, nil, err
		}
		if i == 0 || i == 3 {
			as = append(as, w)
		} else {
			bs = append(bs, w)
		}
	}
	return as, bs, nil
}

// --- 1. gateway vs raw ---------------------------------------------------------------

// inboxScenario is nil when the data set has no regular users (-users 0).
func (b *harness) inboxScenario(ctx context.Context) (*InboxResult, error) {
	c := b.c
	reqs, err := b.inboxRequests(ctx)
	if err != nil || len(reqs) == 0 {
		return nil, noUsers("inbox", err)
	}
	ds, _ := b.dataset(ctx)
	batched, err := b.gatewayOf(ctx, needGateway)
	if err != nil {
		return nil, err
	}
	gw := b.postRandom(batched.url, reqs)
	raw := func(ctx context.Context, _ int, rng *rand.Rand) error {
		return b.rawInbox(ctx, ds.users[rng.Intn(len(ds.users))], io.Discard)
	}
	// Both sides warm up in turn, twice, and each side's measured time is split in two
	// halves run gateway, raw, raw, gateway (the gateway side's engine CPU per request was
	// 5.0 ms in its first 5s against 3.0 ms later, for the same calls, measured first).
	progress("gateway vs raw: warming up both for %s", b.warmup())
	if err := b.warmInTurn(ctx, 2, warmSide{name: "gateway", load: gw}, warmSide{name: "raw", load: raw}); err != nil {
		return nil, err
	}
	if err := b.checkSameAnswer(ctx, batched.url, reqs[0].Token, ds.users[0]); err != nil {
		return nil, err
	}

	progress("gateway vs raw: gateway (HTTP+GraphQL, load from a child process) and raw (Query + BatchGetItem + encoding/json), %s each at concurrency %d, in halves: gateway, raw, raw, gateway", c.duration, c.concurrency)
	// The profiles cover the first gateway half.
	stopProf, err := startProfiles(c.cpuProfile, c.memProfile)
	if err != nil {
		return nil, err
	}
	profiled := false
	sides := func(conc int, d time.Duration) ([]window, []window, error) {
		return inHalves(func() (window, error) {
			w, err := b.gatewayWindow(ctx, batched.url, conc, d, reqs)
			if !profiled {
				profiled = true
				if perr := stopProf(); perr != nil && err == nil {
					err = perr
				}
			}
			return w, err
		}, func() (window, error) { return b.rawWindow(ctx, conc, d, raw), nil })
	}
	gs, rs, err := sides(c.concurrency, c.duration/2)
	if err != nil {
		return nil, err
	}
	r := &InboxResult{Engine: b.eng.name, Concurrency: c.concurrency, Duration: c.duration.String(), Query: inboxQuery,
		Gateway: sideOf("gateway (HTTP+GraphQL, dataloaders)", gs...), Raw: sideOf("raw (Query + BatchGetItem + JSON)", rs...)}

	// At the fixed concurrency a small machine is CPU-bound (the JVM, the gateway and the
	// load generator share the cores), so latency there is mostly queueing. One request at
	// a time shows the latency the gateway adds to the same DynamoDB calls.
	d1 := max(c.duration/2, time.Second)
	progress("gateway vs raw: one request at a time, %s each, in halves: gateway, raw, raw, gateway", d1)
	if gs, rs, err = sides(1, d1/2); err != nil {
		return nil, err
	}
	r.GatewaySerial = sideOf("", gs...).Latency
	raw1 := sideOf("", rs...)
	if raw1.FirstError != "" {
		return nil, errors.New(raw1.FirstError)
	}
	r.RawSerial = raw1.Latency
	return r, nil
}

// noUsers is err, or nil with a note that scenario name is skipped: the data set has no
// regular users (-users 0).
func noUsers(name string, err error) error {
	if err == nil {
		progress("%s: skipped: no regular users (-users 0)", name)
	}
	return err
}

// window is one measured stretch of one side's load: its requests, their latencies and
// what this process (and the local engine) used meanwhile.
type window struct {
	requests, errors int
	firstErr         string
	seconds          float64
	lat              []time.Duration
	u0, u1           usage
}

// gatewayWindow runs reqs against url from a child process for d and measures this
// process meanwhile.
func (b *harness) gatewayWindow(ctx context.Context, url string, concurrency int, d time.Duration, reqs []loadRequest) (window, error) {
	stop := b.rssPeak.sampleWhile(ctx)
	defer stop()
	u0 := snapshot(b.eng)
	lr, err := spawnLoad(ctx, loadSpec{URL: url, Duration: d, Concurrency: concurrency, Requests: reqs, KeepLatencies: true})
	if err != nil {
		return window{}, err
	}
	return window{requests: lr.Requests, errors: lr.Errors, firstErr: lr.FirstError, seconds: lr.Seconds, lat: lr.Latencies, u0: u0, u1: snapshot(b.eng)}, nil
}

// rawWindow runs fn in this process for d at concurrency.
func (b *harness) rawWindow(ctx context.Context, concurrency int, d time.Duration, fn func(ctx context.Context, w int, rng *rand.Rand) error) window {
	stop := b.rssPeak.sampleWhile(ctx)
	defer stop()
	u0 := snapshot(b.eng)
	t0 := time.Now()
	lat, errs, ferr := inProcessLoad(ctx, concurrency, d, fn)
	w := window{requests: len(lat), errors: errs, seconds: time.Since(t0).Seconds(), lat: lat, u0: u0, u1: snapshot(b.eng)}
	if ferr != nil {
		w.firstErr = ferr.Error()
	}
	return w
}

// sideOf merges the windows of one side into its figures.
func sideOf(name string, ws ...window) Side {
	s := Side{Name: name}
	var all []time.Duration
	var used usage // the sum of the windows' differences
	for _, w := range ws {
		s.Requests += w.requests
		s.Errors += w.errors
		s.Seconds += w.seconds
		if s.FirstError == "" {
			s.FirstError = w.firstErr
		}
		all = append(all, w.lat...)
		used.cpu += w.u1.cpu - w.u0.cpu
		used.mallocs += w.u1.mallocs - w.u0.mallocs
		used.allocated += w.u1.allocated - w.u0.allocated
		used.engineCPU += w.u1.engineCPU - w.u0.engineCPU
		used.ops = append(used.ops, w.u1.ops[min(len(w.u0.ops), len(w.u1.ops)):]...)
	}
	if s.Seconds > 0 {
		s.ReqPerSec = float64(s.Requests) / s.Seconds
	}
	s.Latency = summarize(all)
	s.Cost = perRequest(usage{}, used, s.Requests)
	return s
}

// gatewayLoad runs reqs against url from a child process and measures this process.
func (b *harness) gatewayLoad(ctx context.Context, name, url string, reqs []loadRequest) (Side, error) {
	w, err := b.gatewayWindow(ctx, url, b.c.concurrency, b.c.duration, reqs)
	if err != nil {
		return Side{}, err
	}
	return sideOf(name, w), nil
}

// Hand-written access: the key formats of store/keys.go (README.md's Key design), typed out here on purpose.
func userPK(u string) string { return "T#" + tenant + "#U#" + u }

type rawItem struct {
	SK          string `dynamodbav:"sk"`
	ID          string `dynamodbav:"id"`
	ActorID     string `dynamodbav:"actorId"`
	TargetKind  string `dynamodbav:"targetKind"`
	TargetID    string `dynamodbav:"targetId"`
	UnreadCount int    `dynamodbav:"unreadCount"`
}

type rawProfile struct {
	PK        string `dynamodbav:"pk"`
	Name      string `dynamodbav:"name"`
	AvatarURL string `dynamodbav:"avatarUrl"`
	Title     string `dynamodbav:"title"`
	URL       string `dynamodbav:"url"`
}

type rawResponse struct {
	Data struct {
		Viewer struct {
			UnreadCount int `json:"unreadCount"`
			Inbox       struct {
				Edges    []rawEdge `json:"edges"`
				PageInfo struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
			} `json:"inbox"`
		} `json:"viewer"`
	} `json:"data"`
}

type rawEdge struct {
	Node struct {
		Actor  *rawActor  `json:"actor"`
		Target *rawTarget `json:"target"`
	} `json:"node"`
}

type rawActor struct {
	Name      string `json:"name"`
	AvatarURL string `json:"avatarUrl"`
}

type rawTarget struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

var rawProjectionNames = map[string]string{"#pk": "pk", "#sk": "sk", "#n": "name", "#a": "avatarUrl", "#t": "title", "#u": "url"}

// rawInbox is the initial inbox load by hand: one Query (META sorts above every
// notification, so it comes first), one BatchGetItem of the distinct actors and targets,
// and the GraphQL response's JSON written to w.
func (b *harness) rawInbox(ctx context.Context, user string, w io.Writer) error {
	const first = 20
	out, err := b.eng.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(b.c.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{"#pk": "pk", "#sk": "sk"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: userPK(user)},
			":lo": &types.AttributeValueMemberS{Value: "N#"},
			":hi": &types.AttributeValueMemberS{Value: "N~META"},
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(first + 2),
	})
	if err != nil {
		return err
	}
	var resp rawResponse
	var items []rawItem
	for _, raw := range out.Items {
		var it rawItem
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			return err
		}
		if it.SK == "N~META" {
			resp.Data.Viewer.UnreadCount = it.UnreadCount
			continue
		}
		items = append(items, it)
	}
	more := len(items) > first
	items = items[:min(len(items), first)]
	keyOf := func(it rawItem) (actor, target string) {
		if it.ActorID != "" {
			actor = "T#" + tenant + "#ACTOR#" + it.ActorID
		}
		if it.TargetID != "" {
			target = "T#" + tenant + "#TARGET#" + it.TargetKind + "#" + it.TargetID
		}
		return
	}
	seen := map[string]bool{}
	var keys []map[string]types.AttributeValue
	for _, it := range items {
		a, t := keyOf(it)
		for _, pk := range []string{a, t} {
			if pk != "" && !seen[pk] {
				seen[pk] = true
				keys = append(keys, map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "PROFILE"}})
			}
		}
	}
	profiles := map[string]rawProfile{}
	req := types.KeysAndAttributes{Keys: keys, ProjectionExpression: aws.String("#pk, #sk, #n, #a, #t, #u"), ExpressionAttributeNames: rawProjectionNames}
	for len(req.Keys) > 0 {
		bo, err := b.eng.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{b.c.table: req}})
		if err != nil {
			return err
		}
		for _, raw := range bo.Responses[b.c.table] {
			var p rawProfile
			if err := attributevalue.UnmarshalMap(raw, &p); err != nil {
				return err
			}
			profiles[p.PK] = p
		}
		req.Keys = bo.UnprocessedKeys[b.c.table].Keys
	}
	edges := make([]rawEdge, len(items))
	for i, it := range items {
		a, t := keyOf(it)
		if p, ok := profiles[a]; ok {
			edges[i].Node.Actor = &rawActor{Name: p.Name, AvatarURL: p.AvatarURL}
		}
		if p, ok := profiles[t]; ok {
			edges[i].Node.Target = &rawTarget{Title: p.Title, URL: p.URL}
		}
	}
	resp.Data.Viewer.Inbox.Edges = edges
	resp.Data.Viewer.Inbox.PageInfo.HasNextPage = more
	if len(items) > 0 {
		c := b.st.EncodeCursor(inbox.Viewer{TenantID: tenant, UserID: user}, store.IndexInbox, items[len(items)-1].ID)
		resp.Data.Viewer.Inbox.PageInfo.EndCursor = &c
	}
	return json.NewEncoder(w).Encode(&resp)
}

// checkSameAnswer makes sure both sides answer the same document for one user.
func (b *harness) checkSameAnswer(ctx context.Context, url, token, user string) error {
	var gw, raw strings.Builder
	body, _ := json.Marshal(map[string]string{"query": inboxQuery})
	var g any
	if err := postGraphQL(ctx, b.client, url, token, string(body), &g); err != nil {
		return err
	}
	_ = json.NewEncoder(&gw).Encode(g)
	if err := b.rawInbox(ctx, user, &raw); err != nil {
		return err
	}
	var r any
	_ = json.Unmarshal([]byte(raw.String()), &r)
	raw.Reset()
	_ = json.NewEncoder(&raw).Encode(r)
	if gw.String() != raw.String() {
		return fmt.Errorf("gateway and raw answers differ:\n gateway %.400s\n raw     %.400s", gw.String(), raw.String())
	}
	return nil
}

// --- 2. batched vs naive -------------------------------------------------------------

// inboxBaseline is the gateway with dataloaders under the inbox load: scenario 1's
// gateway side when it ran (prev), else a run of its own (what names it in the progress).
func (b *harness) inboxBaseline(ctx context.Context, prev *InboxResult, what string, reqs []loadRequest) (Side, error) {
	if prev != nil {
		return prev.Gateway, nil
	}
	batched, err := b.gatewayOf(ctx, needGateway)
	if err != nil {
		return Side{}, err
	}
	progress("%s, %s at concurrency %d", what, b.c.duration, b.c.concurrency)
	return b.gatewayLoad(ctx, "gateway (HTTP+GraphQL, dataloaders)", batched.url, reqs)
}

// naiveScenario is nil when the data set has no regular users (-users 0).
func (b *harness) naiveScenario(ctx context.Context, prev *InboxResult) (*NaiveResult, error) {
	reqs, err := b.inboxRequests(ctx)
	if err != nil || len(reqs) == 0 {
		return nil, noUsers("naive", err)
	}
	batched, err := b.inboxBaseline(ctx, prev, "batched vs naive: batched", reqs)
	if err != nil {
		return nil, err
	}
	naiveGW, err := b.gatewayOf(ctx, needNaive)
	if err != nil {
		return nil, err
	}
	progress("batched vs naive: naive (no dataloaders), %s at concurrency %d", b.c.duration, b.c.concurrency)
	if err := b.warmInTurn(ctx, 1, warmSide{name: "naive", load: b.postRandom(naiveGW.url, reqs)}); err != nil {
		return nil, err
	}
	naive, err := b.gatewayLoad(ctx, "gateway, naive (one call per actor and per target)", naiveGW.url, reqs)
	if err != nil {
		return nil, err
	}
	return &NaiveResult{Engine: b.eng.name, Concurrency: b.c.concurrency, Duration: b.c.duration.String(), Batched: batched, Naive: naive}, nil
}

// --- 6. shared profile cache --------------------------------------------------------

// cacheScenario runs the inbox load against the gateway whose store shares a profile
// cache across requests (store.WithProfileCache) and compares it with the same gateway
// without one (scenario 1's gateway side, or a run of its own when scenario 1 is skipped).
// The hit rate is over the measured window only, after a warm-up through the same cache:
// the steady state of a running gateway. It is nil when the data set has no regular
// users (-users 0).
func (b *harness) cacheScenario(ctx context.Context, prev *InboxResult) (*CacheResult, error) {
	reqs, err := b.inboxRequests(ctx)
	if err != nil || len(reqs) == 0 {
		return nil, noUsers("cache", err)
	}
	off, err := b.inboxBaseline(ctx, prev, "profile cache: off", reqs)
	if err != nil {
		return nil, err
	}
	cached, err := b.gatewayOf(ctx, needCached)
	if err != nil {
		return nil, err
	}
	cachedSt := cached.app.Store
	progress("profile cache: on (size %d, ttl %s), warming up for %s", b.c.cacheSize, b.c.cacheTTL, b.warmup())
	hc, mc := cachedSt.ProfileCacheStats() // zero: nothing used the cache before
	if err := b.warmInTurn(ctx, 1, warmSide{name: "cached", load: b.postRandom(cached.url, reqs)}); err != nil {
		return nil, err
	}
	progress("profile cache: on, %s at concurrency %d", b.c.duration, b.c.concurrency)
	h0, m0 := cachedSt.ProfileCacheStats()
	on, err := b.gatewayLoad(ctx, fmt.Sprintf("gateway with the shared profile cache (size %d, ttl %s)", b.c.cacheSize, b.c.cacheTTL), cached.url, reqs)
	if err != nil {
		return nil, err
	}
	h1, m1 := cachedSt.ProfileCacheStats()
	r := &CacheResult{Engine: b.eng.name, Concurrency: b.c.concurrency, Duration: b.c.duration.String(),
		Size: b.c.cacheSize, TTL: b.c.cacheTTL.String(), On: on, Off: off, Hits: h1 - h0, Misses: m1 - m0,
		ColdHits: h1 - hc, ColdMisses: m1 - mc}
	return r, nil
}

// --- 3. the mark-alls are O(1) --------------------------------------------------------

// markAllOp is one of scenario 3's mutations.
type markAllOp struct {
	name     string
	category bool // markAllRead of one category
	// body is the GraphQL request for a user whose notifications are all of category cat.
	body func(cat string) string
	// cleared reads the count the mutation must leave at 0 from its response's data.
	cleared func(data map[string]any) (float64, bool)
}

// markAllOps are markAllRead, markAllSeen and markAllRead of one category (the whole
// inbox of the user measured is of that category, so each clears a count that is 10 or
// 10,000).
var markAllOps = []markAllOp{
	{name: "markAllRead",
		body: func(string) string { return `{"query":"mutation { markAllRead { unreadCount readAllBefore } }"}` },
		cleared: func(d map[string]any) (float64, bool) {
			v, ok := d["markAllRead"].(map[string]any)["unreadCount"].(float64)
			return v, ok
		}},
	{name: "markAllSeen",
		body: func(string) string { return `{"query":"mutation { markAllSeen { unread unseen } }"}` },
		cleared: func(d map[string]any) (float64, bool) {
			v, ok := d["markAllSeen"].(map[string]any)["unseen"].(float64)
			return v, ok
		}},
	{name: "markAllRead(filter: {categories})", category: true,
		body: func(cat string) string {
			b, _ := json.Marshal(map[string]any{"query": "mutation M($c: [String!]) { markAllRead(filter: {categories: $c}) { unreadCount badge { unseen } } }",
				"variables": map[string]any{"c": []string{cat}}})
			return string(b)
		},
		cleared: func(d map[string]any) (float64, bool) {
			v, ok := d["markAllRead"].(map[string]any)["unreadCount"].(float64)
			return v, ok
		}},
}

// markAllGoal is issue 9's bound on the p50 ratio of a mark-all on 10,000 notifications
// over one on 10.
const markAllGoal = 1.5

// markAllScenario is nil when the data set has no big users (-big-users 0).
func (b *harness) markAllScenario(ctx context.Context) (*MarkAllResult, error) {
	ds, err := b.dataset(ctx)
	if err != nil {
		return nil, err
	}
	if len(ds.big) == 0 {
		progress("markall: skipped: no big users (-big-users 0)")
		return nil, nil
	}
	batched, err := b.gatewayOf(ctx, needGateway)
	if err != nil {
		return nil, err
	}
	r := &MarkAllResult{Engine: b.eng.name, Duration: b.c.duration.String(), GoalP50Ratio: markAllGoal,
		Method: "sequential mutations through HTTP+GraphQL; before each, META's image from before the first call is restored with a PutItem (untimed), so every call finds the same counts; the GSI sweep is off; " +
			"per mutation, each user runs -duration in two halves, in the order few, many, many, few (the first call of each half is a warm-up, not timed)"}
	users := []struct{ user, cat string }{{ds.few, "github"}, {ds.big[0], bigCategory}}
	for _, op := range markAllOps {
		progress("%s: %d and %d notifications, %s each in halves", op.name, b.c.fewSize, b.c.bigSize, b.c.duration)
		lat := make([][]time.Duration, len(users))
		before := make([]inbox.Badge, len(users))
		for _, i := range []int{0, 1, 1, 0} {
			l, bd, err := b.markAllUser(ctx, batched.url, op, users[i].user, users[i].cat, b.c.duration/2)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
			lat[i] = append(lat[i], l...)
			before[i] = bd
		}
		o := MarkAllOp{Name: op.name, Mutation: op.body(users[0].cat)}
		for i, u := range users {
			mu := MarkAllUser{User: u.user, UnreadBefore: before[i].Unread, UnseenBefore: before[i].Unseen, Latency: summarize(lat[i])}
			if op.category {
				mu.Category = u.cat
				for _, c := range before[i].Categories {
					if c.Category == u.cat {
						mu.CategoryUnreadBefore = c.Unread
					}
				}
			}
			o.Users = append(o.Users, mu)
		}
		o.P50Ratio = ratio(o.Users[1].Latency.P50, o.Users[0].Latency.P50)
		o.GoalMet = o.P50Ratio <= markAllGoal
		r.Ops = append(r.Ops, o)
	}
	// The earlier fields: markAllRead's figures.
	r.Users = r.Ops[0].Users
	return r, nil
}

// markAllUser runs op for user (whose notifications are of category cat) for d through
// the gateway at url, restoring META before each call, and returns the timed latencies and the badge every call starts
// from.
func (b *harness) markAllUser(ctx context.Context, url string, op markAllOp, user, cat string, d time.Duration) ([]time.Duration, inbox.Badge, error) {
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: userPK(user)}, "sk": &types.AttributeValueMemberS{Value: "N~META"}}
	got, err := b.eng.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(b.c.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, inbox.Badge{}, err
	}
	if got.Item == nil {
		return nil, inbox.Badge{}, fmt.Errorf("user %s has no META", user)
	}
	before, err := b.st.Badge(ctx, inbox.Viewer{TenantID: tenant, UserID: user})
	if err != nil {
		return nil, inbox.Badge{}, err
	}
	tok, err := b.token(user)
	if err != nil {
		return nil, inbox.Badge{}, err
	}
	body := op.body(cat)
	var lat []time.Duration
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline) || i < 3; i++ {
		if _, err := b.eng.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(b.c.table), Item: got.Item}); err != nil {
			return nil, inbox.Badge{}, err
		}
		var out struct {
			Data map[string]any `json:"data"`
		}
		t0 := time.Now()
		err := postGraphQL(ctx, b.client, url, tok, body, &out)
		el := time.Since(t0)
		if err != nil {
			return nil, inbox.Badge{}, err
		}
		if n, ok := op.cleared(out.Data); !ok || n != 0 {
			return nil, inbox.Badge{}, fmt.Errorf("%s for %s left %v (answer %v)", op.name, user, n, out.Data)
		}
		if i > 0 { // the first call warms this user's path up
			lat = append(lat, el)
		}
	}
	// Leave the inbox as it was found.
	if _, err := b.eng.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(b.c.table), Item: got.Item}); err != nil {
		return nil, inbox.Badge{}, err
	}
	return lat, before, nil
}

// --- 4. send throughput --------------------------------------------------------------

func (b *harness) sendScenario(ctx context.Context) (*SendResult, error) {
	c := b.c
	n := c.sendRecips
	batched, err := b.gatewayOf(ctx, needGateway)
	if err != nil {
		return nil, err
	}
	tok, err := b.token("bench-sender", auth.ScopeSend)
	if err != nil {
		return nil, err
	}
	g := newSendGen(2, c.actors, c.targets)
	var genMu sync.Mutex
	var seq atomic.Int64
	// Each worker of the three-item raw loop sends to recipients of its own (n users named
	// raw-w-i), call after call. Each gateway call goes to n fresh users (gw-N-i), as each
	// call of the raw loop of the gateway's items does: a user's group item gains a member
	// with every send, so a side sending to the same users again and again writes (and the
	// gateway reads) larger items than a side writing for fresh users.
	rcpt := make([][]string, c.concurrency)
	for w := range c.concurrency {
		for i := range n {
			rcpt[w] = append(rcpt[w], fmt.Sprintf("raw-%02d-%03d", w, i))
		}
	}
	// next is worker w's next send of side (keyed bench-send-N on the gateway's, bench-raw-N on the raw one).
	next := func(side string, w int) inbox.SendInput {
		genMu.Lock()
		defer genMu.Unlock()
		k := seq.Add(1)
		if side == "gw" {
			users := make([]string, n)
			for i := range users {
				users[i] = fmt.Sprintf("gw-%05d-%03d", k, i)
			}
			return g.input(fmt.Sprintf("bench-send-%d", k), users)
		}
		return g.input(fmt.Sprintf("bench-raw-%d", k), rcpt[w])
	}
	gwSend := func(ctx context.Context, w int) (int, error) {
		in := next("gw", w)
		vars := map[string]any{"input": map[string]any{
			"idempotencyKey": in.IdempotencyKey, "recipients": in.Recipients, "type": in.Type, "category": in.Category,
			"title": in.Title, "body": in.Body, "payload": json.RawMessage(in.Payload),
			"actor":  map[string]string{"id": in.Actor.ActorID, "name": in.Actor.Name, "avatarUrl": in.Actor.AvatarURL, "url": in.Actor.URL},
			"target": map[string]string{"id": in.Target.TargetID, "kind": in.Target.Kind, "title": in.Target.Title, "url": in.Target.URL},
		}}
		body, _ := json.Marshal(map[string]any{"query": "mutation Send($input: SendNotificationInput!) { sendNotification(input: $input) { accepted duplicate } }", "variables": vars})
		var out struct {
			Data struct {
				SendNotification struct{ Accepted int } `json:"sendNotification"`
			} `json:"data"`
		}
		err := postGraphQL(ctx, b.client, batched.url, tok, string(body), &out)
		return out.Data.SendNotification.Accepted, err
	}
	rawSend := func(ctx context.Context, w int) (int, error) {
		in := next("raw", w)
		eg, gctx := errgroup.WithContext(ctx)
		eg.SetLimit(8) // the store's per-send concurrency
		for _, r := range in.Recipients {
			eg.Go(func() error {
				return b.rawSendOne(gctx, in.IdempotencyKey, r, in.Type, in.Category, in.Title, in.Body, string(in.Payload), in.Actor.ActorID, in.Target.Kind, in.Target.TargetID)
			})
		}
		if err := eg.Wait(); err != nil {
			return 0, err
		}
		return len(in.Recipients), nil
	}
	// The raw loop writing the same items as the gateway: one recipient's transaction of
	// the same send, recorded from a real service.Writer, written for fresh users (a
	// user's group has room, as a fresh one's does).
	tpl, err := b.recordRecipientTxnFor(ctx, next("raw", 0), "rs-probe-000", "bench-rs-probe")
	if err != nil {
		return nil, fmt.Errorf("record a recipient's transaction: %w", err)
	}
	var call atomic.Int64
	sameSend := func(ctx context.Context, w int) (int, error) {
		k := call.Add(1)
		users := make([]string, n)
		for i := range users {
			users[i] = fmt.Sprintf("rs-%05d-%03d", k, i)
		}
		if err := replayTxn(ctx, b.eng.db, tpl, users, fmt.Sprintf("bench-rs-%d", k)); err != nil {
			return 0, err
		}
		return n, nil
	}
	sides := []struct {
		name string
		send func(context.Context, int) (int, error)
		acc  sendAcc
	}{
		{name: "sendNotification (HTTP+GraphQL, service.Writer)", send: gwSend},
		{name: "raw TransactWriteItems loop of the recorded transaction (the gateway's items)", send: sameSend},
		{name: "raw TransactWriteItems loop (guard + notification + META per recipient)", send: rawSend},
	}
	// Warm-ups in turn, one call per worker of each side at full concurrency, untimed:
	// DynamoDB Local's JIT compiles the write paths while they run. Measured first after a
	// single warm-up call, the gateway side paid for the engine's warm-up alone: its engine
	// CPU per call was twice what it was on the same calls run again after the raw sides.
	progress("send throughput: warming up (%d calls of each side at once, in turn)", c.concurrency)
	for _, sd := range sides {
		eg, gctx := errgroup.WithContext(ctx)
		for w := range c.concurrency {
			eg.Go(func() error { _, err := sd.send(gctx, w); return err })
		}
		if err := eg.Wait(); err != nil {
			return nil, fmt.Errorf("warm up %s: %w", sd.name, err)
		}
	}
	// Each side's time in two halves, in the order gateway, same items, three items, three
	// items, same items, gateway: what the engine still warms up or the machine's other
	// work changes weighs on every side alike.
	for j, i := range []int{0, 1, 2, 2, 1, 0} {
		progress("send throughput: %s, %s at concurrency %d (a half)", sides[i].name, c.duration/2, c.concurrency)
		stopProfile := func() error { return nil }
		if j == 0 { // -send-cpuprofile: the gateway's first half
			if stopProfile, err = startProfiles(c.sendCPUProfile, ""); err != nil {
				return nil, err
			}
		}
		if err := b.sendHalf(ctx, &sides[i].acc, c.duration/2, sides[i].send); err != nil {
			return nil, err
		}
		if err := stopProfile(); err != nil {
			return nil, err
		}
	}
	gside, same, rside := sides[0].acc.side(sides[0].name), sides[1].acc.side(sides[1].name), sides[2].acc.side(sides[2].name)
	costs, err := b.sendCosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("send write units: %w", err)
	}
	return &SendResult{Engine: b.eng.name, Concurrency: c.concurrency, RecipientsPerCall: n, Duration: c.duration.String(), Gateway: gside, Raw: rside,
		RawSame: same, SameTransaction: tpl.describe(), Costs: costs}, nil
}

// sendAcc accumulates one side's halves of scenario 4.
type sendAcc struct {
	lat       []time.Duration
	errs      int
	firstErr  error
	delivered int64
	elapsed   time.Duration
	use       usage // this process's and the engine's use, and the DynamoDB calls, summed
	ops       map[string]opTime
}

// sendHalf runs send (worker w's next call; it returns the notifications it delivered)
// at -concurrency for d and adds what it did to acc.
func (b *harness) sendHalf(ctx context.Context, acc *sendAcc, d time.Duration, send func(ctx context.Context, w int) (int, error)) error {
	var delivered atomic.Int64
	stop := b.rssPeak.sampleWhile(ctx)
	u0, o0 := snapshot(b.eng), b.eng.timer.snapshot()
	t0 := time.Now()
	lat, errs, ferr := inProcessLoad(ctx, b.c.concurrency, d, func(ctx context.Context, w int, _ *rand.Rand) error {
		n, err := send(ctx, w)
		if err == nil {
			delivered.Add(int64(n))
		}
		return err
	})
	el := time.Since(t0)
	u1, o1 := snapshot(b.eng), b.eng.timer.snapshot()
	stop()
	acc.lat = append(acc.lat, lat...)
	acc.errs += errs
	if acc.firstErr == nil {
		acc.firstErr = ferr
	}
	acc.delivered += delivered.Load()
	acc.elapsed += el
	acc.use.cpu += u1.cpu - u0.cpu
	acc.use.mallocs += u1.mallocs - u0.mallocs
	acc.use.allocated += u1.allocated - u0.allocated
	acc.use.engineCPU += u1.engineCPU - u0.engineCPU
	acc.use.ops = append(acc.use.ops, u1.ops[min(len(u0.ops), len(u1.ops)):]...)
	if acc.ops == nil {
		acc.ops = map[string]opTime{}
	}
	for op, v := range o1 {
		t := acc.ops[op]
		t.Calls += v.Calls - o0[op].Calls
		t.Total += v.Total - o0[op].Total
		acc.ops[op] = t
	}
	return ctx.Err()
}

// side reports the halves accumulated: notifications/s over their time together, and
// per call this process's and the engine's CPU, the DynamoDB calls by operation and
// their mean time.
func (acc *sendAcc) side(name string) SendSide {
	s := SendSide{Name: name, Calls: len(acc.lat), Errors: acc.errs, Notifications: acc.delivered,
		Seconds: acc.elapsed.Seconds(), CallLatency: summarize(acc.lat),
		PerCall: perRequest(usage{}, acc.use, len(acc.lat)), OpMeanMs: meanMillis(nil, acc.ops)}
	if acc.elapsed > 0 {
		s.PerSec = float64(acc.delivered) / acc.elapsed.Seconds()
	}
	if acc.firstErr != nil {
		s.FirstError = acc.firstErr.Error()
	}
	return s
}

// rawSendOne writes one recipient's guard, notification and META counter in one
// transaction, as the store does, retrying a cancelled transaction with a fresh id.
func (b *harness) rawSendOne(ctx context.Context, key, user, typ, category, title, body, payload, actorID, targetKind, targetID string) error {
	table := aws.String(b.c.table)
	notExists := aws.String("attribute_not_exists(#pk)")
	pkName := map[string]string{"#pk": "pk"}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	v := inbox.Viewer{TenantID: tenant, UserID: user}
	for attempt := 0; ; attempt++ {
		id := ulid.Make().String()
		now := time.Now()
		guard := map[string]types.AttributeValue{"pk": s("T#" + tenant + "#IDEM#" + key), "sk": s("R#" + user), "entityType": s("IdempotencyGuard"),
			"userId": s(user), "notificationId": s(id), "inputHash": s("raw"),
			"expiresAt": &types.AttributeValueMemberN{Value: fmt.Sprint(now.Add(30 * 24 * time.Hour).Unix())}}
		// The notification and META's count: store.OutsideSendInput, the store's own shapes.
		in, err := store.OutsideSendInput(b.c.table, v, inbox.Notification{ID: id, Type: typ, Category: category, Title: title,
			Body: body, ActorID: actorID, TargetKind: targetKind, TargetID: targetID, Payload: inbox.JSON(payload), CreatedAt: now})
		if err != nil {
			return err
		}
		in.TransactItems = append([]types.TransactWriteItem{{Put: &types.Put{TableName: table, Item: guard,
			ConditionExpression: notExists, ExpressionAttributeNames: pkName}}}, in.TransactItems...)
		_, err = b.eng.db.TransactWriteItems(ctx, in)
		var tce *types.TransactionCanceledException
		if err != nil && errors.As(err, &tce) && attempt < 10 {
			time.Sleep(time.Duration(5<<attempt) * time.Millisecond / 2)
			continue
		}
		return err
	}
}
