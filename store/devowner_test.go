package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/store"
)

// ownerKey is the key of the ownership item of token on platform in tenant, as
// store/keys.go builds it (deviceOwnerPK).
func ownerKey(tenant, platform, token string) map[string]types.AttributeValue {
	sum := sha256.Sum256([]byte(platform + ":" + token))
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "T#" + tenant + "#DEVTOKEN#" + hex.EncodeToString(sum[:])},
		"sk": &types.AttributeValueMemberS{Value: "OWNER"},
	}
}

// ownerItem returns the user the ownership item of token on platform in tenant names
// ("" when there is none).
func (f *fixture) ownerItem(t *testing.T, tenant, platform, token string) string {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table),
		Key: ownerKey(tenant, platform, token), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := out.Item["userId"].(*types.AttributeValueMemberS); ok {
		return u.Value
	}
	return ""
}

// holders returns which of users of tenant hold the device of token on platform.
func (f *fixture) holders(t *testing.T, tenant, platform, token string, users ...string) []string {
	t.Helper()
	var out []string
	for _, u := range users {
		ds, err := f.s.Devices(context.Background(), inbox.Viewer{TenantID: tenant, UserID: u})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ds, func(d inbox.Device) bool { return d.Token == token && d.Platform == platform }) {
			out = append(out, u)
		}
	}
	return out
}

// wantOwner checks that exactly want (none for "") of users of tenant holds the device of
// token on platform, and that its ownership item names want.
func (f *fixture) wantOwner(t *testing.T, tenant, platform, token, want string, users ...string) {
	t.Helper()
	var wantHolders []string
	if want != "" {
		wantHolders = []string{want}
	}
	if got := f.holders(t, tenant, platform, token, users...); !slices.Equal(got, wantHolders) {
		t.Fatalf("%s %s/%s: held by %v, want %v", tenant, platform, token, got, wantHolders)
	}
	if got := f.ownerItem(t, tenant, platform, token); got != want {
		t.Fatalf("%s %s/%s: ownership item names %q, want %q", tenant, platform, token, got, want)
	}
}

// pushJob is a push delivery job of v for the device of token on platform.
func pushJob(v inbox.Viewer, platform, token string) inbox.DeliveryJob {
	id := inbox.DeviceID(platform, token)
	return inbox.DeliveryJob{Ref: inbox.DeliveryRef{TenantID: v.TenantID, NotificationID: "01HZX8Y3T9M2V6Q4R8S0W1A2B1",
		Key: inbox.DeliveryKey(inbox.ChannelPush, id)}, UserID: v.UserID, Channel: inbox.ChannelPush,
		To: token, Platform: platform, DeviceID: id}
}

