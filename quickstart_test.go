package main

// Tests of the README's frontend quickstart (web/quickstart) and of its GraphQL examples:
// the README shows the quickstart files verbatim, each client runs with Node against a real
// gateway and prints what it got, and every GraphQL example returns data for the demo user
// of `make run`.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/service"
)

var updateQuickstart = flag.Bool("update-quickstart", false,
	"rewrite the README's quickstart code blocks from the files in web/quickstart")

// quickstartFiles are the files of web/quickstart the README shows, in its order, and the
// npm packages they import.
var quickstartFiles = []struct {
	file     string
	packages []string
}{
	{"config.js", nil},
	{"apollo.js", []string{"@apollo/client", "rxjs", "graphql"}},
	{"urql.js", []string{"@urql/core", "@urql/exchange-graphcache"}},
	{"relay.js", []string{"relay-runtime"}},
	{"graphql-ws.js", []string{"graphql-ws", "ws"}},
}

// quickstartBlock matches a README code block that shows a quickstart file: the marker
// comment naming the file, then a js block holding the file's text exactly.
var quickstartBlock = regexp.MustCompile("(?s)<!-- quickstart: (\\S+) -->\n```js\n(.*?)```\n")

// TestQuickstartREADMEShowsTheFiles: the README's quickstart blocks are the files the other
// tests run, byte for byte, so the two cannot drift apart. `go test -run
// TestQuickstartREADMEShowsTheFiles -update-quickstart .` copies the files into the README.
func TestQuickstartREADMEShowsTheFiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]int{}
	var stale []string
	updated := quickstartBlock.ReplaceAllFunc(readme, func(block []byte) []byte {
		m := quickstartBlock.FindSubmatch(block)
		name := string(m[1])
		shown[name]++
		file, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("README shows %s: %v", name, err)
			return block
		}
		if !bytes.Equal(m[2], file) {
			stale = append(stale, name)
		}
		return fmt.Appendf(nil, "<!-- quickstart: %s -->\n```js\n%s```\n", name, file)
	})
	for _, f := range quickstartFiles {
		name := "web/quickstart/" + f.file
		if shown[name] != 1 {
			t.Errorf("README shows %s %d times, want once (a block marked <!-- quickstart: %s -->)", name, shown[name], name)
		}
	}
	if len(stale) == 0 {
		return
	}
	if *updateQuickstart {
		if err := os.WriteFile("README.md", updated, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("README.md: updated %v", stale)
		return
	}
	t.Errorf("README.md shows an old version of %v: run go test -run TestQuickstartREADMEShowsTheFiles -update-quickstart .", stale)
}

// TestQuickstartRelayArtifactsAreCurrent: the committed relay-compiler output is what the
// compiler writes for relay.js and today's schema (so the client test needs no compiler).
func TestQuickstartRelayArtifactsAreCurrent(t *testing.T) {
	node := quickstartNode(t)
	if _, err := os.Stat(filepath.Join("node_modules", "relay-compiler", "package.json")); err != nil {
		t.Fatalf("npm package relay-compiler is missing (%v): run `npm ci` in the module root", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, filepath.Join("web", "quickstart", "relay-compile.js"), "--validate").CombinedOutput()
	if err != nil {
		t.Fatalf("relay-compiler --validate: %v\n%s\nregenerate with: node web/quickstart/relay-compile.js", err, out)
	}
}

// quickstartNode returns the node executable, failing when it or a package the quickstart
// imports is missing.
func quickstartNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v): install Node.js 20+, then run `npm ci` in the module root", err)
	}
	for _, f := range quickstartFiles {
		for _, p := range f.packages {
			if _, err := os.Stat(filepath.Join("node_modules", p, "package.json")); err != nil {
				t.Fatalf("npm package %s is missing (%v): run `npm ci` in the module root", p, err)
			}
		}
	}
	return node
}

// quickstartRun is one quickstart client running against a gateway: each line it prints,
// decoded as JSON.
type quickstartRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	lines  chan string
	ctx    context.Context
}

