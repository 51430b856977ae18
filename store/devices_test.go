package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// testClock is a settable clock for store.WithClock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// deviceIDs returns the ids of ds in order.
func deviceIDs(ds []inbox.Device) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// Devices: registered with their id (sha256 of platform:token), idempotent, at most
// inbox.MaxDevices (the oldest evicted), removed by token or id, pruned idempotently,
// kept by a profile update; bad input writes nothing.
func TestDevices(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	f := newFixture(t, store.WithClock(clk.now))
	ctx := context.Background()
	v := f.viewer("a")

	f.rec.Reset()
	for _, c := range []struct {
		v               inbox.Viewer
		token, platform string
	}{
		{v, "tok", "gcm"}, {v, "", inbox.PlatformFCM}, {v, "a token", inbox.PlatformFCM}, {v, "tok\n", inbox.PlatformAPNs},
		{v, strings.Repeat("x", inbox.MaxDeviceTokenBytes+1), inbox.PlatformFCM},
		{inbox.Viewer{TenantID: f.tenant, UserID: "a#PROFILE"}, "tok", inbox.PlatformFCM},
	} {
		if _, err := f.s.RegisterDevice(ctx, c.v, c.token, c.platform); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("register %q on %q for %+v: %v, want BAD_USER_INPUT", c.token, c.platform, c.v, err)
		}
	}
	if err := f.s.PruneDevice(ctx, v, "not-an-id"); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("prune of a malformed id: %v", err)
	}
	if _, err := f.s.UnregisterDevice(ctx, v, ""); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("unregister of nothing: %v", err)
	}
	if ops := f.rec.Ops(); len(ops) != 0 {
		t.Fatalf("refused calls sent %v", ops)
	}

	if ds, err := f.s.Devices(ctx, v); err != nil || len(ds) != 0 {
		t.Fatalf("no devices = %v, %v", ds, err)
	}
	d0, err := f.s.RegisterDevice(ctx, v, "apns-token-0", inbox.PlatformAPNs)
	want := inbox.Device{ID: inbox.DeviceID(inbox.PlatformAPNs, "apns-token-0"), Token: "apns-token-0", Platform: inbox.PlatformAPNs, CreatedAt: clk.now()}
	if err != nil || d0 != want || len(d0.ID) != 16 || !inbox.IsDeviceID(d0.ID) {
		t.Fatalf("register = %+v, %v; want %+v", d0, err, want)
	}
	// The same token again: nothing written, the device as first registered.
	clk.advance(time.Minute)
	f.rec.Reset()
	if again, err := f.s.RegisterDevice(ctx, v, "apns-token-0", inbox.PlatformAPNs); err != nil || again != d0 {
		t.Fatalf("register again = %+v, %v; want %+v", again, err, d0)
	}
	if ops := f.rec.Ops(); !slices.Equal(ops, []string{"BatchGetItem"}) {
		t.Errorf("idempotent register ops %v, want one BatchGetItem (the profile and the token's owner)", ops)
	}
	// The same token on the other platform is another device.
	if d, err := f.s.RegisterDevice(ctx, v, "apns-token-0", inbox.PlatformFCM); err != nil || d.ID == d0.ID {
		t.Fatalf("other platform = %+v, %v", d, err)
	}
	// A profile update keeps the devices (and devices keep the profile).
	if _, err := f.s.PutUserProfile(ctx, v, inbox.UserProfile{Addresses: map[string]string{"email": "a@example.com"}}); err != nil {
		t.Fatal(err)
	}
	// With the two above: inbox.MaxDevices.
	for i := 2; i < inbox.MaxDevices; i++ {
		clk.advance(time.Minute)
		if _, err := f.s.RegisterDevice(ctx, v, fmt.Sprintf("fcm-token-%d", i), inbox.PlatformFCM); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := f.s.Devices(ctx, v)
	if err != nil || len(ds) != inbox.MaxDevices || ds[0] != d0 {
		t.Fatalf("devices = %+v, %v", ds, err)
	}
	if p, err := f.s.UserProfile(ctx, v); err != nil || p.Address("email") != "a@example.com" {
		t.Fatalf("profile beside devices = %+v, %v", p, err)
	}
	// An 11th evicts the oldest (d0), and only it.
	clk.advance(time.Minute)
	d11, err := f.s.RegisterDevice(ctx, v, "fcm-token-11", inbox.PlatformFCM)
	if err != nil {
		t.Fatal(err)
	}
	after, err := f.s.Devices(ctx, v)
	if err != nil || len(after) != inbox.MaxDevices || slices.Contains(deviceIDs(after), d0.ID) ||
		!slices.Equal(deviceIDs(after), append(deviceIDs(ds[1:]), d11.ID)) {
		t.Fatalf("after eviction = %v, %v; before %v", deviceIDs(after), err, deviceIDs(ds))
	}
	// Unregister by token (both platforms' devices of one token would go; here one), by
	// id; an unknown one is false.
	if ok, err := f.s.UnregisterDevice(ctx, v, "fcm-token-3"); err != nil || !ok {
		t.Fatalf("unregister by token = %v, %v", ok, err)
	}
	if ok, err := f.s.UnregisterDevice(ctx, v, d11.ID); err != nil || !ok {
		t.Fatalf("unregister by id = %v, %v", ok, err)
	}
	if ok, err := f.s.UnregisterDevice(ctx, v, "fcm-token-3"); err != nil || ok {
		t.Fatalf("unregister of a removed token = %v, %v", ok, err)
	}
	if ok, err := f.s.UnregisterDevice(ctx, f.viewer("nobody"), "fcm-token-3"); err != nil || ok {
		t.Fatalf("unregister for a user without a profile = %v, %v", ok, err)
	}
	left, err := f.s.Devices(ctx, v)
	if err != nil || len(left) != inbox.MaxDevices-2 {
		t.Fatalf("left = %v, %v", deviceIDs(left), err)
	}
	for _, d := range left {
		if d.Token == "fcm-token-3" || d.ID == d11.ID {
			t.Fatalf("removed device still there: %+v", d)
		}
	}
	// Prune: once removes, twice is a no-op; a user without devices is fine.
	victim := left[0].ID
	for i := 0; i < 2; i++ {
		if err := f.s.PruneDevice(ctx, v, victim); err != nil {
			t.Fatalf("prune %d: %v", i, err)
		}
	}
	if err := f.s.PruneDevice(ctx, f.viewer("nobody"), victim); err != nil {
		t.Fatalf("prune without a profile: %v", err)
	}
	if ds, _ := f.s.Devices(ctx, v); len(ds) != inbox.MaxDevices-3 || slices.Contains(deviceIDs(ds), victim) {
		t.Fatalf("after prune = %v", deviceIDs(ds))
	}
	if ds, _ := f.s.Devices(ctx, f.viewer("nobody")); len(ds) != 0 {
		t.Fatalf("prune created devices: %v", ds)
	}
	// The profile is outside the inbox's key range: the inbox stays empty.
	if page := f.page(t, "a", inbox.PageQuery{First: ptr(10)}); len(page.Edges) != 0 {
		t.Fatalf("inbox holds %d items", len(page.Edges))
	}
}

// Registrations racing on one user all land (the devices map is written on condition
// that its revision is the one read, and retried).
func TestDevicesConcurrentRegister(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	v := f.viewer("a")
	var wg sync.WaitGroup
	errs := make(chan error, inbox.MaxDevices)
	for i := range inbox.MaxDevices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.s.RegisterDevice(ctx, v, fmt.Sprintf("token-%d", i), inbox.PlatformFCM)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ds, err := f.s.Devices(ctx, v); err != nil || len(ds) != inbox.MaxDevices {
		t.Fatalf("devices = %d, %v", len(ds), err)
	}
}
