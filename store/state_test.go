package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/ddbfault"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

// truth recounts v's counters from the notifications themselves: every notification item
// of the partition (a raw Query), its state as the store reports it (Notifications), and
// the counts of the active ones.
func (f *fixture) truth(t *testing.T, v inbox.Viewer) inbox.Badge {
	t.Helper()
	ctx := context.Background()
	var ids []string
	in := &dynamodb.QueryInput{
		TableName:              aws.String(f.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :n)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "T#" + v.TenantID + "#U#" + v.UserID},
			":n":  &types.AttributeValueMemberS{Value: "N#"},
		},
		ConsistentRead: aws.Bool(true),
	}
	for {
		out, err := f.db.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range out.Items {
			var it struct {
				ID string `dynamodbav:"id"`
			}
			if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, it.ID)
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	b := inbox.Badge{}
	cats := map[string]*inbox.CategoryCount{}
	for start := 0; start < len(ids); start += 100 {
		ns, err := f.s.Notifications(ctx, v, ids[start:min(start+100, len(ids))])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if n == nil || n.Archived || n.SnoozedUntil != nil {
				continue
			}
			cat := n.Category
			if n.Type == "old" { // written before the v2 counters: counted in unread alone
				cat = ""
			}
			c := cats[cat]
			if c == nil {
				c = &inbox.CategoryCount{Category: cat}
				cats[cat] = c
			}
			if !n.Read {
				b.Unread++
				c.Unread++
			}
			if !n.Seen {
				b.Unseen++
				c.Unseen++
			}
		}
	}
	// The tenant's announcements as v's inbox lists them (archived included): counted as
	// notifications are, from the state the page shows.
	for _, n := range f.entries(t, v.UserID, inbox.PageQuery{Archived: inbox.ArchivedInclude}) {
		if n.Kind != inbox.KindAnnouncement || n.Archived {
			continue
		}
		c := cats[n.Category]
		if c == nil {
			c = &inbox.CategoryCount{Category: n.Category}
			cats[n.Category] = c
		}
		if !n.Read {
			b.Unread++
			c.Unread++
		}
		if !n.Seen {
			b.Unseen++
			c.Unseen++
		}
	}
	b.Categories = []inbox.CategoryCount{}
	for _, c := range cats {
		if c.Category != "" && (c.Unread != 0 || c.Unseen != 0) {
			b.Categories = append(b.Categories, *c)
		}
	}
	slices.SortFunc(b.Categories, func(a, b inbox.CategoryCount) int {
		if a.Category < b.Category {
			return -1
		}
		return 1
	})
	return b
}

// checkExact fails unless v's badge equals the recount of its notifications, the
// unread list holds exactly the unread count and every group its members (checkGroups).
func (f *fixture) checkExact(t *testing.T, v inbox.Viewer) inbox.Badge {
	t.Helper()
	want := f.truth(t, v)
	got, err := f.s.Badge(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	if got.Unread != want.Unread || got.Unseen != want.Unseen || !slices.Equal(got.Categories, want.Categories) {
		t.Fatalf("badge %+v, but the notifications count %+v", got, want)
	}
	n := 0
	q := inbox.PageQuery{First: ptr(100), UnreadOnly: true}
	for {
		p := f.page(t, v.UserID, q)
		n += len(p.Edges)
		if !p.PageInfo.HasNextPage {
			break
		}
		q.After = *p.PageInfo.EndCursor
	}
	if n != want.Unread {
		t.Fatalf("the unread list has %d, the badge %d", n, want.Unread)
	}
	f.checkGroups(t, v)
	return got
}

// pool is the ids sent so far, shared by the goroutines of a race.
type pool struct {
	mu  sync.Mutex
	ids []string
	exp map[string]int64 // expireAt (ms) of the ids sent with one
}

func (p *pool) add(ids []string, exp int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, ids...)
	for _, id := range ids {
		if exp != 0 {
			p.exp[id] = exp
		}
	}
}

func (p *pool) pick(r *rand.Rand, n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for range n {
		if len(p.ids) > 0 {
			out = append(out, p.ids[r.IntN(len(p.ids))])
		}
	}
	return out
}