// A device token belongs to one user of a tenant: registering it for another user moves
// it (out of the previous owner's devices, its ownership item rewritten, in one
// transaction), whatever the order; a second registration by the owner writes nothing;
// unregistering or pruning by a previous owner never touches the new owner's; another
// tenant's registration of the same token is its own; the same token on the other
// platform is another device; an evicted or removed device gives its ownership up; a
// device registered before ownership items existed moves too; registrations racing
// each other and an unregister end with one owner (concurrentOwners); at delivery a
// moved device is no longer the previous owner's (recheckDevice).
func TestDeviceBelongsToOneUser(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	f := newFixture(t, store.WithClock(clk.now))
	ctx := context.Background()
	a, b, c := f.viewer("a"), f.viewer("b"), f.viewer("c")
	users := []string{"a", "b", "c"}
	fcm, apns := inbox.PlatformFCM, inbox.PlatformAPNs
	register := func(t *testing.T, v inbox.Viewer, token, platform string) inbox.Device {
		t.Helper()
		clk.advance(time.Minute)
		d, err := f.s.RegisterDevice(ctx, v, token, platform)
		if err != nil {
			t.Fatalf("register %s for %s: %v", token, v.UserID, err)
		}
		return d
	}

	t.Run("A then B, B twice, A again, C, B", func(t *testing.T) {
		register(t, a, "tok-move", fcm)
		f.wantOwner(t, f.tenant, fcm, "tok-move", "a", users...)
		d := register(t, b, "tok-move", fcm)
		if d.CreatedAt != clk.now() || d.ID != inbox.DeviceID(fcm, "tok-move") {
			t.Fatalf("moved device %+v, want registered now for b", d)
		}
		f.wantOwner(t, f.tenant, fcm, "tok-move", "b", users...)
		f.rec.Reset()
		if again := register(t, b, "tok-move", fcm); again != d {
			t.Fatalf("B again = %+v, want %+v", again, d)
		}
		if ops := f.rec.Ops(); !slices.Equal(ops, []string{"BatchGetItem"}) {
			t.Fatalf("B's second registration sent %v, want one read", ops)
		}
		for _, v := range []inbox.Viewer{a, c, b} {
			register(t, v, "tok-move", fcm)
			f.wantOwner(t, f.tenant, fcm, "tok-move", v.UserID, users...)
		}
	})

	t.Run("other tenants keep their own", func(t *testing.T) {
		other := inbox.Viewer{TenantID: "globex", UserID: "a"}
		register(t, other, "tok-tenant", fcm)
		register(t, a, "tok-tenant", fcm)
		register(t, b, "tok-tenant", fcm)
		f.wantOwner(t, f.tenant, fcm, "tok-tenant", "b", users...)
		f.wantOwner(t, "globex", fcm, "tok-tenant", "a", users...)
	})

	t.Run("the other platform is another device", func(t *testing.T) {
		register(t, a, "tok-platform", apns)
		register(t, b, "tok-platform", fcm)
		f.wantOwner(t, f.tenant, apns, "tok-platform", "a", users...)
		f.wantOwner(t, f.tenant, fcm, "tok-platform", "b", users...)
	})

	t.Run("a previous owner's unregister and prune leave the new owner's", func(t *testing.T) {
		d := register(t, a, "tok-unreg", fcm)
		register(t, b, "tok-unreg", fcm)
		for _, name := range []string{"tok-unreg", d.ID} {
			if ok, err := f.s.UnregisterDevice(ctx, a, name); err != nil || ok {
				t.Fatalf("A unregisters %s after the move: %v, %v", name, ok, err)
			}
		}
		if err := f.s.PruneDevice(ctx, a, d.ID); err != nil {
			t.Fatal(err)
		}
		f.wantOwner(t, f.tenant, fcm, "tok-unreg", "b", users...)
		// The owner's unregister gives the token up; the next registration takes it.
		if ok, err := f.s.UnregisterDevice(ctx, b, "tok-unreg"); err != nil || !ok {
			t.Fatalf("B unregisters: %v, %v", ok, err)
		}
		f.wantOwner(t, f.tenant, fcm, "tok-unreg", "", users...)
		register(t, c, "tok-unreg", fcm)
		f.wantOwner(t, f.tenant, fcm, "tok-unreg", "c", users...)
		// So does a prune by the owner.
		if err := f.s.PruneDevice(ctx, c, d.ID); err != nil {
			t.Fatal(err)
		}
		f.wantOwner(t, f.tenant, fcm, "tok-unreg", "", users...)
	})

	t.Run("an evicted device gives its ownership up", func(t *testing.T) {
		v := f.viewer("many")
		for i := range inbox.MaxDevices + 1 {
			register(t, v, fmt.Sprintf("tok-evict-%d", i), fcm)
		}
		f.wantOwner(t, f.tenant, fcm, "tok-evict-0", "", "many")
		f.wantOwner(t, f.tenant, fcm, "tok-evict-1", "many", "many")
		register(t, a, "tok-evict-1", fcm)
		f.wantOwner(t, f.tenant, fcm, "tok-evict-1", "a", "a", "many")
		if ds, err := f.s.Devices(ctx, v); err != nil || len(ds) != inbox.MaxDevices-1 {
			t.Fatalf("the evicting user's devices: %d, %v", len(ds), err)
		}
	})

	t.Run("a device registered before ownership items moves too", func(t *testing.T) {
		register(t, a, "tok-legacy", fcm)
		// As stored before ownership items existed: the device in A's map only.
		if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: ownerKey(f.tenant, fcm, "tok-legacy")}); err != nil {
			t.Fatal(err)
		}
		if r, err := f.s.RecheckDevice(ctx, pushJob(a, fcm, "tok-legacy")); err != nil || r != "" {
			t.Fatalf("A's legacy device: %q, %v; want A's", r, err)
		}
		// A's own registration records the ownership it had.
		register(t, a, "tok-legacy", fcm)
		f.wantOwner(t, f.tenant, fcm, "tok-legacy", "a", users...)

		if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: ownerKey(f.tenant, fcm, "tok-legacy")}); err != nil {
			t.Fatal(err)
		}
		register(t, b, "tok-legacy", fcm)
		// Nothing names A as the holder, so A's map keeps it; its pushes stop there.
		if got := f.holders(t, f.tenant, fcm, "tok-legacy", users...); !slices.Equal(got, []string{"a", "b"}) || f.ownerItem(t, f.tenant, fcm, "tok-legacy") != "b" {
			t.Fatalf("after B took a legacy device: held by %v", got)
		}
		if r, err := f.s.RecheckDevice(ctx, pushJob(a, fcm, "tok-legacy")); err != nil || r != inbox.ReasonDeviceMoved {
			t.Fatalf("A's push to the legacy device B took: %q, %v", r, err)
		}
		// A's unregister takes it out of A's map and leaves B's ownership.
		if ok, err := f.s.UnregisterDevice(ctx, a, "tok-legacy"); err != nil || !ok {
			t.Fatalf("A unregisters its legacy copy: %v, %v", ok, err)
		}
		f.wantOwner(t, f.tenant, fcm, "tok-legacy", "b", users...)
		// And a registration by A takes it back from B.
		register(t, a, "tok-legacy", fcm)
		f.wantOwner(t, f.tenant, fcm, "tok-legacy", "a", users...)
	})

	t.Run("concurrent registrations", func(t *testing.T) { concurrentOwners(t, f) })
	t.Run("recheck at delivery", func(t *testing.T) { recheckDevice(t, f) })
}

