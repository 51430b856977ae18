package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/inboxgw/gateway/inbox"
)

// examplesRel is where npm installs the examples, relative to the module root.
const examplesRel = "node_modules/@octokit/webhooks-examples/api.github.com/index.json"

// examplesFile reads the real webhook examples, found from the module root (the nearest
// directory above the working directory holding go.mod).
func examplesFile(t *testing.T) []byte {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
	path := filepath.Join(dir, filepath.FromSlash(examplesRel))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the webhook examples: %v\nrun `npm install` in %s to install @octokit/webhooks-examples", err, dir)
	}
	return b
}

func parseExamples(t *testing.T) ([]Notification, Stats, []byte) {
	t.Helper()
	raw := examplesFile(t)
	ns, st, err := Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return ns, st, raw
}

// rawDef is index.json read generically, independently of the package's decoding.
type rawDef struct {
	Name     string           `json:"name"`
	Examples []map[string]any `json:"examples"`
}

func rawDefs(t *testing.T, raw []byte) []rawDef {
	t.Helper()
	var defs []rawDef
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatal(err)
	}
	return defs
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

func obj(m map[string]any, k string) map[string]any {
	o, _ := m[k].(map[string]any)
	return o
}

// mentionRE is the login regexp of the brief, applied without the code-span rule: '@' not
// preceded by a word character, 1..39 alphanumerics or single hyphens, no leading hyphen.
var mentionRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])@([A-Za-z0-9](?:-?[A-Za-z0-9])*)`)

// expectedRecipients recomputes the recipient rules on the generic payload.
func expectedRecipients(ex map[string]any) []string {
	sender := strings.ToLower(str(ex, "sender", "login"))
	seen := map[string]bool{}
	var out []string
	add := func(login string) {
		k := strings.ToLower(login)
		if login == "" || k == sender || seen[k] || inbox.CheckID("r", login) != nil {
			return
		}
		seen[k] = true
		out = append(out, login)
	}
	logins := func(v any) {
		arr, _ := v.([]any)
		for _, u := range arr {
			if m, ok := u.(map[string]any); ok {
				add(str(m, "login"))
			}
		}
	}
	add(str(ex, "repository", "owner", "login"))
	add(str(ex, "issue", "user", "login"))
	add(str(ex, "pull_request", "user", "login"))
	add(str(ex, "assignee", "login"))
	logins(ex["assignees"])
	for _, k := range []string{"issue", "pull_request"} {
		if o := obj(ex, k); o != nil {
			add(str(o, "assignee", "login"))
			logins(o["assignees"])
		}
	}
	add(str(ex, "requested_reviewer", "login"))
	logins(ex["requested_reviewers"])
	if o := obj(ex, "pull_request"); o != nil {
		logins(o["requested_reviewers"])
	}
	for _, k := range []string{"issue", "pull_request", "comment", "review", "release"} {
		for _, m := range mentionRE.FindAllStringSubmatch(str(ex, k, "body"), -1) {
			if len(m[1]) <= 39 {
				add(m[1])
			}
		}
	}
	return out
}

func exampleType(name string, ex map[string]any) string {
	if a := str(ex, "action"); a != "" {
		return name + "." + a
	}
	return name
}

type exampleRef struct {
	event string
	index int
}

// TestParseCountsMatchTheFile recomputes, from the raw JSON, how many examples each event
// has, which of them have recipients, who they are, and the per-type and per-recipient
// counts, and compares with Parse.
func TestParseCountsMatchTheFile(t *testing.T) {
	ns, st, raw := parseExamples(t)
	defs := rawDefs(t, raw)

	examplesPerEvent := map[string]int{}
	wantByType := map[string]int{}
	wantSkippedByType := map[string]int{}
	wantByRecipient := map[string]int{}
	wantRecipients := map[exampleRef][]string{}
	total, skipped := 0, 0
	for _, d := range defs {
		for i, ex := range d.Examples {
			total++
			examplesPerEvent[d.Name]++
			typ := exampleType(d.Name, ex)
			rs := expectedRecipients(ex)
			if len(rs) == 0 {
				skipped++
				wantSkippedByType[typ]++
				continue
			}
			wantByType[typ]++
			for _, r := range rs {
				wantByRecipient[r]++
			}
			wantRecipients[exampleRef{d.Name, i}] = rs
		}
	}

	if st.Definitions != len(defs) {
		t.Errorf("Definitions = %d, want %d", st.Definitions, len(defs))
	}
	if st.Events != total {
		t.Errorf("Events = %d, want %d", st.Events, total)
	}
	if st.Skipped != skipped || st.Notifications != total-skipped || len(ns) != total-skipped {
		t.Errorf("Skipped = %d, Notifications = %d, len = %d; want %d, %d", st.Skipped, st.Notifications, len(ns), skipped, total-skipped)
	}
	if !reflect.DeepEqual(st.ByType, wantByType) {
		t.Errorf("ByType = %v\nwant %v", st.ByType, wantByType)
	}
	if !reflect.DeepEqual(st.SkippedByType, wantSkippedByType) {
		t.Errorf("SkippedByType = %v\nwant %v", st.SkippedByType, wantSkippedByType)
	}
	if !reflect.DeepEqual(st.ByRecipient, wantByRecipient) {
		t.Errorf("ByRecipient = %v\nwant %v", st.ByRecipient, wantByRecipient)
	}

	// Every example of an event is either produced or skipped under its category.
	perCategory := map[string]int{}
	for typ, n := range st.ByType {
		perCategory[strings.SplitN(typ, ".", 2)[0]] += n
	}
	for typ, n := range st.SkippedByType {
		perCategory[strings.SplitN(typ, ".", 2)[0]] += n
	}
	if !reflect.DeepEqual(perCategory, examplesPerEvent) {
		t.Errorf("produced+skipped per event = %v\nwant %v", perCategory, examplesPerEvent)
	}
	if examplesPerEvent["issue_comment"] == 0 || examplesPerEvent["pull_request"] == 0 || examplesPerEvent["issues"] == 0 {
		t.Fatalf("the examples file lacks issue_comment, issues or pull_request examples: %v", examplesPerEvent)
	}

	for _, n := range ns {
		ref := exampleRef{n.Event, n.Index}
		if !reflect.DeepEqual(n.Input.Recipients, wantRecipients[ref]) {
			t.Errorf("%s[%d] recipients = %v, want %v", n.Event, n.Index, n.Input.Recipients, wantRecipients[ref])
		}
		ex := defsExample(defs, n.Event, n.Index)
		if want := exampleType(n.Event, ex); n.Input.Type != want || n.Input.Category != n.Event || n.Action != str(ex, "action") {
			t.Errorf("%s[%d] type %q category %q action %q, want %q %q %q", n.Event, n.Index, n.Input.Type, n.Input.Category, n.Action, want, n.Event, str(ex, "action"))
		}
		if err := n.Input.Validate(); err != nil {
			t.Errorf("%s[%d] invalid: %v", n.Event, n.Index, err)
		}
	}

	// The figures, for the report.
	type kv struct {
		k string
		v int
	}
	var top []kv
	for k, v := range st.ByRecipient {
		top = append(top, kv{k, v})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].v > top[j].v || top[i].v == top[j].v && top[i].k < top[j].k })
	t.Logf("definitions %d, examples %d, notifications %d, skipped %d, types %d, top recipients %v",
		st.Definitions, st.Events, st.Notifications, st.Skipped, len(st.ByType), top)
}

func defsExample(defs []rawDef, event string, index int) map[string]any {
	for _, d := range defs {
		if d.Name == event && index < len(d.Examples) {
			return d.Examples[index]
		}
	}
	return nil
}

func find(ns []Notification, event string, index int) *Notification {
	for i := range ns {
		if ns[i].Event == event && ns[i].Index == index {
			return &ns[i]
		}
	}
	return nil
}

var codertocat = &inbox.Actor{
	ActorID:   "Codertocat",
	Name:      "Codertocat",
	AvatarURL: "https://avatars1.githubusercontent.com/u/21031067?v=4",
	URL:       "https://github.com/Codertocat",
}

// TestHandPicked checks examples read by hand in index.json.
func TestHandPicked(t *testing.T) {
	ns, st, raw := parseExamples(t)
	defs := rawDefs(t, raw)
	cases := []struct {
		event      string
		index      int
		action     string
		recipients []string
		actor      *inbox.Actor
		target     inbox.Target
		title      string
		body       string
		payload    string
	}{
		{
			event: "pull_request", index: 21, action: "review_requested",
			// The owner and author Codertocat is the sender; octocat is the requested reviewer.
			recipients: []string{"octocat"},
			actor:      codertocat,
			target: inbox.Target{
				Kind: "pull_request", TargetID: "MDExOlB1bGxSZXF1ZXN0Mjc5MTQ3NDM3",
				Title: "Update the README with new information.",
				URL:   "https://github.com/Codertocat/Hello-World/pull/2",
			},
			title:   "Codertocat requested a review from octocat on pull request #2: Update the README with new information.",
			body:    "This is a pretty simple change that we need to pull into master.",
			payload: `{"repository":"Codertocat/Hello-World","event":"pull_request","action":"review_requested","number":2,"html_url":"https://github.com/Codertocat/Hello-World/pull/2"}`,
		},
		{
			event: "pull_request_review_comment", index: 1, action: "created",
			recipients: []string{"octocat"},
			actor:      codertocat,
			target: inbox.Target{
				Kind: "comment", TargetID: "MDI0OlB1bGxSZXF1ZXN0UmV2aWV3Q29tbWVudDI4NDMxMjYzMA==",
				Title: "Update the README with new information.",
				URL:   "https://github.com/Codertocat/Hello-World/pull/2#discussion_r284312630",
			},
			title:   "Codertocat commented on pull request #2: Update the README with new information.",
			body:    "Maybe you should use more emoji on this line.",
			payload: `{"repository":"Codertocat/Hello-World","event":"pull_request_review_comment","action":"created","number":2,"html_url":"https://github.com/Codertocat/Hello-World/pull/2#discussion_r284312630"}`,
		},
		{
			event: "issues", index: 21, action: "transferred",
			// The repository belongs to the octo-org organization, which also authored the issue.
			recipients: []string{"octo-org"},
			actor:      codertocat,
			target: inbox.Target{
				Kind: "issue", TargetID: "MDExOlB1bGxSZXF1ZXN0MzMyNzAzOTcz",
				Title: "Update package.json",
				URL:   "https://github.com/octo-org/hello-world-npm/pull/1",
			},
			title:   "Codertocat transferred issue #1: Update package.json",
			body:    "",
			payload: `{"repository":"octo-org/octo-repo","event":"issues","action":"transferred","number":1,"html_url":"https://github.com/octo-org/hello-world-npm/pull/1"}`,
		},
		{
			event: "check_suite", index: 7, action: "rerequested",
			// A bot sender: the repository owner is notified, the bot is the actor.
			recipients: []string{"Codertocat"},
			actor: &inbox.Actor{
				ActorID: "octocoders-linter[bot]", Name: "octocoders-linter[bot]",
				AvatarURL: "https://avatars1.githubusercontent.com/u/38302899?v=4",
				URL:       "https://github.com/apps/octocoders-linter",
			},
			target: inbox.Target{
				Kind: "repository", TargetID: "MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI=",
				Title: "Codertocat/Hello-World", URL: "https://github.com/Codertocat/Hello-World",
			},
			title:   "octocoders-linter[bot]: check suite rerequested in Codertocat/Hello-World",
			payload: `{"repository":"Codertocat/Hello-World","event":"check_suite","action":"rerequested","html_url":"https://github.com/Codertocat/Hello-World"}`,
		},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s[%d]", c.event, c.index), func(t *testing.T) {
			if ex := defsExample(defs, c.event, c.index); str(ex, "action") != c.action {
				t.Fatalf("the examples file changed: %s[%d] has action %q, this test read %q", c.event, c.index, str(ex, "action"), c.action)
			}
			n := find(ns, c.event, c.index)
			if n == nil {
				t.Fatal("no notification")
			}
			in := n.Input
			if in.Type != c.event+"."+c.action || in.Category != c.event {
				t.Errorf("type %q category %q", in.Type, in.Category)
			}
			if !reflect.DeepEqual(in.Recipients, c.recipients) {
				t.Errorf("recipients = %v, want %v", in.Recipients, c.recipients)
			}
			if !reflect.DeepEqual(in.Actor, c.actor) {
				t.Errorf("actor = %+v, want %+v", in.Actor, c.actor)
			}
			if in.Target == nil || *in.Target != c.target {
				t.Errorf("target = %+v, want %+v", in.Target, c.target)
			}
			if in.Title != c.title {
				t.Errorf("title = %q, want %q", in.Title, c.title)
			}
			if in.Body != c.body {
				t.Errorf("body = %q, want %q", in.Body, c.body)
			}
			if string(in.Payload) != c.payload {
				t.Errorf("payload = %s, want %s", in.Payload, c.payload)
			}
		})
	}

	// issue_comment[0] (created): Codertocat comments on their own issue in their own
	// repository, assigned to themselves: nobody else to notify, so it is skipped.
	if ex := defsExample(defs, "issue_comment", 0); str(ex, "action") != "created" || str(ex, "sender", "login") != "Codertocat" {
		t.Fatalf("the examples file changed: issue_comment[0] is %q by %q", str(ex, "action"), str(ex, "sender", "login"))
	}
	if n := find(ns, "issue_comment", 0); n != nil {
		t.Errorf("issue_comment[0] produced %+v, want it skipped", n.Input)
	}
	if st.SkippedByType["issue_comment.created"] == 0 {
		t.Error("no issue_comment.created counted as skipped")
	}
}

// TestIssueCommentFromAnotherUser takes the real issue_comment.created example, makes
// octocat the commenter and adds mentions to the comment.
func TestIssueCommentFromAnotherUser(t *testing.T) {
	defs := rawDefs(t, examplesFile(t))
	ex := defsExample(defs, "issue_comment", 0)
	ex["sender"] = map[string]any{"login": "octocat", "avatar_url": "https://avatars.example/octocat", "html_url": "https://github.com/octocat"}
	comment := obj(ex, "comment")
	comment["body"] = "You are totally right! cc @hubot, @Codertocat and @OctoCat; not `@inline`, me@example.com or @org/team.\r\n```\n@fenced\n```\n@mona-lisa."
	index, err := json.Marshal([]map[string]any{{"name": "issue_comment", "examples": []any{ex}}})
	if err != nil {
		t.Fatal(err)
	}
	ns, st, err := Parse(bytes.NewReader(index))
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 || st.Notifications != 1 || st.ByType["issue_comment.created"] != 1 {
		t.Fatalf("got %d notifications, stats %+v", len(ns), st)
	}
	in := ns[0].Input
	// Codertocat: owner, author, assignee, and mentioned (once); octocat: the sender.
	if want := []string{"Codertocat", "hubot", "mona-lisa"}; !reflect.DeepEqual(in.Recipients, want) {
		t.Errorf("recipients = %v, want %v", in.Recipients, want)
	}
	if want := "octocat commented on issue #1: Spelling error in the README file"; in.Title != want {
		t.Errorf("title = %q, want %q", in.Title, want)
	}
	want := inbox.Target{
		Kind: "comment", TargetID: "MDEyOklzc3VlQ29tbWVudDQ5MjcwMDQwMA==",
		Title: "Spelling error in the README file",
		URL:   "https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400",
	}
	if in.Target == nil || *in.Target != want {
		t.Errorf("target = %+v, want %+v", in.Target, want)
	}
	if in.Actor == nil || in.Actor.ActorID != "octocat" || in.Actor.URL != "https://github.com/octocat" {
		t.Errorf("actor = %+v", in.Actor)
	}
	if strings.Contains(in.Body, "\r") || !strings.HasPrefix(in.Body, "You are totally right!") {
		t.Errorf("body = %q", in.Body)
	}
}

func TestSenderNeverRecipient(t *testing.T) {
	ns, _, raw := parseExamples(t)
	defs := rawDefs(t, raw)
	for _, n := range ns {
		sender := str(defsExample(defs, n.Event, n.Index), "sender", "login")
		for _, r := range n.Input.Recipients {
			if strings.EqualFold(r, sender) {
				t.Errorf("%s[%d]: sender %s is a recipient", n.Event, n.Index, sender)
			}
		}
		if sender != "" && (n.Input.Actor == nil || n.Input.Actor.ActorID != sender) {
			t.Errorf("%s[%d]: actor %+v, want sender %s", n.Event, n.Index, n.Input.Actor, sender)
		}
	}
}

func TestIdempotencyKeys(t *testing.T) {
	ns, _, raw := parseExamples(t)
	defs := rawDefs(t, raw)
	canonical := map[string]string{} // key -> canonical JSON of its example
	for _, n := range ns {
		k := n.Input.IdempotencyKey
		if err := inbox.CheckID("key", k); err != nil || !strings.HasPrefix(k, "gh:"+n.Event+":") {
			t.Errorf("%s[%d]: bad key %q (%v)", n.Event, n.Index, k, err)
		}
		c, err := json.Marshal(defsExample(defs, n.Event, n.Index))
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := canonical[k]; ok && prev != string(c) {
			t.Errorf("%s[%d]: key %s shared with a different example", n.Event, n.Index, k)
		}
		canonical[k] = string(c)
	}
	distinct := map[string]bool{}
	for _, c := range canonical {
		distinct[c] = true
	}
	if len(distinct) != len(canonical) {
		t.Errorf("%d distinct examples share %d keys", len(distinct), len(canonical))
	}

	again, _, err := Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ns, again) {
		t.Error("two parses of the same file differ")
	}

	// Key order and whitespace do not change the key; a value does.
	a, _ := idempotencyKey("ping", json.RawMessage(`{"a":1,"b":{"c":"<x>","d":12345678901234567890}}`))
	b, _ := idempotencyKey("ping", json.RawMessage(`{ "b": {"d":12345678901234567890, "c":"<x>"}, "a": 1 }`))
	c, _ := idempotencyKey("ping", json.RawMessage(`{"a":1,"b":{"c":"<x>","d":12345678901234567891}}`))
	if a != b || a == c || a == "" {
		t.Errorf("keys %q %q %q", a, b, c)
	}
}

func TestPayloadAndBody(t *testing.T) {
	ns, _, _ := parseExamples(t)
	for _, n := range ns {
		var doc map[string]any
		if err := json.Unmarshal(n.Input.Payload, &doc); err != nil {
			t.Fatalf("%s[%d]: payload %s: %v", n.Event, n.Index, n.Input.Payload, err)
		}
		if len(n.Input.Payload) > 1024 || doc["event"] != n.Event {
			t.Errorf("%s[%d]: payload %s", n.Event, n.Index, n.Input.Payload)
		}
		for k := range doc {
			switch k {
			case "repository", "event", "action", "number", "html_url":
			default:
				t.Errorf("%s[%d]: payload has %q", n.Event, n.Index, k)
			}
		}
		if utf8.RuneCountInString(n.Input.Body) > BodyMaxRunes {
			t.Errorf("%s[%d]: body of %d runes", n.Event, n.Index, utf8.RuneCountInString(n.Input.Body))
		}
		if n.Input.Target != nil && n.Input.Target.URL == "" {
			t.Errorf("%s[%d]: target without url", n.Event, n.Index)
		}
	}
	long := strings.Repeat("é", 500)
	if got := truncate(long, BodyMaxRunes); utf8.RuneCountInString(got) != BodyMaxRunes || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate: %d runes", utf8.RuneCountInString(got))
	}
	if got := truncate(" short\r\ntext ", BodyMaxRunes); got != "short\ntext" {
		t.Errorf("truncate = %q", got)
	}
}

func TestMentions(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"@octocat", []string{"octocat"}},
		{"hi @a-b and @A-B again, @c.", []string{"a-b", "c"}},
		{"mail me@example.com or x_@y", nil},
		{"@-lead @double--hyphen @trail- ok", []string{"trail"}},
		{"@" + strings.Repeat("a", 39) + " @" + strings.Repeat("b", 40), []string{strings.Repeat("a", 39)}},
		{"@org/team and @snake_case", nil},
		{"(@paren) [@bracket] \"@quote\"", []string{"paren", "bracket", "quote"}},
		{"`@span` ``a ` @double``\n```go\n@fenced\n```\n~~~\n@tilde\n~~~\n@after", []string{"after"}},
		{"unclosed `@tick", []string{"tick"}},
	} {
		if got := Mentions(c.text); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Mentions(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		`{"name":"x"}`,
		`[{"name":"","examples":[]}]`,
		`[{"name":"push","examples":[[1]]}]`,
		`[{"name":"push","examples":[{"sender":"octocat"}]}]`,
		`[{"name":"push"`,
	} {
		if _, _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("Parse(%s): no error", in)
		}
	}
}

