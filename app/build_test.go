package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"go.uber.org/goleak"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// Build's roles, without an engine: the client points at a closed port and none of these
// builds calls it (the table is not created, nothing is sent).
func TestBuildRoles(t *testing.T) {
	ctx := context.Background()
	db := dynlocal.Client("http://127.0.0.1:1")
	quiet := slog.New(slog.DiscardHandler)
	cfg := Config{Table: "inbox", ComplexityLimit: 5000}

	t.Run("a worker reads no token: no secret needed, no HTTP surface", func(t *testing.T) {
		g, err := Build(ctx, cfg, Deps{Log: quiet, DB: db, Worker: true})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if g.Handler != nil || g.HTTP != nil || g.Verifier != nil {
			t.Errorf("a worker has Handler %v, HTTP %v, Verifier %v; want none", g.Handler, g.HTTP, g.Verifier)
		}
		if g.Scheduler == nil || g.Service == nil || g.Store == nil || g.Broker == nil {
			t.Errorf("a worker lacks its scheduler, service, store or broker: %+v", g)
		}
	})

	t.Run("a gateway without a secret refuses to start", func(t *testing.T) {
		g, err := Build(ctx, cfg, Deps{Log: quiet, DB: db})
		if !errors.Is(err, errNoJWTSecret) || g != nil {
			t.Fatalf("Build: %v, %v; want errNoJWTSecret and no gateway", g, err)
		}
	})

	t.Run("a gateway serves one composition", func(t *testing.T) {
		c := cfg
		c.JWTSecret = strings.Repeat("s", 32)
		g, err := Build(ctx, c, Deps{Log: quiet, DB: db})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if g.Handler == nil || g.HTTP == nil || g.Verifier == nil || g.Scheduler == nil {
			t.Fatalf("incomplete gateway: %+v", g)
		}
	})

	t.Run("an unusable setting closes what was opened", func(t *testing.T) {
		c := cfg
		c.JWTSecret = strings.Repeat("s", 32)
		c.APNsKey = filepath.Join(t.TempDir(), "missing.p8")
		c.APNsKeyID, c.APNsTeamID, c.APNsTopic = "KEY1234567", "TEAM123456", "com.example.app"
		// The test runs alone (its package's parallel tests wait for it): every goroutine
		// alive after the builds that was not before is one a failed Build left behind.
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		for range 20 {
			if g, err := Build(ctx, c, Deps{Log: quiet, DB: db}); err == nil || g != nil || !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Build with a missing APNs key: %v, %v; want the file's error", g, err)
			}
		}
	})
}

// A dev gateway whose start fails after its mail catcher listened frees the catcher's
// address: the catcher's Close raced its serving goroutine, and a retried Build of the
// same configuration in the process (a test's, the bench's) met "address already in
// use" while the stale catcher kept accepting mail nobody reads.
func TestBuildFailingInDevModeFreesTheCatchersAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	db := dynlocal.Client("http://127.0.0.1:1")
	cfg := Config{Table: "inbox", ComplexityLimit: 5000, Dev: true, DataDir: t.TempDir(), DevSMTPAddr: addr,
		DemoImport: filepath.Join(t.TempDir(), "missing.json")}
	for i := range 20 {
		if g, err := Build(context.Background(), cfg, Deps{Log: slog.New(slog.DiscardHandler), DB: db}); g != nil || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("build %d with a missing demo file: gateway %t, %v; want the file's error", i, g != nil, err)
		}
	}
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Fatalf("the catcher's address after the failed builds: %v", err)
	} else {
		ln.Close()
	}
}

// A gateway's cursor key is its configuration's, whoever verifies its tokens: two builds
// of one configuration (serve's, or a caller's with its own Verifier, as the tests'
// harness and the bench) accept each other's cursors; a configuration without a secret
// to sign them refuses to build rather than sign with a random key of one process, which
// another instance (or the same after a restart) would answer "invalid cursor".
func TestBuildCursorKeyIsTheConfigurations(t *testing.T) {
	ctx := context.Background()
	db := dynlocal.Client("http://127.0.0.1:1")
	quiet := slog.New(slog.DiscardHandler)
	v, err := auth.NewVerifier(auth.Config{Secret: []byte(strings.Repeat("v", 32))})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	viewer := inbox.Viewer{TenantID: "t", UserID: "u"}
	id := ulid.Make().String()
	for _, c := range []struct {
		name string
		cfg  Config
		deps Deps
		want error // nil: builds, and the two builds share their cursors
	}{
		{"a caller's verifier, no secret", Config{}, Deps{Verifier: v}, errNoJWTSecret},
		{"a caller's verifier, a JWT secret", Config{JWTSecret: strings.Repeat("j", 32)}, Deps{Verifier: v}, nil},
		{"a caller's verifier, a cursor secret", Config{CursorSecret: strings.Repeat("c", 32)}, Deps{Verifier: v}, nil},
		{"serve's: a JWT secret", Config{JWTSecret: strings.Repeat("j", 32)}, Deps{}, nil},
		{"serve's: a cursor secret beside the JWT secret", Config{JWTSecret: strings.Repeat("j", 32), CursorSecret: strings.Repeat("c", 32)}, Deps{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Table, cfg.ComplexityLimit = "inbox", 5000
			deps := c.deps
			deps.Log, deps.DB = quiet, db
			var stores []*store.Store
			for range 2 {
				g, err := Build(ctx, cfg, deps)
				if c.want != nil {
					if !errors.Is(err, c.want) || g != nil {
						t.Fatalf("Build: gateway %t, %v; want %v and no gateway", g != nil, err, c.want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				stores = append(stores, g.Store)
			}
			cur := stores[0].EncodeCursor(viewer, store.IndexInbox, id)
			if got, err := stores[1].DecodeCursor(viewer, store.IndexInbox, cur); err != nil || got != id {
				t.Fatalf("a cursor of one build on the other: %q, %v", got, err)
			}
		})
	}
}
