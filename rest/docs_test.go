package rest_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// GET /v1/docs answers an HTML page that loads the vendored Redoc bundle and points it at
// the served OpenAPI document, both on the gateway itself (nothing from another origin);
// the bundle is served gzipped to a client that accepts gzip, decompressed to one that
// does not, and 304 to one that has it.
func TestAPIDocsRenderTheServedDocumentOffline(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	page := call(t, s, http.MethodGet, "/v1/docs", "", nil, nil)
	if page.Status != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /v1/docs: %d %s", page.Status, page.Header.Get("Content-Type"))
	}
	html := string(page.Body)
	if m := regexp.MustCompile(`(?i)(src|href|spec-url)="(https?:)?//`).FindString(html); m != "" {
		t.Fatalf("the page loads %s from another origin:\n%s", m, html)
	}
	if !strings.Contains(html, `http-equiv="Content-Security-Policy" content="default-src 'self'; script-src 'self';`) {
		t.Fatalf("the page's policy does not keep it on the gateway's origin:\n%s", html)
	}
	base, _ := url.Parse(s.HTTP.URL + "/v1/docs")
	attr := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(html)
		if m == nil {
			t.Fatalf("the page has no %s:\n%s", re, html)
		}
		u, err := base.Parse(m[1])
		if err != nil {
			t.Fatal(err)
		}
		return u.Path
	}
	if spec := attr(`<redoc spec-url="([^"]+)"`); spec != "/v1/openapi.json" {
		t.Fatalf("Redoc renders %s, want the served document /v1/openapi.json", spec)
	}
	script := attr(`<script src="([^"]+)"`)
	if script != "/v1/docs/redoc.standalone.js" {
		t.Fatalf("the page loads %s, want the vendored bundle", script)
	}

	gz := call(t, s, http.MethodGet, script, "", map[string]string{"Accept-Encoding": "gzip, deflate, br"}, nil)
	if gz.Status != http.StatusOK || gz.Header.Get("Content-Encoding") != "gzip" || gz.Header.Get("Vary") != "Accept-Encoding" ||
		!strings.HasPrefix(gz.Header.Get("Content-Type"), "text/javascript") || gz.Header.Get("ETag") == "" {
		t.Fatalf("GET %s accepting gzip: %d %v", script, gz.Status, gz.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.Body))
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// The bundle defines the <redoc> element's renderer (its global Redoc.init).
	if len(js) < 1<<20 || !bytes.Contains(js, []byte("Redoc")) || !bytes.Contains(js, []byte("spec-url")) {
		t.Fatalf("the bundle is %d bytes, without Redoc or spec-url", len(js))
	}
	t.Logf("bundle: %d bytes, %d gzipped", len(js), len(gz.Body))

	plain := call(t, s, http.MethodGet, script, "", map[string]string{"Accept-Encoding": "gzip;q=0, identity"}, nil)
	if plain.Status != http.StatusOK || plain.Header.Get("Content-Encoding") != "" || !bytes.Equal(plain.Body, js) {
		t.Fatalf("GET %s refusing gzip: %d %v, %d bytes (want the %d of the bundle)", script, plain.Status, plain.Header, len(plain.Body), len(js))
	}
	again := call(t, s, http.MethodGet, script, "", map[string]string{"If-None-Match": gz.Header.Get("ETag")}, nil)
	if again.Status != http.StatusNotModified || len(again.Body) != 0 {
		t.Fatalf("GET %s with its ETag: %d, %d bytes", script, again.Status, len(again.Body))
	}
	if other := call(t, s, http.MethodGet, script, "", map[string]string{"If-None-Match": `"other"`, "Accept-Encoding": "gzip"}, nil); other.Status != http.StatusOK {
		t.Fatalf("GET %s with another ETag: %d", script, other.Status)
	}
	if post := call(t, s, http.MethodPost, "/v1/docs", "", nil, nil); post.Status != http.StatusMethodNotAllowed {
		t.Fatalf("POST /v1/docs: %d %s", post.Status, post.Body)
	}
}
