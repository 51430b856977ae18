package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
)

// A page filtered by type (AP5) reads GSI2, whose key is (pk, type) / id: each type of an
// inbox is an item collection of its notifications in time order. One type is one Query
// that reads the notifications it returns (plus one, to know whether more follow); a few
// types are one Query each, merged by id. The archived, snoozed and category filters stay
// FilterExpressions and the unread filter stays in memory: those do not change which
// collection is read, only how much of it a page skips.

// maxStep bounds the Limit of one Query of a typed page (as the table's page Query).
const maxStep = 1000

// typedPage reads a page filtered by type: META by GetItem (when withMeta) and,
// concurrently, the matches from GSI2 (typedItems). It returns up to want+1 matches in the Queries' order (newest
// first; oldest first when backward) and META.
func (s *Store) typedPage(ctx context.Context, v inbox.Viewer, q inbox.PageQuery, backward bool, start string, want int, withMeta bool) ([]*notificationItem, metaItem, error) {
	if !withMeta {
		// META is read later, with the page's profiles (never with the unread filter,
		// the one user of waitMeta).
		items, err := s.typedItems(ctx, v, q, backward, start, want, func(context.Context) (*metaItem, error) {
			return nil, fmt.Errorf("typed page: META not read with the Query")
		})
		return items, metaItem{}, err
	}
	var (
		meta      metaItem
		metaReady = make(chan struct{})
		items     []*notificationItem
	)
	waitMeta := func(ctx context.Context) (*metaItem, error) {
		select {
		case <-metaReady:
			return &meta, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		m, err := s.getMeta(gctx, v, false)
		meta = m
		close(metaReady)
		return err
	})
	g.Go(func() error {
		var err error
		items, err = s.typedItems(gctx, v, q, backward, start, want, waitMeta)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, metaItem{}, err
	}
	return items, meta, nil
}

// typeStream is the Query of one type of a typed page: the matches it read that the merge
// has not taken yet, the Limit of its next call, whether its last call's filters dropped
// some of what it read, and whether its collection is read to the end.
type typeStream struct {
	in       *dynamodb.QueryInput
	buf      []*notificationItem
	limit    int32
	filtered bool
	done     bool
}

// typedItems returns the first want+1 matches of q after start (a ULID, "" for the end
// of the list) in the order of the page's Queries, merged from one Query of GSI2 per
// type. The next match is the newest (oldest when backward) of the streams' first ones,
// known once every stream that may hold more has one in hand: a stream with none is read
// again, all such streams concurrently.
//
// Reads: the first call of each of k types asks for ⌈(want+1)/k⌉ (+1 when k > 1, so an
// even mix needs no second round), a later one for at most what the page still lacks
// (twice the last step at most), so one type reads what it returns plus one. A stream
// whose filters (archived, snoozed, category, unread) dropped what it read grows its steps
// instead (doubling, at least four times what is lacking, at most maxStep): a filter
// that matches little costs O(log n) calls, not one per few items.
func (s *Store) typedItems(ctx context.Context, v inbox.Viewer, q inbox.PageQuery, backward bool, start string, want int,
	waitMeta func(context.Context) (*metaItem, error)) ([]*notificationItem, error) {
	need := want + 1
	typeList := slices.Compact(slices.Sorted(slices.Values(q.Types)))
	k := len(typeList)
	first := need
	if k > 1 {
		first = (need+k-1)/k + 1
	}
	streams := make([]*typeStream, k)
	for i, t := range typeList {
		streams[i] = &typeStream{in: s.typeQueryInput(v, q, t, backward, start), limit: int32(min(first, maxStep))}
	}
	out := make([]*notificationItem, 0, need)
	var empty []*typeStream
	for len(out) < need {
		empty = empty[:0]
		for _, st := range streams {
			if len(st.buf) == 0 && !st.done {
				empty = append(empty, st)
			}
		}
		if len(empty) > 0 {
			if err := s.fillStreams(ctx, empty, need-len(out), q.UnreadOnly, waitMeta); err != nil {
				return nil, err
			}
			continue
		}
		best := -1
		for i, st := range streams {
			if len(st.buf) == 0 {
				continue
			}
			if best < 0 || (st.buf[0].ID > streams[best].buf[0].ID) != backward {
				best = i
			}
		}
		if best < 0 {
			break // every stream is read to its end
		}
		out = append(out, streams[best].buf[0])
		streams[best].buf = streams[best].buf[1:]
	}
	return out, nil
}

// fillStreams reads the next matches of each stream in sts, lacking being how many the
// page still lacks: one call in place, more concurrently.
func (s *Store) fillStreams(ctx context.Context, sts []*typeStream, lacking int, unreadOnly bool, waitMeta func(context.Context) (*metaItem, error)) error {
	if len(sts) == 1 {
		return s.fillStream(ctx, sts[0], lacking, unreadOnly, waitMeta)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, st := range sts {
		g.Go(func() error { return s.fillStream(gctx, st, lacking, unreadOnly, waitMeta) })
	}
	return g.Wait()
}

// fillStream makes st's next Query call and keeps its matches (dropping, for the unread
// filter, those META's watermarks make read); then sets the step of the call after it.
func (s *Store) fillStream(ctx context.Context, st *typeStream, lacking int, unreadOnly bool, waitMeta func(context.Context) (*metaItem, error)) error {
	if st.in.ExclusiveStartKey != nil {
		step := min(2*int(st.limit), lacking)
		if st.filtered {
			step = max(2*int(st.limit), 4*lacking)
		}
		st.limit = int32(min(max(step, 1), maxStep))
	}
	st.in.Limit = aws.Int32(st.limit)
	out, err := s.db.Query(ctx, st.in)
	if err != nil {
		return fmt.Errorf("inbox query by type: %w", err)
	}
	decoded := make([]notificationItem, len(out.Items))
	for j, raw := range out.Items {
		it := &decoded[j]
		if err := decodeNotification(raw, it); err != nil {
			return fmt.Errorf("decode notification: %w", err)
		}
		st.buf = append(st.buf, it)
	}
	if unreadOnly && len(st.buf) > 0 {
		m, err := waitMeta(ctx)
		if err != nil {
			return err
		}
		st.buf = slices.DeleteFunc(st.buf, func(it *notificationItem) bool { return stateOf(it, m).read })
	}
	st.filtered = len(st.buf) < int(out.ScannedCount)
	st.in.ExclusiveStartKey = out.LastEvaluatedKey
	st.done = out.LastEvaluatedKey == nil
	return nil
}

// typeQueryInput builds the Query of GSI2 for the notifications of type typ in v's inbox
// that pass q's other filters, after the notification startID ("" for the end of the
// list), newest first unless backward.
func (s *Store) typeQueryInput(v inbox.Viewer, q inbox.PageQuery, typ string, backward bool, startID string) *dynamodb.QueryInput {
	names := map[string]string{"#pk": attrPK, "#type": attrType}
	values := map[string]types.AttributeValue{
		":pk":   &types.AttributeValueMemberS{Value: userPK(v)},
		":type": &types.AttributeValueMemberS{Value: typ},
	}
	// A multi-attribute partition key: every attribute of it by equality.
	key := "#pk = :pk AND #type = :type"
	if startID != "" {
		names["#id"] = attrID
		values[":start"] = &types.AttributeValueMemberS{Value: startID}
		if backward {
			key += " AND #id > :start"
		} else {
			key += " AND #id < :start"
		}
	}
	return &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(gsi2Name),
		KeyConditionExpression:    aws.String(key),
		FilterExpression:          aws.String(pageFilter(q, names, values)),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ScanIndexForward:          aws.Bool(backward),
	}
}
