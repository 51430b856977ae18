package app_test

import (
	"bytes"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/internal/testgw"
)

// devMailPage is what GET /dev/mail?format=json answers.
type devMailPage struct {
	Received uint64 `json:"received"`
	Messages []struct {
		Subject string   `json:"subject"`
		To      []string `json:"to"`
		HTML    string   `json:"html"`
	} `json:"messages"`
	Sends []struct {
		NotificationID string `json:"notificationId"`
		UserID         string `json:"userId"`
		Channel        string `json:"channel"`
		Status         string `json:"status"`
		Reason         string `json:"reason"`
		Explain        string `json:"explain"`
	} `json:"sends"`
}

// A dev gateway's /dev/mail says why no mail came (the recent sends' channels, a skipped
// email's reason) and renders the HTML part of the mail that came in a sandboxed frame:
// through the real HTTP surface, its scheduler delivering to its own catcher.
func TestDevMailSaysWhyNoMailCameAndRendersTheHTMLPart(t *testing.T) {
	t.Parallel()
	s := testgw.NewWith(t, testgw.Options{Scheduler: true, Config: func(c *app.Config) {
		c.Dev, c.DevSMTPAddr = true, "127.0.0.1:0"
	}})
	base := s.HTTP.URL
	admin := s.Token("default", "svc", auth.ScopeSend, auth.ScopeAdmin)
	do := func(method, path, key string, body any, want int) map[string]any {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	page := func() (devMailPage, string) {
		t.Helper()
		resp, err := http.Get(base + app.DevMailPath + "?format=json")
		if err != nil {
			t.Fatal(err)
		}
		var p devMailPage
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp, err = http.Get(base + app.DevMailPath)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return p, string(b)
	}

	if p, text := page(); len(p.Sends) != 0 || !strings.Contains(text, "No send since start.") {
		t.Fatalf("a new gateway lists sends: %+v\n%s", p, text)
	}
	do(http.MethodPut, "/v1/users/ann", "", map[string]any{"email": "ann@example.test"}, 200)
	htmlPart := `<p class="hi">Hello <b>{{ name }}</b> & "friends"</p><script>parent.alert(1)</script>`
	do(http.MethodPut, "/v1/templates/welcome", "", map[string]any{"locale": "en", "title": "Welcome {{ name }}", "body": "Hello",
		"email": map[string]any{"subject": "Welcome, {{ name }}", "html": htmlPart, "text": "Hello {{ name }}"}}, 200)
	do(http.MethodPut, "/v1/users/ann/preferences", "", map[string]any{"channels": map[string]any{"email": false}}, 200)
	first := do(http.MethodPost, "/v1/notifications", "w-1", map[string]any{"recipientUserId": "ann", "type": "welcome",
		"template": "welcome", "data": map[string]any{"name": "Ann"}}, 202)["notificationId"].(string)

	// The send answers at accept; its recipient is written a moment later.
	waitFor := func(what string, done func(devMailPage) bool) (devMailPage, string) {
		t.Helper()
		var p devMailPage
		var text string
		testgw.WaitFor(t, 30*time.Second, what, func() bool {
			p, text = page()
			return done(p)
		})
		return p, text
	}
	p, text := waitFor("the first send listed", func(p devMailPage) bool { return len(p.Sends) > 0 })
	if len(p.Messages) != 0 || len(p.Sends) == 0 || p.Sends[0].NotificationID != first || p.Sends[0].UserID != "ann" {
		t.Fatalf("after an opted-out send: %+v", p)
	}
	var email bool
	for _, o := range p.Sends {
		if o.Channel == "EMAIL" {
			email = o.Status == "SKIPPED" && o.Reason == "opted_out" && strings.Contains(o.Explain, "preferences")
		}
	}
	if !email || !strings.Contains(text, "No mail yet. The recent sends skipped 1 channel") ||
		!strings.Contains(text, "<td><code>"+first+"</code></td><td>ann</td><td>EMAIL</td><td>SKIPPED</td><td><code>opted_out</code>") {
		t.Fatalf("the page does not say the email was skipped opted_out: %+v\n%s", p, text)
	}

	do(http.MethodPut, "/v1/users/ann/preferences", "", map[string]any{"channels": map[string]any{"email": true}}, 200)
	second := do(http.MethodPost, "/v1/notifications", "w-2", map[string]any{"recipientUserId": "ann", "type": "welcome",
		"template": "welcome", "data": map[string]any{"name": "Ann"}}, 202)["notificationId"].(string)
	p, text = waitFor("the second send's mail", func(p devMailPage) bool {
		for _, o := range p.Sends {
			if o.NotificationID == second && o.Channel == "EMAIL" && o.Status == "SENT" {
				return len(p.Messages) > 0
			}
		}
		return false
	})
	if p.Sends[0].NotificationID != second || p.Messages[0].Subject != "Welcome, Ann" || p.Messages[0].To[0] != "ann@example.test" {
		t.Fatalf("after the second send: %+v", p)
	}
	// The HTML part is rendered in a frame that runs nothing: its markup is escaped inside
	// srcdoc, so it neither ends the attribute nor adds an element to the page.
	frame := `<iframe sandbox="" title="HTML part of Welcome, Ann" srcdoc="` + html.EscapeString(p.Messages[0].HTML) + `"></iframe>`
	if !strings.Contains(p.Messages[0].HTML, "<script>parent.alert(1)</script>") || !strings.Contains(text, frame) || strings.Contains(text, "<script>") ||
		strings.Contains(text, "<b>Ann</b>") {
		t.Fatalf("the page does not frame the HTML part as %s:\n%s", frame, text)
	}
}
