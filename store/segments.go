package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
)

// Segments (AP18, AP19; keys in keys.go): a segment is a named set of a tenant's users,
// the audience of a broadcast. `followers:{actorId}` is just a segment id.
//
// Its members are write-sharded: member u lives in partition
// T#{t}#SEG#{id}#S#{SegmentShard(u)} with sort key M#{u}, so adding a million members
// spreads their writes over every shard, and a broadcast pages the shards in parallel.
// Each shard partition holds its exact member count in the item ~COUNT, changed in the
// same transaction as the members it counts (a Put on condition that the member is new,
// a Delete on condition that it exists): a repeated add or remove never counts twice.
// A segment exists while it has members: one without any reads as empty.

// DefaultSegmentShards is the segments' shard count unless WithSegmentShards says
// otherwise.
const DefaultSegmentShards = 16

// MaxSegmentShards is the largest shard count: a broadcast's start writes its head item
// plus, per shard, a progress item and a scheduler task in ONE TransactWriteItems (at
// most 100 actions), so that it is durable whole or not at all.
const MaxSegmentShards = 49

// maxSegmentTxn is the most member actions in one transaction: 99 members + the count.
const maxSegmentTxn = 99

// WithSegmentShards sets how many write shards a segment's members are spread over
// (default DefaultSegmentShards; clamped to 1..MaxSegmentShards). Every instance must
// use the same count, and it must never change on a table that holds segments: a member
// lives in the shard its id hashed to when it was added.
func WithSegmentShards(n int) Option {
	return func(s *Store) { s.segShards = min(max(n, 1), MaxSegmentShards) }
}

// SegmentShards returns the segments' shard count.
func (s *Store) SegmentShards() int { return s.segShards }

// segMemberItem is a segment member as stored.
type segMemberItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	UserID     string `dynamodbav:"userId"`
	AddedAt    int64  `dynamodbav:"addedAt"` // Unix ms
}

// attrSegCount is the member count of a segment shard's ~COUNT item.
const attrSegCount = "count"

// SegmentChange is what an UpdateSegment changed: the members it added that were not
// members yet, and those it removed that were.
type SegmentChange struct {
	Added, Removed int
}

// checkSegment checks a tenant and a segment id (inbox.CheckID: ':' allowed, '#' not).
func checkSegment(tenantID, id string) error {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return err
	}
	return inbox.CheckID("segment", id)
}

// segOp is one member change of an UpdateSegment.
type segOp struct {
	user   string
	remove bool
}

