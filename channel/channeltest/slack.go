package channeltest

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Slack is a local Slack Web API serving POST /chat.postMessage as Slack documents it:
// HTTP 200 with {"ok": true, "channel", "ts", "message"} or {"ok": false, "error"}.
// Checks, with Slack's errors: a bearer token (not_authed without one, invalid_auth for
// another than Token, token_revoked once Revoke was called), a JSON or form body
// (invalid_json when unreadable), a channel (channel_not_found when missing or not a
// Slack id, user_not_found for an id Users does not hold when Users is set), text or
// blocks (no_text), text at most 40,000 characters (msg_too_long). Then the next queued
// SlackAnswer, else success: ts is a fresh "seconds.micros" timestamp and channel the
// user's direct-message channel ("D" + the user id's tail).
//
// Every request is recorded. The server closes at the test's end.
type Slack struct {
	// URL is SlackConfig.BaseURL.
	URL string
	// Token is the bot token the server accepts.
	Token string
	// Users, when not nil, are the user ids that exist (others: user_not_found).
	Users map[string]bool

	srv *httptest.Server
	*script[SlackAnswer, SlackRequest]
	revoked atomic.Bool
	seq     atomic.Int64
}

// SlackAnswer is a scripted answer. The zero value is the server's ordinary behaviour.
type SlackAnswer struct {
	// Status is the HTTP status (0: 200); Error Slack's error string ({"ok": false}).
	Status int
	Error  string
	// RetryAfter is sent as the Retry-After header when not "" (Slack sends it with 429
	// ratelimited).
	RetryAfter string
	// Body, when set, is sent as is instead of the JSON answer.
	Body string
	// Hang: never answer; the handler waits until the client gives up.
	Hang bool
}

// SlackRateLimited is Slack's rate-limit answer: HTTP 429, error ratelimited, Retry-After
// seconds.
func SlackRateLimited(seconds int) SlackAnswer {
	return SlackAnswer{Status: http.StatusTooManyRequests, Error: "ratelimited", RetryAfter: strconv.Itoa(seconds)}
}

// SlackRequest is one request as the server received it.
type SlackRequest struct {
	Header http.Header
	// Token is the bearer token; Channel and Text the message's.
	Token, Channel, Text string
	// OK and Error are what the server answered (neither: it hung or sent a raw Body);
	// Channel and TS the posted message's on success.
	OK                      bool
	Error                   string
	PostedChannel, PostedTS string
}

// slackID is the shape of a Slack user, channel or conversation id.
var slackID = regexp.MustCompile(`^[UWCDG][A-Z0-9]{2,20}$`)

// NewSlack starts a Slack server with a fresh bot token.
func NewSlack(t testing.TB) *Slack {
	t.Helper()
	s := &Slack{Token: "xoxb-" + hexID(12), script: newScript[SlackAnswer, SlackRequest]()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /chat.postMessage", s.postMessage)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.script.close()
		s.srv.Close()
	})
	s.URL = s.srv.URL
	return s
}

// Queue scripts the answers to the next requests that pass the server's checks, in order.
func (s *Slack) Queue(a ...SlackAnswer) {
	s.queue(a...)
}

// Revoke makes the token revoked: every later request answers token_revoked.
func (s *Slack) Revoke() { s.revoked.Store(true) }

// Requests returns the requests received so far.
func (s *Slack) Requests() []SlackRequest {
	return s.requests()
}

func (s *Slack) postMessage(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := SlackRequest{Header: r.Header.Clone()}
	rec.Token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var msg struct {
		Channel string          `json:"channel"`
		Text    string          `json:"text"`
		Blocks  json.RawMessage `json:"blocks"`
	}
	bodyErr := ""
	switch ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct {
	case "application/json":
		if json.Unmarshal(raw, &msg) != nil {
			bodyErr = "invalid_json"
		}
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(raw))
		if err != nil {
			bodyErr = "invalid_form_data"
		}
		msg.Channel, msg.Text = form.Get("channel"), form.Get("text")
		if rec.Token == "" {
			rec.Token = form.Get("token")
		}
	default:
		bodyErr = "invalid_form_data"
	}
	rec.Channel, rec.Text = msg.Channel, msg.Text
	fail := ""
	switch {
	case rec.Token == "":
		fail = "not_authed"
	case rec.Token != s.Token:
		fail = "invalid_auth"
	case s.revoked.Load():
		fail = "token_revoked"
	case bodyErr != "":
		fail = bodyErr
	case !slackID.MatchString(msg.Channel):
		fail = "channel_not_found"
	case s.Users != nil && !s.Users[msg.Channel]:
		fail = "user_not_found"
	case strings.TrimSpace(msg.Text) == "" && len(msg.Blocks) == 0:
		fail = "no_text"
	case len([]rune(msg.Text)) > 40000:
		fail = "msg_too_long"
	}
	var ans SlackAnswer
	if fail != "" {
		ans.Error = fail
	} else {
		ans = s.next()
	}
	if ans.Hang {
		s.record(rec)
		s.hang(r)
		return
	}
	if ans.RetryAfter != "" {
		w.Header().Set("Retry-After", ans.RetryAfter)
	}
	status := ans.Status
	if status == 0 {
		status = http.StatusOK
	}
	if ans.Body != "" {
		s.record(rec)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, ans.Body)
		return
	}
	if ans.Error != "" || status != http.StatusOK {
		rec.Error = ans.Error
		s.record(rec)
		answerJSON(w, status, map[string]any{"ok": false, "error": ans.Error})
		return
	}
	rec.OK = true
	rec.PostedChannel = "D" + msg.Channel[1:]
	now := time.Now()
	rec.PostedTS = strconv.FormatInt(now.Unix(), 10) + "." + strconv.FormatInt(1e5+s.seq.Add(1)%9e5, 10)
	s.record(rec)
	answerJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": rec.PostedChannel, "ts": rec.PostedTS,
		"message": map[string]any{"type": "message", "subtype": "bot_message", "text": msg.Text, "ts": rec.PostedTS}})
}