// startQuickstart runs web/quickstart/<file> with the gateway's URL and token in the
// environment the README tells users to set, plus extra variables.
func startQuickstart(t *testing.T, node, file, url, token string, extra ...string) *quickstartRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	// Plain `node file`, as the README runs them: no flag (Node 20, the supported version,
	// has no global WebSocket; graphql-ws.js brings the ws package's).
	cmd := exec.CommandContext(ctx, node, filepath.Join("web", "quickstart", file))
	cmd.Env = append(os.Environ(), append([]string{"INBOX_URL=" + url, "INBOX_TOKEN=" + token}, extra...)...)
	cmd.WaitDelay = 5 * time.Second
	r := &quickstartRun{t: t, cmd: cmd, stderr: new(bytes.Buffer), lines: make(chan string, 8), ctx: ctx}
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", file, err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	return r
}

// next decodes the client's next line into dst.
func (r *quickstartRun) next(what string, dst any) {
	r.t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			_ = r.cmd.Wait()
			r.t.Fatalf("%s ended before printing %s: %v\nstderr:\n%s", r.cmd.Args, what, r.cmd.ProcessState, r.stderr)
		}
		if err := json.Unmarshal([]byte(line), dst); err != nil {
			r.t.Fatalf("%s printed %q for %s: %v", r.cmd.Args, line, what, err)
		}
	case <-r.ctx.Done():
		r.t.Fatalf("%s: no %s in time\nstderr:\n%s", r.cmd.Args, what, r.stderr)
	}
}

// end waits for the client to exit 0 having printed nothing more.
func (r *quickstartRun) end() {
	r.t.Helper()
	for line := range r.lines {
		r.t.Errorf("%s printed more than expected: %s", r.cmd.Args, line)
	}
	if err := r.cmd.Wait(); err != nil {
		r.t.Fatalf("%s: %v\nstderr:\n%s", r.cmd.Args, err, r.stderr)
	}
}

// nodeMajor returns node's major version.
func nodeMajor(t *testing.T, node string) int {
	t.Helper()
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		t.Fatalf("node --version printed %q", out)
	}
	return n
}

// quickstartPage is what apollo.js and relay.js print for the inbox.
type quickstartPage struct {
	ID          string   `json:"id"`
	UnreadCount int      `json:"unreadCount"`
	Titles      []string `json:"titles"`
	HasNextPage bool     `json:"hasNextPage"`
	// Who is apollo.js's actor line of each item ("Ann and 2 others" for a batch).
	Who []string `json:"who"`
}

