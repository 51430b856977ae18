package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/live/redistest"
)

// nodeSub is a Node client script running one subscription until the test ends.
type nodeSub struct {
	t      *testing.T
	name   string
	lines  chan string
	stderr *bytes.Buffer
}

// startNodeSub runs script (tests/js) against url with token and the subscription
// document query; it prints every result's data, one JSON line each, until killed.
func startNodeSub(t *testing.T, node, script, url, token, query string) *nodeSub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Join("tests", "js", script), url, token, "0", query)
	cmd.WaitDelay = 5 * time.Second
	s := &nodeSub{t: t, name: script, lines: make(chan string, 64), stderr: new(bytes.Buffer)}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", script, err)
	}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	return s
}

// next returns the next result's data, decoded into dst.
func (s *nodeSub) next(what string, dst any) {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("%s ended before %s\nstderr:\n%s", s.name, what, s.stderr.String())
		}
		if err := json.Unmarshal([]byte(line), dst); err != nil {
			s.t.Fatalf("%s printed %q for %s: %v", s.name, line, what, err)
		}
	case <-time.After(20 * time.Second):
		s.t.Fatalf("%s: nothing for %s within 20s\nstderr:\n%s", s.name, what, s.stderr.String())
	}
}

// quiet fails when s prints anything within d.
func (s *nodeSub) quiet(what string, d time.Duration) {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if ok {
			s.t.Fatalf("%s: unexpected %s after %s", s.name, line, what)
		}
		s.t.Fatalf("%s ended after %s\nstderr:\n%s", s.name, what, s.stderr.String())
	case <-time.After(d):
	}
}

