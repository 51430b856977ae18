package rest

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/unsub"
)

// UnsubscribePath is the one-click unsubscribe route (RFC 8058), outside the service
// API's document: it takes no token, only the signed link's.
const UnsubscribePath = "/v1/unsubscribe"

// maxUnsubscribeBody bounds the form body of a one-click POST (RFC 8058's is
// "List-Unsubscribe=One-Click"); a longer one is refused.
const maxUnsubscribeBody = 4096

// PreferencesWriter is the store's preferences update (store.Store.UpdatePreferences).
type PreferencesWriter interface {
	UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error)
}

// UnsubscribeOptions configure NewUnsubscribe.
type UnsubscribeOptions struct {
	// Signer checks the links' tokens; nil: no link was ever sent, and the route answers
	// 404 (a gateway without INBOX_UNSUBSCRIBE_SECRET outside dev mode).
	Signer *unsub.Signer
	Prefs  PreferencesWriter
	Log    *slog.Logger
}

// NewUnsubscribe serves UnsubscribePath:
//   - POST ?t={token} with the form body List-Unsubscribe=One-Click, multipart or
//     urlencoded (what a mail client sends for RFC 8058's one-click, no authorization):
//     the token's user is opted out of the token's channel for its category (of the
//     channel altogether when the token has no category), and the answer is 200 (HTML
//     for a browser's form, else JSON). A replay is the same opt-out again: 200.
//   - GET ?t={token}: a page that names what the link does, with a button that POSTs;
//     it changes nothing (link scanners and prefetchers follow GETs).
//
// A token that is missing, malformed, too long or not signed by the gateway, and a POST
// without the one-click body, change nothing and answer a 400 problem
// (BAD_USER_INPUT); other methods 405.
func NewUnsubscribe(o UnsubscribeOptions) http.Handler {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Signer == nil {
			writeProblem(w, http.StatusNotFound, inbox.CodeNotFound, "one-click unsubscribe is not configured on this gateway")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST")
			writeProblem(w, http.StatusMethodNotAllowed, inbox.CodeBadUserInput, "use POST (one-click) or GET (the confirmation page)")
			return
		}
		token := r.URL.Query().Get("t")
		c, err := o.Signer.Verify(token)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, inbox.CodeBadUserInput, "the unsubscribe link is invalid (changed or not from this gateway)")
			return
		}
		if r.Method == http.MethodGet {
			page(w, http.StatusOK, unsubPage{Claims: c, Token: token})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxUnsubscribeBody)
		// RFC 8058 has mail clients send the body as multipart/form-data (SHOULD) or
		// application/x-www-form-urlencoded (MAY): ParseForm parses the latter,
		// ParseMultipartForm the former (ErrNotMultipart for any other body, whose
		// ParseForm error it would hide); MaxBytesReader bounds both.
		err = r.ParseForm()
		if err == nil {
			if err = r.ParseMultipartForm(maxUnsubscribeBody); errors.Is(err, http.ErrNotMultipart) {
				err = nil
			}
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeProblem(w, http.StatusRequestEntityTooLarge, inbox.CodePayloadTooLarge, "the body is over 4 KiB")
				return
			}
			writeProblem(w, http.StatusBadRequest, inbox.CodeBadUserInput, "the body must be the form List-Unsubscribe=One-Click")
			return
		}
		if r.PostForm.Get("List-Unsubscribe") != "One-Click" {
			writeProblem(w, http.StatusBadRequest, inbox.CodeBadUserInput, "the body must be the form List-Unsubscribe=One-Click (RFC 8058)")
			return
		}
		v := inbox.Viewer{TenantID: c.TenantID, UserID: c.UserID}
		off := inbox.SwitchChanges{c.Channel: false}
		upd := inbox.PreferencesUpdate{Channels: off}
		if c.Category != "" {
			upd = inbox.PreferencesUpdate{Categories: []inbox.CategorySwitches{{Category: c.Category, Channels: off}}}
		}
		if _, err := o.Prefs.UpdatePreferences(r.Context(), v, upd); err != nil {
			writeError(o.Log, w, r, err)
			return
		}
		o.Log.InfoContext(r.Context(), "unsubscribed by a one-click link", "tenant", c.TenantID, "user", c.UserID,
			"category", c.Category, "channel", c.Channel)
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			page(w, http.StatusOK, unsubPage{Claims: c, Done: true})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{"unsubscribed": true, "channel": c.Channel, "category": c.Category})
	})
}

// unsubPage is what the confirmation page shows. Its form posts to "?t={token}", relative
// to the page's own URL: the link's path as the mail client followed it, with whatever
// prefix INBOX_PUBLIC_URL has (an absolute /v1/unsubscribe would skip a proxy's prefix).
type unsubPage struct {
	unsub.Claims
	Token string
	Done  bool
}

var unsubTemplate = template.Must(template.New("unsub").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Unsubscribe</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;padding:.5rem 1rem}</style>
</head><body>
{{if .Done}}<h1>You are unsubscribed</h1>
<p>No more {{if .Category}}<strong>{{.Category}}</strong> {{end}}email will be sent to you. You can turn it on again in your notification preferences.</p>
{{else}}<h1>Unsubscribe</h1>
<p>Stop {{if .Category}}<strong>{{.Category}}</strong> {{else}}all {{end}}email notifications?</p>
<form method="post" action="?t={{.Token}}"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>
{{end}}</body></html>
`))

// page writes the confirmation page for p with status.
func page(w http.ResponseWriter, status int, p unsubPage) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = unsubTemplate.Execute(w, p)
}
