package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
)

// The hostile-input suite of issue 8 for the limits of httpapi/limits*.go: each test
// asserts the bound (bytes, count, time) the attack broke.

// newLimitedGateway is newGateway with options set by opts, served by httpapi.NewServer
// with timeouts (the way server.go serves it).
func newLimitedGateway(t *testing.T, opts func(*httpapi.Options), timeouts httpapi.Timeouts) *gateway {
	t.Helper()
	return newGatewayWith(t, gatewaySetup{options: opts, timeouts: &timeouts})
}

// anonymous posts body to /graphql without a token and returns the status and body.
func anonymous(t *testing.T, g *gateway, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(g.srv.URL+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// decodeErrors returns a response body's errors.
func decodeErrors(t *testing.T, body []byte) []struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
} {
	t.Helper()
	var out struct {
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("body %.200q: %v", body, err)
	}
	return out.Errors
}

// allocated returns the bytes the process allocated so far (runtime.MemStats.TotalAlloc):
// the client, the server and everything else in the test binary.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// heapAfterGC returns the live heap after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Issue 8, item 1: one 1 MiB document of 100,000 unknown directives, without a token, got
// a 100 MB error response (680,000 errors) and grew the gateway by 870 MB. It must get one
// small coded error, and the request must not allocate more than a few times its size.
func TestDirectiveFloodGetsASmallCodedError(t *testing.T) {
	g := newLimitedGateway(t, nil, httpapi.Timeouts{})
	doc := "{ __typename" + strings.Repeat(" @abcdefgh", 100_000) + " }"
	body, _ := json.Marshal(map[string]string{"query": doc})
	if len(body) > httpapi.MaxBodyBytes || len(body) < 1_000_000 {
		t.Fatalf("body of %d bytes, want about 1 MB and at most MaxBodyBytes", len(body))
	}
	before := allocated()
	status, resp := anonymous(t, g, body)
	alloc := allocated() - before
	errs := decodeErrors(t, resp)
	t.Logf("HTTP %d, %d bytes, %d errors, %d MiB allocated: %s", status, len(resp), len(errs), alloc>>20, resp)
	if len(resp) > 2048 {
		t.Errorf("response of %d bytes, want at most 2 KiB", len(resp))
	}
	if len(errs) != 1 || errs[0].Extensions["code"] != "GRAPHQL_PARSE_FAILED" {
		t.Errorf("errors = %+v, want one GRAPHQL_PARSE_FAILED", errs)
	}
	// The request body alone is read, copied and decoded a few times (a few MiB); the
	// unbounded parser and validator allocated hundreds.
	if alloc > 64<<20 {
		t.Errorf("the request allocated %d MiB, want at most 64", alloc>>20)
	}
}

// Issue 8, item 1: a document within the token limit that still makes thousands of
// validation errors gets MaxErrors of them, the last saying how many more there were.
func TestErrorsPerResponseAreBounded(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, httpapi.Timeouts{})
	// 2,000 unknown directives: 4,000 tokens, under ParserTokenLimit; each one an error.
	doc := "{ __typename" + strings.Repeat(" @x", 2000) + " }"
	body, _ := json.Marshal(map[string]string{"query": doc})
	_, resp := anonymous(t, g, body)
	errs := decodeErrors(t, resp)
	if len(errs) != httpapi.MaxErrors {
		t.Fatalf("%d errors (%d bytes), want %d", len(errs), len(resp), httpapi.MaxErrors)
	}
	last := errs[len(errs)-1]
	if !strings.HasPrefix(last.Message, "too many errors: ") || last.Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
		t.Errorf("last error = %+v", last)
	}
	if len(resp) > 16<<10 {
		t.Errorf("response of %d bytes, want at most 16 KiB", len(resp))
	}
}

