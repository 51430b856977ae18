package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/loader"
	"github.com/inboxgw/gateway/store"
)

// need names one expensive part of the harness. A scenario declares in the table what
// it uses; the harness builds a part on its first use and refuses a part that the
// running scenario did not declare, so the table says truthfully what a selection costs.
type need uint8

const (
	// needDataset is the seeded data set: regular users, big inboxes, the few user.
	needDataset need = 1 << iota
	// needGateway is the gateway with dataloaders, as serve composes it.
	needGateway
	// needNaive is the gateway without dataloaders.
	needNaive
	// needCached is the gateway with the shared profile cache.
	needCached
	// needRedis is a redis-server shared by the scenarios that use one.
	needRedis
)

// needNames are the parts' names, in the order prepare builds them.
var needNames = []struct {
	n    need
	name string
}{{needDataset, "dataset"}, {needGateway, "gateway"}, {needNaive, "naive gateway"}, {needCached, "cached gateway"}, {needRedis, "redis"}}

func (n need) String() string {
	var parts []string
	for _, p := range needNames {
		if n&p.n != 0 {
			parts = append(parts, p.name)
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// lazy is a value built on its first use, once; a failed build is not retried (the run
// stops on its error).
type lazy[T any] struct {
	once sync.Once
	done bool
	v    T
	err  error
}

func (l *lazy[T]) get(build func() (T, error)) (T, error) {
	l.once.Do(func() { l.v, l.err = build(); l.done = true })
	return l.v, l.err
}

// peek is the value if it was built (without error).
func (l *lazy[T]) peek() (T, bool) {
	var zero T
	if !l.done || l.err != nil {
		return zero, false
	}
	return l.v, true
}

// harness is what the scenarios share: the engine, the bench's table and store, the
// verifier of every gateway's tokens, and the expensive parts (the data set, the
// gateways, redis) built on first use by the scenario that declared them.
type harness struct {
	c        config
	eng      *engine
	st       *store.Store
	verifier *auth.Verifier
	// secret is the JWT secret of the bench's gateways (build), which verifier signs with.
	secret  string
	log     *slog.Logger
	rssPeak peak
	client  *http.Client

	// allowed is what the running scenario declared (runScenarios sets it).
	allowed need
	// builders make the expensive parts; newHarness sets the real ones, a test its own.
	builders builders
	// built names the parts built so far, in order.
	built   []string
	closers []func()

	ds        lazy[*dataset]
	inboxReqs lazy[[]loadRequest]
	batched   lazy[*gateway]
	naive     lazy[*gateway]
	cached    lazy[*gateway]
	redis     lazy[string] // the shared redis-server's URL
}

// builders make the harness's expensive parts; each returns what to run at the harness's
// close (nil: nothing).
type builders struct {
	seed    func(ctx context.Context) (*dataset, error)
	gateway func(ctx context.Context, kind need) (*gateway, error)
	redis   func(ctx context.Context) (url string, stop func(), err error)
}

// realBuilders build the parts on the engine: the seed through the harness's store, the
// gateways as serve composes them (app.Build) with stores of their own over the seeded
// table (sweep off: markAllRead is measured by restoring META's image, which leaves the
// inbox as before only while nothing sweeps GSI1), sharing one local broker.
func (h *harness) realBuilders() builders {
	broker := live.NewLocal()
	return builders{
		seed: func(ctx context.Context) (*dataset, error) { return seed(ctx, h.c, h.st, h.eng.db) },
		gateway: func(ctx context.Context, kind need) (*gateway, error) {
			deps := app.Deps{Broker: broker, Store: []store.Option{store.WithSweepWorkers(0)}}
			var set func(*app.Config)
			switch kind {
			case needNaive: // every profile read on its own
				deps.Handler = func(o *httpapi.Options) { o.Loaders = func(string) *loader.Loaders { return nil } }
			case needCached: // scenario 6: only this gateway's store has the cache
				set = func(cfg *app.Config) { cfg.ProfileCacheSize, cfg.ProfileCacheTTL = h.c.cacheSize, h.c.cacheTTL }
			}
			return h.serve(ctx, h.eng.db, set, deps)
		},
		redis: func(ctx context.Context) (string, func(), error) { return startRedis(ctx, h.c.live.redisServer) },
	}
}

// newHarness is a harness on eng over st.
func newHarness(c config, eng *engine, st *store.Store, verifier *auth.Verifier, secret string, log *slog.Logger) *harness {
	h := &harness{c: c, eng: eng, st: st, verifier: verifier, secret: secret, log: log,
		client: &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}}}
	h.builders = h.realBuilders()
	return h
}

// close stops what the harness started, the latest first.
func (h *harness) close() {
	for i := len(h.closers) - 1; i >= 0; i-- {
		h.closers[i]()
	}
	h.closers = nil
}

// use checks that the running scenario declared part n.
func (h *harness) use(n need) error {
	if h.allowed&n == 0 {
		return fmt.Errorf("the scenario uses the %s without declaring it in the scenario table", n)
	}
	return nil
}

// record notes that part n was built.
func (h *harness) record(n need, stop func()) {
	h.built = append(h.built, n.String())
	if stop != nil {
		h.closers = append(h.closers, stop)
	}
}

// prepare builds the parts of n that are not built yet.
func (h *harness) prepare(ctx context.Context, n need) error {
	var err error
	for _, p := range needNames {
		if n&p.n == 0 || err != nil {
			continue
		}
		switch p.n {
		case needDataset:
			_, err = h.dataset(ctx)
		case needGateway, needNaive, needCached:
			_, err = h.gatewayOf(ctx, p.n)
		case needRedis:
			if _, err = h.redisURL(ctx); errors.Is(err, errRedisMissing) {
				err = nil // the scenarios say so in their results
			}
		}
	}
	return err
}

// dataset is the seeded data set, seeded on the first call.
func (h *harness) dataset(ctx context.Context) (*dataset, error) {
	if err := h.use(needDataset); err != nil {
		return nil, err
	}
	return h.ds.get(func() (*dataset, error) {
		ds, err := h.builders.seed(ctx)
		if err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		h.record(needDataset, nil)
		return ds, nil
	})
}

// gatewayOf is the gateway of kind (needGateway, needNaive or needCached), started on
// the first call.
func (h *harness) gatewayOf(ctx context.Context, kind need) (*gateway, error) {
	if err := h.use(kind); err != nil {
		return nil, err
	}
	l := map[need]*lazy[*gateway]{needGateway: &h.batched, needNaive: &h.naive, needCached: &h.cached}[kind]
	return l.get(func() (*gateway, error) {
		gw, err := h.builders.gateway(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		h.record(kind, gw.close)
		return gw, nil
	})
}

// redisURL is the URL of the shared redis-server, started on the first call;
// errRedisMissing when redis-server is not installed.
func (h *harness) redisURL(ctx context.Context) (string, error) {
	if err := h.use(needRedis); err != nil {
		return "", err
	}
	return h.redis.get(func() (string, error) {
		url, stop, err := h.builders.redis(ctx)
		if err == nil {
			h.record(needRedis, stop)
		}
		return url, err
	})
}

// inboxRequests are the initial inbox load's requests, one per regular user of the data
// set (none with -users 0).
func (h *harness) inboxRequests(ctx context.Context) ([]loadRequest, error) {
	ds, err := h.dataset(ctx)
	if err != nil {
		return nil, err
	}
	return h.inboxReqs.get(func() ([]loadRequest, error) {
		body, _ := json.Marshal(map[string]string{"query": inboxQuery})
		var reqs []loadRequest
		for _, u := range ds.users {
			tok, err := h.token(u)
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, loadRequest{Token: tok, Body: string(body)})
		}
		return reqs, nil
	})
}

// serve composes a gateway as serve does (build) over db and starts its handler on a
// loopback listener; its close stops both.
func (h *harness) serve(ctx context.Context, db *dynamodb.Client, set func(*app.Config), deps app.Deps) (*gateway, error) {
	g, err := build(ctx, db, h.c.table, h.log, h.secret, set, deps)
	if err != nil {
		return nil, err
	}
	gw, err := startGateway(g.HTTP)
	if err != nil {
		g.Close()
		return nil, err
	}
	stop := gw.close
	gw.close = func() { stop(); g.Close() }
	gw.app = g
	return gw, nil
}

// token signs a user's token for the bench's gateways.
func (h *harness) token(user string, scopes ...string) (string, error) {
	return h.verifier.Sign(auth.Claims{TenantID: tenant, UserID: user, Scopes: scopes}, 24*time.Hour)
}

// serviceToken signs a service's token with the send scope.
func (h *harness) serviceToken() (string, error) {
	return h.verifier.Sign(auth.Claims{TenantID: tenant, Subject: "bench-service", Scopes: []string{auth.ScopeSend}}, 24*time.Hour)
}

func (h *harness) warmup() time.Duration {
	return min(max(h.c.duration/5, 500*time.Millisecond), 3*time.Second)
}
