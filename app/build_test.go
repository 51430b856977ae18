package app

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/dynlocal"
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
		before := runtime.NumGoroutine()
		for range 20 {
			if g, err := Build(ctx, c, Deps{Log: quiet, DB: db}); err == nil || g != nil || !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Build with a missing APNs key: %v, %v; want the file's error", g, err)
			}
		}
		// Twenty failed builds leave no store sweep, lane or broker goroutine behind.
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before+2 {
			t.Errorf("%d goroutines after 20 failed builds, %d before", n, before)
		}
	})
}
