package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/app"
	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/web"
)

// uiGateway is a gateway with /demo signed in as user "ann" and another origin's page
// (localhost instead of 127.0.0.1) allowed; it returns the gateway's base URL and the
// other origin's page URL.
func uiGateway(t *testing.T) (*testgw.Server, string, string) {
	var s *testgw.Server
	s = testgw.NewWith(t, testgw.Options{
		Config: func(c *app.Config) { c.AllowedOrigins = []string{"localhost:*"} },
		Handler: func(o *httpapi.Options) {
			o.DemoUser = "ann"
			o.DemoToken = func() (string, error) {
				return s.Verifier.Sign(auth.Claims{TenantID: "default", UserID: "ann"}, time.Hour)
			}
		},
	})
	base := strings.TrimSuffix(s.URL, "/graphql")
	tok := s.Token("default", "ann")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>other origin</title>
<script type="module" src="%[1]s/ui/inbox.js"></script>
<inbox-bell id="bell" endpoint="%[1]s/graphql" token="%[2]s"></inbox-bell>
<inbox-feed id="feed" endpoint="%[1]s/graphql" token="%[2]s" locale="de"></inbox-feed>`, base, tok)
	}))
	t.Cleanup(other.Close)
	return s, base, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
}

// The bundle is served with its ETag (304 on If-None-Match), a cache lifetime and CORS
// for an allowed origin only.
func TestInboxJSServed(t *testing.T) {
	_, base, _ := uiGateway(t)
	get := func(h map[string]string) *http.Response {
		req, _ := http.NewRequest("GET", base+"/ui/inbox.js", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	r := get(map[string]string{"Origin": "http://localhost:5173"})
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript") ||
		r.Header.Get("ETag") != web.InboxJSETag || r.Header.Get("Cache-Control") == "" ||
		!strings.Contains(string(body), "inbox-feed") {
		t.Fatalf("status %d headers %v, %d bytes", r.StatusCode, r.Header, len(body))
	}
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != "http://localhost:5173" {
		t.Errorf("allowed origin: Access-Control-Allow-Origin %q", got)
	}
	if got := get(map[string]string{"Origin": "https://evil.example"}).Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("other origin: Access-Control-Allow-Origin %q", got)
	}
	if r := get(map[string]string{"If-None-Match": web.InboxJSETag}); r.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: status %d", r.StatusCode)
	}
}

// /demo exists only when the handler has a demo token minter (dev mode with a demo import),
// and its token endpoint mints a token of the demo user.
func TestDemoOnlyWithDemoUser(t *testing.T) {
	s, base, _ := uiGateway(t)
	resp, err := http.Get(base + "/demo/token")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c, err := s.Verifier.Verify(string(tok))
	if err != nil || c.UserID != "ann" {
		t.Fatalf("demo token: %v %+v", err, c)
	}
	plain := testgw.New(t)
	resp, err = http.Get(strings.TrimSuffix(plain.URL, "/graphql") + "/demo/token")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := plain.Verifier.Verify(strings.TrimSpace(string(body))); err == nil {
		t.Fatalf("a gateway without a demo user minted %q", body)
	}
}

// The components in Debian's Chromium (puppeteer-core) against this gateway: render,
// paging, live update within 2 s, marks, archive, snooze, keyboard, axe-core, another
// origin (web/inbox-ui/test/browser.mjs). INBOX_UI_MEASURE=1 also measures;
// INBOX_UI_SHOT names where the demo's screenshot goes.
func TestInboxUIInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	s, base, other := uiGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script, _ := filepath.Abs("inbox-ui/test/browser.mjs")
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = "inbox-ui"
	cmd.Env = append(os.Environ(), "BASE="+base, "SVC="+s.ServiceToken("default", "ui-test"), "USER=ann", "OTHER="+other,
		"SHOT="+os.Getenv("INBOX_UI_SHOT"), "MEASURE="+os.Getenv("INBOX_UI_MEASURE"))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("browser test: %v", err)
	}
}
