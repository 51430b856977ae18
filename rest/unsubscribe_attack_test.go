package rest_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/unsub"
)

// prefsLog records the preference updates NewUnsubscribe makes.
type prefsLog struct {
	mu   sync.Mutex
	upds []inbox.Viewer
}

func (p *prefsLog) UpdatePreferences(_ context.Context, v inbox.Viewer, _ inbox.PreferencesUpdate) (inbox.Preferences, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upds = append(p.upds, v)
	return inbox.Preferences{}, nil
}

func (p *prefsLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.upds)
}

// unsubServer serves rest.NewUnsubscribe over a signer and a recording preferences
// writer; tok is a valid token for tenant acme, user kim, category news.
func unsubServer(t *testing.T) (srv *httptest.Server, prefs *prefsLog, tok string) {
	t.Helper()
	s, err := unsub.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	tok, err = s.Token(unsub.Claims{TenantID: "acme", UserID: "kim", Category: "news", Channel: inbox.ChannelEmail})
	if err != nil {
		t.Fatal(err)
	}
	prefs = &prefsLog{}
	srv = httptest.NewServer(rest.NewUnsubscribe(rest.UnsubscribeOptions{Signer: s, Prefs: prefs}))
	t.Cleanup(srv.Close)
	return srv, prefs, tok
}

func doUnsub(t *testing.T, method, target, contentType string, body io.Reader) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(b)
}

// TestOneClickUnsubscribeMultipart: RFC 8058 section 3.2 has the mail receiver send
// the one-click POST as multipart/form-data (SHOULD; application/x-www-form-urlencoded
// MAY). The handler parsed only the urlencoded form, so a compliant client's click was
// refused with 400 and the user stayed subscribed.
func TestOneClickUnsubscribeMultipart(t *testing.T) {
	t.Parallel()
	srv, prefs, tok := unsubServer(t)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("List-Unsubscribe", "One-Click"); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	st, _, b := doUnsub(t, http.MethodPost, srv.URL+rest.UnsubscribePath+"?t="+url.QueryEscape(tok), mw.FormDataContentType(), &body)
	if st != 200 || !strings.Contains(b, `"unsubscribed":true`) || prefs.count() != 1 {
		t.Fatalf("multipart one-click POST: %d %s (%d updates)", st, b, prefs.count())
	}

	// A multipart body without the one-click field, and one over the bound, change nothing.
	body.Reset()
	mw = multipart.NewWriter(&body)
	_ = mw.WriteField("List-Unsubscribe", "Nope")
	_ = mw.Close()
	if st, ct, b := doUnsub(t, http.MethodPost, srv.URL+rest.UnsubscribePath+"?t="+url.QueryEscape(tok), mw.FormDataContentType(), &body); st != 400 || ct != rest.ProblemContentType {
		t.Fatalf("multipart without the one-click value: %d %s %s", st, ct, b)
	}
	body.Reset()
	mw = multipart.NewWriter(&body)
	_ = mw.WriteField("List-Unsubscribe", "One-Click")
	_ = mw.WriteField("pad", strings.Repeat("x", 1<<20))
	_ = mw.Close()
	if st, ct, b := doUnsub(t, http.MethodPost, srv.URL+rest.UnsubscribePath+"?t="+url.QueryEscape(tok), mw.FormDataContentType(), &body); st != 413 || ct != rest.ProblemContentType {
		t.Fatalf("a 1 MiB multipart body: %d %s %s", st, ct, b)
	}
	if prefs.count() != 1 {
		t.Fatalf("refused requests made %d updates", prefs.count()-1)
	}
}
