package resolvers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/graph"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/loader"
	"github.com/inboxgw/gateway/resolvers"
)

// pageStore answers every call at once from memory, so BenchmarkInitialInbox measures
// the GraphQL execution and the resolvers alone (no DynamoDB, no network).
type pageStore struct {
	resolvers.Store
	page *inbox.Page
}

func (s *pageStore) Inbox(context.Context, inbox.Viewer, inbox.PageQuery) (*inbox.Page, error) {
	p := *s.page
	return &p, nil
}

func (s *pageStore) Profiles(_ context.Context, _ string, refs []inbox.ProfileRef) ([]*inbox.Profile, error) {
	out := make([]*inbox.Profile, len(refs))
	for i, r := range refs {
		if r.TargetKind == "" {
			out[i] = &inbox.Profile{Actor: &inbox.Actor{ActorID: r.ID, Name: "name " + r.ID, AvatarURL: "https://a/" + r.ID}}
		} else {
			out[i] = &inbox.Profile{Target: &inbox.Target{TargetID: r.ID, Kind: r.TargetKind, Title: "title " + r.ID, URL: "https://t/" + r.ID}}
		}
	}
	return out, nil
}

func (s *pageStore) Badge(context.Context, inbox.Viewer) (inbox.Badge, error) {
	return inbox.Badge{Unread: 7, Version: 1}, nil
}

func benchPage() *inbox.Page {
	p := &inbox.Page{UnreadCount: 7, HasUnreadCount: true}
	for i := range 20 {
		n := &inbox.Notification{
			ID: fmt.Sprintf("01JB%022d", i), Type: "issue_comment.created", Title: "t",
			CreatedAt: time.Unix(1700000000, 0).UTC(), ActorID: fmt.Sprintf("actor%d", i%7),
			TargetKind: "issue", TargetID: fmt.Sprint(i),
		}
		p.Edges = append(p.Edges, inbox.Edge{Cursor: fmt.Sprintf("c%d", i), Node: n})
	}
	end := "c19"
	p.PageInfo = inbox.PageInfo{HasNextPage: true, EndCursor: &end}
	return p
}

func benchInbox(b *testing.B, query string) {
	st := &pageStore{page: benchPage()}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: (&resolvers.Resolver{Store: st}).Root()}))
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.AroundResponses(func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		return next(loader.With(ctx, loader.New(st, "t1")))
	})
	claims := auth.Claims{TenantID: "t1", UserID: "u1"}
	body := `{"query":` + fmt.Sprintf("%q", query) + `}`
	run := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(auth.WithClaims(req.Context(), claims))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w
	}
	if w := run(); w.Code != 200 || strings.Contains(w.Body.String(), `"errors"`) {
		b.Fatalf("%d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
}

// BenchmarkInitialInbox is the bench command's initial inbox load, without the store.
func BenchmarkInitialInbox(b *testing.B) {
	benchInbox(b, `query InitialInbox { viewer { unreadCount inbox(first: 20) { edges { node { actor { name avatarUrl } target { title url } } } pageInfo { hasNextPage endCursor } } } }`)
}

// BenchmarkInboxWithIDs is the same load asking for every object's id as well.
func BenchmarkInboxWithIDs(b *testing.B) {
	benchInbox(b, `query { viewer { id unreadCount inbox(first: 20) { edges { node { id read actor { id name avatarUrl } target { id title url } } } pageInfo { hasNextPage endCursor } } } }`)
}