// race runs every state change on alice's inbox from many goroutines through s, and
// returns the errors met (ok reports whether an error is acceptable). With ann (the
// announcement service s merges), announcements are created and withdrawn in the race
// too, and read, unread, seen, archive, unarchive and delete name them among the
// notifications ("@" ids).
func race(t *testing.T, s *store.Store, tenant string, rounds int, ok func(error) bool, ann ...*service.Announcements) {
	t.Helper()
	ctx := context.Background()
	v := inbox.Viewer{TenantID: tenant, UserID: "alice"}
	cats := []string{"", "a", "b"}
	p := &pool{exp: map[string]int64{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	report := func(what string, err error) {
		if err != nil && !ok(err) {
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			mu.Unlock()
		}
	}
	seq := 0
	next := func() int { mu.Lock(); defer mu.Unlock(); seq++; return seq }
	send := func(r *rand.Rand) {
		in := inbox.SendInput{IdempotencyKey: "race-" + strconv.Itoa(next()) + randSuffix(), Recipients: []string{"alice", "bob"},
			Type: "t", Category: cats[r.IntN(len(cats))], GroupKey: []string{"", "g1", "g2"}[r.IntN(3)]}
		var exp int64
		if r.IntN(3) == 0 {
			in.ExpiresAt = time.Now().Add(time.Hour).Truncate(time.Millisecond)
			exp = in.ExpiresAt.UnixMilli()
		}
		res, err := writer(s).Send(ctx, tenant, in)
		report("send", err)
		if err == nil && len(res.NotificationIDs) > 0 {
			p.add(res.NotificationIDs[:1], exp)
		}
	}
	anns := &pool{exp: map[string]int64{}}
	announce := func(r *rand.Rand) {
		a, _, err := ann[0].Create(ctx, tenant, service.CreateRequest{Input: inbox.AnnouncementInput{
			IdempotencyKey: "race-ann-" + strconv.Itoa(next()) + randSuffix(), Type: "a", Category: cats[r.IntN(len(cats))], Title: "hello"}})
		report("announce", err)
		if err == nil {
			anns.add([]string{inbox.AnnouncementRef + a.ID}, 0)
		}
	}
	// mixed picks n of the notifications and, in a race with announcements, some of them.
	mixed := func(r *rand.Rand, n int) []string {
		ids := p.pick(r, n)
		if len(ann) > 0 {
			ids = append(ids, anns.pick(r, 1+r.IntN(2))...)
		}
		return ids
	}
	r0 := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		send(r0)
	}
	if len(ann) > 0 {
		for range 3 {
			announce(r0)
		}
	}
	ops := []func(r *rand.Rand){
		send,
		func(r *rand.Rand) {
			_, err := s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpRead, IDs: mixed(r, 3)})
			report("read", err)
		},
		func(r *rand.Rand) {
			_, err := s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpUnread, IDs: mixed(r, 2)})
			report("unread", err)
		},
		func(r *rand.Rand) {
			_, err := s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpSeen, IDs: mixed(r, 2)})
			report("seen", err)
		},
		func(r *rand.Rand) {
			_, err := s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpArchive, IDs: mixed(r, 2)})
			report("archive", err)
		},
		func(r *rand.Rand) {
			_, err := s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpUnarchive, IDs: mixed(r, 2)})
			report("unarchive", err)
		},
		func(r *rand.Rand) {
			ids := p.pick(r, 2)
			until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			_, err := s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpSnooze, IDs: ids, Until: until})
			report("snooze", err)
			if len(ids) > 0 && r.IntN(2) == 0 {
				report("wake", s.Wake(ctx, v, ids[0], strconv.FormatInt(until.UnixMilli(), 10)))
			}
		},
		func(r *rand.Rand) {
			_, err := s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpUnsnooze, IDs: p.pick(r, 1)})
			report("unsnooze", err)
		},
		func(r *rand.Rand) {
			if r.IntN(3) == 0 {
				ids := p.pick(r, 1)
				if len(ann) > 0 && r.IntN(2) == 0 {
					ids = anns.pick(r, 1)
				}
				_, err := s.Delete(ctx, v, ids)
				report("delete", err)
			}
		},
		func(r *rand.Rand) {
			for _, id := range p.pick(r, 3) {
				p.mu.Lock()
				exp := p.exp[id]
				p.mu.Unlock()
				if exp != 0 {
					report("expire", s.Expire(ctx, v, id, strconv.FormatInt(exp, 10)))
					return
				}
			}
		},
		func(r *rand.Rand) {
			switch r.IntN(12) {
			case 0:
				_, err := s.MarkAll(ctx, v, nil)
				report("markAll", err)
			case 1:
				_, err := s.MarkAll(ctx, v, []string{cats[1+r.IntN(2)]})
				report("markAll(category)", err)
			case 2:
				_, err := s.MarkAllSeen(ctx, v)
				report("markAllSeen", err)
			}
		},
	}
	if len(ann) > 0 {
		ops = append(ops, func(r *rand.Rand) {
			if r.IntN(2) == 0 {
				announce(r)
				return
			}
			if ids := anns.pick(r, 1); len(ids) > 0 && r.IntN(3) == 0 {
				_, err := ann[0].Withdraw(ctx, tenant, strings.TrimPrefix(ids[0], inbox.AnnouncementRef))
				report("withdraw", err)
			}
		})
	}
	for w, op := range ops {
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), uint64(g)))
				for range rounds {
					op(r)
				}
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("concurrent op: %v", err)
	}
}

