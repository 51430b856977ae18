package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// at names the moment of one call of a hooked store: before or after its n-th (from 1)
// call of operation op.
type at struct {
	op    string
	n     int
	after bool
}

// hookedStore is a store on f's table whose calls run the steps the moments name, each
// once, on the calling goroutine: another client's changes interleaved deterministically
// between this store's reads and its write.
func hookedStore(t *testing.T, f *fixture, clk *testClock, steps map[at]func() error) (*store.Store, func() error) {
	t.Helper()
	calls := map[string]int{}
	var stepErr error
	run := func(m at) {
		if step, ok := steps[m]; ok {
			delete(steps, m)
			if err := step(); err != nil && stepErr == nil {
				stepErr = fmt.Errorf("step at %+v: %w", m, err)
			}
		}
	}
	hook := func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("interleave",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					op := awsmiddleware.GetOperationName(ctx)
					calls[op]++
					n := calls[op]
					run(at{op, n, false})
					out, md, err := next.HandleInitialize(ctx, in)
					run(at{op, n, true})
					return out, md, err
				}), middleware.Before)
		})
	}
	s := store.New(dynlocaltest.Client(t, hook), f.table, store.WithSweepWorkers(0), store.WithClock(clk.now))
	t.Cleanup(s.Close)
	// done: every step ran, without error.
	done := func() error {
		if stepErr != nil {
			return stepErr
		}
		if len(steps) > 0 {
			return fmt.Errorf("%d step(s) never ran (the calls they wait for were not made): %v", len(steps), steps)
		}
		return nil
	}
	return s, done
}

// wantOneOwner checks the ownership invariant of token's device: at most one of users
// holds it, and its ownership item names the holder (none: no ownership item); and that
// the holder is want.
func (f *fixture) wantOneOwner(t *testing.T, token, want string, users ...string) {
	t.Helper()
	got := f.holders(t, f.tenant, inbox.PlatformFCM, token, users...)
	owner := f.ownerItem(t, f.tenant, inbox.PlatformFCM, token)
	switch {
	case len(got) > 1:
		t.Errorf("%s held by %v (ownership item names %q)", token, got, owner)
	case len(got) == 1 && owner != got[0], len(got) == 0 && owner != "":
		t.Errorf("%s held by %v, but its ownership item names %q", token, got, owner)
	case want != "" && (len(got) != 1 || got[0] != want), want == "" && len(got) != 0:
		t.Errorf("%s held by %v, want %q", token, got, want)
	}
}

