package main

// Scenario 15, accept: POST /v1/notifications against one raw PutItem of the request
// (issue 10's goal: p50 ≤ 1.5×, side by side in one run, same client, same concurrency).
//
// The gateway side is the real HTTP surface, built as package app builds it
// (app.Build: the REST service API over the send pipeline, as serve serves it)
// on a loopback listener, over a store on one DynamoDB client; requests carry a real
// HS256 service token (scope notifications:send), a fresh Idempotency-Key each, one
// recipient (recipientUserId, a distinct user of 1,000) and priority bulk, so the
// request answers 202 once accepted (service.Accept: one TransactWriteItems of the
// request and its recovery task) and is processed afterwards in the bulk lane. The raw
// side is one PutItem, on the same client, of an item holding the request's body (the
// item's size is the body's plus its key). Both sides run -concurrency callers in this
// process (the HTTP client too), warm up in turn twice, then run -duration each in
// halves: gateway, raw, raw, gateway; after every gateway half the bulk lane's
// processing of what it accepted is left to finish (until the client has made no call
// for a second), so it never runs during a raw half.
//
// For context, the transactional (waiting) send through the same handler: GraphQL
// sendNotification, which answers once the notification is stored (service.Send), at
// the same concurrency for -duration/2. At that concurrency the two cores are saturated
// (DynamoDB Local's JVM, the gateway, the callers), so latency there is mostly queueing
// for the engine and follows the engine work a request causes: every call of the client
// asks for its consumed capacity (capacity.go), and the calls and units per request are
// reported, a POST's including the bulk lane's processing of it. Then both sides again
// one request at a time (-duration/2 each, halves gateway, raw, raw, gateway): the
// latency a POST adds to the engine's time without the queueing.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/live"
)

// acceptGoal is issue 10's bound on POST p50 / raw PutItem p50.
const acceptGoal = 1.5

// AcceptResult is scenario 15.
type AcceptResult struct {
	Engine      string `json:"engine"`
	Concurrency int    `json:"concurrency"`
	Duration    string `json:"duration"`
	// RequestBytes is the POST body's size; ItemBytes the raw item's (names and values).
	RequestBytes int  `json:"request_bytes"`
	ItemBytes    int  `json:"raw_item_bytes"`
	Gateway      Side `json:"post_v1_notifications"`
	Raw          Side `json:"raw_putitem"`
	Waiting      Side `json:"graphql_send_notification_waiting"`
	// Serial are both sides one request at a time.
	GatewaySerial Latency `json:"post_serial_latency"`
	RawSerial     Latency `json:"raw_serial_latency"`
	SerialRatio   float64 `json:"p50_post_over_raw_serial"`
	// Capacity per request: a POST's calls and units include its processing in the
	// bulk lane (one recipient's notification); by operation and partition kinds.
	GatewayCapacity Capacity            `json:"post_capacity_per_request"`
	RawCapacity     Capacity            `json:"raw_capacity_per_request"`
	GatewayByCall   map[string]Capacity `json:"post_capacity_by_operation_per_request"`
	P50Ratio        float64             `json:"p50_post_over_raw"`
	P99Ratio        float64             `json:"p99_post_over_raw"`
	WaitingRatio    float64             `json:"p50_waiting_send_over_raw"`
	// DrainSeconds is how long the bulk lane took to process what the gateway halves
	// accepted, after them.
	DrainSeconds []float64 `json:"bulk_drain_seconds"`
	GoalRatio    float64   `json:"goal_ratio"`
	GoalMet      bool      `json:"goal_met"`
}

// acceptBody is the POST body: one recipient, priority bulk.
func acceptBody(user string) []byte {
	b, _ := json.Marshal(map[string]any{"recipientUserId": user, "type": "comment", "category": "social",
		"title": "Grace Hopper replied to your comment", "body": "Have you tried the compiler? It saves a great deal of work.",
		"actor": map[string]string{"id": "grace", "name": "Grace Hopper"}, "priority": "bulk"})
	return b
}