// UpdateSegment adds the users add to segment id of tenantID and removes the users
// remove (AP18). Together at most MaxSegmentChange ids, each checked with inbox.CheckID;
// repeats count once; an id in both lists is refused. Members are grouped by shard; each
// shard's changes commit in TransactWriteItems of at most 99 members plus the shard's
// ~COUNT update (ADD the number of members the transaction adds less those it
// removes); the shards are written concurrently. An add of a member that exists, or a
// remove of one that does not, fails its condition: the transaction is sent again
// without it, so the counts stay exact under repeats and concurrent calls.
//
// Errors: BAD_USER_INPUT for bad ids, no ids, or too many; otherwise the first
// DynamoDB failure (shards committed before it stay committed: the call may be
// repeated).
func (s *Store) UpdateSegment(ctx context.Context, tenantID, id string, add, remove []string) (SegmentChange, error) {
	if err := checkSegment(tenantID, id); err != nil {
		return SegmentChange{}, err
	}
	if len(add)+len(remove) == 0 {
		return SegmentChange{}, inbox.Errorf(inbox.CodeBadUserInput, "add or remove at least one member")
	}
	if len(add)+len(remove) > inbox.MaxSegmentChange {
		return SegmentChange{}, inbox.Errorf(inbox.CodeBadUserInput, "at most %d members added and removed per call", inbox.MaxSegmentChange)
	}
	seen := make(map[string]bool, len(add)+len(remove))
	shards := make(map[int][]segOp)
	for i, list := range [][]string{add, remove} {
		for _, u := range list {
			if err := inbox.CheckID("member", u); err != nil {
				return SegmentChange{}, err
			}
			rm, dup := seen[u]
			if dup && rm != (i == 1) {
				return SegmentChange{}, inbox.Errorf(inbox.CodeBadUserInput, "member %q is both added and removed", u)
			}
			if dup {
				continue
			}
			seen[u] = i == 1
			n := SegmentShard(u, s.segShards)
			shards[n] = append(shards[n], segOp{user: u, remove: i == 1})
		}
	}
	var res SegmentChange
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for n, ops := range shards {
		// One shard's chunks one after the other: they share its ~COUNT item.
		g.Go(func() error {
			for start := 0; start < len(ops); start += maxSegmentTxn {
				c, err := s.segmentTxn(gctx, tenantID, id, n, ops[start:min(len(ops), start+maxSegmentTxn)])
				mu.Lock()
				res.Added += c.Added
				res.Removed += c.Removed
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return res, fmt.Errorf("store: update segment: %w", err)
	}
	return res, nil
}

// segmentTxn commits ops (at most maxSegmentTxn, all of shard n) with the shard's count,
// dropping the ops whose condition fails (already a member / not a member) and sending
// the rest again; conflicts are retried with backoff (retryConflicts).
func (s *Store) segmentTxn(ctx context.Context, tenantID, id string, n int, ops []segOp) (SegmentChange, error) {
	pk := segmentPK(tenantID, id, n)
	pending := slices.Clone(ops)
	return retryConflicts(ctx, func() (SegmentChange, error) {
		if len(pending) == 0 {
			return SegmentChange{}, nil
		}
		t := &txn{}
		var c SegmentChange
		now := s.now().UnixMilli()
		present, err := expression.NewBuilder().WithCondition(itemPresent()).Build()
		if err != nil {
			return SegmentChange{}, fmt.Errorf("build member removal: %w", err)
		}
		for _, op := range pending {
			k := itemKey{pk, segMemberSK(op.user)}
			if op.remove {
				c.Removed++
				t.add(k, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table), Key: k.av(),
					ConditionExpression: present.Condition(), ExpressionAttributeNames: present.Names()}})
				continue
			}
			c.Added++
			item, err := attributevalue.MarshalMap(segMemberItem{PK: k.pk, SK: k.sk, EntityType: entitySegMember, UserID: op.user, AddedAt: now})
			if err != nil {
				return SegmentChange{}, fmt.Errorf("encode member: %w", err)
			}
			p, err := condPut(s.table, item, itemAbsent())
			if err != nil {
				return SegmentChange{}, err
			}
			t.add(k, types.TransactWriteItem{Put: p})
		}
		x, err := buildUpdate(expression.Add(expression.Name(attrSegCount), expression.Value(c.Added-c.Removed)).
			Set(expression.Name(attrEntityType), expression.Value(entitySegCount)), nil, nil)
		if err != nil {
			return SegmentChange{}, fmt.Errorf("build segment count: %w", err)
		}
		ck := itemKey{pk, skSegCount}
		t.add(ck, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: ck.av(),
			UpdateExpression: x.Update(), ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}})
		_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
		if err == nil {
			return c, nil
		}
		var keep []segOp
		for _, op := range pending {
			if !t.conditionFailed(err, itemKey{pk, segMemberSK(op.user)}) {
				keep = append(keep, op)
			}
		}
		if len(keep) < len(pending) {
			// Members already in (or already out): the rest goes again without them.
			pending = keep
			return SegmentChange{}, errRetry
		}
		return SegmentChange{}, err
	})
}

// SegmentCount returns the number of members of segment id: the sum of its shards'
// ~COUNT items, read with one consistent BatchGetItem (AP19). 0 for a segment without
// members (or unknown).
func (s *Store) SegmentCount(ctx context.Context, tenantID, id string) (int, error) {
	if err := checkSegment(tenantID, id); err != nil {
		return 0, err
	}
	keys := make([]itemKey, s.segShards)
	for n := range keys {
		keys[n] = itemKey{segmentPK(tenantID, id, n), skSegCount}
	}
	items, err := s.batchGet(ctx, keys, batchGetOptions{consistent: true, projection: "#pk, #sk, #count",
		names: map[string]string{"#pk": attrPK, "#sk": attrSK, "#count": attrSegCount}})
	if err != nil {
		return 0, fmt.Errorf("store: segment count: %w", err)
	}
	total := 0
	for _, it := range items {
		if v, ok := it[attrSegCount].(*types.AttributeValueMemberN); ok {
			n, err := strconv.Atoi(v.Value)
			if err != nil {
				return 0, fmt.Errorf("store: segment count %q: %w", v.Value, err)
			}
			total += n
		}
	}
	return total, nil
}

