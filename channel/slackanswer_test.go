package channel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
)

// rawSlack answers every chat.postMessage with status and body as they are; cut sends a
// Content-Length longer than the body, so the client's read ends early.
func rawSlack(t *testing.T, status int, body string, cut bool) channel.Channel {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if cut {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)+1000))
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	ch, err := channel.NewSlack(channel.SlackConfig{BotToken: "xoxb-1", BaseURL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// escapedEcho is the "message" Slack echoes for text, escaped as Slack's JSON escapes it
// (every character outside ASCII as \uXXXX, each emoji a surrogate pair: 12 bytes).
func escapedEcho(text string) string {
	var b strings.Builder
	for _, r := range text {
		if r < 0x80 {
			js, _ := json.Marshal(string(r))
			b.WriteString(strings.Trim(string(js), `"`))
			continue
		}
		if r > 0xffff {
			r -= 0x10000
			b.WriteString(`\u` + strconv.FormatInt(int64(0xd800+(r>>10)), 16) + `\u` + strconv.FormatInt(int64(0xdc00+(r&0x3ff)), 16))
		} else {
			b.WriteString(`\u` + strconv.FormatInt(int64(r), 16))
		}
	}
	return `{"type":"message","subtype":"bot_message","text":"` + b.String() + `","blocks":[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"` + b.String() + `"}]}]}]}`
}

// Slack's "ok": true is the message posted, however long the answer that says it:
// chat.postMessage echoes the message, so a long one (40,000 characters, escaped) makes
// an answer far over what other providers send, and one cut after "ok" still said it.
// Each answer here is a success the adapter used to read as "not the Web API's JSON"
// (Transient: the worker posted the message again, up to its attempts). Answers that
// never said "ok": true stay transient or permanent as before.
func TestSlackLongOrCutSuccessIsSent(t *testing.T) {
	t.Parallel()
	emoji := strings.Repeat("🚀", 20000)
	lt := strings.Repeat("<", 40000)
	for name, tc := range map[string]struct {
		body string
		cut  bool
	}{
		"slack order, long ascii echo": {body: `{"ok":true,"channel":"D024BE7LH","ts":"1503435956.000247","message":` + escapedEcho(strings.Repeat("a", 40000)) + `}`},
		"slack order, escaped emoji":   {body: `{"ok":true,"channel":"D024BE7LH","ts":"1503435956.000247","message":` + escapedEcho(emoji) + `}`},
		"sorted keys, escaped <":       {body: `{"channel":"D024BE7LH","message":` + escapedEcho(lt) + `,"ok":true,"ts":"1503435956.000247"}`},
		"cut inside the echo":          {body: `{"ok":true,"channel":"D024BE7LH","ts":"1503435956.000247","message":{"text":"half`, cut: true},
		"cut after ok":                 {body: `{"ok":true,"channel":"D024BE7LH","ts":"1503435956.000247"`, cut: true},
		"long answer, then garbage":    {body: `{"ok":true,"channel":"D024BE7LH","ts":"1503435956.000247","message":` + escapedEcho(emoji) + `,"x":}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := rawSlack(t, http.StatusOK, tc.body, tc.cut).Send(context.Background(), slackMessage("U024BE7LH"))
			if err != nil || res.MessageID != "D024BE7LH:1503435956.000247" || res.Provider != channel.ProviderSlack {
				t.Fatalf("Send = %+v, %v; want posted as D024BE7LH:1503435956.000247", res, err)
			}
		})
	}
	// "ok": true, then the answer hangs (a proxy holding the rest): sent, without
	// waiting for the timeout that made it a transient failure, posted again.
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"channel":"D024BE7LH","ts":"1503435956.000247","message":{"text":"`))
		w.(http.Flusher).Flush()
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	ch, err := channel.NewSlack(channel.SlackConfig{BotToken: "xoxb-1", BaseURL: srv.URL, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ch.Send(context.Background(), slackMessage("U024BE7LH")); err != nil || res.MessageID != "D024BE7LH:1503435956.000247" {
		t.Errorf("ok, then a hang: %+v, %v; want posted", res, err)
	}
	for name, tc := range map[string]struct {
		status int
		body   string
		cut    bool
		kind   channel.Kind
		code   string
	}{
		"html page":                 {status: 200, body: "<html>captive portal</html>", kind: channel.Transient},
		"empty":                     {status: 200, body: "", kind: channel.Transient},
		"an array":                  {status: 200, body: `[{"ok":true}]`, kind: channel.Transient},
		"ok as a string":            {status: 200, body: `{"ok":"true","channel":"D1","ts":"1.2"}`, kind: channel.Transient},
		"cut before ok":             {status: 200, body: `{"channel":"D024BE7LH","ts":"1.2","message":{"text":"half`, cut: true, kind: channel.Transient},
		"ok beyond what is read":    {status: 200, body: `{"message":` + escapedEcho(strings.Repeat(lt, 3)) + `,"ok":true,"channel":"D1","ts":"1.2"}`, kind: channel.Transient},
		"ok false, no error":        {status: 200, body: `{"ok":false}`, kind: channel.Transient},
		"ok false after long field": {status: 200, body: `{"warning":"` + strings.Repeat("w", 100<<10) + `","ok":false,"error":"channel_not_found"}`, kind: channel.Permanent, code: "channel_not_found"},
		"ok true with a 500":        {status: 500, body: `{"ok":true,"channel":"D1","ts":"1.2"}`, kind: channel.Transient},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := rawSlack(t, tc.status, tc.body, tc.cut).Send(context.Background(), slackMessage("U024BE7LH"))
			wantError(t, err, tc.kind, tc.status, tc.code)
		})
	}
}