// Every interleaving of a device's move with its owner's unregister, prune, eviction, or
// another move, each step of the other client between the mover's reads or before its
// commit, ends with at most one user holding the device and its ownership item naming
// that user; a device held in the map of a user no ownership item names (registered
// before ownership items existed) included.
func TestDeviceOwnershipInterleavings(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	f := newFixture(t, store.WithClock(clk.now))
	ctx := context.Background()
	users := []string{"u0", "u1", "u2"}
	fcm := inbox.PlatformFCM
	register := func(u, token string) func() error {
		return func() error {
			clk.advance(time.Millisecond)
			_, err := f.s.RegisterDevice(ctx, f.viewer(u), token, fcm)
			return err
		}
	}
	unregister := func(u, token string) func() error {
		return func() error { _, err := f.s.UnregisterDevice(ctx, f.viewer(u), token); return err }
	}
	prune := func(u, token string) func() error {
		return func() error { return f.s.PruneDevice(ctx, f.viewer(u), inbox.DeviceID(fcm, token)) }
	}
	steps := func(fns ...func() error) func() error {
		return func() error {
			for _, fn := range fns {
				if err := fn(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	must := func(t *testing.T, fns ...func() error) {
		t.Helper()
		if err := steps(fns...)(); err != nil {
			t.Fatal(err)
		}
	}
	// fill registers MaxDevices devices prefix-0 (the oldest) ... for u.
	fill := func(t *testing.T, u, prefix string) {
		t.Helper()
		for i := range inbox.MaxDevices {
			must(t, register(u, fmt.Sprintf("%s-%d", prefix, i)))
		}
	}
	// forgetOwner deletes token's ownership item: the device as stored before they existed.
	forgetOwner := func(token string) func() error {
		return func() error {
			_, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: ownerKey(f.tenant, fcm, token)})
			return err
		}
	}
	beforeCommit := at{"TransactWriteItems", 1, false}
	betweenReads := at{"BatchGetItem", 2, false}
	afterSecondRead := at{"BatchGetItem", 2, true}
	afterOwnerRead := at{"GetItem", 2, true} // removeDevice's read, after the PROFILE's
	hooked := func(t *testing.T, s map[at]func() error) (*store.Store, func()) {
		hs, done := hookedStore(t, f, clk, s)
		return hs, func() {
			t.Helper()
			if err := done(); err != nil {
				t.Fatal(err)
			}
		}
	}
	move := func(t *testing.T, s map[at]func() error, u, token string) {
		t.Helper()
		hs, done := hooked(t, s)
		clk.advance(time.Millisecond)
		if _, err := hs.RegisterDevice(ctx, f.viewer(u), token, fcm); err != nil {
			t.Fatal(err)
		}
		done()
	}

	t.Run("the owner unregisters before the move commits", func(t *testing.T) {
		must(t, register("u0", "tok-a"))
		move(t, map[at]func() error{beforeCommit: unregister("u0", "tok-a")}, "u1", "tok-a")
		f.wantOneOwner(t, "tok-a", "u1", users...)
	})
	t.Run("the owner prunes before the move commits", func(t *testing.T) {
		must(t, register("u0", "tok-b"))
		move(t, map[at]func() error{beforeCommit: prune("u0", "tok-b")}, "u1", "tok-b")
		f.wantOneOwner(t, "tok-b", "u1", users...)
	})
	t.Run("the owner unregisters and registers again between the move's reads", func(t *testing.T) {
		must(t, register("u0", "tok-c"))
		move(t, map[at]func() error{betweenReads: unregister("u0", "tok-c"), afterSecondRead: register("u0", "tok-c")}, "u1", "tok-c")
		f.wantOneOwner(t, "tok-c", "u1", users...)
	})
	for _, name := range []string{"unregister", "prune"} {
		t.Run("a move commits before the owner's "+name, func(t *testing.T) {
			token := "tok-d-" + name
			must(t, register("u0", token))
			hs, done := hooked(t, map[at]func() error{afterOwnerRead: register("u1", token)})
			var err error
			if name == "unregister" {
				var ok bool
				ok, err = hs.UnregisterDevice(ctx, f.viewer("u0"), token)
				if ok {
					t.Errorf("u0's unregister after the move reported a removal")
				}
			} else {
				err = hs.PruneDevice(ctx, f.viewer("u0"), inbox.DeviceID(fcm, token))
			}
			if err != nil {
				t.Fatal(err)
			}
			done()
			f.wantOneOwner(t, token, "u1", users...)
		})
	}
	t.Run("two moves at once", func(t *testing.T) {
		must(t, register("u0", "tok-e"))
		move(t, map[at]func() error{beforeCommit: register("u2", "tok-e")}, "u1", "tok-e")
		f.wantOneOwner(t, "tok-e", "u1", users...)
	})
	t.Run("another move and back before the move commits", func(t *testing.T) {
		must(t, register("u0", "tok-f"))
		move(t, map[at]func() error{beforeCommit: steps(register("u2", "tok-f"), register("u0", "tok-f"))}, "u1", "tok-f")
		f.wantOneOwner(t, "tok-f", "u1", users...)
	})
	t.Run("another move and back between the move's reads", func(t *testing.T) {
		must(t, register("u0", "tok-g"))
		move(t, map[at]func() error{betweenReads: register("u2", "tok-g"), afterSecondRead: register("u0", "tok-g")}, "u1", "tok-g")
		f.wantOneOwner(t, "tok-g", "u1", users...)
	})
	t.Run("a move of the device the owner evicts", func(t *testing.T) {
		for i, m := range []at{beforeCommit, betweenReads, afterSecondRead} {
			prefix := fmt.Sprintf("tok-h%d", i)
			fill(t, "u0", prefix)
			// u0's registration of one more evicts prefix-0, which u1 takes meanwhile.
			move(t, map[at]func() error{m: register("u1", prefix+"-0")}, "u0", prefix+"-new")
			f.wantOneOwner(t, prefix+"-0", "u1", users...)
			f.wantOneOwner(t, prefix+"-new", "u0", users...)
			for j := 1; j < inbox.MaxDevices; j++ {
				f.wantOneOwner(t, fmt.Sprintf("%s-%d", prefix, j), "u0", users...)
			}
			if ds, err := f.s.Devices(ctx, f.viewer("u0")); err != nil || len(ds) > inbox.MaxDevices {
				t.Fatalf("u0's devices: %d, %v", len(ds), err)
			}
		}
	})
	t.Run("the owner evicts the device before the move commits", func(t *testing.T) {
		fill(t, "u0", "tok-i")
		move(t, map[at]func() error{beforeCommit: register("u0", "tok-i-new")}, "u1", "tok-i-0")
		f.wantOneOwner(t, "tok-i-0", "u1", users...)
		f.wantOneOwner(t, "tok-i-new", "u0", users...)
	})
	// Held in u0's map with no ownership item naming u0: u0's own registration of it
	// writes one (changing nothing in the map) while u0's eviction of it is in flight.
	t.Run("an evicted device without ownership item registered again before the eviction commits", func(t *testing.T) {
		fill(t, "u0", "tok-j")
		must(t, forgetOwner("tok-j-0"))
		move(t, map[at]func() error{beforeCommit: register("u0", "tok-j-0")}, "u0", "tok-j-new")
		f.wantOneOwner(t, "tok-j-0", "", users...)
	})
	t.Run("an evicted device another user took without its ownership item", func(t *testing.T) {
		fill(t, "u0", "tok-k")
		// u2 takes tok-k-0 while no ownership item names u0: u0's map keeps it.
		must(t, forgetOwner("tok-k-0"), register("u2", "tok-k-0"))
		// u0 evicts it; meanwhile u2 gives it up and u0 registers it again (its map
		// holds it: only the ownership item is written).
		move(t, map[at]func() error{beforeCommit: steps(unregister("u2", "tok-k-0"), register("u0", "tok-k-0"))}, "u0", "tok-k-new")
		f.wantOneOwner(t, "tok-k-0", "", users...)
	})
}