// TestQuickstartClients runs each quickstart client against the gateway with a real token
// and checks what it printed against what the user's inbox holds.
func TestQuickstartClients(t *testing.T) {
	node := quickstartNode(t)
	s := testgw.New(t)
	sender := s.Token("t1", "svc", auth.ScopeSend)
	// titles returns the titles of the newest k of n seeded notifications (s.seed titles
	// them n0..n{n-1}), newest first, as the clients list them.
	titles := func(n, k int) []string {
		var out []string
		for i := n - 1; i >= n-k; i-- {
			out = append(out, fmt.Sprintf("n%d", i))
		}
		return out
	}
	checkPage := func(t *testing.T, what string, got quickstartPage, want []string, unread int) {
		t.Helper()
		if !slices.Equal(got.Titles, want) || got.UnreadCount != unread || !got.HasNextPage {
			t.Fatalf("%s = %+v, want titles %v, unreadCount %d, hasNextPage", what, got, want, unread)
		}
	}

	t.Run("apollo", func(t *testing.T) {
		s := s.WithT(t)
		token := s.Token("t1", "qs-apollo")
		s.Seed(sender, "qs-apollo", 5)
		r := startQuickstart(t, node, "apollo.js", s.URL, token)
		var first, merged quickstartPage
		r.next("the first page", &first)
		checkPage(t, "first page", first, titles(5, 2), 5)
		r.next("the pages merged by relayStylePagination", &merged)
		checkPage(t, "after fetchMore", merged, titles(5, 4), 5)
		r.end()
		if !slices.Equal(first.Who, []string{"The Octocat", "The Octocat"}) {
			t.Fatalf("who = %q", first.Who)
		}
		// A batch of three comments reads "Ann and 2 others".
		s.Seed(sender, "qs-apollo-b", 2)
		for i, name := range []string{"Ann", "Bob", "Cy"} {
			s.Send(sender, map[string]any{"idempotencyKey": fmt.Sprintf("qs-batch-%d", i), "recipients": []string{"qs-apollo-b"},
				"type": "comment", "title": "Comments", "actor": map[string]any{"id": strings.ToLower(name), "name": name},
				"batch": map[string]any{"key": "post", "window": "1s", "maxItems": 3}})
		}
		r = startQuickstart(t, node, "apollo.js", s.URL, s.Token("t1", "qs-apollo-b"))
		var batched, rest quickstartPage
		r.next("the first page", &batched)
		r.next("the next page", &rest)
		r.end()
		if len(batched.Who) != 2 || batched.Who[0] != "Ann and 2 others" || batched.Titles[0] != "Comments" {
			t.Fatalf("the batched page = %+v", batched)
		}
	})

	t.Run("urql", func(t *testing.T) {
		s := s.WithT(t)
		token := s.Token("t1", "qs-urql")
		s.Seed(sender, "qs-urql", 3)
		r := startQuickstart(t, node, "urql.js", s.URL, token)
		var badge, cached struct {
			UnreadCount int  `json:"unreadCount"`
			FromCache   bool `json:"fromCache"`
		}
		r.next("the badge", &badge)
		if badge.UnreadCount != 3 || badge.FromCache {
			t.Fatalf("badge = %+v, want 3 from the network", badge)
		}
		r.next("the badge in the cache after markRead", &cached)
		if cached.UnreadCount != 2 || !cached.FromCache {
			t.Fatalf("cached badge = %+v, want 2 from the cache (the mutation's answer)", cached)
		}
		r.end()
		s.ExpectUnread(token, 2, "after urql's markRead")
	})

	t.Run("relay", func(t *testing.T) {
		s := s.WithT(t)
		token := s.Token("t1", "qs-relay")
		s.Seed(sender, "qs-relay", 5)
		var v struct {
			Viewer struct {
				ID string `json:"id"`
			} `json:"viewer"`
		}
		s.MustData(token, `{ viewer { id } }`, nil, &v)
		r := startQuickstart(t, node, "relay.js", s.URL, token)
		var first, next quickstartPage
		r.next("the fragment's first page", &first)
		checkPage(t, "first page", first, titles(5, 2), 5)
		r.next("the connection after the pagination query", &next)
		checkPage(t, "after the pagination query", next, titles(5, 4), 5)
		if first.ID != v.Viewer.ID || next.ID != v.Viewer.ID {
			t.Fatalf("fragment ids %q, %q, want the viewer's %q", first.ID, next.ID, v.Viewer.ID)
		}
		r.end()
	})

	t.Run("graphql-ws", func(t *testing.T) {
		s := s.WithT(t)
		token := s.Token("t1", "qs-ws")
		ids := s.Seed(sender, "qs-ws", 2)
		r := startQuickstart(t, node, "graphql-ws.js", s.URL, token, "INBOX_EVENTS=3")
		var v struct {
			UnreadCount *int `json:"unreadCount"`
		}
		expect := func(what string, want int) {
			t.Helper()
			v.UnreadCount = nil
			r.next(what, &v)
			if v.UnreadCount == nil || *v.UnreadCount != want {
				t.Fatalf("%s: got %+v, want unreadCount %d", what, v, want)
			}
		}
		expect("the current badge", 2)
		s.Mark(token, true, ids[0])
		expect("the badge after markRead", 1)
		s.Seed(sender, "qs-ws", 1)
		expect("the badge after a send", 2)
		r.end()
		testgw.WaitFor(t, 10*time.Second, "the server to drop the subscription", func() bool { return s.Broker.Subscribers() == 0 })
	})
}

// readmeOperations returns the operations of the README's ```graphql blocks, one document
// each, by name (anonymous ones by their first field), in order.
func readmeOperations(t *testing.T) (names, docs []string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```graphql\n(.*?)```").FindAllSubmatch(readme, -1)
	start := regexp.MustCompile(`^(query|mutation|subscription)\b\s*(\w*)`)
	first := regexp.MustCompile(`[{(]\s*(\w+)`)
	for _, b := range blocks {
		var cur []string
		flush := func() {
			if doc := strings.TrimSpace(strings.Join(cur, "\n")); doc != "" {
				name := start.FindStringSubmatch(doc)[2]
				if name == "" {
					name = first.FindStringSubmatch(doc)[1]
				}
				names, docs = append(names, name), append(docs, doc)
			}
			cur = nil
		}
		for _, line := range strings.Split(string(b[1]), "\n") {
			if start.MatchString(line) {
				flush()
			}
			if strings.TrimSpace(line) != "" {
				cur = append(cur, line)
			}
		}
		flush()
	}
	if len(docs) == 0 {
		t.Fatal("README.md has no ```graphql examples")
	}
	return names, docs
}

