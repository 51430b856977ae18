package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
)

// Inbox returns one page of v's inbox, newest first (Relay cursor connections).
//
// Access patterns: AP1 and AP2 (Query on pk, sk in [N#, N~META], ScanIndexForward=false) or AP4
// (the same on GSI1 under unreadPK) for unreadOnly. A first page read from the top gets
// META from the same Query (its sort key sorts above every notification), so badge and
// page cost one call. Any other page needs META too (the read state of every
// notification depends on its watermarks): when the page reads its actors and targets
// (q.Profiles), META rides in that BatchGetItem after the Query, so every such page costs
// one Query and one BatchGetItem; otherwise (and for the unread filter, which needs the
// watermark while it pages) META is read with a GetItem sent concurrently with the Query.
//
// Filters never shorten a page while more matching items exist: the Query follows
// LastEvaluatedKey until it has first (or last) + 1 matches or the partition ends. The
// unread filter is applied here because it depends on the watermark (stale GSI entries
// below it are skipped and handed to the sweep). A page filtered by type reads GSI2
// instead, one Query per type merged by time, with META's GetItem alongside (AP5,
// typedPage): it reads the notifications of those types only.
//
// Cursors are bound to v and to the list read (see EncodeCursor). A typed page's list is
// the one it filters (pageIndex): GSI2 holds the same notifications in the same order, a
// position is a ULID on both, so a cursor keeps working when its filter changes, and the
// cursors given before GSI2 existed keep working after it.
//
// Errors: BAD_USER_INPUT for invalid arguments or an invalid cursor.
func (s *Store) Inbox(ctx context.Context, v inbox.Viewer, q inbox.PageQuery) (*inbox.Page, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if _, err := checkCategories(q.Categories); err != nil {
		return nil, err
	}
	switch q.Archived {
	case "", inbox.ArchivedExclude, inbox.ArchivedInclude, inbox.ArchivedOnly:
	default:
		return nil, inbox.Errorf(inbox.CodeBadUserInput, "unknown archived filter")
	}
	var after, before string
	var err error
	ix := pageIndex(q)
	if q.After != "" {
		if after, err = s.DecodeCursor(v, ix, q.After); err != nil {
			return nil, err
		}
	}
	if q.Before != "" {
		if before, err = s.DecodeCursor(v, ix, q.Before); err != nil {
			return nil, err
		}
	}
	backward := q.Last != nil
	want := inbox.DefaultPageSize
	switch {
	case q.First != nil:
		want = *q.First
	case q.Last != nil:
		want = *q.Last
	}
	start := after
	if backward {
		start = before
	}
	// META comes with the Query only when it starts at the top, newest first.
	metaInQuery := !backward && start == "" && len(q.Types) == 0
	// Otherwise META rides in the BatchGetItem of the page's profiles when the page reads
	// them, so the page costs a Query and a BatchGetItem; the unread filter needs the
	// watermark while it pages, so it reads META with a GetItem alongside the Query.
	deferMeta := !metaInQuery && q.Profiles && !q.UnreadOnly
	if len(q.Types) > 0 {
		items, meta, err := s.typedPage(ctx, v, q, backward, start, want, !deferMeta)
		if err != nil {
			return nil, err
		}
		return s.finishPage(ctx, v, ix, q, items, meta, deferMeta, want, backward, after != "", before != "", start)
	}

	onGSI := usesGSI(q)
	var (
		meta      metaItem
		metaReady = make(chan struct{})
		items     []*notificationItem
		stale     int
	)
	query := func(gctx context.Context) error {
		in := s.pageQueryInput(v, q, backward, start)
		limit := int32(want + 1)
		if metaInQuery {
			limit++
		}
		for {
			in.Limit = aws.Int32(limit)
			out, err := s.db.Query(gctx, in)
			if err != nil {
				return fmt.Errorf("inbox query: %w", err)
			}
			// The items of one response in one allocation.
			decoded := make([]notificationItem, len(out.Items))
			for j, raw := range out.Items {
				if keyOf(raw).sk == skMeta {
					if metaInQuery {
						if err := decodeMeta(raw, &meta); err != nil {
							return fmt.Errorf("decode meta: %w", err)
						}
					}
					continue
				}
				it := &decoded[j]
				if err := decodeNotification(raw, it); err != nil {
					return fmt.Errorf("decode notification: %w", err)
				}
				items = append(items, it)
			}
			if q.UnreadOnly {
				// The filter needs the watermark: from this Query's META, or from the
				// GetItem sent alongside it.
				if !metaInQuery {
					select {
					case <-metaReady:
					case <-gctx.Done():
						return gctx.Err()
					}
				}
				n := 0
				for _, it := range items {
					// On GSI1 a read or inactive entry is stale (the sweep removes it);
					// on the table, archived ones are the archived filter's business.
					if st := stateOf(it, &meta); st.read || (onGSI && !st.active) {
						if onGSI {
							stale++
						}
						continue
					}
					items[n] = it
					n++
				}
				items = items[:n]
			}
			if len(items) > want || out.LastEvaluatedKey == nil {
				return nil
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
			// Later calls of a filtered read take bigger steps: each costs a round trip.
			// The step doubles, so a filter that matches little reads a large inbox in
			// O(log n) calls, not one call per few items.
			limit = min(1000, max(2*limit, int32(4*(want+1-len(items)))))
		}
	}
	if metaInQuery || deferMeta {
		// One call: run it here. A goroutine of its own would start on a small stack
		// and grow it through the SDK's deep middleware chain on every request (stack
		// copies were 7% of the gateway's CPU in the bench's profile).
		if err := query(ctx); err != nil {
			return nil, err
		}
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			m, err := s.getMeta(gctx, v, false)
			meta = m
			close(metaReady)
			return err
		})
		g.Go(func() error { return query(gctx) })
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	if stale > 0 {
		// GSI entries below the watermark are housekeeping the sweep has not done yet.
		s.sweeper.enqueue(v)
	}
	return s.finishPage(ctx, v, ix, q, items, meta, deferMeta, want, backward, after != "", before != "", start)
}