// concurrentOwners: registrations of one token by several users at once end with exactly one of them
// holding it and its ownership item naming that one; so do registrations racing an
// unregister by the current owner (one holder, or none and no ownership item).
func concurrentOwners(t *testing.T, f *fixture) {
	ctx := context.Background()
	users := []string{"u0", "u1", "u2", "u3"}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	const rounds = 6
	for r := range rounds {
		token := fmt.Sprintf("tok-race-%d", r)
		racers := users[:2+r%3] // 2, 3 or 4 users at once
		if r%2 == 1 {
			if _, err := f.s.RegisterDevice(ctx, f.viewer("u0"), token, inbox.PlatformFCM); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		for _, u := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := f.s.RegisterDevice(ctx, f.viewer(u), token, inbox.PlatformFCM)
				errs <- err
			}()
		}
		if r%2 == 1 {
			// The owner of before unregisters while the others register.
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := f.s.UnregisterDevice(ctx, f.viewer("u0"), token)
				errs <- err
			}()
		}
		close(start)
		wg.Wait() // one token's race at a time
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for r := range rounds {
		token := fmt.Sprintf("tok-race-%d", r)
		got := f.holders(t, f.tenant, inbox.PlatformFCM, token, users...)
		owner := f.ownerItem(t, f.tenant, inbox.PlatformFCM, token)
		switch {
		case len(got) > 1:
			t.Errorf("%s held by %v", token, got)
		case len(got) == 1 && owner != got[0], len(got) == 0 && owner != "":
			t.Errorf("%s held by %v, ownership item names %q", token, got, owner)
		case r%2 == 0 && len(got) != 1:
			t.Errorf("%s: registrations alone left it to %v", token, got)
		}
	}
}

// recheckDevice: at delivery, a push job's device is its recipient's while it holds it and no other
// user took it: moved to another user is device_moved, unregistered no_device; a job
// that is no push to a device is refused.
func recheckDevice(t *testing.T, f *fixture) {
	ctx := context.Background()
	a, b := f.viewer("a"), f.viewer("b")
	fcm := inbox.PlatformFCM
	check := func(v inbox.Viewer, want string) {
		t.Helper()
		if got, err := f.s.RecheckDevice(ctx, pushJob(v, fcm, "tok-recheck")); err != nil || got != want {
			t.Fatalf("%s's push: %q, %v; want %q", v.UserID, got, err, want)
		}
	}
	check(a, inbox.ReasonNoDevice)
	if _, err := f.s.RegisterDevice(ctx, a, "tok-recheck", fcm); err != nil {
		t.Fatal(err)
	}
	check(a, "")
	check(b, inbox.ReasonDeviceMoved) // A's, not B's
	if _, err := f.s.RegisterDevice(ctx, b, "tok-recheck", fcm); err != nil {
		t.Fatal(err)
	}
	check(a, inbox.ReasonDeviceMoved)
	check(b, "")
	if _, err := f.s.UnregisterDevice(ctx, b, "tok-recheck"); err != nil {
		t.Fatal(err)
	}
	check(b, inbox.ReasonNoDevice)
	check(a, inbox.ReasonNoDevice)

	f.rec.Reset()
	email := pushJob(a, fcm, "tok-recheck")
	email.Channel = inbox.ChannelEmail
	noToken := pushJob(a, fcm, "")
	other := pushJob(a, fcm, "tok-recheck")
	other.UserID = "a#PROFILE"
	for _, job := range []inbox.DeliveryJob{email, noToken, other} {
		if _, err := f.s.RecheckDevice(ctx, job); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("job %+v: %v, want BAD_USER_INPUT", job, err)
		}
	}
	if ops := f.rec.Ops(); len(ops) != 0 {
		t.Fatalf("refused jobs sent %v", ops)
	}
}
