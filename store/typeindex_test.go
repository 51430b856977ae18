package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// readCounter is the store's client, counting the items DynamoDB read for it: a Query's
// ScannedCount (what its FilterExpression saw, kept or not) and the items a GetItem or
// BatchGetItem returned.
type readCounter struct {
	*dynamodb.Client
	read    atomic.Int64
	queries atomic.Int64
}

func (c *readCounter) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, optFns...)
	if err == nil {
		c.read.Add(int64(out.ScannedCount))
		c.queries.Add(1)
	}
	return out, err
}

func (c *readCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.Client.GetItem(ctx, in, optFns...)
	if err == nil && out.Item != nil {
		c.read.Add(1)
	}
	return out, err
}

func (c *readCounter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.Client.BatchGetItem(ctx, in, optFns...)
	if err == nil {
		for _, items := range out.Responses {
			c.read.Add(int64(len(items)))
		}
	}
	return out, err
}

// take returns the items read since the last take.
func (c *readCounter) take() int {
	n := c.read.Swap(0)
	c.queries.Store(0)
	return int(n)
}

// countedStore is a store over a fresh table (its name returned) whose reads c counts.
func countedStore(t *testing.T) (*store.Store, *readCounter, string) {
	t.Helper()
	db := dynlocaltest.Client(t)
	table := dynlocaltest.TableName(t)
	c := &readCounter{Client: db}
	st := store.New(c, table, store.WithSweepWorkers(0))
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	t.Cleanup(st.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := st.CreateTable(ctx); err != nil {
		t.Fatalf("create table: %v", err)
	}
	return st, c, table
}

// putNotifications writes notifications of v's inbox straight into the table, as an
// outside writer would, with ids in the order of typeOf, oldest first, and returns their
// ids. Those of type counted are sent with their META update (so META exists and counts
// them); the others are put 25 a BatchWriteItem, uncounted (the reads are the point).
func putNotifications(t *testing.T, db *dynamodb.Client, table string, v inbox.Viewer, typeOf []string, counted string) []string {
	t.Helper()
	ctx := context.Background()
	base := uint64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	ids := make([]string, len(typeOf))
	var batch []types.WriteRequest
	flush := func() {
		for len(batch) > 0 {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: batch}})
			if err != nil {
				t.Fatal(err)
			}
			batch = out.UnprocessedItems[table]
		}
	}
	for i, typ := range typeOf {
		ids[i] = ulid.MustNew(base+uint64(i), ulid.DefaultEntropy()).String()
		n := inbox.Notification{ID: ids[i], Type: typ, Title: fmt.Sprint(typ, " ", i)}
		if typ == counted {
			in, err := store.OutsideSendInput(table, v, n)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.TransactWriteItems(ctx, in); err != nil {
				t.Fatal(err)
			}
			continue
		}
		item, err := store.OutsideNotificationItem(v, n)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		if len(batch) == 25 {
			flush()
		}
	}
	flush()
	return ids
}

