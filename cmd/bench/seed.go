package main

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
)

const tenant = "bench"

// dataset is what the seed wrote.
type dataset struct {
	users   []string // regular users
	big     []string // users with -big-size unread notifications
	few     string   // the user with -few-size unread notifications
	stats   SeedStats
	genSeed int64
}

// bigCategory is the category of every notification of the big inboxes (the category
// markAllRead of scenario 3 clears it).
const bigCategory = "ci"

var notifTypes = []string{"mention", "review_requested", "comment", "assign", "ci_failed", "release"}
var targetKinds = []string{"issue", "pull_request", "commit"}

// sendGen makes realistic sends: actors and targets drawn from Zipf long tails.
type sendGen struct {
	rng     *rand.Rand
	actors  *rand.Zipf
	targets *rand.Zipf
}

func newSendGen(seed int64, actors, targets int) *sendGen {
	r := rand.New(rand.NewSource(seed))
	return &sendGen{
		rng:     r,
		actors:  rand.NewZipf(r, 1.1, 4, uint64(max(actors, 1)-1)),
		targets: rand.NewZipf(r, 1.05, 8, uint64(max(targets, 1)-1)),
	}
}

func (g *sendGen) input(key string, recipients []string) inbox.SendInput {
	a := g.actors.Uint64()
	t := g.targets.Uint64()
	kind := targetKinds[t%uint64(len(targetKinds))]
	typ := notifTypes[g.rng.Intn(len(notifTypes))]
	return inbox.SendInput{
		IdempotencyKey: key,
		Recipients:     recipients,
		Type:           typ,
		Category:       "github",
		Title:          fmt.Sprintf("actor%05d %s on %s #%d", a, typ, kind, t),
		Body:           "Could you take a look at the latest changes? The pipeline on main is green again after the fix.",
		Actor: &inbox.Actor{ActorID: fmt.Sprintf("actor%05d", a), Name: fmt.Sprintf("Actor %d", a),
			AvatarURL: fmt.Sprintf("https://avatars.example.com/u/%d?v=4", a), URL: fmt.Sprintf("https://example.com/actor%05d", a)},
		Target: &inbox.Target{TargetID: fmt.Sprintf("%d", t), Kind: kind, Title: fmt.Sprintf("Improve %s handling (#%d)", kind, t),
			URL: fmt.Sprintf("https://example.com/%s/%d", kind, t)},
		Payload: []byte(fmt.Sprintf(`{"repo":"inboxgw/gateway","number":%d}`, t)),
	}
}

