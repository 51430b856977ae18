package rest_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

func TestDevicesRegisterUnregisterAndWhoMay(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	admin := s.Token(tenant, "svc", rest.ScopeAdmin)
	alice := s.Token(tenant, "alice")
	apns := strings.Repeat("ab", 32)
	fcm := "fcm-token:APA91bH_x-y.z"
	path := "/v1/users/alice/devices"

	d := decode[gen.Device](t, call(t, s, http.MethodPost, path, admin, nil, map[string]any{"token": apns, "platform": "apns"}), 201)
	if d.Id != inbox.DeviceID(inbox.PlatformAPNs, apns) || d.Token != apns || d.Platform != gen.Apns || d.CreatedAt.IsZero() {
		t.Fatalf("registered: %s", mustJSON(t, d))
	}
	// Registering the same token again answers the device as it is.
	if again := decode[gen.Device](t, call(t, s, http.MethodPost, path, admin, nil, map[string]any{"token": apns, "platform": "apns"}), 201); again.Id != d.Id || !again.CreatedAt.Equal(d.CreatedAt) {
		t.Fatalf("again: %s, first %s", mustJSON(t, again), mustJSON(t, d))
	}
	// The user itself may register its own device, and nobody else's.
	f := decode[gen.Device](t, call(t, s, http.MethodPost, path, alice, nil, map[string]any{"token": fcm, "platform": "fcm"}), 201)
	expectProblem(t, call(t, s, http.MethodPost, "/v1/users/bob/devices", alice, nil, map[string]any{"token": fcm, "platform": "fcm"}), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodPost, path, s.Token(tenant, "svc", rest.ScopeSend), nil, map[string]any{"token": fcm, "platform": "fcm"}), 403, "FORBIDDEN")
	expectProblem(t, call(t, s, http.MethodPost, path, "", nil, map[string]any{"token": fcm, "platform": "fcm"}), 401, "UNAUTHENTICATED")
	// Bad input is answered before anything is written.
	for _, body := range []any{
		map[string]any{"token": fcm, "platform": "webos"},
		map[string]any{"token": "", "platform": "fcm"},
		map[string]any{"token": "has space", "platform": "fcm"},
		map[string]any{"platform": "fcm"},
		map[string]any{"token": fcm, "platform": "fcm", "extra": 1},
		`[]`,
	} {
		expectProblem(t, call(t, s, http.MethodPost, path, admin, nil, body), 400, "BAD_USER_INPUT")
	}
	expectProblem(t, call(t, s, http.MethodPost, path, admin, nil, map[string]any{"token": strings.Repeat("x", rest.MaxDeviceBytes), "platform": "fcm"}), 413, "PAYLOAD_TOO_LARGE")
	devices, err := s.Store.Devices(t.Context(), inbox.Viewer{TenantID: tenant, UserID: "alice"})
	if err != nil || len(devices) != 2 {
		t.Fatalf("alice's devices: %+v %v", devices, err)
	}
	// Another tenant's alice has none.
	if other, err := s.Store.Devices(t.Context(), inbox.Viewer{TenantID: "globex", UserID: "alice"}); err != nil || len(other) != 0 {
		t.Fatalf("globex's alice: %+v %v", other, err)
	}

	// Unregister: by token (escaped in the path), then by id; a second time 404.
	expectProblem(t, call(t, s, http.MethodDelete, path+"/"+url.PathEscape(fcm), s.Token(tenant, "bob"), nil, nil), 403, "FORBIDDEN")
	if a := call(t, s, http.MethodDelete, path+"/"+url.PathEscape(fcm), alice, nil, nil); a.Status != http.StatusNoContent || len(a.Body) != 0 {
		t.Fatalf("delete by token: %d %s", a.Status, a.Body)
	}
	expectProblem(t, call(t, s, http.MethodDelete, path+"/"+url.PathEscape(fcm), alice, nil, nil), 404, "NOT_FOUND")
	if a := call(t, s, http.MethodDelete, path+"/"+d.Id, admin, nil, nil); a.Status != http.StatusNoContent {
		t.Fatalf("delete by id: %d %s", a.Status, a.Body)
	}
	expectProblem(t, call(t, s, http.MethodDelete, path+"/"+d.Id, admin, nil, nil), 404, "NOT_FOUND")
	expectProblem(t, call(t, s, http.MethodDelete, path+"/has%20space", admin, nil, nil), 400, "BAD_USER_INPUT")
	if devices, err := s.Store.Devices(t.Context(), inbox.Viewer{TenantID: tenant, UserID: "alice"}); err != nil || len(devices) != 0 {
		t.Fatalf("alice's devices after unregistering: %+v %v (fcm id %s)", devices, err, f.Id)
	}
}