// The inbox: 300 notifications of one type and 5 of another, spread among them.
// A page of the rare type reads the rare notifications (and META), not the inbox: at most
// twice what it returns, plus META. The old FilterExpression over the user's partition
// read all 306 items to return 5 (5 Query calls). Every page of a walk through it, either
// way and at any page size, keeps that bound, and a type with no notification reads
// nothing but META.
func TestTypeFilterReadsWhatItReturns(t *testing.T) {
	t.Parallel()
	st, c, table := countedStore(t)
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	typeOf := make([]string, 305)
	for i := range typeOf {
		typeOf[i] = "common"
	}
	for _, i := range []int{3, 77, 150, 151, 290} {
		typeOf[i] = "rare"
	}
	written := putNotifications(t, c.Client, table, v, typeOf, "rare")
	var rare []string // newest first
	for i := len(written) - 1; i >= 0; i-- {
		if typeOf[i] == "rare" {
			rare = append(rare, written[i])
		}
	}
	ctx := context.Background()
	c.take()

	p, err := st.Inbox(ctx, v, inbox.PageQuery{First: ptr(5), Types: []string{"rare"}})
	if err != nil {
		t.Fatal(err)
	}
	read, queries := c.read.Load(), c.queries.Load()
	c.take()
	t.Logf("first: 5, types: [rare] over 300 common + 5 rare: %d items read (%d Query calls) for %d returned", read, queries, len(p.Edges))
	if !slices.Equal(ids(p), rare) || p.PageInfo.HasNextPage || p.UnreadCount != len(rare) {
		t.Fatalf("page = %v (next %v, badge %d), want %v (badge %d)", ids(p), p.PageInfo.HasNextPage, p.UnreadCount, rare, len(rare))
	}
	if read > 2*int64(len(p.Edges)) {
		t.Errorf("read %d items to return %d, want at most twice as many", read, len(p.Edges))
	}

	for _, size := range []int{1, 2, 4} {
		for _, backward := range []bool{false, true} {
			var got []string
			q := inbox.PageQuery{Types: []string{"rare"}}
			for pages := 0; ; pages++ {
				if pages > len(rare) {
					t.Fatalf("size %d backward %v: more pages than notifications", size, backward)
				}
				if backward {
					q.Last = ptr(size)
				} else {
					q.First = ptr(size)
				}
				p, err := st.Inbox(ctx, v, q)
				if err != nil {
					t.Fatal(err)
				}
				if read := c.take(); read > 2*len(p.Edges)+1 {
					t.Errorf("size %d backward %v: read %d items for a page of %d, want at most %d", size, backward, read, len(p.Edges), 2*len(p.Edges)+1)
				}
				more := p.PageInfo.HasNextPage
				if backward {
					more = p.PageInfo.HasPreviousPage
					got = append(ids(p), got...)
					if more {
						q.Before = *p.PageInfo.StartCursor
					}
				} else {
					got = append(got, ids(p)...)
					if more {
						q.After = *p.PageInfo.EndCursor
					}
				}
				if more && len(p.Edges) != size {
					t.Fatalf("size %d backward %v: a short page of %d with more to come", size, backward, len(p.Edges))
				}
				if !more {
					break
				}
			}
			if !slices.Equal(got, rare) {
				t.Fatalf("size %d backward %v: walk = %v, want %v", size, backward, got, rare)
			}
		}
	}

	p, err = st.Inbox(ctx, v, inbox.PageQuery{First: ptr(5), Types: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	if read := c.take(); len(p.Edges) != 0 || p.PageInfo.HasNextPage || read > 1 {
		t.Fatalf("a type without notifications: %d edges, next %v, %d items read (want 0, false, at most META)", len(p.Edges), p.PageInfo.HasNextPage, read)
	}
}

// A filter of several types is one Query of GSI2 per type, merged newest first (oldest
// first backward): every page is exact, cursors carry across, and it reads about what it
// returns plus one look-ahead per type, not the types it leaves out.
func TestTypeFilterSeveralTypesMerged(t *testing.T) {
	t.Parallel()
	st, c, table := countedStore(t)
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	var typeOf []string
	for i := range 240 {
		switch {
		case i%40 == 7:
			typeOf = append(typeOf, "b")
		case i%3 == 0 && i < 120:
			typeOf = append(typeOf, "a") // a's are all in the older half
		case i%11 == 5:
			typeOf = append(typeOf, "c")
		default:
			typeOf = append(typeOf, "noise")
		}
	}
	written := putNotifications(t, c.Client, table, v, typeOf, "b")
	for _, filter := range [][]string{{"a", "b"}, {"b", "c", "a"}, {"c", "zzz"}, {"a", "a", "b"}} {
		var want []string
		for i := len(written) - 1; i >= 0; i-- {
			if slices.Contains(filter, typeOf[i]) {
				want = append(want, written[i])
			}
		}
		for _, size := range []int{1, 3, 7, 100} {
			for _, backward := range []bool{false, true} {
				c.take()
				got, returned := walk(t, st, v, inbox.PageQuery{Types: filter}, size, backward)
				read := c.take()
				if !slices.Equal(got, want) {
					t.Fatalf("types %v size %d backward %v: walk = %v, want %v", filter, size, backward, got, want)
				}
				// Per page: the items returned, one look-ahead per type, META; a page
				// after a stream ran dry asks it again for at most what it lacks.
				pages := (len(want) + size - 1) / size
				if pages == 0 {
					pages = 1
				}
				limit := 2*returned + pages*(2*len(filter)+1)
				t.Logf("types %v size %d backward %v: read %d for %d returned in %d pages (bound %d)", filter, size, backward, read, returned, pages, limit)
				if read > limit {
					t.Errorf("types %v size %d backward %v: read %d items for %d returned in %d pages, want at most %d", filter, size, backward, read, returned, pages, limit)
				}
			}
		}
	}
}

// walk pages through v's inbox under q (its page size and direction set here) and returns
// every id, newest first, and how many it returned; each page but the last must be full.
func walk(t *testing.T, st *store.Store, v inbox.Viewer, q inbox.PageQuery, size int, backward bool) ([]string, int) {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("more than 1000 pages")
		}
		if backward {
			q.Last = ptr(size)
		} else {
			q.First = ptr(size)
		}
		p, err := st.Inbox(context.Background(), v, q)
		if err != nil {
			t.Fatalf("inbox %+v: %v", q, err)
		}
		more := p.PageInfo.HasNextPage
		if backward {
			more = p.PageInfo.HasPreviousPage
			got = append(ids(p), got...)
			if more {
				q.Before = *p.PageInfo.StartCursor
			}
			if q.Before != "" && !p.PageInfo.HasNextPage && pages > 0 {
				t.Fatalf("%+v: a page before a cursor says nothing follows", q)
			}
		} else {
			got = append(got, ids(p)...)
			if more {
				q.After = *p.PageInfo.EndCursor
			}
			if pages > 0 && !p.PageInfo.HasPreviousPage {
				t.Fatalf("%+v: a page after a cursor says nothing precedes", q)
			}
		}
		if more && len(p.Edges) != size {
			t.Fatalf("%+v: a short page of %d with more to come", q, len(p.Edges))
		}
		if !more {
			return got, len(got)
		}
	}
}