// SegmentShardPage returns up to limit (1..1000; default 100) members of shard n of
// segment id, in user id order, after member after ("" from the start), and whether the
// Query stopped at its limit (more may follow: pass the last member as after). One
// consistent Query of the shard's partition (AP19), never a Scan.
func (s *Store) SegmentShardPage(ctx context.Context, tenantID, id string, n int, after string, limit int) ([]string, bool, error) {
	if err := checkSegment(tenantID, id); err != nil {
		return nil, false, err
	}
	if n < 0 || n >= s.segShards {
		return nil, false, inbox.Errorf(inbox.CodeBadUserInput, "segment shard %d out of range", n)
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	pk := segmentPK(tenantID, id, n)
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :m)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK, "#u": "userId"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pk},
			":m":  &types.AttributeValueMemberS{Value: skSegMemberPrefix},
		},
		ProjectionExpression: aws.String("#u"),
		ConsistentRead:       aws.Bool(true),
		Limit:                aws.Int32(int32(limit)),
	}
	if after != "" {
		in.ExclusiveStartKey = itemKey{pk, segMemberSK(after)}.av()
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, false, fmt.Errorf("store: segment shard page: %w", err)
	}
	members := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if v, ok := it["userId"].(*types.AttributeValueMemberS); ok {
			members = append(members, v.Value)
		}
	}
	return members, len(out.LastEvaluatedKey) > 0, nil
}

// SegmentPage is one page of a segment (GetSegment).
type SegmentPage struct {
	// Count is the segment's member count (all shards).
	Count int
	// Members is this page's user ids: shard by shard, in id order within a shard.
	Members []string
	// NextCursor continues the listing; "" at the end.
	NextCursor string
}

// GetSegment returns segment id's member count (SegmentCount: one BatchGetItem) and a
// page of up to limit members (1..1000; default 100) from cursor ("" from the start;
// else a NextCursor of an earlier page): one Query per shard the page reaches (AP19).
// Errors: BAD_USER_INPUT for bad ids or a cursor that is not one of this listing.
func (s *Store) GetSegment(ctx context.Context, tenantID, id string, limit int, cursor string) (SegmentPage, error) {
	if err := checkSegment(tenantID, id); err != nil {
		return SegmentPage{}, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	shard, after, err := decodeSegmentCursor(cursor, s.segShards)
	if err != nil {
		return SegmentPage{}, err
	}
	g, gctx := errgroup.WithContext(ctx)
	var count int
	g.Go(func() (err error) {
		count, err = s.SegmentCount(gctx, tenantID, id)
		return err
	})
	var page SegmentPage
	g.Go(func() error {
		for ; shard < s.segShards; shard, after = shard+1, "" {
			members, more, err := s.SegmentShardPage(gctx, tenantID, id, shard, after, limit-len(page.Members))
			if err != nil {
				return err
			}
			page.Members = append(page.Members, members...)
			if len(page.Members) == limit {
				switch {
				case more:
					page.NextCursor = encodeSegmentCursor(shard, members[len(members)-1])
				case shard+1 < s.segShards:
					page.NextCursor = encodeSegmentCursor(shard+1, "")
				}
				return nil
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return SegmentPage{}, err
	}
	page.Count = count
	return page, nil
}

// encodeSegmentCursor encodes a listing position: the shard and the last member read
// there ("" for the shard's start). Not secret: it names a member of the caller's own
// segment.
func encodeSegmentCursor(shard int, after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(shard) + ":" + after))
}

// decodeSegmentCursor reverses encodeSegmentCursor ("" is the start).
func decodeSegmentCursor(c string, shards int) (int, string, error) {
	if c == "" {
		return 0, "", nil
	}
	bad := inbox.Errorf(inbox.CodeBadUserInput, "cursor is not a segment cursor")
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", bad
	}
	ns, after, ok := strings.Cut(string(raw), ":")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 0 || n >= shards {
		return 0, "", bad
	}
	if after != "" && inbox.CheckID("cursor", after) != nil {
		return 0, "", bad
	}
	return n, after, nil
}
