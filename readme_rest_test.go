package main

// Tests of the README's "Service API (REST /v1)" section and of its configuration table:
// every curl example of the section runs, with the real curl through bash, against a real
// gateway holding `make run`'s demo import, and answers what the README shows; the token
// command runs with the built binary; the configuration table lists exactly the variables
// of `help`.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
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

// restSection is the heading of the README section whose examples TestREADMEServiceAPIExamples runs.
const restSection = "## Service API (REST /v1)"

// readmeSection returns the README's text from the line heading to the next "## " heading.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	s = s[i+1:]
	if j := strings.Index(s[len(heading):], "\n## "); j >= 0 {
		s = s[:len(heading)+j+1]
	}
	return s
}

// restExample is one shell block of the section and, for a block that runs curl, the
// ```http block after it: the answer the README shows.
type restExample struct {
	shell  string
	answer *shownAnswer // nil for a block without curl (it sets variables: the token)
}

// shownAnswer is an answer as the README shows it: the status line, the headers it chose
// to show, and the body (nil when none is shown).
type shownAnswer struct {
	status int
	header http.Header
	body   any
}

// fencedBlock matches a fenced code block and its info string.
var fencedBlock = regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```$")

// restExamples returns the section's ```sh blocks in order, each curl block with the
// ```http block that must follow it.
func restExamples(t *testing.T, section string) []restExample {
	t.Helper()
	blocks := fencedBlock.FindAllStringSubmatch(section, -1)
	var out []restExample
	for i := 0; i < len(blocks); i++ {
		lang, text := blocks[i][1], blocks[i][2]
		switch lang {
		case "sh":
		case "http":
			t.Fatalf("README %s: an ```http block that follows no curl example:\n%s", restSection, text)
		default:
			t.Fatalf("README %s: a ```%s block; the section holds only ```sh examples and their ```http answers", restSection, lang)
		}
		ex := restExample{shell: text}
		if strings.Contains(text, "curl ") {
			if i+1 == len(blocks) || blocks[i+1][1] != "http" {
				t.Fatalf("README %s: the curl example\n%s\nis not followed by an ```http block showing its answer", restSection, text)
			}
			i++
			ex.answer = parseShownAnswer(t, blocks[i][2])
		}
		out = append(out, ex)
	}
	if len(out) == 0 || out[0].answer != nil {
		t.Fatalf("README %s: want a token command first, then curl examples", restSection)
	}
	return out
}

// parseShownAnswer parses an ```http block: "HTTP/1.1 NNN Reason", header lines, a blank
// line and a JSON body.
func parseShownAnswer(t *testing.T, text string) *shownAnswer {
	t.Helper()
	head, body, _ := strings.Cut(text, "\n\n")
	lines := strings.Split(head, "\n")
	proto, rest, _ := strings.Cut(lines[0], " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/") || err != nil {
		t.Fatalf("README %s: an answer must start with a status line (HTTP/1.1 200 OK), not %q", restSection, lines[0])
	}
	a := &shownAnswer{status: status, header: http.Header{}}
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("README %s: answer header line %q", restSection, l)
		}
		a.header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	if strings.TrimSpace(body) != "" {
		if err := json.Unmarshal([]byte(body), &a.body); err != nil {
			t.Fatalf("README %s: the body shown for %s is not JSON: %v\n%s", restSection, lines[0], err, body)
		}
	}
	return a
}

// placeholder matches what a reader replaces in an example: <notificationId>, named after
// the field of an earlier answer that holds the value.
var placeholder = regexp.MustCompile(`<([A-Za-z]+)>`)