// finishPage builds the page of items (in Query order, up to want+1) with the tenant's
// announcements merged in. When q asks for profiles it first reads the actors and
// targets of the page's notifications (and, with q.ActivityProfiles, their activities'
// actors; those not in the shared profile cache) and, when readMeta, v's META, all in ONE
// BatchGetItem: the notifications' read and seen states are derived once META is in hand.
// The announcements carry their own actors and targets: none is read for them.
func (s *Store) finishPage(ctx context.Context, v inbox.Viewer, ix CursorIndex, q inbox.PageQuery, items []*notificationItem, meta metaItem,
	readMeta bool, want int, backward, hasAfter, hasBefore bool, start string) (*inbox.Page, error) {
	// The tenant's announcements (from the instance's cache: no call in the usual case)
	// are merged by time into the page once META's marks are in hand.
	set, err := s.annSet(ctx, v, false)
	if err != nil {
		return nil, err
	}
	pg := pageArgs{ix: ix, q: q, want: want, backward: backward, hasAfter: hasAfter, hasBefore: hasBefore, start: start, set: set, now: s.now()}
	if !q.Profiles {
		return s.buildPage(v, pg.entries(items, &meta), meta, pg), nil
	}
	var keys []itemKey
	metaKey := itemKey{userPK(v), skMeta}
	// The profiles read are those of the items the page shows. With META in hand the
	// page is merged now, and only its own notifications' profiles are read (the
	// announcements it shows carry theirs, and take the place of items read past them).
	// Without, the marks that decide which announcements show come in the batch: the
	// first want items in Query order are read, the page keeps at most those.
	var entries []pageEntry
	shown := items[:min(want, len(items))]
	if readMeta {
		keys = append(keys, metaKey)
	} else {
		entries = pg.entries(items, &meta)
		shown = make([]*notificationItem, 0, len(shown))
		for _, e := range entries[:min(want, len(entries))] {
			if e.it != nil {
				shown = append(shown, e.it)
			}
		}
	}
	pb := s.newProfileBatch(v.TenantID)
	for _, it := range shown {
		keys = pb.want(inbox.ProfileRef{ID: it.ActorID}, keys)
		if q.ActivityProfiles {
			for _, a := range it.Activities {
				keys = pb.want(inbox.ProfileRef{ID: a.ActorID}, keys)
			}
		}
		if it.TargetID != "" {
			keys = pb.want(inbox.ProfileRef{TargetKind: it.TargetKind, ID: it.TargetID}, keys)
		}
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{})
	if err != nil {
		return nil, err
	}
	if readMeta {
		if raw, ok := got[metaKey]; ok {
			if err := decodeMeta(raw, &meta); err != nil {
				return nil, fmt.Errorf("decode meta: %w", err)
			}
		}
	}
	profiles, err := pb.decode(got)
	if err != nil {
		return nil, err
	}
	if readMeta {
		entries = pg.entries(items, &meta)
	}
	p := s.buildPage(v, entries, meta, pg)
	p.Profiles = profiles
	return p, nil
}