// maxThrottledInRace is how many calls of a race test may answer THROTTLED.
const maxThrottledInRace = 5

// TestEveryStateChangeExactUnderConcurrency races sends (three categories, some with an
// expiry), read, unread, seen, archive, unarchive, snooze with wake-ups, unsnooze,
// delete, expire, markAllRead (all and per category) and markAllSeen on one inbox, then
// recounts every counter from the notifications.
func TestEveryStateChangeExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// THROTTLED is the contract's answer when conflict retries run out (the client
	// retries): on a starved machine a few calls of the hundreds get it, having written
	// nothing, which the recount below proves. More than a few would be a livelock.
	var throttled atomic.Int32
	race(t, f.s, f.tenant, 3, func(err error) bool {
		return inbox.ErrorCode(err) == inbox.CodeThrottled && throttled.Add(1) <= maxThrottledInRace
	}, announcer(f.s, nil))
	if n := throttled.Load(); n > 0 {
		t.Logf("%d calls answered THROTTLED", n)
	}
	b := f.checkExact(t, f.viewer("alice"))
	f.checkExact(t, f.viewer("bob"))
	t.Logf("after the race: %+v", b)
}

// TestEveryStateChangeExactUnderFaults runs the same race through the fault proxy
// (throttling, outages, answers lost after the commit, latency): calls may fail with a
// retryable code, but the counters stay exact.
func TestEveryStateChangeExactUnderFaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	proxy := ddbfault.New(dynlocaltest.Endpoint(t), ddbfault.Config{Seed: 9, Throttle: 0.03, Outage: 0.02,
		LostAnswer: 0.03, Latency: 0.05, LatencySpike: 20 * time.Millisecond})
	ps := httptest.NewServer(proxy)
	t.Cleanup(func() { ps.Close(); proxy.Close() })
	faulty := dynlocaltest.Client(t, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ps.URL) })
	s := store.New(faulty, f.table, store.WithSweepWorkers(1),
		store.WithRetryPolicy(store.RetryPolicy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}))
	t.Cleanup(s.Close)
	proxy.SetEnabled(true)
	race(t, s, f.tenant, 3, func(err error) bool {
		code := inbox.ErrorCode(err)
		return code == inbox.CodeThrottled || code == inbox.CodeUnavailable
	}, announcer(s, nil))
	proxy.SetEnabled(false)
	// Checked through another instance (its own announcement cache, read after the race).
	announcer(f.s, nil)
	st := proxy.Stats()
	if st.LostAnswers == 0 || st.Throttled == 0 {
		t.Fatalf("the proxy injected too little to mean anything: %+v", st)
	}
	f.checkExact(t, f.viewer("alice"))
	f.checkExact(t, f.viewer("bob"))
	t.Logf("faults: %+v", st)
}
