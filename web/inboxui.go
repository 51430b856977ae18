package web

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"time"
)

// inboxJS is the built bundle of web/inbox-ui (make inbox-ui; scripts/check-inbox-ui.sh
// checks that the sources reproduce it).
//
//go:embed inbox-ui/dist/inbox.js
var inboxJS []byte

// InboxJSETag is the strong ETag of the embedded bundle: a quoted hex SHA-256 prefix.
var InboxJSETag = func() string {
	sum := sha256.Sum256(inboxJS)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// InboxJS serves the inbox web components (<inbox-bell>, <inbox-feed>, <inbox-preferences>)
// as one ES module at /ui/inbox.js: text/javascript, the ETag InboxJSETag (If-None-Match
// answers 304), Cache-Control "public, max-age=300" so a new gateway version is picked up
// within five minutes. CORS is the caller's (httpapi wraps it like /graphql).
func InboxJS() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("ETag", InboxJSETag)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, "inbox.js", time.Time{}, bytes.NewReader(inboxJS))
	})
}

var demoPage = template.Must(template.New("demo").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Inbox demo</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; background: #f6f8fa; }
header { display: flex; justify-content: space-between; align-items: center; padding: 8px 16px; background: #24292f; color: #fff; }
header inbox-bell { --inbox-bell-color: #fff; }
main { max-width: 720px; margin: 16px auto; background: #fff; border: 1px solid #d0d7de; border-radius: 8px; }
h1 { font-size: 16px; margin: 0; }
</style>
<script type="module" src="/ui/inbox.js"></script>
</head><body>
<header><h1>Inbox demo: {{.User}}</h1><inbox-bell id="bell"></inbox-bell></header>
<main><inbox-feed id="feed"></inbox-feed></main>
<script type="module">
const getToken = async () => {
  const r = await fetch('/demo/token', { cache: 'no-store' });
  if (!r.ok) throw new Error('demo token: HTTP ' + r.status);
  return (await r.text()).trim();
};
for (const el of document.querySelectorAll('inbox-bell, inbox-feed')) el.getToken = getToken;
</script>
</body></html>
`))

// Demo serves the dev mode's demo: GET /demo, a page with <inbox-bell> and <inbox-feed>
// signed in as the demo user, and GET /demo/token, a fresh token of that user from mint
// (text/plain, no-store). Only app wiring in dev mode mounts it. Errors of mint answer 500.
func Demo(user string, mint func() (string, error)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /demo", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_ = demoPage.Execute(w, struct{ User string }{user})
	})
	mux.HandleFunc("GET /demo/token", func(w http.ResponseWriter, _ *http.Request) {
		tok, err := mint()
		if err != nil {
			http.Error(w, "cannot sign the demo token", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(tok))
	})
	return mux
}