func TestMapping(t *testing.T) {
	m := Mapping()
	for _, want := range []string{"| Recipients |", "| Type |", "| Target kind |", "| Idempotency key |", "`sender.login`"} {
		if !strings.Contains(m, want) {
			t.Errorf("Mapping lacks %q", want)
		}
	}
	if strings.Contains(m, "§") {
		t.Error("Mapping has an unreplaced §")
	}
}

// recorder is an inbox.Sender that remembers idempotency keys like the store does.
type recorder struct {
	mu      sync.Mutex
	seen    map[string]bool
	sent    []inbox.SendInput
	tenants map[string]int
	failAt  int // fail the failAt-th call (1-based) when > 0
	calls   int
}

var errBoom = errors.New("boom")

func (r *recorder) Send(ctx context.Context, tenantID string, in inbox.SendInput) (inbox.SendResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls == r.failAt {
		return inbox.SendResult{}, errBoom
	}
	if err := in.Validate(); err != nil {
		return inbox.SendResult{}, err
	}
	if r.seen == nil {
		r.seen, r.tenants = map[string]bool{}, map[string]int{}
	}
	r.tenants[tenantID]++
	if r.seen[tenantID+"\x00"+in.IdempotencyKey] {
		return inbox.SendResult{Duplicate: true}, nil
	}
	r.seen[tenantID+"\x00"+in.IdempotencyKey] = true
	r.sent = append(r.sent, in)
	return inbox.SendResult{Accepted: len(in.Recipients)}, nil
}