// TestREADMEExamplesReturnDataForDemoUser imports the GitHub examples as `make run` does,
// checks that their busiest user is the README's octocat, and runs every GraphQL example of
// the README (and the curl one) as that user: each returns data without errors.
func TestREADMEExamplesReturnDataForDemoUser(t *testing.T) {
	s := testgw.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := app.Config{DemoImport: "node_modules/@octokit/webhooks-examples/api.github.com/index.json", DemoTenant: "default"}
	user, err := app.ImportDemo(ctx, cfg, slog.New(slog.DiscardHandler), service.Writer{Store: s.Store, Publisher: s.Broker})
	if err != nil {
		t.Fatalf("demo import: %v", err)
	}
	if user != "octocat" {
		t.Fatalf("demo user = %q; the README's examples name octocat", user)
	}
	// The README's shell example signs octocat's own token (no service scope).
	token := s.Token("default", user)

	// The curl example's query.
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*-d '(\{"query".*\})'`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md: no curl example (-d '{\"query\": ...}')")
	}
	var curl struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(m[1], &curl); err != nil {
		t.Fatalf("the curl example's body: %v", err)
	}
	var c struct {
		Viewer struct {
			UnreadCount int                   `json:"unreadCount"`
			Inbox       struct{ Nodes []any } `json:"inbox"`
		} `json:"viewer"`
	}
	s.MustData(token, curl.Query, nil, &c)
	if c.Viewer.UnreadCount == 0 || len(c.Viewer.Inbox.Nodes) == 0 {
		t.Fatalf("curl example: %+v, want the demo user's badge and notifications", c.Viewer)
	}

	// The templated GraphQL send names the template that the README's REST section
	// creates: the same PUT, here.
	put, err := http.NewRequest(http.MethodPut, s.HTTP.URL+"/v1/templates/invoice-paid", strings.NewReader(
		`{"locale": "en", "title": "Invoice {{ invoice.number }} paid", "body": "We received {{ invoice.amount }}. Thank you!"}`))
	if err != nil {
		t.Fatal(err)
	}
	put.Header.Set("Authorization", "Bearer "+s.ServiceToken("default", "readme", auth.ScopeAdmin))
	put.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /v1/templates/invoice-paid: %s", resp.Status)
	}

	// The placeholders the README asks readers to replace: a notification id from the
	// Inbox example, a target id and the viewer id from the first answers that have them,
	// and a time a minute ahead.
	var someID, targetID, viewerID, announcementID string
	names, docs := readmeOperations(t)
	for i, doc := range names {
		doc, name := docs[i], doc
		t.Run(name, func(t *testing.T) {
			s := s.WithT(t)
			doc = strings.NewReplacer("<notification id>", someID, "<target id>", targetID, "<viewer id>", viewerID, "<announcement id>", announcementID,
				"<in a minute>", time.Now().Add(time.Minute).UTC().Format(time.RFC3339)).Replace(doc)
			if p := regexp.MustCompile(`"<[^">]*>"`).FindString(doc); p != "" {
				t.Fatalf("%s: the README's placeholder %s is not one this test fills in", name, p)
			}
			var data map[string]any
			switch {
			case strings.HasPrefix(doc, "subscription"):
				data = readmeSubscription(t, s, token, doc)
			case strings.Contains(doc, "sendNotification"), strings.Contains(doc, "sendAnnouncement"), strings.Contains(doc, "withdrawAnnouncement"):
				// Sending is a service's: a notifications:send token, which has no inbox.
				s.MustData(s.ServiceToken("default", "readme"), doc, nil, &data)
			default:
				s.MustData(token, doc, nil, &data)
			}
			raw, _ := json.Marshal(data)
			if !quickstartHasData(data) {
				t.Fatalf("%s returned no data for %s: %s", name, user, raw)
			}
			t.Logf("%s: %.300s", name, raw)
			if targetID == "" {
				targetID = readmeObjectID(data, "target")
			}
			if viewerID == "" {
				viewerID = readmeObjectID(data, "viewer")
			}
			if a, ok := data["sendAnnouncement"].(map[string]any); ok && announcementID == "" {
				announcementID, _ = a["announcement"].(map[string]any)["id"].(string)
			}
			if name == "Inbox" {
				var d struct {
					Viewer struct {
						Inbox struct {
							Edges []struct {
								Node struct{ ID string } `json:"node"`
							} `json:"edges"`
						} `json:"inbox"`
					} `json:"viewer"`
				}
				_ = json.Unmarshal(raw, &d)
				for _, e := range d.Viewer.Inbox.Edges {
					someID = e.Node.ID
				}
			}
		})
	}
	if someID == "" {
		t.Error("the Inbox example gave no notification id for the markRead example")
	}
	// The examples run in the README's order leave octocat as the examples after them
	// (REST, the email demo, "Five minutes" again) need: email on, no quiet hours, nothing
	// muted.
	var p struct {
		Viewer struct {
			Preferences struct {
				Channels     struct{ Email bool } `json:"channels"`
				QuietHours   any                  `json:"quietHours"`
				MutedTargets []any                `json:"mutedTargets"`
			} `json:"preferences"`
		} `json:"viewer"`
	}
	s.MustData(token, `{ viewer { preferences { channels { email } quietHours { start } mutedTargets { id } } } }`, nil, &p)
	if pr := p.Viewer.Preferences; !pr.Channels.Email || pr.QuietHours != nil || len(pr.MutedTargets) != 0 {
		t.Errorf("after the README's GraphQL examples octocat's preferences are %+v: the email examples after them would send nothing", pr)
	}
}