// pageQueryInput builds the Query of AP1/AP2 (table) or AP4 (GSI1) starting after the
// notification startID ("" for the end of the range), descending unless backward.
func (s *Store) pageQueryInput(v inbox.Viewer, q inbox.PageQuery, backward bool, startID string) *dynamodb.QueryInput {
	pkName, skName, pkVal := attrPK, attrSK, userPK(v)
	if usesGSI(q) {
		pkName, skName, pkVal = attrGSI1PK, attrGSI1SK, unreadPK(v)
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": pkName,
			"#sk": skName,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pkVal},
			":lo": &types.AttributeValueMemberS{Value: skNotifPrefix},
			":hi": &types.AttributeValueMemberS{Value: skMeta},
		},
		ScanIndexForward: aws.Bool(backward),
	}
	if usesGSI(q) {
		in.IndexName = aws.String(gsi1Name)
	}
	in.FilterExpression = aws.String("#et = :meta OR (" + pageFilter(q, in.ExpressionAttributeNames, in.ExpressionAttributeValues) + ")")
	in.ExpressionAttributeNames["#et"] = attrEntityType
	in.ExpressionAttributeValues[":meta"] = &types.AttributeValueMemberS{Value: entityMeta}
	if startID != "" {
		sk := notifSK(startID)
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: userPK(v)},
			attrSK: &types.AttributeValueMemberS{Value: sk},
		}
		if usesGSI(q) {
			in.ExclusiveStartKey[attrGSI1PK] = &types.AttributeValueMemberS{Value: unreadPK(v)}
			in.ExclusiveStartKey[attrGSI1SK] = &types.AttributeValueMemberS{Value: sk}
		}
	}
	return in
}

// usesGSI reports whether q reads GSI1 (AP4): the unread list of active notifications,
// when archived ones are excluded. Other unread filters read the table.
func usesGSI(q inbox.PageQuery) bool {
	return q.UnreadOnly && (q.Archived == "" || q.Archived == inbox.ArchivedExclude)
}

// pageFilter is the condition a notification of a page passes: it is not snoozed, its
// archived state matches q.Archived, and its category is among q's (when given). The type
// is never here: a page filtered by type reads GSI2, whose key names it. The Queries of the table
// and GSI1 let META pass too (so the first page carries the badge). The read state is not
// here: it depends on META's watermarks, so it is filtered in memory.
func pageFilter(q inbox.PageQuery, names map[string]string, values map[string]types.AttributeValue) string {
	names["#snz"] = attrSnoozedUntil
	parts := []string{"attribute_not_exists(#snz)"}
	switch q.Archived {
	case inbox.ArchivedOnly:
		names["#arc"] = attrArchivedAt
		parts = append(parts, "attribute_exists(#arc)")
	case inbox.ArchivedInclude:
	default:
		names["#arc"] = attrArchivedAt
		parts = append(parts, "attribute_not_exists(#arc)")
	}
	in := func(attr, ph, prefix string, vals []string) {
		if len(vals) == 0 {
			return
		}
		names[ph] = attr
		expr := ph + " IN ("
		for i, t := range slices.Compact(slices.Sorted(slices.Values(vals))) {
			name := fmt.Sprintf(":%s%d", prefix, i)
			if i > 0 {
				expr += ", "
			}
			expr += name
			values[name] = &types.AttributeValueMemberS{Value: t}
		}
		parts = append(parts, expr+")")
	}
	in(attrCategory, "#cat", "c", q.Categories)
	return strings.Join(parts, " AND ")
}