// seed writes the data set through the store, -seed-workers sends at a time.
func seed(ctx context.Context, c config, st *store.Store, db *dynamodb.Client) (*dataset, error) {
	ds := &dataset{genSeed: 1}
	for i := range c.users {
		ds.users = append(ds.users, fmt.Sprintf("u%05d", i))
	}
	for i := range c.bigUsers {
		ds.big = append(ds.big, fmt.Sprintf("big%02d", i))
	}
	ds.few = "few01"

	g := newSendGen(ds.genSeed, c.actors, c.targets)
	var inputs []inbox.SendInput
	fan := min(c.fanout, len(ds.users))
	if len(ds.users) > 0 && fan > 0 {
		for i := range c.users * c.perUser / fan {
			perm := g.rng.Perm(len(ds.users))[:fan]
			rcpt := make([]string, fan)
			for j, p := range perm {
				rcpt[j] = ds.users[p]
			}
			inputs = append(inputs, g.input(fmt.Sprintf("seed-%d", i), rcpt))
		}
	}
	regular := len(inputs)
	for i := range c.fewSize {
		inputs = append(inputs, g.input(fmt.Sprintf("seed-few-%d", i), []string{ds.few}))
	}
	// A big user's inbox is one META item that every send to it updates in a transaction:
	// those sends can only go one at a time (about 50 a second on DynamoDB Local on two
	// cores), so all but the newest bigTail notifications of a big inbox are bulk-loaded
	// (BatchWriteItem, in the store's item format, META set to match), and the newest
	// bigTail go through the store, one lane per big user. The result is checked through
	// the store (badge and first page) before any scenario runs.
	bigTail := min(c.bigSize, 100)
	lanes := make([][]inbox.SendInput, len(ds.big))
	for b, u := range ds.big {
		for i := range bigTail {
			lanes[b] = append(lanes[b], inbox.SendInput{IdempotencyKey: fmt.Sprintf("seed-%s-%d", u, i), Recipients: []string{u},
				Type: notifTypes[i%len(notifTypes)], Category: bigCategory, Title: fmt.Sprintf("Build %d finished", i), Body: "All checks have passed."})
		}
	}
	if bulk := c.bigSize - bigTail; bulk > 0 && len(ds.big) > 0 {
		progress("seeding: bulk-loading %d notifications into each of %d big inboxes", bulk, len(ds.big))
		t0 := time.Now()
		for _, u := range ds.big {
			if err := bulkInbox(ctx, db, c.table, u, bulk, c.seedWorkers); err != nil {
				return nil, fmt.Errorf("bulk-load %s: %w", u, err)
			}
		}
		ds.stats.BulkLoaded = int64(bulk * len(ds.big))
		ds.stats.BulkSeconds = time.Since(t0).Seconds()
	}
	total := len(inputs) + len(ds.big)*bigTail

	progress("seeding: %d sends (%d regular users x ~%d, %d users x %d, 1 user x %d), %d at a time",
		total, c.users, c.perUser, c.bigUsers, c.bigSize, c.fewSize, c.seedWorkers)
	start := time.Now()
	var done, written atomic.Int64
	stopTicker := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopTicker:
				return
			case <-t.C:
				el := time.Since(start).Seconds()
				progress("seeding: %d/%d sends, %d notifications (%.0f/s)", done.Load(), total, written.Load(), float64(written.Load())/el)
			}
		}
	}()
	send := func(ctx context.Context, in inbox.SendInput) error {
		res, err := service.Writer{Store: st}.Send(ctx, tenant, in)
		if err != nil {
			return err
		}
		done.Add(1)
		written.Add(int64(res.Accepted))
		return nil
	}
	// One send at a time per user: concurrent transactions on one META item only conflict
	// and retry. Each send locks its recipients, in sorted order so that no two sends wait
	// on each other in a cycle.
	locks := map[string]*sync.Mutex{}
	for _, u := range append(append([]string{}, ds.users...), ds.few) {
		locks[u] = &sync.Mutex{}
	}
	eg, gctx := errgroup.WithContext(ctx)
	for _, lane := range lanes {
		eg.Go(func() error {
			for _, in := range lane {
				if err := send(gctx, in); err != nil {
					return err
				}
			}
			return nil
		})
	}
	queue := make(chan inbox.SendInput)
	eg.Go(func() error {
		defer close(queue)
		for _, in := range inputs {
			select {
			case queue <- in:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range max(c.seedWorkers, 1) {
		eg.Go(func() error {
			for in := range queue {
				rcpt := slices.Sorted(slices.Values(in.Recipients))
				for _, u := range rcpt {
					locks[u].Lock()
				}
				err := send(gctx, in)
				for _, u := range rcpt {
					locks[u].Unlock()
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	err := eg.Wait()
	close(stopTicker)
	if err != nil {
		return nil, err
	}
	el := time.Since(start)
	bulkLoaded, bulkSeconds := ds.stats.BulkLoaded, ds.stats.BulkSeconds
	ds.stats = SeedStats{
		Sends: total, RegularSends: regular, Notifications: written.Load() + bulkLoaded, BulkLoaded: bulkLoaded, BulkSeconds: bulkSeconds,
		RegularUsers: c.users, BigUsers: c.bigUsers, BigSize: c.bigSize, FewSize: c.fewSize,
		Actors: c.actors, Targets: c.targets, Fanout: fan,
		Seconds: el.Seconds(), NotificationsPerSec: float64(written.Load()) / el.Seconds(), // el starts after the bulk load
	}
	if c.users > 0 {
		ds.stats.PerUser = regular * fan / c.users
	}
	progress("seeded %d notifications through the store (%.0f/s) and %d in bulk, in %s", written.Load(), ds.stats.NotificationsPerSec, bulkLoaded, el.Round(time.Millisecond))
	for _, u := range ds.big {
		v := inbox.Viewer{TenantID: tenant, UserID: u}
		bd, err := st.Badge(ctx, v)
		if err != nil {
			return nil, err
		}
		n := bd.Unread
		if bd.Unseen != c.bigSize || len(bd.Categories) != 1 || bd.Categories[0] != (inbox.CategoryCount{Category: bigCategory, Unread: c.bigSize, Unseen: c.bigSize}) {
			return nil, fmt.Errorf("big inbox %s: badge %+v, want %d unread and unseen, all in %s", u, bd, c.bigSize, bigCategory)
		}
		page, err := st.Inbox(ctx, v, inbox.PageQuery{First: aws.Int(20), UnreadOnly: true})
		if err != nil {
			return nil, err
		}
		if n != c.bigSize || len(page.Edges) != min(20, c.bigSize) || page.UnreadCount != c.bigSize {
			return nil, fmt.Errorf("big inbox %s: the store sees %d unread (page %d, badge %d), want %d", u, n, len(page.Edges), page.UnreadCount, c.bigSize)
		}
	}
	return ds, nil
}

// bulkInbox writes n unread, unseen notifications of category bigCategory for user with
// BatchWriteItem, in the store's item format (store.OutsideNotificationItem), with ids in
// the past, and then the META item that counts them (store.OutsideMetaItem: unread, unseen
// and the category's counters, its clock at the newest id, so that later sends through the
// store keep counting on from there).
func bulkInbox(ctx context.Context, db *dynamodb.Client, table, user string, n, workers int) error {
	entropy := ulid.Monotonic(rand.New(rand.NewSource(int64(len(user)*7919+n))), 0)
	base := time.Now().Add(-time.Duration(n+1000) * time.Second)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = ulid.MustNew(ulid.Timestamp(base.Add(time.Duration(i)*time.Second)), entropy).String()
	}
	v := inbox.Viewer{TenantID: tenant, UserID: user}
	ns := make([]inbox.Notification, n)
	for i, id := range ids {
		ns[i] = inbox.Notification{ID: id, Type: "ci_failed", Category: bigCategory, Title: "Nightly build failed",
			Body:      "The nightly build of main failed in the integration tests.",
			CreatedAt: time.UnixMilli(int64(ulid.MustParse(id).Time()))}
	}
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(max(workers/2, 1))
	for lo := 0; lo < n; lo += 25 {
		chunk := ns[lo:min(n, lo+25)]
		eg.Go(func() error {
			reqs := make([]types.WriteRequest, len(chunk))
			for i, nt := range chunk {
				item, err := store.OutsideNotificationItem(v, nt)
				if err != nil {
					return err
				}
				reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: item}}
			}
			return batchWrite(gctx, db, table, reqs)
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	meta, err := store.OutsideMetaItem(v, ns)
	if err != nil {
		return err
	}
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: meta})
	return err
}

// batchWrite puts reqs (≤25, BatchWriteItem's limit) into table, re-sending
// UnprocessedItems with doubling delays (10 ms up to 1 s) until all are written.
func batchWrite(ctx context.Context, db *dynamodb.Client, table string, reqs []types.WriteRequest) error {
	pending := map[string][]types.WriteRequest{table: reqs}
	for delay := 10 * time.Millisecond; len(pending[table]) > 0; delay = min(2*delay, time.Second) {
		out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
		if err != nil {
			return err
		}
		pending = out.UnprocessedItems
		if len(pending[table]) > 0 {
			time.Sleep(delay)
		}
	}
	return nil
}
