package github

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/inboxgw/gateway/inbox"
)

// BodyMaxRunes is the longest Body a notification gets, in runes, ellipsis included.
const BodyMaxRunes = 280

// keyHashHex is how many hex digits of the payload's SHA-256 go into an idempotency key.
const keyHashHex = 32

// Notification is one webhook example mapped to a send request.
type Notification struct {
	// Event is the webhook event name ("issue_comment"), Action its action ("created"),
	// empty for events without one.
	Event  string
	Action string
	// Index is the example's position in its event's examples list, for diagnostics.
	Index int
	// Input is the send request: recipients, type, category, title, body, actor, target,
	// payload and idempotency key, valid by inbox.SendInput.Validate.
	Input inbox.SendInput
}

// Stats describes what Parse saw and produced.
type Stats struct {
	// Definitions is the number of event definitions in the index (58 in webhooks-examples 7.6.1).
	Definitions int
	// Events is the number of example payloads seen, over all definitions.
	Events int
	// Notifications is the number of send requests produced (Events - Skipped).
	Notifications int
	// Skipped is the number of payloads left with no recipient.
	Skipped int
	// ByType counts the produced notifications per Type ("issue_comment.created").
	ByType map[string]int
	// SkippedByType counts the skipped payloads per Type.
	SkippedByType map[string]int
	// ByRecipient counts the produced notifications addressed to each login.
	ByRecipient map[string]int
}

// definition is one entry of index.json; the other fields are not needed.
type definition struct {
	Name     string            `json:"name"`
	Examples []json.RawMessage `json:"examples"`
}

// user is a GitHub account (user, organization or bot) as it appears in payloads.
type user struct {
	Login     string `json:"login"`
	AvatarURL string `json:"avatar_url"`
	HTMLURL   string `json:"html_url"`
}

// object holds the fields read from issues, pull requests, comments, reviews, releases,
// discussions and repositories; each kind uses a subset.
type object struct {
	ID                 json.RawMessage `json:"id"`
	NodeID             string          `json:"node_id"`
	Number             int             `json:"number"`
	Title              string          `json:"title"`
	Name               string          `json:"name"`
	TagName            string          `json:"tag_name"`
	FullName           string          `json:"full_name"`
	Body               string          `json:"body"`
	HTMLURL            string          `json:"html_url"`
	State              string          `json:"state"`
	Merged             bool            `json:"merged"`
	CommitID           string          `json:"commit_id"`
	User               *user           `json:"user"`
	Owner              *user           `json:"owner"`
	Assignee           *user           `json:"assignee"`
	Assignees          []*user         `json:"assignees"`
	RequestedReviewers []*user         `json:"requested_reviewers"`
	// PullRequest is set on an issue that is a pull request.
	PullRequest json.RawMessage `json:"pull_request"`
}

// named is a label, milestone or team: only its name is read.
type named struct {
	Name  string `json:"name"`
	Title string `json:"title"`
}

// payload is the part of a webhook payload the mapping reads.
type payload struct {
	Action             string  `json:"action"`
	Number             int     `json:"number"`
	Ref                string  `json:"ref"`
	RefType            string  `json:"ref_type"`
	Sender             *user   `json:"sender"`
	Repository         *object `json:"repository"`
	Issue              *object `json:"issue"`
	PullRequest        *object `json:"pull_request"`
	Comment            *object `json:"comment"`
	Review             *object `json:"review"`
	Release            *object `json:"release"`
	Discussion         *object `json:"discussion"`
	Forkee             *object `json:"forkee"`
	Assignee           *user   `json:"assignee"`
	Assignees          []*user `json:"assignees"`
	RequestedReviewer  *user   `json:"requested_reviewer"`
	RequestedReviewers []*user `json:"requested_reviewers"`
	RequestedTeam      *named  `json:"requested_team"`
	Label              *named  `json:"label"`
	Milestone          *named  `json:"milestone"`
}

