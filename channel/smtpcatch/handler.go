package smtpcatch

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// SendOutcome is one channel of a recent send, listed by the page beside the mail so that
// a reader sees why no mail came (a channel skipped: the user opted out, the address is
// suppressed, the profile has no address).
type SendOutcome struct {
	// At is when the send wrote the recipient.
	At time.Time `json:"at"`
	// NotificationID is the id the send's status is read under (GET
	// /v1/notifications/{id}/status); UserID the recipient.
	NotificationID string `json:"notificationId"`
	UserID         string `json:"userId"`
	// Channel is the channel (EMAIL, IN_APP, ...), Status its record's status (QUEUED,
	// SENT, SKIPPED, ...), Reason why it was skipped ("" unless SKIPPED), Explain the
	// reason in words and what changes it ("" when there is nothing to explain).
	Channel string `json:"channel"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Explain string `json:"explain,omitempty"`
}

// Sends returns the channels of the last sends, newest first; Handler lists them.
type Sends func(ctx context.Context) ([]SendOutcome, error)

// Handler serves the kept messages, newest first: GET answers a small HTML page, or
// JSON ({"received": n, "messages": [Message...], "sends": [SendOutcome...]}) when the
// request asks for it (`Accept: application/json` or `?format=json`); DELETE forgets
// them (Reset) and answers 204. Other methods get 405.
//
// The page shows each message's text part and renders its HTML part in a sandboxed
// iframe (sandbox="": no script, no form, no navigation of the page, an opaque origin;
// the page's Content-Security-Policy loads nothing remote), with its source beside it.
// When sends is not nil the page also lists the channels of the recent sends it returns
// ("Recent sends"), so that a skipped email says why; an error of sends is shown in
// that section (the mail is still served).
func (c *Catcher) Handler(sends Sends) http.Handler {
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
		var (
			outcomes []SendOutcome
			sendsErr string
		)
		if sends != nil {
			var err error
			if outcomes, err = sends(r.Context()); err != nil {
				sendsErr = err.Error()
			}
		}
		if outcomes == nil {
			outcomes = []SendOutcome{}
		}
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			if msgs == nil {
				msgs = []Message{}
			}
			_ = json.NewEncoder(w).Encode(struct {
				Received   uint64        `json:"received"`
				Messages   []Message     `json:"messages"`
				Sends      []SendOutcome `json:"sends"`
				SendsError string        `json:"sendsError,omitempty"`
			}{c.Received(), msgs, outcomes, sendsErr})
			return
		}
		skipped := 0
		for _, o := range outcomes {
			if o.Reason != "" {
				skipped++
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// The iframes' srcdoc documents inherit this policy: a caught message's remote
		// images, scripts and styles sheets load nothing; inline styles and data: images
		// (what an email carries itself) show.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'")
		_ = page.Execute(w, struct {
			Received   uint64
			Messages   []Message
			ListSends  bool
			Sends      []SendOutcome
			Skipped    int
			SendsError string
		}{c.Received(), msgs, sends != nil, outcomes, skipped, sendsErr})
	})
}

// page is the catcher's HTML page. html/template escapes every value for its context: the
// HTML part inside srcdoc is attribute-escaped (quotes and ampersands), so it cannot end
// the attribute, and the sandboxed frame runs none of it.
var page = template.Must(template.New("mail").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Dev mail ({{len .Messages}})</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:60em}article{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1em 0}
dl{display:grid;grid-template-columns:7em 1fr;margin:0}dt{color:#666}pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em;margin:.4em 0}
details summary{cursor:pointer;color:#555}iframe{width:100%;height:24em;border:1px solid #ddd;background:#fff}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3em .5em;border-bottom:1px solid #eee;vertical-align:top}
.skip{color:#a40}code{font-size:13px}</style></head>
<body><h1>Dev mail</h1>
<p>{{.Received}} received since start; the newest {{len .Messages}} kept, newest first. JSON: <a href="?format=json">?format=json</a>.</p>
{{range .Messages}}<article id="m{{.ID}}">
<h2>{{if .Subject}}{{.Subject}}{{else}}(no subject){{end}}</h2>
<dl><dt>From</dt><dd>{{.From}}</dd><dt>To</dt><dd>{{range $i, $t := .To}}{{if $i}}, {{end}}{{$t}}{{end}}</dd>
<dt>Received</dt><dd>{{.ReceivedAt.Format "2006-01-02 15:04:05Z07:00"}}</dd><dt>Message-ID</dt><dd>{{.MessageID}}</dd></dl>
{{if .HTML}}<iframe sandbox="" title="HTML part of {{.Subject}}" srcdoc="{{.HTML}}"></iframe>
{{if .Text}}<details><summary>Text part</summary><pre>{{.Text}}</pre></details>{{end}}
<details><summary>HTML part (source)</summary><pre>{{.HTML}}</pre></details>
{{else if .Text}}<pre>{{.Text}}</pre>{{end}}
</article>{{else}}<p id="no-mail">No mail yet.{{if .Skipped}} The recent sends skipped {{.Skipped}} channel{{if ne .Skipped 1}}s{{end}}: see why under "Recent sends".{{end}}</p>{{end}}
{{if .ListSends}}<section id="recent-sends"><h2>Recent sends</h2>
{{if .SendsError}}<p class="skip">The recent sends could not be read: {{.SendsError}}</p>{{end}}
{{if .Sends}}<p>The channels of the last sends this gateway wrote, newest first. A skipped channel names its reason.</p>
<table><thead><tr><th>Notification</th><th>User</th><th>Channel</th><th>Status</th><th>Reason</th></tr></thead><tbody>
{{range .Sends}}<tr{{if .Reason}} class="skip"{{end}}><td><code>{{.NotificationID}}</code></td><td>{{.UserID}}</td><td>{{.Channel}}</td><td>{{.Status}}</td><td>{{if .Reason}}<code>{{.Reason}}</code>{{if .Explain}}: {{.Explain}}{{end}}{{end}}</td></tr>
{{end}}</tbody></table>{{else if not .SendsError}}<p>No send since start.</p>{{end}}
</section>{{end}}
</body></html>
`))
