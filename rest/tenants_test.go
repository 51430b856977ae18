package rest_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/rest/gen"
)

// Every /v1 route with tenant A's tokens reads and writes tenant A only: tenant B's
// notification ids (raw, as GraphQL global ids, escaped), segment, broadcast (by its id
// and by its Idempotency-Key), send key, template, user preferences and devices are
// unknown to A, whatever A does with them, and B's data stays as it was. Ids built to
// reach B's keys (B's tenant and '#' in a path, huge, unicode, dot segments) are refused
// or name A's own items.
func TestEveryRouteKeepsToTheTokensTenant(t *testing.T) {
	t.Parallel()
	s := newWired(t)
	const a, b = "tenant-a", "tenant-b"
	adminA, sendA := s.Token(a, "svc", rest.ScopeAdmin), s.Token(a, "svc", rest.ScopeSend)
	adminB, sendB := s.Token(b, "svc", rest.ScopeAdmin), s.Token(b, "svc", rest.ScopeSend)
	bobA := s.Token(a, "bob")

	// Tenant B's things.
	decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/vip/members", adminB, nil, map[string]any{"add": []string{"bob", "cy"}}), 200)
	decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/welcome", adminB, nil, map[string]any{"locale": "en", "title": "Hi {{ name }}", "body": "B's"}), 200)
	sent := decode[gen.Accepted](t, call(t, s, http.MethodPost, "/v1/notifications", sendB, map[string]string{"Idempotency-Key": "k1"},
		map[string]any{"recipientUserId": "bob", "type": "otp", "title": "B's secret"}), 202)
	bID := *sent.NotificationId
	bc := decode[gen.BroadcastAccepted](t, call(t, s, http.MethodPost, "/v1/broadcasts", sendB, map[string]string{"Idempotency-Key": "bk1"},
		map[string]any{"segment": "vip", "type": "news", "title": "B's news", "sendAt": time.Now().Add(time.Hour).Format(time.RFC3339)}), 202)
	dev := decode[gen.Device](t, call(t, s, http.MethodPost, "/v1/users/bob/devices", adminB, nil, map[string]any{"token": "fcm-b-token", "platform": "fcm"}), 201)
	call(t, s, http.MethodPut, "/v1/users/bob/preferences", adminB, nil, map[string]any{"locale": "de-DE"})
	waitFeed(t, s, sendB, "bob", 1)

	notFound := func(method, path, token string, body any) {
		t.Helper()
		expectProblem(t, call(t, s, method, path, token, nil, body), 404, "NOT_FOUND")
	}
	gid := base64.RawURLEncoding.EncodeToString([]byte(inbox.TypeNotification + ":" + bID))
	// Status of B's notification: by id, as a global id, escaped.
	for _, id := range []string{bID, gid, url.PathEscape(bID), strings.ToLower(bID)} {
		notFound(http.MethodGet, "/v1/notifications/"+id+"/status", sendA, nil)
	}
	// B's broadcast: read, cancel.
	notFound(http.MethodGet, "/v1/broadcasts/"+bc.BroadcastId, sendA, nil)
	notFound(http.MethodDelete, "/v1/broadcasts/"+bc.BroadcastId, sendA, nil)
	// B's segment and template: read; a broadcast, a segment send and a templated send
	// naming them.
	notFound(http.MethodGet, "/v1/segments/vip", adminA, nil)
	notFound(http.MethodGet, "/v1/templates/welcome", adminA, nil)
	expectProblem(t, call(t, s, http.MethodPost, "/v1/broadcasts", sendA, map[string]string{"Idempotency-Key": "a-bc"},
		map[string]any{"segment": "vip", "type": "news", "title": "x"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPost, "/v1/notifications", sendA, map[string]string{"Idempotency-Key": "a-seg"},
		map[string]any{"segment": "vip", "type": "news", "title": "x"}), 400, "BAD_USER_INPUT")
	expectProblem(t, call(t, s, http.MethodPost, "/v1/notifications", sendA, map[string]string{"Idempotency-Key": "a-tpl"},
		map[string]any{"recipientUserId": "bob", "type": "news", "template": "welcome", "data": map[string]any{"name": "x"}}), 400, "BAD_USER_INPUT")
	// B's keys are not A's: another body under them is a new request, never CONFLICT or
	// B's answer (which would tell A that B used the key, and what it sent).
	accA := decode[gen.Accepted](t, call(t, s, http.MethodPost, "/v1/notifications", sendA, map[string]string{"Idempotency-Key": "k1"},
		map[string]any{"recipientUserId": "bob", "type": "otp", "title": "A's"}), 202)
	if *accA.NotificationId == bID || accA.RequestId == sent.RequestId {
		t.Fatalf("A's send under B's key answered B's: %s", mustJSON(t, accA))
	}
	bcA := call(t, s, http.MethodPost, "/v1/broadcasts", sendA, map[string]string{"Idempotency-Key": "bk1"},
		map[string]any{"recipients": []string{"bob"}, "type": "news", "title": "A's news"})
	if bcA.Status != 202 || bcA.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("A's broadcast under B's key: %d %s %v", bcA.Status, bcA.Body, bcA.Header)
	}
	// A's writes under B's names stay A's: the segment, the template, B's device of bob.
	if got := decode[gen.SegmentMembersChanged](t, call(t, s, http.MethodPut, "/v1/segments/vip/members", adminA, nil,
		map[string]any{"add": []string{"eve"}, "remove": []string{"bob", "cy"}}), 200); got.Count != 1 || got.Removed != 0 {
		t.Fatalf("A's change of a segment named like B's: %s", mustJSON(t, got))
	}
	if v := decode[gen.TemplateVersion](t, call(t, s, http.MethodPut, "/v1/templates/welcome", adminA, nil, map[string]any{"locale": "en", "title": "A"}), 200); v.Version != 1 {
		t.Fatalf("A's first version of its template: %s", mustJSON(t, v))
	}
	notFound(http.MethodDelete, "/v1/users/bob/devices/"+dev.Id, adminA, nil)
	notFound(http.MethodDelete, "/v1/users/bob/devices/fcm-b-token", adminA, nil)
	notFound(http.MethodDelete, "/v1/users/bob/devices/"+dev.Id, bobA, nil)
	if p := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/bob/preferences", bobA, nil, nil), 200); p.Locale != nil {
		t.Fatalf("A's bob reads B's bob's preferences: %s", mustJSON(t, p))
	}
	// A's feed of bob: A's own only.
	for _, n := range feed(t, s, sendA, "bob") {
		if n.Id == bID || deref(n.Title) == "B's secret" {
			t.Fatalf("A's feed of bob holds B's notification: %s", mustJSON(t, n))
		}
	}
	// Ids built to reach B's keys: B's tenant and '#' (escaped), dot segments, control
	// characters, huge, unicode look-alikes; each refused or A's own (unknown).
	for _, id := range []string{
		url.PathEscape("x#T#" + b + "#NOTIF#" + bID), url.PathEscape(b + "#" + bID), url.PathEscape("../" + b + "/" + bID),
		"%00" + bID, strings.Repeat("9", 300), url.PathEscape(strings.Repeat("é", 200)), url.PathEscape("ｖｉｐ"),
	} {
		for _, r := range []struct{ method, path, token string }{
			{http.MethodGet, "/v1/notifications/" + id + "/status", sendA},
			{http.MethodGet, "/v1/broadcasts/" + id, sendA},
			{http.MethodDelete, "/v1/broadcasts/" + id, sendA},
			{http.MethodGet, "/v1/segments/" + id, adminA},
			{http.MethodGet, "/v1/templates/" + id, adminA},
			{http.MethodDelete, "/v1/users/" + id + "/devices/" + dev.Id, adminA},
		} {
			if got := call(t, s, r.method, r.path, r.token, nil, nil); got.Status != 400 && got.Status != 404 {
				t.Errorf("%s %s: %d %s", r.method, r.path, got.Status, got.Body)
			}
		}
	}

	// B's things are as they were.
	if seg := decode[gen.Segment](t, call(t, s, http.MethodGet, "/v1/segments/vip", adminB, nil, nil), 200); seg.Count != 2 {
		t.Fatalf("B's segment: %s", mustJSON(t, seg))
	}
	if tpl := decode[gen.Template](t, call(t, s, http.MethodGet, "/v1/templates/welcome", adminB, nil, nil), 200); tpl.Version != 1 || deref(tpl.Body) != "B's" {
		t.Fatalf("B's template: %s", mustJSON(t, tpl))
	}
	if got := decode[gen.Broadcast](t, call(t, s, http.MethodGet, "/v1/broadcasts/"+bc.BroadcastId, sendB, nil, nil), 200); got.Status == "cancelled" {
		t.Fatalf("B's broadcast: %s", mustJSON(t, got))
	}
	if st := decode[gen.NotificationStatus](t, call(t, s, http.MethodGet, "/v1/notifications/"+bID+"/status", sendB, nil, nil), 200); st.UserId != "bob" {
		t.Fatalf("B's status: %s", mustJSON(t, st))
	}
	if p := decode[gen.Preferences](t, call(t, s, http.MethodGet, "/v1/users/bob/preferences", adminB, nil, nil), 200); deref(p.Locale) != "de-DE" {
		t.Fatalf("B's bob's preferences: %s", mustJSON(t, p))
	}
	if a := call(t, s, http.MethodDelete, "/v1/users/bob/devices/"+dev.Id, adminB, nil, nil); a.Status != http.StatusNoContent {
		t.Fatalf("B's device: %d %s", a.Status, a.Body)
	}
}