func (b *harness) acceptScenario(ctx context.Context) (*AcceptResult, error) {
	c := b.c
	// One client: the gateway's store and the raw PutItem both call through it; its
	// meter counts the calls and units, and tells when the bulk lane's background
	// processing has finished.
	meter := &capacityMeter{}
	db := dynamodb.New(b.eng.db.Options(), meter.option())
	gw, err := b.serve(ctx, db, nil, app.Deps{Broker: live.NewLocal()})
	if err != nil {
		return nil, err
	}
	defer gw.close()
	base := strings.TrimSuffix(gw.url, "/graphql")
	token, err := b.serviceToken()
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4 * c.concurrency, MaxIdleConnsPerHost: 4 * c.concurrency}}
	defer client.CloseIdleConnections()

	var seq atomic.Int64
	post := func(ctx context.Context, _ int, _ *rand.Rand) error {
		i := seq.Add(1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/notifications", bytes.NewReader(acceptBody(fmt.Sprintf("acc-%04d", i%1000))))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "acc-"+ulid.Make().String())
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("status %d: %.300s", resp.StatusCode, body)
		}
		return nil
	}
	sample := acceptBody("acc-0000")
	item := func(key string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "T#" + tenant + "#RAWACC#" + key},
			"sk": &types.AttributeValueMemberS{Value: "REQ"}, "body": &types.AttributeValueMemberS{Value: string(sample)}}
	}
	raw := func(ctx context.Context, _ int, _ *rand.Rand) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.table), Item: item("acc-" + ulid.Make().String())})
		return err
	}
	waiting := func(ctx context.Context, _ int, _ *rand.Rand) error {
		i := seq.Add(1)
		q, _ := json.Marshal(map[string]any{
			"query": `mutation($in: SendNotificationInput!) { sendNotification(input: $in) { accepted } }`,
			"variables": map[string]any{"in": map[string]any{"idempotencyKey": "acw-" + ulid.Make().String(),
				"recipients": []string{fmt.Sprintf("acc-%04d", i%1000)}, "type": "comment", "category": "social",
				"title": "Grace Hopper replied to your comment", "body": "Have you tried the compiler? It saves a great deal of work."}}})
		var out struct {
			Data struct {
				SendNotification struct{ Accepted int } `json:"sendNotification"`
			} `json:"data"`
		}
		if err := postGraphQL(ctx, client, gw.url, token, string(q), &out); err != nil {
			return err
		}
		if out.Data.SendNotification.Accepted != 1 {
			return fmt.Errorf("sendNotification accepted %d", out.Data.SendNotification.Accepted)
		}
		return nil
	}
	res := &AcceptResult{Engine: b.eng.name, Concurrency: c.concurrency, Duration: c.duration.String(), RequestBytes: len(sample),
		ItemBytes: itemSize(item("acc-" + ulid.Make().String())), GoalRatio: acceptGoal}

	// drain waits until the client has made no call for a second: the bulk lane has
	// processed what the gateway accepted (or left it to its recovery task).
	drain := func() error {
		el, err := untilQuiet(ctx, time.Second, 5*time.Minute, "the bulk lane", func() (int, error) {
			meter.mu.Lock()
			defer meter.mu.Unlock()
			return meter.total.Calls, nil
		})
		res.DrainSeconds = append(res.DrainSeconds, el.Seconds()-1)
		return err
	}

	progress("accept: warming up both for %s, twice", b.warmup())
	if err := b.warmInTurn(ctx, 2, warmSide{name: "gateway", load: post, after: drain}, warmSide{name: "raw", load: raw}); err != nil {
		return nil, err
	}
	res.DrainSeconds = nil
	half := c.duration / 2
	var gcap, rcap Capacity
	gby := map[string]Capacity{}
	addCap := func(to *Capacity, by map[string]Capacity) {
		t, b := meter.take()
		to.WCU, to.RCU, to.Calls = to.WCU+t.WCU, to.RCU+t.RCU, to.Calls+t.Calls
		if by != nil {
			for k, v := range b {
				e := by[k]
				e.WCU, e.RCU, e.Calls = e.WCU+v.WCU, e.RCU+v.RCU, e.Calls+v.Calls
				by[k] = e
			}
		}
	}
	// sides measures both in halves at conc for d each: a gateway half's units include
	// its bulk lane's processing, left to finish after it.
	sides := func(conc int, d time.Duration) ([]window, []window, error) {
		return inHalves(func() (window, error) {
			meter.take()
			w := b.rawWindow(ctx, conc, d, post)
			err := drain()
			if conc == c.concurrency {
				addCap(&gcap, gby)
			}
			return w, err
		}, func() (window, error) {
			meter.take()
			w := b.rawWindow(ctx, conc, d, raw)
			if conc == c.concurrency {
				addCap(&rcap, nil)
			}
			return w, nil
		})
	}
	progress("accept: POST /v1/notifications and raw PutItem, %s each at concurrency %d, in halves: gateway, raw, raw, gateway", c.duration, c.concurrency)
	gs, rs, err := sides(c.concurrency, half)
	if err != nil {
		return nil, err
	}
	progress("accept: GraphQL sendNotification (waits for the write), %s at concurrency %d", half, c.concurrency)
	w1 := b.rawWindow(ctx, c.concurrency, half, waiting)
	d1 := max(half/2, time.Second)
	progress("accept: one request at a time, %s each, in halves: gateway, raw, raw, gateway", 2*d1)
	ss, ts, err := sides(1, d1)
	if err != nil {
		return nil, err
	}
	res.Gateway = sideOf("POST /v1/notifications (HTTP, service token, priority bulk: answers at accept)", gs...)
	res.Raw = sideOf("raw PutItem of the request's body", rs...)
	res.Waiting = sideOf("GraphQL sendNotification (transactional: answers once stored)", w1)
	res.GatewaySerial, res.RawSerial = sideOf("", ss...).Latency, sideOf("", ts...).Latency
	res.SerialRatio = ratio(res.GatewaySerial.P50, res.RawSerial.P50)
	per := func(x Capacity, n int) Capacity {
		return Capacity{WCU: ratio(x.WCU, float64(n)), RCU: ratio(x.RCU, float64(n)), Calls: x.Calls}
	}
	res.GatewayCapacity, res.RawCapacity = per(gcap, res.Gateway.Requests), per(rcap, res.Raw.Requests)
	res.GatewayByCall = map[string]Capacity{}
	for k, v := range gby {
		res.GatewayByCall[k] = per(v, res.Gateway.Requests)
	}
	res.P50Ratio = ratio(res.Gateway.Latency.P50, res.Raw.Latency.P50)
	res.P99Ratio = ratio(res.Gateway.Latency.P99, res.Raw.Latency.P99)
	res.WaitingRatio = ratio(res.Waiting.Latency.P50, res.Raw.Latency.P50)
	res.GoalMet = res.P50Ratio > 0 && res.P50Ratio <= acceptGoal && res.Gateway.Errors == 0 && res.Raw.Errors == 0
	progress("accept: p50 POST %.2f ms, raw %.2f ms (%.2fx)", res.Gateway.Latency.P50, res.Raw.Latency.P50, res.P50Ratio)
	return res, nil
}