// readmeObjectID returns the id of the first object under key field (at any depth, lists
// included) in v, "" when there is none.
func readmeObjectID(v any, field string) string {
	switch v := v.(type) {
	case map[string]any:
		if o, ok := v[field].(map[string]any); ok {
			if id, ok := o["id"].(string); ok && id != "" {
				return id
			}
		}
		for _, x := range v {
			if id := readmeObjectID(x, field); id != "" {
				return id
			}
		}
	case []any:
		for _, x := range v {
			if id := readmeObjectID(x, field); id != "" {
				return id
			}
		}
	}
	return ""
}

// quickstartHasData reports whether v holds some data: a non-empty list, a non-zero number,
// true, or a non-empty string, at any depth.
func quickstartHasData(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			if quickstartHasData(x) {
				return true
			}
		}
	case []any:
		return len(v) > 0
	case float64:
		return v != 0
	case bool:
		return v
	case string:
		return v != ""
	}
	return false
}

// readmeSubscription runs a subscription example as a plain POST, which answers its first
// event; notificationAdded gets one from sends to the viewer until it answers.
func readmeSubscription(t *testing.T, s *testgw.Server, token, doc string) map[string]any {
	t.Helper()
	type answer struct {
		data json.RawMessage
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"query": doc})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
		if err != nil {
			done <- answer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var r testgw.Response
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			done <- answer{err: fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)}
			return
		}
		if len(r.Errors) > 0 {
			done <- answer{err: fmt.Errorf("errors: %+v", r.Errors)}
			return
		}
		done <- answer{data: r.Data}
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-done:
			if a.err != nil {
				t.Fatalf("subscription: %v", a.err)
			}
			var data map[string]any
			if err := json.Unmarshal(a.data, &data); err != nil {
				t.Fatalf("subscription data: %v (%s)", err, a.data)
			}
			return data
		case <-tick.C:
			if strings.Contains(doc, "notificationAdded") || strings.Contains(doc, "inboxEvents") {
				s.Send(s.ServiceToken("default", "readme"), s.SendInput("for the notificationAdded example", "octocat"))
			}
		}
	}
}

// TestNodeIsTheSupportedVersion: the node that runs the README's scripts and the tests is
// the one version package.json's engines names (the README states it too).
func TestNodeIsTheSupportedVersion(t *testing.T) {
	raw, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Engines struct {
			Node string `json:"node"`
		} `json:"engines"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	major, ok := strings.CutSuffix(pkg.Engines.Node, ".x")
	want, err := strconv.Atoi(major)
	if !ok || err != nil {
		t.Fatalf("package.json engines.node = %q, want one major version such as \"20.x\"", pkg.Engines.Node)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v): install Node.js %d", err, want)
	}
	if got := nodeMajor(t, node); got != want {
		t.Fatalf("node is version %d; the supported version (package.json engines, README) is %d", got, want)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), fmt.Sprintf("Node %d (the one supported version", want)) {
		t.Fatalf("README.md does not state Node %d as the supported version", want)
	}
}