type eventData struct {
	InboxEvents struct {
		Kind            string   `json:"kind"`
		NotificationIds []string `json:"notificationIds"`
		Notification    *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"notification"`
		Badge struct {
			Unread int `json:"unread"`
		} `json:"badge"`
	} `json:"inboxEvents"`
}

type badgeData struct {
	Badge struct {
		Unread     int `json:"unread"`
		Unseen     int `json:"unseen"`
		Categories []struct {
			Category string `json:"category"`
		} `json:"categories"`
	} `json:"badge"`
}

const (
	eventsQuery = `subscription { inboxEvents { kind notificationIds notification { id title } badge { unread unseen } } }`
	badgeQuery  = `subscription { badge { unread unseen categories { category unread unseen } } }`
)

// outsideSet applies SET expr to a notification the way a service writing the table
// directly would (a plain UpdateItem, META untouched).
func outsideSet(t *testing.T, db *dynamodb.Client, table, tenant, user, globalID, expr string, vals map[string]types.AttributeValue) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(globalID)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(string(raw), "Notification:")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "T#" + tenant + "#U#" + user},
			"sk": &types.AttributeValueMemberS{Value: "N#" + id}},
		UpdateExpression:          aws.String("SET " + expr),
		ExpressionAttributeValues: vals,
	}); err != nil {
		t.Fatalf("outside UpdateItem: %v", err)
	}
}

// TestNodeClientsInboxEventsAcrossInstances: with each real client library (graphql-ws,
// the legacy protocol through subscriptions-transport-ws, graphql-sse), a subscriber on
// instance A receives inboxEvents and badge for changes made through instance B and by a
// service writing the table directly (through the stream relay): each event once, in
// order, with the badge after it, although B's own publish and the relay both carry the
// gateway's writes.
func TestNodeClientsInboxEventsAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway and relay processes")
	}
	node := nodeBinary(t)
	rds := redistest.Server(t)
	rdb := redis.NewClient(&redis.Options{Addr: rds.Addr()})
	defer rdb.Close()
	table := dynlocaltest.TableName(t)
	db := dynlocaltest.Client(t)
	dynlocaltest.KeepStreams(t) // the relay reads the stream
	env := gwEnv(t, table, "INBOX_BROKER=redis", "INBOX_REDIS_URL="+rds.URL(), "INBOX_RELAY_LEASE="+relayLease.String())
	_, a := startGatewayProc(t, "gateway-A", env)
	_, b := startGatewayProc(t, "gateway-B", env)
	rel := startProc(t, "relay", env, "relay")
	rel.waitLog("relay: reading stream", time.Time{}, procTimeout)
	sender := b.Token("t1", "svc", auth.ScopeSend)

	for i, c := range nodeClients {
		t.Run(c.script, func(t *testing.T) {
			a, b := a.WithT(t), b.WithT(t)
			user := "ev" + string(rune('a'+i))
			tok := a.Token("t1", user)
			events := startNodeSub(t, node, c.script, a.URL, tok, eventsQuery)
			// inboxEvents sends nothing first: its subscription is in place once A
			// listens on the viewer's Redis channel.
			testgw.WaitFor(t, 20*time.Second, "instance A to subscribe to the viewer's channel", func() bool {
				n, err := rdb.PubSubNumSub(context.Background(), "inbox:t1#"+user).Result()
				return err == nil && n["inbox:t1#"+user] == 1
			})
			badges := startNodeSub(t, node, c.script, a.URL, tok, badgeQuery)
			var bd badgeData
			badges.next("the first badge", &bd)
			if bd.Badge.Unread != 0 || bd.Badge.Unseen != 0 || len(bd.Badge.Categories) != 0 {
				t.Fatalf("first badge %+v, want zeros", bd.Badge)
			}

			expect := func(what, kind, id string, unread int) eventData {
				t.Helper()
				var e eventData
				events.next(what, &e)
				ev := e.InboxEvents
				if ev.Kind != kind || len(ev.NotificationIds) != 1 || ev.NotificationIds[0] != id || ev.Badge.Unread != unread {
					t.Fatalf("%s: event %+v, want %s of %s with unread %d", what, ev, kind, id, unread)
				}
				if (ev.Notification != nil) != (kind == "ADDED") || (ev.Notification != nil && ev.Notification.ID != id) {
					t.Fatalf("%s: notification %+v for %s", what, ev.Notification, kind)
				}
				return e
			}
			g1 := b.Seed(sender, user, 1)[0]
			expect("a send through B", "ADDED", g1, 1)
			b.Mark(tok, true, g1)
			expect("a markRead through B", "READ", g1, 0)
			o1 := outsideSend(t, db, table, "t1", user)
			if e := expect("an outside write", "ADDED", o1, 1); e.InboxEvents.Notification.Title != "from a service" {
				t.Fatalf("outside notification %+v", e.InboxEvents.Notification)
			}
			now := &types.AttributeValueMemberN{Value: "1700000000000"}
			outsideSet(t, db, table, "t1", user, o1, "archivedAt = :t", map[string]types.AttributeValue{":t": now})
			expect("an outside archive", "ARCHIVED", o1, 1)
			// The relay's copies of B's writes came meanwhile or come now: nothing more.
			events.quiet("the last event", time.Second)

			// The badge follows (coalesced: intermediate values may be skipped) to 1.
			testgw.WaitFor(t, 20*time.Second, "the badge subscriber to reach 1", func() bool {
				select {
				case line := <-badges.lines:
					bd = badgeData{}
					if err := json.Unmarshal([]byte(line), &bd); err != nil {
						t.Fatalf("badge line %q", line)
					}
				default:
				}
				return bd.Badge.Unread == 1
			})
		})
	}
}

// nodeClients are the scripts in tests/js run by the cross-instance test, one per real
// client library (the same set as httpapi's Node client tests).
var nodeClients = []struct{ script string }{
	{"graphql-ws.mjs"}, {"subscriptions-transport-ws.mjs"}, {"graphql-sse.mjs"},
}

// nodeBinary returns the node executable, failing (not skipping) when node or the client
// scripts' npm packages are missing.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v): install Node.js 20+, then run `npm ci` in the module root", err)
	}
	for _, p := range []string{"graphql-ws", "ws", "subscriptions-transport-ws", "graphql-sse"} {
		if _, err := os.Stat(filepath.Join("node_modules", p, "package.json")); err != nil {
			t.Fatalf("npm package %s is missing (%v): run `npm ci` in the module root", p, err)
		}
	}
	return node
}