// Parse decodes an @octokit/webhooks-examples index.json from r and maps every example
// payload to a Notification, in file order (definitions, then their examples).
//
// Payloads with no recipient are skipped and counted in Stats. The result is deterministic:
// two parses of the same input give equal notifications and idempotency keys.
//
// Errors: the input is not a JSON array of definitions, a definition has no name, an example
// is not a JSON object or has fields of unexpected types, or (a mapping bug) a produced
// request fails inbox.SendInput.Validate. Errors name the event and example index.
func Parse(r io.Reader) ([]Notification, Stats, error) {
	stats := Stats{
		ByType:        map[string]int{},
		SkippedByType: map[string]int{},
		ByRecipient:   map[string]int{},
	}
	var defs []definition
	if err := json.NewDecoder(r).Decode(&defs); err != nil {
		return nil, stats, fmt.Errorf("github: decode index: %w", err)
	}
	stats.Definitions = len(defs)
	var out []Notification
	for di, d := range defs {
		if d.Name == "" {
			return nil, stats, fmt.Errorf("github: definition %d has no name", di)
		}
		for i, raw := range d.Examples {
			stats.Events++
			n, ok, err := mapExample(d.Name, i, raw)
			if err != nil {
				return nil, stats, err
			}
			if !ok {
				stats.Skipped++
				stats.SkippedByType[n.Input.Type]++
				continue
			}
			stats.Notifications++
			stats.ByType[n.Input.Type]++
			for _, rcpt := range n.Input.Recipients {
				stats.ByRecipient[rcpt]++
			}
			out = append(out, n)
		}
	}
	return out, stats, nil
}

// mapExample maps one example payload. ok is false when it has no recipient; the returned
// Notification then still carries Event, Action and Input.Type.
func mapExample(event string, index int, raw json.RawMessage) (Notification, bool, error) {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return Notification{}, false, fmt.Errorf("github: %s example %d: %w", event, index, err)
	}
	typ := event
	if p.Action != "" {
		typ = event + "." + p.Action
	}
	n := Notification{Event: event, Action: p.Action, Index: index, Input: inbox.SendInput{Type: typ, Category: event}}
	n.Input.Recipients = recipients(&p)
	if len(n.Input.Recipients) == 0 {
		return n, false, nil
	}
	key, err := idempotencyKey(event, raw)
	if err != nil {
		return Notification{}, false, fmt.Errorf("github: %s example %d: %w", event, index, err)
	}
	n.Input.IdempotencyKey = key
	n.Input.Actor = actor(&p)
	n.Input.Target = target(&p)
	n.Input.Title = title(event, &p)
	n.Input.Body = truncate(body(&p), BodyMaxRunes)
	doc := struct {
		Repository string `json:"repository,omitempty"`
		Event      string `json:"event"`
		Action     string `json:"action,omitempty"`
		Number     int    `json:"number,omitempty"`
		HTMLURL    string `json:"html_url,omitempty"`
	}{Event: event, Action: p.Action, Number: number(&p)}
	if p.Repository != nil {
		doc.Repository = p.Repository.FullName
	}
	if n.Input.Target != nil {
		doc.HTMLURL = n.Input.Target.URL
	}
	if n.Input.Payload, err = json.Marshal(doc); err != nil {
		return Notification{}, false, fmt.Errorf("github: %s example %d: payload: %w", event, index, err)
	}
	if err := n.Input.Validate(); err != nil {
		return Notification{}, false, fmt.Errorf("github: %s example %d: invalid send request: %w", event, index, err)
	}
	return n, true, nil
}