// Issue 8, item 2: distinct valid documents padded in a comment were all kept by the query
// cache (1,000 entries whatever their size) and the APQ cache (100 entries): 1,000 1 MB
// documents pinned 1.68 GB. Both caches are bounded by bytes: 100 distinct 200 KB
// documents sent as persisted queries (both caches see each) keep at most the budgets.
func TestQueryCachesAreBoundedByBytes(t *testing.T) {
	g := newLimitedGateway(t, func(o *httpapi.Options) { o.QueryCacheBytes, o.APQCacheBytes = 4<<20, 2<<20 }, httpapi.Timeouts{})
	const docs, size = 100, 200_000
	base := heapAfterGC()
	for i := range docs {
		q := fmt.Sprintf("query Q%d { __typename }\n#", i) + strings.Repeat("p", size)
		sum := sha256.Sum256([]byte(q))
		body, _ := json.Marshal(map[string]any{"query": q, "extensions": map[string]any{
			"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}})
		status, resp := anonymous(t, g, body)
		if status != http.StatusOK || !bytes.Contains(resp, []byte(`"__typename":"Query"`)) {
			t.Fatalf("document %d: HTTP %d %.300s", i, status, resp)
		}
	}
	grown := int64(heapAfterGC()) - int64(base)
	t.Logf("%d documents of %d KB: live heap grew by %.1f MiB", docs, size/1000, float64(grown)/(1<<20))
	// Before: every document stayed (20 MB; both caches share each text). Now: at most the
	// query cache's 4 MiB and the APQ cache's 2 MiB.
	if grown > 8<<20 {
		t.Errorf("live heap grew by %d MiB after %d documents, want at most 8", grown>>20, docs)
	}
	// The cache still serves: a persisted query registered last is found by its hash alone.
	q := "query Last { __typename }"
	sum := sha256.Sum256([]byte(q))
	ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}
	body, _ := json.Marshal(map[string]any{"query": q, "extensions": ext})
	anonymous(t, g, body)
	body, _ = json.Marshal(map[string]any{"extensions": ext})
	if _, resp := anonymous(t, g, body); !bytes.Contains(resp, []byte(`"__typename":"Query"`)) {
		t.Errorf("persisted query by hash: %s", resp)
	}
}

// Issue 8, item 3: introspection and "Did you mean" suggestions answered in production
// without a token. Production refuses __schema (also through a fragment) with a coded
// error and suggests nothing; dev mode (Options.Introspection) allows both.
func TestIntrospectionAndSuggestionsOnlyInDevMode(t *testing.T) {
	t.Parallel()
	const schemaQuery = `{ __schema { queryType { name } } }`
	const viaFragment = `query { ...F } fragment F on Query { __type(name: "Viewer") { name } }`
	const typo = `{ viewer { unreadCont } }`
	prod := newLimitedGateway(t, nil, httpapi.Timeouts{})
	for _, q := range []string{schemaQuery, viaFragment} {
		status, resp := anonymous(t, prod, []byte(gql(q)))
		errs := decodeErrors(t, resp)
		if status != http.StatusOK || len(errs) != 1 || errs[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" ||
			bytes.Contains(resp, []byte(`"queryType"`)) || bytes.Contains(resp, []byte(`"Viewer"`)) {
			t.Errorf("production %s: HTTP %d %s", q, status, resp)
		}
	}
	if _, resp := anonymous(t, prod, []byte(gql(typo))); !bytes.Contains(resp, []byte("unreadCont")) || bytes.Contains(resp, []byte("Did you mean")) {
		t.Errorf("production typo: %s", resp)
	}
	// Misspelt arguments, input fields and types suggested the schema's names too.
	for _, q := range []string{
		`{ viewer { inbox(frist: 1) { nodes { id } } } }`,
		`{ viewer { inbox(filter: { unreadOnli: true }) { nodes { id } } } }`,
		`query($f: InboxFiltr) { viewer { inbox(filter: $f) { nodes { id } } } }`,
	} {
		if _, resp := anonymous(t, prod, []byte(gql(q))); bytes.Contains(resp, []byte("Did you mean")) ||
			!bytes.Contains(resp, []byte("GRAPHQL_VALIDATION_FAILED")) {
			t.Errorf("production %s: %s", q, resp)
		}
	}

	dev := newLimitedGateway(t, func(o *httpapi.Options) { o.Introspection = true }, httpapi.Timeouts{})
	if _, resp := anonymous(t, dev, []byte(gql(schemaQuery))); !bytes.Contains(resp, []byte(`{"data":{"__schema":{"queryType":{"name":"Query"}}}}`)) {
		t.Errorf("dev __schema: %s", resp)
	}
	if _, resp := anonymous(t, dev, []byte(gql(viaFragment))); !bytes.Contains(resp, []byte(`"name":"Viewer"`)) {
		t.Errorf("dev __type: %s", resp)
	}
	if _, resp := anonymous(t, dev, []byte(gql(typo))); !bytes.Contains(resp, []byte("Did you mean")) {
		t.Errorf("dev typo: %s", resp)
	}
}

// Issue 8, item 9: variables were coerced loosely. "10" for an Int was accepted,
// 99999999999 (over GraphQL's 32-bit Int) reached the resolver, 1.5 was reported as
// "value 0", and the statuses differed. Each is BAD_USER_INPUT naming the variable and
// the value, with one status per response media type (200 for application/json, 400 for
// application/graphql-response+json, as the GraphQL-over-HTTP spec asks), on POST and GET.
func TestVariablesAreCoercedStrictly(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, httpapi.Timeouts{})
	const q = `query ($n: Int) { viewer { inbox(first: $n) { nodes { id } } } }`
	for _, c := range []struct{ raw, shown string }{
		{`"10"`, `"10" (a string)`},
		{`99999999999`, `99999999999 (a number)`},
		{`1.5`, `1.5 (a number)`},
		{`[3]`, `[3] (a list)`},
		{`2147483648`, `2147483648 (a number)`},
	} {
		body := `{"query":` + strconvQuote(q) + `,"variables":{"n":` + c.raw + `}}`
		for accept, wantStatus := range map[string]int{"application/json": 200, "application/graphql-response+json": 400} {
			req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
			req.Header.Set("Authorization", "Bearer "+g.token)
			checkCoercion(t, req, "POST "+accept+" "+c.raw, wantStatus, c.shown)
		}
		vars, _ := json.Marshal(map[string]json.RawMessage{"n": json.RawMessage(c.raw)})
		req, _ := http.NewRequest(http.MethodGet, g.srv.URL+"/graphql?query="+url.QueryEscape(q)+"&variables="+url.QueryEscape(string(vars)), nil)
		req.Header.Set("Authorization", "Bearer "+g.token)
		checkCoercion(t, req, "GET "+c.raw, 200, c.shown)
	}
	// What coerces still runs: an Int in range, and the same in a list and an input object.
	if _, data := g.ops(t, `query ($n: Int, $f: InboxFilter) { viewer { inbox(first: $n, filter: $f) { nodes { id } } } }`,
		map[string]any{"n": 5, "f": map[string]any{"unreadOnly": true, "types": "comment"}}); data["viewer"] == nil {
		t.Errorf("valid variables: data %v", data)
	}
	// Inside an input object, the path names the field.
	status, code, _ := g.post(t, `{"query":"query ($f: InboxFilter) { viewer { inbox(filter: $f) { nodes { id } } } }","variables":{"f":{"unreadOnly":"yes"}}}`)
	if status != 200 || code != inbox.CodeBadUserInput {
		t.Errorf("unreadOnly \"yes\": HTTP %d code %q", status, code)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// checkCoercion sends req and checks one BAD_USER_INPUT error naming $n and the value.
func checkCoercion(t *testing.T, req *http.Request, name string, wantStatus int, shown string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	errs := decodeErrors(t, b)
	if resp.StatusCode != wantStatus || len(errs) != 1 || errs[0].Extensions["code"] != inbox.CodeBadUserInput ||
		!strings.Contains(errs[0].Message, "$n") || !strings.Contains(errs[0].Message, shown) || !strings.Contains(errs[0].Message, "2147483647") {
		t.Errorf("%s: HTTP %d %s", name, resp.StatusCode, b)
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

// Issue 8, item 9: a persisted query whose hash is not its query's was an INTERNAL error
// logged at ERROR. It is the client's mistake: BAD_USER_INPUT, logged below ERROR.
func TestWrongPersistedQueryHashIsBadUserInput(t *testing.T) {
	t.Parallel()
	logs := newSyncBuffer()
	g := newLimitedGateway(t, func(o *httpapi.Options) {
		o.Log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, httpapi.Timeouts{})
	body := `{"query":"{ __typename }","extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + strings.Repeat("0", 64) + `"}}}`
	status, code, _ := g.post(t, body)
	if status != http.StatusOK || code != inbox.CodeBadUserInput {
		t.Errorf("wrong hash: HTTP %d code %q", status, code)
	}
	// An unknown hash without the query asks the client for it (the APQ protocol).
	if _, code, _ := g.post(t, `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"`+strings.Repeat("1", 64)+`"}}}`); code != "PERSISTED_QUERY_NOT_FOUND" {
		t.Errorf("unknown hash: code %q", code)
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("logged at ERROR:\n%s", logs.String())
	}
}

// Issue 8, item 1: the response size is bounded (Options.MaxResponseBytes, 1 MiB here
// for a small test; 8 MiB by default). Four aliases of a page of 20 notifications with
// 15 KiB payloads make a 1.2 MB answer; it is replaced by one coded error (the client asks
// for less), not sent.
func TestResponseSizeIsBounded(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, func(o *httpapi.Options) { o.MaxResponseBytes = 1 << 20 }, httpapi.Timeouts{})
	payload, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 15<<10)})
	for i := range 20 {
		_, err := g.send(context.Background(), "acme", inbox.SendInput{
			IdempotencyKey: fmt.Sprintf("big-%d", i), Recipients: []string{"alice"}, Type: "t", Payload: inbox.JSON(payload)})
		if err != nil {
			t.Fatal(err)
		}
	}
	page := func(alias string) string { return alias + `: viewer { inbox(first: 20) { nodes { payload } } }` }
	one := g.request(t, http.MethodPost, g.srv.URL+"/graphql", "application/json", gql("{ "+page("a")+" }"))
	if len(one.errors) != 0 || len(one.body) < 300_000 {
		t.Fatalf("one page: %d bytes, errors %v", len(one.body), one.errors)
	}
	four := g.request(t, http.MethodPost, g.srv.URL+"/graphql", "application/json",
		gql("{ "+page("a")+" "+page("b")+" "+page("c")+" "+page("d")+" }"))
	t.Logf("one page: %d bytes; four: HTTP %d, %d bytes", len(one.body), four.status, len(four.body))
	if len(four.body) > 4096 || four.code() != inbox.CodeBadUserInput || four.data != nil {
		t.Errorf("four pages: HTTP %d, %d bytes: %.300s", four.status, len(four.body), four.body)
	}
}

// Issue 8, item 1: an error message quotes the document's names, which may be long (up to
// the 1 MiB body): each message is cut at 512 bytes.
func TestLongErrorMessagesAreCut(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, httpapi.Timeouts{})
	name := strings.Repeat("a", 600_000)
	status, resp := anonymous(t, g, []byte(gql("{ "+name+" }")))
	errs := decodeErrors(t, resp)
	if len(resp) > 4096 || len(errs) != 1 || !strings.HasSuffix(errs[0].Message, "aaa…") {
		t.Errorf("HTTP %d, %d bytes: %.300s", status, len(resp), resp)
	}
}

// A fragment bomb: 1.2 KB, 26 fragments each spreading the next one twice, 2^26 field
// selections once expanded. Without a token, it kept a core busy for seconds (2^30: 100 s,
// after the client had given up) while gqlgen's complexity walk expanded every spread,
// before the complexity limit refused it. It must be refused at once, with the
// complexity limit's code, and a document that shares fragments reasonably must still run.
func TestFragmentSpreadBombIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, httpapi.Timeouts{})
	const n = 26
	var b strings.Builder
	b.WriteString("query { ...F0 } ")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d } ", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { __typename }", n)
	body, _ := json.Marshal(map[string]string{"query": b.String()})
	start := time.Now()
	status, resp := anonymous(t, g, body)
	took := time.Since(start)
	errs := decodeErrors(t, resp)
	t.Logf("%d bytes: HTTP %d in %v: %s", len(body), status, took, resp)
	if took > time.Second {
		t.Errorf("answered in %v, want under 1 s", took)
	}
	if len(errs) != 1 || errs[0].Extensions["code"] != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Errorf("errors = %+v, want one COMPLEXITY_LIMIT_EXCEEDED", errs)
	}

	// Ten levels of shared fragments (1,024 selections) still run.
	b.Reset()
	b.WriteString("query { ...F0 } ")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d } ", i, i+1, i+1)
	}
	b.WriteString("fragment F10 on Query { __typename }")
	body, _ = json.Marshal(map[string]string{"query": b.String()})
	status, resp = anonymous(t, g, body)
	if status != http.StatusOK || string(resp) != `{"data":{"__typename":"Query"}}` {
		t.Errorf("shared fragments: HTTP %d %s, want the answer", status, resp)
	}
}

