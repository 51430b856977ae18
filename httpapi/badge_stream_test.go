package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// sseEvents subscribes with query over SSE and returns each event's data as it arrives
// (the channel closes when the stream ends).
func (g *gateway) sseEvents(t *testing.T, ctx context.Context, query string) <-chan string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": query})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.srv.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+g.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- v
			}
		}
	}()
	return out
}

// sseCounts subscribes to unreadCount over SSE and returns the values as they arrive.
func (g *gateway) sseCounts(t *testing.T, ctx context.Context) <-chan string {
	t.Helper()
	events := g.sseEvents(t, ctx, "subscription { unreadCount }")
	out := make(chan string, 16)
	go func() {
		defer close(out)
		for v := range events {
			if n, ok := strings.CutPrefix(v, `{"data":{"unreadCount":`); ok {
				out <- strings.TrimSuffix(n, "}}")
			}
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan string, wait time.Duration) (string, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(wait):
		return "", false
	}
}

// A writer outside the gateway that changes the count without raising META's version
// still reaches subscribers (the relay publishes a re-read hint), and a change that leaves
// the count as it was sends nothing.
func TestBadgeStreamOutsideWriterAndNoRepeats(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := inbox.Viewer{TenantID: "acme", UserID: "alice"}
	g.seed(t, 2, "t", mod(1), mod(1))
	counts := g.sseCounts(t, ctx)
	if c, _ := next(t, counts, 5*time.Second); c != "2" {
		t.Fatalf("first value %q, want 2", c)
	}
	// Outside writer: ADD 1 to the count, version untouched.
	_, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "T#acme#U#alice"}, "sk": &types.AttributeValueMemberS{Value: "N~META"}},
		UpdateExpression:          aws.String("ADD unreadCount :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	g.broker.Publish(ctx, inbox.Change{Viewer: v}) // what the relay publishes for such a record
	if c, _ := next(t, counts, 5*time.Second); c != "3" {
		t.Fatalf("after the outside write: %q, want 3", c)
	}
	// markAllRead twice: 0 once.
	for i := 0; i < 2; i++ {
		if _, err := g.st.MarkAll(ctx, v, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := next(t, counts, 5*time.Second); c != "0" {
		t.Fatalf("after markAllRead: %q, want 0", c)
	}
	if c, ok := next(t, counts, 1500*time.Millisecond); ok {
		t.Fatalf("the same value was sent again: %q", c)
	}
}
