package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// sweepBatch bounds how many GSI1 entries one Sweep call examines.
const sweepBatch = 500

// Sweep removes the GSI1 attributes of v's notifications that are read because of a
// markAllRead watermark (global or of their category), or no longer active, examining at most limit index entries (Query on GSI1 with
// gsi1sk ≤ N#watermark, oldest first, then one conditional UpdateItem each). It is
// housekeeping only: the read state never depends on it. A removal is conditional on the
// notification's markedAt being the one read, so a markUnread made meanwhile is never
// undone. It is resumable: removed entries leave the index, so a later call starts where
// this one stopped; entries explicitly marked unread stay and are skipped.
//
// from is "" or the next value a previous call returned. It returns the number of entries
// removed and where to continue: "" when nothing more below the watermark is left to examine.
func (s *Store) Sweep(ctx context.Context, v inbox.Viewer, from string, limit int) (removed int, next string, err error) {
	if err := checkViewer(v); err != nil {
		return 0, "", err
	}
	meta, err := s.getMeta(ctx, v, true)
	if err != nil {
		return 0, "", err
	}
	// The highest watermark (global or of a category) bounds what may be read by one.
	wm := meta.ReadAllBefore
	for _, c := range meta.Cats {
		wm = max(wm, c.ReadWM)
	}
	if wm == "" {
		return 0, "", nil
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		IndexName:              aws.String(gsi1Name),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": attrGSI1PK, "#sk": attrGSI1SK,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: unreadPK(v)},
			":lo": &types.AttributeValueMemberS{Value: skNotifPrefix},
			":hi": &types.AttributeValueMemberS{Value: notifSK(wm)},
		},
		ScanIndexForward: aws.Bool(true),
	}
	if from != "" && ValidNotificationID(from) {
		sk := notifSK(from)
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: userPK(v)}, attrSK: &types.AttributeValueMemberS{Value: sk},
			attrGSI1PK: &types.AttributeValueMemberS{Value: unreadPK(v)}, attrGSI1SK: &types.AttributeValueMemberS{Value: sk},
		}
	}
	examined, last := 0, ""
	for examined < limit {
		in.Limit = aws.Int32(int32(min(100, limit-examined)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return removed, "", fmt.Errorf("sweep query: %w", err)
		}
		for _, raw := range out.Items {
			examined++
			var it notificationItem
			if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
				return removed, "", fmt.Errorf("decode notification: %w", err)
			}
			last = it.ID
			if st := stateOf(&it, &meta); !st.read && st.active {
				continue
			}
			ok, err := s.dropFromUnreadIndex(ctx, v, &it)
			if err != nil {
				return removed, "", err
			}
			if ok {
				removed++
			}
		}
		if out.LastEvaluatedKey == nil {
			return removed, "", nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return removed, last, nil
}

// dropFromUnreadIndex removes it's GSI1 attributes if its rev and markedAt are still the
// ones read (every state change raises rev; markedAt covers items written before rev).
func (s *Store) dropFromUnreadIndex(ctx context.Context, v inbox.Viewer, it *notificationItem) (bool, error) {
	marked := expression.Name(attrMarkedAt).AttributeNotExists()
	if it.MarkedAt != "" {
		marked = expression.Name(attrMarkedAt).Equal(expression.Value(it.MarkedAt))
	}
	x, err := buildUpdate(expression.Remove(expression.Name(attrGSI1PK)).Remove(expression.Name(attrGSI1SK)),
		[]expression.ConditionBuilder{revCondition(it.Rev), marked}, nil)
	if err != nil {
		return false, fmt.Errorf("sweep update: %w", err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{userPK(v), notifSK(it.ID)}.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sweep update: %w", err)
	}
	return true, nil
}

// sweeper runs Sweep in the background for inboxes that were marked all read (or whose
// unread list met stale entries), a bounded number at a time. Each inbox is queued at most
// once; the queue holds at most maxQueue inboxes and drops the rest (a later read queues
// them again, so nothing is lost but time).
type sweeper struct {
	workers int
	mu      sync.Mutex
	queued  map[inbox.Viewer]bool
	ch      chan inbox.Viewer
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

const maxQueue = 10000

func newSweeper(workers int) *sweeper {
	return &sweeper{workers: workers, queued: make(map[inbox.Viewer]bool), ch: make(chan inbox.Viewer, maxQueue)}
}

func (w *sweeper) start(s *Store) {
	if w.workers <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for range w.workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case v := <-w.ch:
					w.mu.Lock()
					delete(w.queued, v)
					w.mu.Unlock()
					w.run(ctx, s, v)
				}
			}
		}()
	}
}

// run sweeps v to the end, in bounded steps with a pause between them.
func (w *sweeper) run(ctx context.Context, s *Store, v inbox.Viewer) {
	from := ""
	for {
		stepCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, next, err := s.Sweep(stepCtx, v, from, sweepBatch)
		cancel()
		from = next
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("sweep failed; the next read of the unread list queues it again", "tenant", v.TenantID, "err", err)
			}
			return
		}
		if next == "" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (w *sweeper) enqueue(v inbox.Viewer) {
	if w.workers <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued[v] {
		return
	}
	select {
	case w.ch <- v:
		w.queued[v] = true
	default:
	}
}

func (w *sweeper) stop() {
	if w.cancel != nil {
		w.cancel()
		w.wg.Wait()
	}
}