// TestREADMEServiceAPIExamples runs the README's REST section as a reader would after `make
// run`: the demo imported into tenant default, the token command (with the built binary
// and a known secret instead of the dev one), then each curl example through bash, in
// order, with localhost:8080 pointing at the gateway and each <field> placeholder filled
// from the latest answer that has the field. Each must answer the status shown, with the
// headers shown, and a body that has every member shown (arrays: each element shown
// matches one answered), with the same `code` and `status` members. A GET whose answer
// is not yet the one shown (a notification still being written, a broadcast still
// running) is repeated for up to 30 s: the README shows where it ends.
//
// Real curl rather than Go requests built from parsed commands: the examples are shell,
// and only the shell proves that their quoting, line continuations and variables work
// when pasted.
func TestREADMEServiceAPIExamples(t *testing.T) {
	t.Parallel()
	examples := restExamples(t, readmeSection(t, restSection))
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is not installed (%v): the README's examples are shell", err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl is not installed (%v): the README's examples run it (apt-get install curl)", err)
	}
	gw := buildGateway(t)

	s := testgw.NewWith(t, testgw.Options{Scheduler: true})
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
	base, err := url.Parse(s.HTTP.URL)
	if err != nil {
		t.Fatal(err)
	}

	// run runs script with bash and the README's environment, answering its stdout.
	env := append(os.Environ(), "INBOX_JWT_SECRET="+string(testgw.Secret), "INBOX_DATA_DIR="+t.TempDir())
	run := func(script string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bash, "-euo", "pipefail", "-c", script)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v\n%s\nstderr:\n%s", err, script, stderr.Bytes())
		}
		return out
	}

	// The token command: `go run .` is the built binary, and the token it prints must be a
	// service token of tenant default that reaches every endpoint of the section.
	tokenScript := examples[0].shell
	if !strings.Contains(tokenScript, "go run . token") {
		t.Fatalf("README %s: the first block should make TOKEN with `go run . token`:\n%s", restSection, tokenScript)
	}
	token := strings.TrimSpace(string(run(strings.ReplaceAll(tokenScript, "go run .", gw) + "\nprintf '%s' \"$TOKEN\"\n")))
	claims, err := s.Verifier.Verify(token)
	if err != nil {
		t.Fatalf("the README's token: %v", err)
	}
	if claims.TenantID != "default" || !slices.Contains(claims.Scopes, auth.ScopeSend) || !slices.Contains(claims.Scopes, auth.ScopeAdmin) {
		t.Fatalf("the README's token has %+v, want tenant default and scopes %s and %s", claims, auth.ScopeSend, auth.ScopeAdmin)
	}
	env = append(env, "TOKEN="+token)

	fields := map[string]string{} // top-level string members of the answers so far
	for i, ex := range examples[1:] {
		if ex.answer == nil {
			t.Fatalf("README %s: only the first block may run without curl:\n%s", restSection, ex.shell)
		}
		script := strings.ReplaceAll(ex.shell, "localhost:8080", base.Host)
		var missing []string
		script = placeholder.ReplaceAllStringFunc(script, func(p string) string {
			name := placeholder.FindStringSubmatch(p)[1]
			v, ok := fields[name]
			if !ok {
				missing = append(missing, p)
			}
			return v
		})
		if len(missing) > 0 {
			t.Fatalf("example %d: no earlier answer has %v:\n%s", i+1, missing, ex.shell)
		}
		// Only reads are repeated: a send or a PUT runs once.
		read := !strings.Contains(ex.shell, " -X ") && !strings.Contains(ex.shell, " -d ")
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, body, err := parseCurlAnswer(run(script))
			if err == nil {
				err = ex.answer.check(resp, body)
			}
			if err == nil {
				t.Logf("example %d: %s %.300s", i+1, resp.Status, body)
				if m, ok := decodeJSON(body).(map[string]any); ok {
					for k, v := range m {
						if s, ok := v.(string); ok {
							fields[k] = s
						}
					}
				}
				break
			}
			if !read || time.Now().After(deadline) {
				t.Fatalf("example %d:\n%s\n%v", i+1, ex.shell, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// parseCurlAnswer parses what `curl -si` printed: one HTTP response.
func parseCurlAnswer(out []byte) (*http.Response, []byte, error) {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("curl printed no HTTP answer (%v):\n%s", err, out)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		return nil, nil, fmt.Errorf("reading the answer's body: %v", err)
	}
	return resp, body.Bytes(), nil
}

// decodeJSON returns body decoded, nil when it is not JSON.
func decodeJSON(body []byte) any {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	return v
}

// check reports how the answer differs from what the README shows.
func (a *shownAnswer) check(resp *http.Response, body []byte) error {
	if resp.StatusCode != a.status {
		return fmt.Errorf("answered %s, the README shows %d: %s", resp.Status, a.status, body)
	}
	for name, values := range a.header {
		if got := resp.Header.Get(name); got != values[0] {
			return fmt.Errorf("header %s = %q, the README shows %q", name, got, values[0])
		}
	}
	if a.body == nil {
		return nil
	}
	got := decodeJSON(body)
	if got == nil {
		return fmt.Errorf("the answer is not JSON: %s", body)
	}
	if err := jsonCovers(a.body, got, "$"); err != nil {
		return fmt.Errorf("%v\nanswer: %s", err, body)
	}
	shown, _ := a.body.(map[string]any)
	answered, _ := got.(map[string]any)
	for _, k := range []string{"code", "status"} {
		if v, ok := shown[k]; ok && fmt.Sprint(answered[k]) != fmt.Sprint(v) {
			return fmt.Errorf("%s = %v, the README shows %v\nanswer: %s", k, answered[k], v, body)
		}
	}
	return nil
}

// jsonCovers reports where got lacks what shown has: every member of a shown object (at
// any depth), a value of the same JSON type, and for each element of a shown array an
// element of got's that covers it.
func jsonCovers(shown, got any, path string) error {
	switch s := shown.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: answered %T, the README shows an object", path, got)
		}
		for k, v := range s {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing from the answer", path, k)
			}
			if err := jsonCovers(v, gv, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: answered %T, the README shows an array", path, got)
		}
		for i, v := range s {
			var first error
			for j := range g {
				err := jsonCovers(v, g[j], fmt.Sprintf("%s[%d]", path, j))
				if err == nil {
					first = nil
					break
				}
				if first == nil {
					first = err
				}
			}
			if len(g) == 0 {
				first = fmt.Errorf("%s: empty, the README shows %d elements", path, len(s))
			}
			if first != nil {
				return fmt.Errorf("%s[%d] shown matches no element of the answer: %v", path, i, first)
			}
		}
	default:
		if fmt.Sprintf("%T", shown) != fmt.Sprintf("%T", got) {
			return fmt.Errorf("%s: answered %T %v, the README shows %T %v", path, got, got, shown, shown)
		}
	}
	return nil
}