// Table renders scenario 15.
func (x *AcceptResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## 15. accept: POST /v1/notifications vs one raw PutItem of the request\n\n")
	fmt.Fprintf(&b, "Engine: %s. The gateway's HTTP surface as serve builds it (app.Build) on a loopback listener; "+
		"a service token, a fresh Idempotency-Key each call, one recipient, priority bulk (202 at accept; processed afterwards in the bulk lane, "+
		"which is left to finish after each gateway half: %s s). Raw: one PutItem of an item holding the request body (%d bytes; item %d bytes), same DynamoDB client. "+
		"Concurrency %d in this process, %s each side in halves (gateway, raw, raw, gateway), after two warm-ups each.\n\n",
		x.Engine, joinF1(x.DrainSeconds), x.RequestBytes, x.ItemBytes, x.Concurrency, x.Duration)
	fmt.Fprintln(&b, "| side | requests (errors) | req/s | p50 ms | p90 ms | p99 ms | p50 / raw p50 |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range []Side{x.Gateway, x.Raw, x.Waiting} {
		fmt.Fprintf(&b, "| %s | %d (%d) | %.0f | %.2f | %.2f | %.2f | %.2f |\n", s.Name, s.Requests, s.Errors, s.ReqPerSec,
			s.Latency.P50, s.Latency.P90, s.Latency.P99, ratio(s.Latency.P50, x.Raw.Latency.P50))
	}
	fmt.Fprintf(&b, "\nRatio POST / raw PutItem: p50 **%.2f** (goal ≤ %.1f: %s), p99 %.2f. The waiting transactional send (context, not a goal): p50 %.2f× raw.",
		x.P50Ratio, x.GoalRatio, yes(x.GoalMet), x.P99Ratio, x.WaitingRatio)
	fmt.Fprintf(&b, " One request at a time: POST p50 %.2f ms (p99 %.2f), raw p50 %.2f ms (p99 %.2f): %.2f×.",
		x.GatewaySerial.P50, x.GatewaySerial.P99, x.RawSerial.P50, x.RawSerial.P99, x.SerialRatio)
	fmt.Fprintf(&b, " Engine work per request at concurrency %d (ReturnConsumedCapacity; a POST's includes its processing in the bulk lane): POST %.2f calls, %.2f WCU, %.2f RCU; raw %.2f calls, %.2f WCU.",
		x.Concurrency, ratio(float64(x.GatewayCapacity.Calls), float64(x.Gateway.Requests)), x.GatewayCapacity.WCU, x.GatewayCapacity.RCU,
		ratio(float64(x.RawCapacity.Calls), float64(x.Raw.Requests)), x.RawCapacity.WCU)
	for _, s := range []Side{x.Gateway, x.Raw, x.Waiting} {
		if s.FirstError != "" {
			fmt.Fprintf(&b, " %s: first error %q.", s.Name, s.FirstError)
		}
	}
	fmt.Fprintln(&b)
	keys := make([]string, 0, len(x.GatewayByCall))
	for k := range x.GatewayByCall {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(&b, "\nA POST's calls (accept and processing) by operation and partition kinds, per request:")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| operation partitions | calls/request | WCU/request | RCU/request |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: |")
	for _, k := range keys {
		v := x.GatewayByCall[k]
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f |\n", k, ratio(float64(v.Calls), float64(x.Gateway.Requests)), v.WCU, v.RCU)
	}
	return b.String()
}

func joinF1(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = f1(v)
	}
	return strings.Join(parts, ", ")
}
