package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
)

// nodeClients are the scripts in tests/js, one per real client library, and the npm
// packages each needs.
var nodeClients = []struct {
	script   string
	packages []string
}{
	{"graphql-ws.mjs", []string{"graphql-ws", "ws"}},
	{"subscriptions-transport-ws.mjs", []string{"subscriptions-transport-ws", "ws"}},
	{"graphql-sse.mjs", []string{"graphql-sse"}},
}

// nodeBinary returns the node executable, failing (not skipping) when node or the npm
// packages are missing: these clients are part of what the gateway promises to serve.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v): install Node.js 20+, then run `npm ci` in the module root", err)
	}
	for _, c := range nodeClients {
		for _, p := range c.packages {
			if _, err := os.Stat(filepath.Join("..", "node_modules", p, "package.json")); err != nil {
				t.Fatalf("npm package %s is missing (%v): run `npm ci` in the module root", p, err)
			}
		}
		if _, err := os.Stat(filepath.Join("..", "tests", "js", c.script)); err != nil {
			t.Fatalf("client script: %v", err)
		}
	}
	return node
}

func TestNodeClientsReceiveUnreadCount(t *testing.T) {
	t.Parallel()
	node := nodeBinary(t)
	s := testgw.New(t) // httptest: a real loopback port
	sender := s.Token("t1", "svc", auth.ScopeSend)

	for i, c := range nodeClients {
		t.Run(c.script, func(t *testing.T) {
			s := s.WithT(t)
			user := "node" + string(rune('a'+i))
			token := s.Token("t1", user)
			ids := s.Seed(sender, user, 2)

			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, filepath.Join("..", "tests", "js", c.script), s.URL, token, "3")
			cmd.WaitDelay = 5 * time.Second
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatalf("start %s: %v", c.script, err)
			}
			lines := make(chan string, 8)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			next := func(what string) int {
				t.Helper()
				select {
				case line, ok := <-lines:
					if !ok {
						_ = cmd.Wait()
						t.Fatalf("%s ended before %s: %v\nstderr:\n%s", c.script, what, cmd.ProcessState, stderr.String())
					}
					var v struct {
						UnreadCount *int `json:"unreadCount"`
					}
					if err := json.Unmarshal([]byte(line), &v); err != nil || v.UnreadCount == nil {
						t.Fatalf("%s printed %q, want {\"unreadCount\":N}", c.script, line)
					}
					return *v.UnreadCount
				case <-ctx.Done():
					t.Fatalf("%s: no value for %s in time\nstderr:\n%s", c.script, what, stderr.String())
				}
				return 0
			}

			if got := next("the first value"); got != 2 {
				t.Fatalf("first value = %d, want 2", got)
			}
			s.Mark(token, true, ids[0])
			if got := next("the value after markRead"); got != 1 {
				t.Fatalf("after markRead = %d, want 1", got)
			}
			s.Seed(sender, user, 1)
			if got := next("the value after a send"); got != 2 {
				t.Fatalf("after a send = %d, want 2", got)
			}
			for range lines {
				t.Fatalf("%s printed more than 3 values", c.script)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%s: %v\nstderr:\n%s", c.script, err, stderr.String())
			}
			testgw.WaitFor(t, testgw.EventTimeout, "the server to drop the subscription", func() bool { return s.Broker.Subscribers() == 0 })
		})
	}
}

// TestGraphQLOverHTTPAudit runs the graphql-http package's audit suite of the
// GraphQL-over-HTTP spec against the gateway: every audit must pass, SHOULDs included
// (a notice, the spec's MAY, is logged).
func TestGraphQLOverHTTPAudit(t *testing.T) {
	t.Parallel()
	node := nodeBinary(t)
	if _, err := os.Stat(filepath.Join("..", "node_modules", "graphql-http", "package.json")); err != nil {
		t.Fatalf("npm package graphql-http is missing (%v): run `npm ci` in the module root", err)
	}
	// The audits query __type (introspection), which production mode refuses.
	s := testgw.NewConfig(t, func(c *app.Config) { c.Introspection = "on" })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("..", "tests", "js", "graphql-http-audit.mjs"), s.URL, s.Token("t1", "auditor"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("audit: %v\nstderr:\n%s", err, stderr.String())
	}
	ok := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a struct{ ID, Name, Status, Reason string }
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("audit printed %q", sc.Text())
		}
		switch a.Status {
		case "ok":
			ok++
		case "notice":
			t.Logf("notice %s %s: %s", a.ID, a.Name, a.Reason)
		default:
			t.Errorf("%s %s %s: %s", a.Status, a.ID, a.Name, a.Reason)
		}
	}
	if ok < 50 {
		t.Fatalf("only %d audits passed; the suite did not run?\n%s", ok, out)
	}
	t.Logf("%d audits passed", ok)
}
