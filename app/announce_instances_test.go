package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/service"
)

// An announcement created on one instance is in another instance's pages and badges at
// once, though that instance cached the tenant's set before and has no badge subscriber of
// the tenant: its cache follows the broker (bench scenario 19 found instance B showing it
// only after the cache's max age, 30 s, since only live.Announced's watched tenants
// heard of changes).
func TestAnnouncementReachesAnotherInstancesCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := dynlocaltest.Client(t)
	table := dynlocaltest.TableName(t)
	broker := live.NewLocal() // shared, as Redis is between instances
	quiet := slog.New(slog.DiscardHandler)
	build := func(create bool) *Gateway {
		g, err := Build(ctx, Config{Table: table, ComplexityLimit: 5000, JWTSecret: strings.Repeat("s", 32), CreateTable: &create},
			Deps{Log: quiet, DB: db, Broker: broker})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		return g
	}
	a, b := build(true), build(false)
	v := inbox.Viewer{TenantID: "t1", UserID: "u1"}
	// B serves the tenant first: its set (none) is cached, fresh for MaxAge.
	if bd, err := b.Store.Badge(ctx, v); err != nil || bd.Unread != 0 {
		t.Fatalf("B's badge before: %+v, %v", bd, err)
	}
	ann, _, err := a.Announcements.Create(ctx, "t1", service.CreateRequest{Input: inbox.AnnouncementInput{
		IdempotencyKey: "k1", Type: "news", Title: "The new dashboard is live"}})
	if err != nil {
		t.Fatal(err)
	}
	bd, err := b.Store.Badge(ctx, v)
	if err != nil || bd.Unread != 1 {
		t.Errorf("B's badge right after A's announcement: unread %d (%v), want 1", bd.Unread, err)
	}
	page, err := b.Store.Inbox(ctx, v, inbox.PageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Edges) != 1 || page.Edges[0].Node.ID != ann.ID {
		t.Errorf("B's page right after A's announcement has %d items, want the announcement %s", len(page.Edges), ann.ID)
	}
}