func TestImport(t *testing.T) {
	ns, st, _ := parseExamples(t)
	ctx := context.Background()
	rec := &recorder{}
	recipients := 0
	for _, n := range ns {
		recipients += len(n.Input.Recipients)
	}

	first, err := Import(ctx, rec, "default", ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ImportResult{Sent: st.Notifications, Accepted: recipients}); first != want {
		t.Errorf("first import = %+v, want %+v", first, want)
	}
	written := len(rec.sent)
	if written != len(ns) || rec.tenants["default"] != len(ns) {
		t.Errorf("recorded %d sends, tenants %v", written, rec.tenants)
	}

	second, err := Import(ctx, rec, "default", ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ImportResult{Sent: len(ns), Duplicates: len(ns)}); second != want {
		t.Errorf("second import = %+v, want %+v", second, want)
	}
	if len(rec.sent) != written {
		t.Errorf("second import wrote %d more", len(rec.sent)-written)
	}
}

func TestImportErrors(t *testing.T) {
	ns, _, _ := parseExamples(t)
	ctx := context.Background()

	rec := &recorder{failAt: 3}
	res, err := Import(ctx, rec, "default", ns)
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), ns[2].Input.Type) {
		t.Errorf("err = %v, want boom naming %s", err, ns[2].Input.Type)
	}
	if res.Sent != 2 || rec.calls != 3 {
		t.Errorf("res = %+v after %d calls, want stop at the third", res, rec.calls)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Import(cctx, &recorder{}, "default", ns); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v", err)
	}

	if _, err := Import(ctx, &recorder{}, "a#b", ns); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("bad tenant: err = %v", err)
	}
}