// pageArgs are what buildPage needs of the page asked: the list, the query, the size,
// the direction and cursors (start is the cursor's ULID the Query started after, "" for
// none), the tenant's announcement set to merge (nil: none) and the time the page is
// built at (the announcements active then are merged and counted).
type pageArgs struct {
	ix                            CursorIndex
	q                             inbox.PageQuery
	want                          int
	backward, hasAfter, hasBefore bool
	start                         string
	set                           *inbox.AnnouncementSet
	now                           time.Time
}

// entries merges the tenant's announcements visible to the page (as v sees them under
// meta's marks) into items (in Query order, up to want+1): the page's entries, at most
// want+1, in Query order (mergeAnnouncements).
func (pg *pageArgs) entries(items []*notificationItem, meta *metaItem) []pageEntry {
	var marks *inbox.AnnouncementMarks
	if pg.set != nil {
		marks = meta.marks()
	}
	return mergeAnnouncements(items, pg.set, marks, pg.q, pg.start, pg.backward, pg.want, pg.now)
}

// buildPage builds the page of entries (pg.entries: in Query order, up to want+1): it
// trims them to want, orders them newest first and fills the Relay page info: moving
// forward, hasNextPage says more entries follow and hasPreviousPage that a cursor was
// given (entries exist before it); backward, the mirror image. Cursors are v's, in list
// ix: an announcement's position is its ULID, as a notification's. The badge count is v's
// own counters with the announcements added (inbox.ComposeBadge).
func (s *Store) buildPage(v inbox.Viewer, entries []pageEntry, meta metaItem, pg pageArgs) *inbox.Page {
	now := pg.now
	b := meta.badge()
	more := len(entries) > pg.want
	if more {
		entries = entries[:pg.want]
	}
	if pg.backward {
		slices.Reverse(entries)
	}
	unread := meta.UnreadCount
	if pg.set != nil {
		unread = inbox.ComposeBadge(b, pg.set, now).Unread
	}
	p := &inbox.Page{
		Edges:          make([]inbox.Edge, len(entries)),
		UnreadCount:    unread,
		HasUnreadCount: true,
	}
	for i, e := range entries {
		n := (*inbox.Notification)(nil)
		if e.ann != nil {
			// Its actor and target come with it (Notification.Embedded), not from profiles.
			n = inbox.AnnouncementNotification(e.ann, b.Marks)
		} else {
			n = toNotification(e.it, &meta)
		}
		p.Edges[i] = inbox.Edge{Cursor: s.EncodeCursor(v, pg.ix, e.id), Node: n}
	}
	if pg.backward {
		p.PageInfo.HasPreviousPage = more
		p.PageInfo.HasNextPage = pg.hasBefore
	} else {
		p.PageInfo.HasNextPage = more
		p.PageInfo.HasPreviousPage = pg.hasAfter
	}
	if len(p.Edges) > 0 {
		p.PageInfo.StartCursor = &p.Edges[0].Cursor
		p.PageInfo.EndCursor = &p.Edges[len(p.Edges)-1].Cursor
	}
	return p
}

// getMeta reads v's META item (AP3: GetItem). A missing META is an empty inbox.
func (s *Store) getMeta(ctx context.Context, v inbox.Viewer, consistent bool) (metaItem, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            itemKey{userPK(v), skMeta}.av(),
		ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return metaItem{}, fmt.Errorf("get meta: %w", err)
	}
	var m metaItem
	if out.Item != nil {
		if err := decodeMeta(out.Item, &m); err != nil {
			return metaItem{}, fmt.Errorf("decode meta: %w", err)
		}
	}
	return m, nil
}

// UnreadCount returns v's badge count (AP3: one GetItem of META).
func (s *Store) UnreadCount(ctx context.Context, v inbox.Viewer) (int, error) {
	b, err := s.Badge(ctx, v)
	return b.Unread, err
}

// Badge returns v's badge: unread, unseen and per-category counts at META's version (AP3:
// one strongly consistent GetItem). The version grows with every write of META, so of two
// readings the higher version is newer.
func (s *Store) Badge(ctx context.Context, v inbox.Viewer) (inbox.Badge, error) {
	if err := checkViewer(v); err != nil {
		return inbox.Badge{}, err
	}
	m, err := s.getMeta(ctx, v, true)
	if err != nil {
		return inbox.Badge{}, err
	}
	return s.compose(ctx, v, m.badge())
}