// A document repeating one response key: gqlparser compares every pair of fields that
// share a key, so 1,660 "a: __typename" (20 KB, within the token limit, no token) took
// 100 ms of CPU where 1,600 distinct aliases took 7 ms. It is refused before validation,
// also when the repeats come through inline fragments or fragment spreads; 200 repeats
// still run.
func TestRepeatedResponseKeysAreRefusedBeforeValidation(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, httpapi.Timeouts{})
	flat := "{ " + strings.Repeat("a: __typename ", 1660) + "}"
	inline := "{ " + strings.Repeat("... on Query { "+strings.Repeat("a: __typename ", 20)+"} ", 60) + "}"
	var frags strings.Builder
	frags.WriteString("{ ")
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&frags, "...F%d ", i)
	}
	frags.WriteString("}")
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&frags, " fragment F%d on Query { %s}", i, strings.Repeat("a: __typename ", 20))
	}
	for _, doc := range []string{flat, inline, frags.String()} {
		body, _ := json.Marshal(map[string]string{"query": doc})
		status, resp := anonymous(t, g, body)
		errs := decodeErrors(t, resp)
		if status != http.StatusOK || len(errs) != 1 || errs[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%.40s…: HTTP %d %.300s, want one GRAPHQL_VALIDATION_FAILED", doc, status, resp)
		}
	}
	body, _ := json.Marshal(map[string]string{"query": "{ " + strings.Repeat("a: __typename ", httpapi.MaxRepeatedResponseKey) + "}"})
	if status, resp := anonymous(t, g, body); status != http.StatusOK || string(resp) != `{"data":{"a":"Query"}}` {
		t.Errorf("%d repeats: HTTP %d %s, want the answer", httpapi.MaxRepeatedResponseKey, status, resp)
	}
}

