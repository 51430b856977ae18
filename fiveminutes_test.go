package main

// The README's "Five minutes", run as a new user would after `make run`.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/internal/testgw"
)

// fiveMinutesBlock is the README's block marked <!-- five-minutes -->, indented in its
// list item.
var fiveMinutesBlock = regexp.MustCompile("(?s)<!-- five-minutes -->\\n( *)```sh\\n(.*?)\\n *```")

// TestFiveMinutes runs the README's "Five minutes" against a dev gateway with `make run`'s
// demo import and scheduler: /demo answers the bell and the feed; the block (its token
// command with the built binary, its curls through bash) prints the notification's id;
// octocat's badge subscription (what the bell shows) goes up by one; the email is on
// /dev/mail, rendered, with the send listed under "Recent sends".
func TestFiveMinutes(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := fiveMinutesBlock.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```sh block marked <!-- five-minutes -->")
	}
	indent := string(m[1])
	var lines []string
	for _, l := range strings.Split(string(m[2]), "\n") {
		lines = append(lines, strings.TrimPrefix(l, indent))
	}
	block := strings.Join(lines, "\n")
	if n := strings.Count(block, "curl "); n != 3 || strings.Count(block, "/v1/notifications") != 1 {
		t.Fatalf("the block has %d curls; want two PUTs and one send:\n%s", n, block)
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (%v): the README's block is shell with curl", tool, err)
		}
	}
	gw := buildGateway(t)

	s := testgw.NewWith(t, testgw.Options{Scheduler: true, Config: func(c *app.Config) {
		c.Dev, c.DevSMTPAddr = true, "127.0.0.1:0"
		c.DemoImport, c.DemoTenant = "node_modules/@octokit/webhooks-examples/api.github.com/index.json", "default"
	}})
	base := strings.TrimSuffix(s.URL, "/graphql")

	// 1. /demo: the bell and the feed.
	if page := httpGet(t, base+"/demo"); !strings.Contains(page, "<inbox-bell") || !strings.Contains(page, "<inbox-feed") {
		t.Fatalf("/demo:\n%.2000s", page)
	}

	// What the bell shows: octocat's badge over the subscription.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := s.DialWS(ctx, "graphql-transport-ws")
	ws.Init(s.Token("default", "octocat"))
	ws.Subscribe("bell", `subscription { unreadCount }`)
	before := ws.NextCount("bell")

	// 2. The block, as pasted: `go run .` is the built binary, signing with the test's secret.
	script := strings.ReplaceAll(strings.ReplaceAll(block, "go run .", gw), "localhost:8080", strings.TrimPrefix(base, "http://"))
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "INBOX_JWT_SECRET="+string(testgw.Secret), "INBOX_DATA_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the block: %v\n%s", err, out)
	}
	var id string
	for _, line := range strings.Split(string(out), "\n") {
		var a struct {
			NotificationID string `json:"notificationId"`
		}
		if json.Unmarshal([]byte(line), &a) == nil && a.NotificationID != "" {
			id = a.NotificationID
		}
	}
	if id == "" {
		t.Fatalf("the block printed no notification id:\n%s", out)
	}

	// 3. The bell moves by one.
	start := time.Now()
	if got := ws.NextCount("bell"); got != before+1 {
		t.Fatalf("the badge went from %d to %d, want %d", before, got, before+1)
	}
	t.Logf("the bell moved %v after the block returned", time.Since(start))
	// The inbox's global ids name the notification as Notification:<id>.
	if ids := s.InboxIDs(s.Token("default", "octocat")); len(ids) == 0 || ids[0] != base64.RawURLEncoding.EncodeToString([]byte("Notification:"+id)) {
		t.Fatalf("octocat's inbox starts with %.80v, want the new %s on top", ids, id)
	}

	// 4. The email, rendered, on /dev/mail, and the send under "Recent sends".
	// The catcher has the mail a moment before the record says SENT (the provider's answer
	// is recorded after it).
	var page string
	testgw.WaitFor(t, 30*time.Second, "/dev/mail's email \"Hello, Octo\" with its send's EMAIL SENT", func() bool {
		page = httpGet(t, base+app.DevMailPath)
		return strings.Contains(page, "Hello, Octo") && strings.Contains(page, "<td><code>"+id+"</code></td><td>octocat</td><td>EMAIL</td><td>SENT</td>")
	})
	if !strings.Contains(page, `<iframe sandbox=""`) || !strings.Contains(page, "octocat@github.com") {
		t.Fatalf("/dev/mail has the email but not rendered in a sandboxed frame:\n%s", page)
	}
}

// httpGet answers the body of a GET of url, failing the test unless it is 200.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %.500s", url, resp.StatusCode, b)
	}
	return string(b)
}
