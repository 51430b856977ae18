package smtpcatch

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
)

// Handler serves the kept messages, newest first: GET answers a small HTML page, or
// JSON ({"received": n, "messages": [Message...]}) when the request asks for it
// (`Accept: application/json` or `?format=json`); DELETE forgets them (Reset) and
// answers 204. Other methods get 405. The page shows each message's text part and its
// HTML source as text, never rendered (a catcher must not run what it catches).
func (c *Catcher) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodDelete:
			c.Reset()
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			w.Header().Set("Allow", "GET, HEAD, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		msgs := c.Messages()
		for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
			msgs[i], msgs[j] = msgs[j], msgs[i]
		}
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			if msgs == nil {
				msgs = []Message{}
			}
			_ = json.NewEncoder(w).Encode(struct {
				Received uint64    `json:"received"`
				Messages []Message `json:"messages"`
			}{c.Received(), msgs})
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		_ = page.Execute(w, struct {
			Received uint64
			Messages []Message
		}{c.Received(), msgs})
	})
}

var page = template.Must(template.New("mail").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Dev mail ({{len .Messages}})</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:60em}article{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1em 0}
dl{display:grid;grid-template-columns:7em 1fr;margin:0}dt{color:#666}pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em;margin:.4em 0}
details summary{cursor:pointer;color:#555}</style></head>
<body><h1>Dev mail</h1>
<p>{{.Received}} received since start; the newest {{len .Messages}} kept, newest first. JSON: <a href="?format=json">?format=json</a>.</p>
{{range .Messages}}<article id="m{{.ID}}">
<h2>{{if .Subject}}{{.Subject}}{{else}}(no subject){{end}}</h2>
<dl><dt>From</dt><dd>{{.From}}</dd><dt>To</dt><dd>{{range $i, $t := .To}}{{if $i}}, {{end}}{{$t}}{{end}}</dd>
<dt>Received</dt><dd>{{.ReceivedAt.Format "2006-01-02 15:04:05Z07:00"}}</dd><dt>Message-ID</dt><dd>{{.MessageID}}</dd></dl>
{{if .Text}}<pre>{{.Text}}</pre>{{end}}
{{if .HTML}}<details><summary>HTML part (source)</summary><pre>{{.HTML}}</pre></details>{{end}}
</article>{{else}}<p>No mail yet.</p>{{end}}
</body></html>
`))