// A subscription selecting two root fields under different aliases passed gqlparser's
// single-root-field rule (it compares field names, the spec groups by response key) and
// reached gqlgen's executor, which refused it uncoded: INTERNAL_SERVER_ERROR, logged at
// ERROR, for any client without a token. It is GRAPHQL_VALIDATION_FAILED; one root field
// (the same one twice is one response key) still runs.
func TestSubscriptionWithTwoRootFieldsIsAValidationError(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, nil, httpapi.Timeouts{})
	for _, doc := range []string{
		`subscription { a: unreadCount b: unreadCount }`,
		`subscription { a: unreadCount ... on Subscription { b: notificationAdded { id } } }`,
		`subscription S { ...F } fragment F on Subscription { unreadCount x: unreadCount }`,
	} {
		status, resp := anonymous(t, g, []byte(gql(doc)))
		errs := decodeErrors(t, resp)
		if status != http.StatusOK || len(errs) != 1 || errs[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s: HTTP %d %s, want one GRAPHQL_VALIDATION_FAILED", doc, status, resp)
		}
	}
	status, resp := anonymous(t, g, []byte(gql(`subscription { unreadCount unreadCount b: unreadCount @skip(if: true) }`)))
	if errs := decodeErrors(t, resp); status != http.StatusOK || len(errs) != 1 || errs[0].Extensions["code"] != "UNAUTHENTICATED" {
		t.Errorf("one root field: HTTP %d %s, want UNAUTHENTICATED (it runs)", status, resp)
	}
}

// A subscription sent as a plain POST (application/json, no SSE) answers its first event
// and ends. notificationAdded has no first event until a notification arrives: the
// request stayed open with no deadline (150 s and more, past the write timeout, unseen by
// the subscriptions gauge, which counts at the first response). It ends at the query
// deadline with UNAVAILABLE, as a query does.
func TestPlainPOSTSubscriptionHasTheQueryDeadline(t *testing.T) {
	t.Parallel()
	g := newLimitedGateway(t, func(o *httpapi.Options) { o.QueryTimeout = 300 * time.Millisecond }, httpapi.Timeouts{})
	req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/graphql", strings.NewReader(gql(`subscription { notificationAdded { id } }`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.token)
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("no answer after %v: %v", time.Since(start), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	errs := decodeErrors(t, body)
	t.Logf("HTTP %d in %v: %s", resp.StatusCode, took, body)
	if took > 2*time.Second || len(errs) != 1 || errs[0].Extensions["code"] != "UNAVAILABLE" {
		t.Errorf("HTTP %d in %v: %s, want one UNAVAILABLE at the 300 ms deadline", resp.StatusCode, took, body)
	}
}
