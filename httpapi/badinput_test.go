package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

// response is a /graphql answer: status, headers, and the body's errors.
type response struct {
	status int
	header http.Header
	body   []byte
	data   map[string]any
	errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
}

// code returns the first error's extensions.code, "" when there is none.
func (r response) code() string {
	if len(r.errors) == 0 {
		return ""
	}
	c, _ := r.errors[0].Extensions["code"].(string)
	return c
}

// request sends a request to target with the gateway's token (and contentType, when not
// empty) and reads the answer.
func (g *gateway) request(t *testing.T, method, target, contentType, body string) response {
	t.Helper()
	req, _ := http.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header}
	r.body, _ = io.ReadAll(resp.Body)
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(r.body, &out) // not JSON (HEAD has no body): no errors, no data
	r.data, r.errors = out.Data, out.Errors
	return r
}

// post sends a raw JSON body to /graphql and returns the status, the first error's code
// and the data.
func (g *gateway) post(t *testing.T, body string) (int, string, map[string]any) {
	t.Helper()
	r := g.request(t, http.MethodPost, g.srv.URL+"/graphql", "application/json", body)
	return r.status, r.code(), r.data
}

func gql(query string) string {
	b, _ := json.Marshal(map[string]string{"query": query})
	return string(b)
}

func gid(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestRequestLevelErrorsAreBadUserInput(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for name, body := range map[string]string{
		"truncated json":     `{"query": `,
		"variables a string": `{"query":"{ viewer { unreadCount } }","variables":"x"}`,
		"over 1 MiB":         `{"query":"{ viewer { unreadCount } }","variables":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`,
	} {
		status, code, _ := g.post(t, body)
		if status < 400 || status >= 500 || code != inbox.CodeBadUserInput {
			t.Errorf("%s: HTTP %d code %q, want 4xx BAD_USER_INPUT", name, status, code)
		}
	}
}

func TestOutOfRangeFirstIsBadUserInputNotComplexity(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for _, q := range []string{`{ viewer { inbox(first: 1000000) { nodes { id } } } }`, `{ viewer { inbox(last: -5) { nodes { id } } } }`} {
		if _, code, _ := g.post(t, gql(q)); code != inbox.CodeBadUserInput {
			t.Errorf("%s: code %q", q, code)
		}
	}
}

func TestIDsThatCouldBreakAKeyNeverReachAKey(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for _, raw := range []string{"Notification:a#b", "Notification:01M8\x01", "Notification:" + strings.Repeat("0", 300), "Actor:a#b", "Actor:c\x01", "Target:issue\x00a#b", "Target:i#\x001"} {
		id := gid(raw)
		if _, code, _ := g.post(t, gql(`{ node(id: "`+id+`") { id } }`)); code != inbox.CodeBadUserInput {
			t.Errorf("node(%q): code %q", raw, code)
		}
		// A state mutation never lets such an id reach a key either: it names nothing of
		// the viewer's, so it is listed in notFound, as given (v2: no whole-call error).
		data, errs := g.gql(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { notFound } }`, map[string]any{"ids": []string{id}})
		if len(errs) > 0 || !slices.Equal(strs(path(data, "markRead", "notFound")), []string{id}) {
			t.Errorf("markRead(%q): %v %v, want it in notFound", raw, data, errs)
		}
	}
	// A well-formed id that names nothing: notFound as well.
	missing := gid("Notification:01HZX8Y3T9M2V6Q4R8S0W1A2B3")
	data, errs := g.gql(t, `mutation($ids: [ID!]!) { markRead(ids: $ids) { notFound } }`, map[string]any{"ids": []string{missing}})
	if len(errs) > 0 || !slices.Equal(strs(path(data, "markRead", "notFound")), []string{missing}) {
		t.Errorf("missing notification: %v %v", data, errs)
	}
}

func TestOmittedOptionalFieldsAreNull(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	if _, err := g.send(context.Background(), "acme", inbox.SendInput{IdempotencyKey: "k", Recipients: []string{"alice"}, Type: "t",
		Actor: &inbox.Actor{ActorID: "bob"}, Target: &inbox.Target{Kind: "issue", TargetID: "1"}}); err != nil {
		t.Fatal(err)
	}
	_, code, data := g.post(t, gql(`{ viewer { inbox(first: 1) { nodes { title body category actor { name avatarUrl url } target { title url } } } } }`))
	if code != "" {
		t.Fatal(code)
	}
	b, _ := json.Marshal(data)
	want := `{"viewer":{"inbox":{"nodes":[{"actor":{"avatarUrl":null,"name":null,"url":null},"body":null,"category":null,"target":{"title":null,"url":null},"title":null}]}}}`
	var norm any
	_ = json.Unmarshal(b, &norm)
	nb, _ := json.Marshal(norm)
	if !bytes.Equal(nb, []byte(want)) {
		t.Fatalf("got %s\nwant %s", nb, want)
	}
}

// TestTransportLevelErrorsHaveCodes covers the requests gqlgen's transports answer
// themselves: each gets the GraphQL-over-HTTP status and an extensions.code, and a
// mutation sent with GET does not run.
func TestTransportLevelErrorsHaveCodes(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	u := g.srv.URL + "/graphql"
	get := func(query, variables string) string {
		v := url.Values{"query": {query}}
		if variables != "" {
			v.Set("variables", variables)
		}
		return u + "?" + v.Encode()
	}
	for _, tc := range []struct {
		name, method, url, contentType, body string
		status                               int
		code, allow                          string
	}{
		{"PUT", http.MethodPut, u, "application/json", `{}`, 405, inbox.CodeBadRequest, "GET, POST, OPTIONS"},
		{"DELETE", http.MethodDelete, u, "", ``, 405, inbox.CodeBadRequest, "GET, POST, OPTIONS"},
		{"HEAD", http.MethodHead, get(`{ viewer { unreadCount } }`, ""), "", ``, 405, "", "GET, POST, OPTIONS"},
		{"POST text/plain", http.MethodPost, u, "text/plain", gql(`{ viewer { unreadCount } }`), 415, inbox.CodeBadRequest, ""},
		{"GET mutation", http.MethodGet, get(`mutation { markAllRead { unreadCount } }`, ""), "", ``, 405, inbox.CodeBadRequest, "POST"},
		{"GET variables not JSON", http.MethodGet, get(`{ viewer { unreadCount } }`, "notjson"), "", ``, 400, inbox.CodeBadUserInput, ""},
		{"GET variables not an object", http.MethodGet, get(`{ viewer { unreadCount } }`, "[1]"), "", ``, 400, inbox.CodeBadUserInput, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := g.request(t, tc.method, tc.url, tc.contentType, tc.body)
			wantErrors := 1
			if tc.method == http.MethodHead {
				wantErrors = 0 // no body
			}
			if r.status != tc.status || len(r.errors) != wantErrors || r.code() != tc.code {
				t.Fatalf("HTTP %d %s, want %d with code %q", r.status, r.body, tc.status, tc.code)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow: %q, want %q", got, tc.allow)
			}
		})
	}
	// A body of the wrong shape is answered without echoing it or Go's type names.
	r := g.request(t, http.MethodPost, u, "application/json",
		`{"query":"{ viewer { unreadCount } }","variables":[1],"pad":"`+strings.Repeat("x", 4096)+`"}`)
	if r.status != http.StatusBadRequest || r.code() != inbox.CodeBadUserInput ||
		strings.Contains(string(r.body), "xxxx") || strings.Contains(string(r.body), "RawParams") || len(r.body) > 1024 {
		t.Fatalf("HTTP %d %s, want a short BAD_USER_INPUT error", r.status, r.body)
	}
	// A body over 1 MiB without a Content-Length (chunked) gets the same 413 as one with.
	chunked, _ := http.NewRequest(http.MethodPost, u, io.MultiReader(strings.NewReader(
		`{"query":"{ viewer { unreadCount } }","variables":{"x":"`+strings.Repeat("a", 1<<20)+`"}}`)))
	chunked.Header.Set("Content-Type", "application/json")
	chunked.Header.Set("Authorization", "Bearer "+g.token)
	if resp, err := http.DefaultClient.Do(chunked); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over 1 MiB: HTTP %d, want 413", resp.StatusCode)
	}
	// A POST that carries "Upgrade: websocket" is not a handshake: it is served.
	upgradeReq, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(gql(`{ viewer { unreadCount } }`)))
	upgradeReq.Header.Set("Content-Type", "application/json")
	upgradeReq.Header.Set("Authorization", "Bearer "+g.token)
	upgradeReq.Header.Set("Upgrade", "websocket")
	if resp, err := http.DefaultClient.Do(upgradeReq); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST with Upgrade: websocket: HTTP %d, want 200", resp.StatusCode)
	}
	// SSE: a body that is not a GraphQL request gets BAD_USER_INPUT, and the body does not
	// reach the log (gqlgen's SSE transport would print it through the standard logger).
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	sse := func(body string) response {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+g.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, body: b}
	}
	if r := sse(`SECRET{`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"BAD_USER_INPUT"`) || strings.Contains(logged.String(), "SECRET") {
		t.Fatalf("SSE bad body: HTTP %d %s; log %q", r.status, r.body, logged.String())
	}
	// The refused GET mutation did not run: markAllRead would have written the watermark.
	if n := g.rec.Count("UpdateItem"); n != 0 {
		t.Fatalf("%d UpdateItem calls: the GET mutation ran", n)
	}
}

// TestMalformedTimeIsBadUserInput: a Time argument that is not an RFC 3339 timestamp, as a
// literal or a variable, is the client's mistake: BAD_USER_INPUT naming the value, never
// gqlgen's uncoded error (which reached clients as INTERNAL_SERVER_ERROR). A time without
// a zone ("2026-12-01 10:30:00", which gqlgen read as UTC: a local time off by hours) is
// refused too. A well-formed one still reaches the resolver.
func TestMalformedTimeIsBadUserInput(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const mutation = `mutation($until: Time!) { snooze(ids: ["x"], until: $until) { notFound } }`
	body := func(until any) string {
		b, _ := json.Marshal(map[string]any{"query": mutation, "variables": map[string]any{"until": until}})
		return string(b)
	}
	for name, tc := range map[string]struct{ body, quoted string }{
		"literal word":      {gql(`mutation { snooze(ids: ["x"], until: "tomorrow") { notFound } }`), `"tomorrow"`},
		"literal no zone":   {gql(`mutation { snooze(ids: ["x"], until: "2026-12-01T10:30:00") { notFound } }`), `"2026-12-01T10:30:00"`},
		"variable no zone":  {body(time.Now().Add(time.Hour).Format(time.DateTime)), `"` + time.Now().Add(time.Hour).Format("2006-01-02 15")},
		"literal number":    {gql(`mutation { snooze(ids: ["x"], until: 5) { notFound } }`), "a number"},
		"variable word":     {body("tomorrow"), `"tomorrow"`},
		"variable number":   {body(1798710364), "a number"},
		"variable object":   {body(map[string]any{"at": "now"}), "an object"},
		"variable too long": {body(strings.Repeat("9", 500)), strings.Repeat("9", 64) + `"…`},
	} {
		t.Run(name, func(t *testing.T) {
			r := g.request(t, http.MethodPost, g.srv.URL+"/graphql", "application/json", tc.body)
			if r.code() != inbox.CodeBadUserInput || !strings.Contains(r.errors[0].Message, tc.quoted) ||
				!strings.Contains(r.errors[0].Message, "RFC 3339") || len(r.errors[0].Message) > 200 {
				t.Fatalf("HTTP %d %s, want BAD_USER_INPUT naming %s", r.status, r.body, tc.quoted)
			}
		})
	}
	future := time.Now().Add(time.Hour).UTC()
	for _, until := range []string{future.Format(time.RFC3339), future.Format(time.RFC3339Nano), future.In(time.FixedZone("", 3600)).Format(time.RFC3339)} {
		data, errs := g.gql(t, mutation, map[string]any{"until": until})
		if len(errs) > 0 || !slices.Equal(strs(path(data, "snooze", "notFound")), []string{"x"}) {
			t.Errorf("snooze until %s: %v %v, want x in notFound", until, data, errs)
		}
	}
}
