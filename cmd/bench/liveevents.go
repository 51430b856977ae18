package main

// Scenario 7, live, part 3: `subscription { inboxEvents }` delivery on a gateway of its own
// in this process (local broker). One user, one graphql-transport-ws subscriber in this
// process; sequential mutations alternate sendNotification (an ADDED event) and markRead
// of the notification just sent (a READ event). Each event is timed from the store's
// publish of the committed write (the store publishes right after the commit; a wrapper
// around the broker notes the time) to the arrival of its `next` frame: the broker, the
// event's badge (read from the store when the change does not carry it), the transport.
// The time from just before the mutation's HTTP request is reported beside it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/store"
)

// publishClock is the store's publisher in the events measurement: it notes when the last
// change was published, then hands it to the broker.
type publishClock struct {
	live.Broker
	mu   sync.Mutex
	last time.Time
}

func (p *publishClock) Publish(ctx context.Context, c inbox.Change) {
	p.mu.Lock()
	p.last = time.Now()
	p.mu.Unlock()
	p.Broker.Publish(ctx, c)
}

func (p *publishClock) lastPublish() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// LiveEventsResult is the inboxEvents measurement.
type LiveEventsResult struct {
	Transport string `json:"transport"`
	Measures  string `json:"latency_measures"`
	Rounds    int    `json:"rounds"`
	// From the publish of the committed write to the frame.
	Added Latency `json:"delivery_latency_added"`
	Read  Latency `json:"delivery_latency_read"`
	All   Latency `json:"delivery_latency"`
	// From just before the mutation's HTTP request to the frame.
	FromRequest Latency `json:"from_request_latency"`
	Lost        int     `json:"lost"`
	// ReadSkipped says why READ events were not measured (a store that publishes marks
	// without their kind).
	ReadSkipped string  `json:"read_skipped,omitempty"`
	GoalP99Ms   float64 `json:"goal_p99_ms"`
	GoalP99Met  bool    `json:"goal_p99_met"`
}

// eventFrame is one inboxEvents frame as the measurement reads it.
type eventFrame struct {
	kind string
	ids  []string
	at   time.Time
}