// TestREADMEConfigurationListsEveryVariable: the README's configuration table names every
// INBOX_* variable that `help` lists (Config's), and no other.
func TestREADMEConfigurationListsEveryVariable(t *testing.T) {
	t.Parallel()
	var usage bytes.Buffer
	app.Usage(&usage)
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^  (INBOX_\w+)`).FindAllStringSubmatch(usage.String(), -1) {
		want = append(want, m[1])
	}
	if len(want) == 0 {
		t.Fatalf("help lists no variables:\n%s", usage.String())
	}
	section := readmeSection(t, "## Configuration")
	var got []string
	for _, row := range regexp.MustCompile(`(?m)^\| ([^|]+) \|`).FindAllStringSubmatch(section, -1) {
		for _, m := range regexp.MustCompile("`(INBOX_\\w+)`").FindAllStringSubmatch(row[1], -1) {
			got = append(got, m[1])
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	for _, v := range want {
		if !slices.Contains(got, v) {
			t.Errorf("README's configuration table lacks %s (go run . help lists it)", v)
		}
	}
	for _, v := range got {
		if !slices.Contains(want, v) {
			t.Errorf("README's configuration table lists %s, which go run . help does not know", v)
		}
	}
	if c := slices.Compact(slices.Clone(got)); len(c) != len(got) {
		t.Errorf("README's configuration table lists a variable twice: %v", got)
	}
}