// idempotencyKey is "gh:<event>:" and the first keyHashHex hex digits of the SHA-256 of
// raw's canonical JSON: keys sorted (encoding/json sorts map keys), numbers verbatim
// (json.Number), no HTML escaping, no insignificant whitespace.
func idempotencyKey(event string, raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("canonical json: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("canonical json: %w", err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return "gh:" + event + ":" + hex.EncodeToString(sum[:])[:keyHashHex], nil
}

// recipients applies the recipient rules of the package documentation.
func recipients(p *payload) []string {
	var sender string
	if p.Sender != nil {
		sender = strings.ToLower(p.Sender.Login)
	}
	seen := map[string]bool{}
	var out []string
	add := func(login string) {
		k := strings.ToLower(login)
		if login == "" || k == sender || seen[k] || len(out) >= inbox.MaxRecipients {
			return
		}
		if inbox.CheckID("recipient", login) != nil {
			return
		}
		seen[k] = true
		out = append(out, login)
	}
	addUser := func(u *user) {
		if u != nil {
			add(u.Login)
		}
	}
	addUsers := func(us []*user) {
		for _, u := range us {
			addUser(u)
		}
	}
	if p.Repository != nil {
		addUser(p.Repository.Owner)
	}
	for _, o := range []*object{p.Issue, p.PullRequest} {
		if o != nil {
			addUser(o.User)
		}
	}
	addUser(p.Assignee)
	addUsers(p.Assignees)
	for _, o := range []*object{p.Issue, p.PullRequest} {
		if o != nil {
			addUser(o.Assignee)
			addUsers(o.Assignees)
		}
	}
	addUser(p.RequestedReviewer)
	addUsers(p.RequestedReviewers)
	if p.PullRequest != nil {
		addUsers(p.PullRequest.RequestedReviewers)
	}
	for _, o := range []*object{p.Issue, p.PullRequest, p.Comment, p.Review, p.Release} {
		if o != nil {
			for _, m := range Mentions(o.Body) {
				add(m)
			}
		}
	}
	return out
}

// actor is the sender's profile, nil without a sender.
func actor(p *payload) *inbox.Actor {
	if p.Sender == nil || inbox.CheckID("actor", p.Sender.Login) != nil {
		return nil
	}
	return &inbox.Actor{
		ActorID:   p.Sender.Login,
		Name:      p.Sender.Login,
		AvatarURL: p.Sender.AvatarURL,
		URL:       p.Sender.HTMLURL,
	}
}

// target is the most specific object of the payload (see the package documentation).
func target(p *payload) *inbox.Target {
	var t *inbox.Target
	switch {
	case p.Comment != nil:
		t = &inbox.Target{Kind: "comment", Title: commentTitle(p), URL: p.Comment.HTMLURL, TargetID: objectID(p.Comment)}
	case p.Review != nil:
		t = &inbox.Target{Kind: "review", URL: p.Review.HTMLURL, TargetID: objectID(p.Review)}
		if p.PullRequest != nil {
			t.Title = p.PullRequest.Title
		}
	case p.Release != nil:
		t = &inbox.Target{Kind: "release", Title: releaseName(p.Release), URL: p.Release.HTMLURL, TargetID: objectID(p.Release)}
	case p.PullRequest != nil:
		t = &inbox.Target{Kind: "pull_request", Title: p.PullRequest.Title, URL: p.PullRequest.HTMLURL, TargetID: objectID(p.PullRequest)}
	case p.Issue != nil:
		t = &inbox.Target{Kind: "issue", Title: p.Issue.Title, URL: p.Issue.HTMLURL, TargetID: objectID(p.Issue)}
	case p.Repository != nil:
		id := p.Repository.NodeID
		if id == "" {
			id = p.Repository.FullName
		}
		t = &inbox.Target{Kind: "repository", Title: p.Repository.FullName, URL: p.Repository.HTMLURL, TargetID: id}
	default:
		return nil
	}
	if inbox.CheckID("target", t.TargetID) != nil {
		return nil
	}
	return t
}

// objectID is o's node_id, else its numeric id as a string.
func objectID(o *object) string {
	if o.NodeID != "" {
		return o.NodeID
	}
	id := strings.Trim(string(o.ID), `"`)
	if id == "null" {
		return ""
	}
	return id
}

// commentTitle is the title of the thread a comment belongs to.
func commentTitle(p *payload) string {
	switch {
	case p.Issue != nil:
		return p.Issue.Title
	case p.PullRequest != nil:
		return p.PullRequest.Title
	case p.Discussion != nil:
		return p.Discussion.Title
	case p.Comment != nil && p.Comment.CommitID != "":
		return "commit " + shortSHA(p.Comment.CommitID)
	case p.Repository != nil:
		return p.Repository.FullName
	}
	return ""
}

func releaseName(r *object) string {
	if r.Name != "" {
		return r.Name
	}
	return r.TagName
}

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

// number is the issue, pull request or discussion number, 0 when none.
func number(p *payload) int {
	switch {
	case p.Number != 0:
		return p.Number
	case p.PullRequest != nil && p.PullRequest.Number != 0:
		return p.PullRequest.Number
	case p.Issue != nil && p.Issue.Number != 0:
		return p.Issue.Number
	case p.Discussion != nil:
		return p.Discussion.Number
	}
	return 0
}

// body is the body text of the most specific of comment, review, release, pull request and
// issue present in the payload (possibly empty), the object the target usually names.
func body(p *payload) string {
	for _, o := range []*object{p.Comment, p.Review, p.Release, p.PullRequest, p.Issue} {
		if o != nil {
			return o.Body
		}
	}
	return ""
}

// truncate normalises line endings, trims space and cuts s to at most max runes, the last
// being "…" when something was cut.
func truncate(s string, max int) string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return strings.TrimSpace(string(r[:max-1])) + "…"
}

// itoa formats an issue or pull request number.
func itoa(n int) string { return strconv.Itoa(n) }