// The type index with every other filter: unread (in memory, by META's watermarks and
// marks), archived (EXCLUDE, INCLUDE, ONLY), snoozed (never listed), categories. Each
// combination, walked both ways at several page sizes, lists exactly what the unfiltered
// inbox (archived included) shows of those types and states, newest first; and its cursors
// also work on the same list without a type filter (one list, one position).
func TestTypeFilterWithOtherFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	v := f.viewer("alice")
	ctx := context.Background()
	var all []string
	for i := range 36 {
		typ := []string{"rare", "common", "common", "other"}[i%4]
		cat := []string{"", "billing", "social"}[i%3]
		all = append(all, f.sendIn(t, inbox.SendInput{Type: typ, Category: cat, Title: fmt.Sprint(i)}))
	}
	f.apply(t, inbox.OpRead, all[0], all[4], all[8], all[13], all[20])
	f.apply(t, inbox.OpArchive, all[4], all[12], all[16], all[21], all[29])
	if _, err := f.s.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpSnooze, IDs: []string{all[24], all[25]}, Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.MarkAll(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	f.apply(t, inbox.OpUnread, all[8], all[28], all[32])
	later := []string{
		f.sendIn(t, inbox.SendInput{Type: "rare", Category: "billing"}),
		f.sendIn(t, inbox.SendInput{Type: "rare"}),
		f.sendIn(t, inbox.SendInput{Type: "other", Category: "social"}),
	}
	f.apply(t, inbox.OpRead, later[1])

	// The truth: the whole inbox with archived ones (snoozed ones are never listed).
	truth := f.page(t, "alice", inbox.PageQuery{First: ptr(100), Archived: inbox.ArchivedInclude})
	if len(truth.Edges) != 37 {
		t.Fatalf("setup: %d listed, want 37 (39 sent, 2 snoozed)", len(truth.Edges))
	}
	for _, types := range [][]string{{"rare"}, {"rare", "other"}, {"common", "nothing"}} {
		for _, unread := range []bool{false, true} {
			for _, archived := range []inbox.ArchivedFilter{"", inbox.ArchivedInclude, inbox.ArchivedOnly} {
				for _, cats := range [][]string{nil, {"billing"}, {"social", "billing"}} {
					q := inbox.PageQuery{Types: types, UnreadOnly: unread, Archived: archived, Categories: cats}
					var want []string
					for _, e := range truth.Edges {
						n := e.Node
						switch {
						case !slices.Contains(types, n.Type),
							unread && n.Read,
							archived == inbox.ArchivedOnly && !n.Archived,
							(archived == "" || archived == inbox.ArchivedExclude) && n.Archived,
							cats != nil && !slices.Contains(cats, n.Category):
							continue
						}
						want = append(want, n.ID)
					}
					for _, size := range []int{1, 4, 50} {
						for _, backward := range []bool{false, true} {
							got, _ := walk(t, f.s, v, q, size, backward)
							if !slices.Equal(got, want) {
								t.Fatalf("%+v size %d backward %v: %v, want %v", q, size, backward, got, want)
							}
						}
					}
					// A cursor of the typed list is a position of the same list unfiltered
					// by type, and the other way round.
					if len(want) > 1 {
						p, err := f.s.Inbox(ctx, v, inbox.PageQuery{First: ptr(1), Types: types, UnreadOnly: unread, Archived: archived, Categories: cats})
						if err != nil {
							t.Fatal(err)
						}
						rest, err := f.s.Inbox(ctx, v, inbox.PageQuery{First: ptr(100), After: *p.PageInfo.EndCursor, UnreadOnly: unread, Archived: archived, Categories: cats})
						if err != nil {
							t.Fatalf("%+v: the typed page's cursor on the list unfiltered by type: %v", q, err)
						}
						if len(rest.Edges) == 0 || rest.Edges[0].Node.ID >= want[0] {
							t.Fatalf("%+v: the typed page's cursor did not position the unfiltered list after %s", q, want[0])
						}
					}
				}
			}
		}
	}
}

// A notification written from outside needs a type as a send's (1..256 bytes): type is a
// key attribute of GSI2, and DynamoDB refuses an item whose index key attribute is an
// empty string, so both outside shapes refuse it first, with the send's error.
func TestOutsideWritesNeedAType(t *testing.T) {
	t.Parallel()
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	id := ulid.Make().String()
	for name, typ := range map[string]string{"empty": "", "too long": strings.Repeat("t", inbox.MaxIDBytes+1)} {
		n := inbox.Notification{ID: id, Type: typ}
		if _, err := store.OutsideNotificationItem(v, n); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: OutsideNotificationItem = %v, want BAD_USER_INPUT", name, err)
		}
		if _, err := store.OutsideSendInput("t", v, n); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: OutsideSendInput = %v, want BAD_USER_INPUT", name, err)
		}
	}
	for _, typ := range []string{"t", strings.Repeat("t", inbox.MaxIDBytes)} {
		if _, err := store.OutsideNotificationItem(v, inbox.Notification{ID: id, Type: typ}); err != nil {
			t.Errorf("type of %d bytes: %v", len(typ), err)
		}
	}
}