// liveEvents measures inboxEvents delivery for rounds send+markRead pairs of user u, on a
// gateway of its own (local broker).
func (b *harness) liveEvents(ctx context.Context, u liveUser, sender string, rounds int) (*LiveEventsResult, error) {
	res := &LiveEventsResult{Rounds: rounds, GoalP99Ms: 50,
		Transport: "graphql-transport-ws over github.com/coder/websocket, one subscriber and the gateway in the bench process, local broker",
		Measures: "from the store's publish of the committed write (sendNotification, then markRead of that notification; one at a time) " +
			"to the arrival of the inboxEvents `next` frame naming it (ADDED, READ), one monotonic clock"}
	broker := live.NewLocal()
	clock := &publishClock{Broker: broker}
	// The gateway as serve composes it (app.Build); its store publishes through clock.
	gw, err := build(ctx, b.eng.db, b.c.table, b.log, b.secret, nil,
		app.Deps{Broker: broker, Store: []store.Option{store.WithSweepWorkers(0), store.WithPublisher(clock)}})
	if err != nil {
		return nil, err
	}
	defer gw.Close()
	h := gw.Handler
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Shutdown(sctx)
		_ = srv.Close()
	}()
	url := "http://" + ln.Addr().String() + "/graphql"
	conn, _, err := websocket.Dial(ctx, wsURL(url), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.CloseNow() }()
	conn.SetReadLimit(1 << 20)
	write := func(s string) error { return conn.Write(ctx, websocket.MessageText, []byte(s)) }
	if err := write(`{"type":"connection_init","payload":{"Authorization":"Bearer ` + u.Token + `"}}`); err != nil {
		return nil, err
	}
	if _, msg, err := conn.Read(ctx); err != nil || !json.Valid(msg) {
		return nil, fmt.Errorf("connection_init: %v %s", err, msg)
	}
	if err := write(`{"id":"ev","type":"subscribe","payload":{"query":"subscription { inboxEvents { kind notificationIds badge { unread } } }"}}`); err != nil {
		return nil, err
	}
	frames := make(chan eventFrame, 64)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, msg, err := conn.Read(context.Background())
			if err != nil {
				readErr <- err
				return
			}
			at := time.Now()
			var m wsMsg
			if err := json.Unmarshal(msg, &m); err != nil {
				readErr <- err
				return
			}
			switch m.Type {
			case "ping":
				_ = conn.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`))
				continue
			case "next":
			default:
				continue
			}
			var p struct {
				Data struct {
					InboxEvents struct {
						Kind            string   `json:"kind"`
						NotificationIds []string `json:"notificationIds"`
					} `json:"inboxEvents"`
				} `json:"data"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				readErr <- err
				return
			}
			frames <- eventFrame{kind: p.Data.InboxEvents.Kind, ids: p.Data.InboxEvents.NotificationIds, at: at}
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); broker.Subscribers() == 0; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("inboxEvents subscription not registered within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	var fromReq []time.Duration
	// wait returns how long after the last publish the event kind naming id arrived
	// (false: lost), and notes the time since t0.
	wait := func(kind, id string, t0 time.Time, within time.Duration) (time.Duration, bool, error) {
		timeout := time.NewTimer(within)
		defer timeout.Stop()
		for {
			select {
			case f := <-frames:
				if f.kind == kind && len(f.ids) == 1 && f.ids[0] == id {
					fromReq = append(fromReq, f.at.Sub(t0))
					return f.at.Sub(clock.lastPublish()), true, nil
				}
			case err := <-readErr:
				return 0, false, err
			case <-timeout.C:
				return 0, false, nil
			}
		}
	}
	var added, read, all []time.Duration
	readMisses := 0
	for i := range rounds {
		in := map[string]any{"idempotencyKey": fmt.Sprintf("live-events-%d-%d", time.Now().UnixNano(), i), "recipients": []string{u.ID},
			"type": "comment", "title": "New comment"}
		body, _ := json.Marshal(map[string]any{"query": "mutation($in: SendNotificationInput!) { sendNotification(input: $in) { notificationIds } }",
			"variables": map[string]any{"in": in}})
		var out struct {
			Data struct {
				Send struct {
					IDs []string `json:"notificationIds"`
				} `json:"sendNotification"`
			} `json:"data"`
		}
		t0 := time.Now()
		if err := postGraphQL(ctx, client, url, sender, string(body), &out); err != nil {
			return nil, fmt.Errorf("send: %w", err)
		}
		if len(out.Data.Send.IDs) != 1 {
			return nil, fmt.Errorf("send wrote %d notifications", len(out.Data.Send.IDs))
		}
		id := out.Data.Send.IDs[0]
		d, ok, err := wait("ADDED", id, t0, 5*time.Second)
		if err != nil {
			return nil, err
		}
		if !ok {
			res.Lost++
			continue
		}
		added, all = append(added, d), append(all, d)
		if res.ReadSkipped != "" {
			continue
		}
		t0 = time.Now()
		if err := postGraphQL(ctx, client, url, u.Token, `{"query":"mutation { markRead(ids: [\"`+id+`\"]) { unreadCount } }"}`, nil); err != nil {
			return nil, fmt.Errorf("markRead: %w", err)
		}
		d, ok, err = wait("READ", id, t0, time.Second)
		if err != nil {
			return nil, err
		}
		if !ok {
			switch {
			case len(read) > 0:
				res.Lost++
			case readMisses == 2:
				res.ReadSkipped = "no READ event for the first 3 markRead calls: the store publishes marks without their kind"
			default:
				readMisses++
			}
			continue
		}
		read, all = append(read, d), append(all, d)
	}
	res.Added, res.Read, res.All, res.FromRequest = summarize(added), summarize(read), summarize(all), summarize(fromReq)
	res.GoalP99Met = res.All.N > 0 && res.All.P99 <= res.GoalP99Ms && res.Lost == 0
	return res, nil
}
