package web

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// get serves one request through h.
func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "http://gateway.test/", nil)
	req.URL.Path = path // set directly, so that ".." segments reach the handler as sent
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// fakeAssets creates every whitelisted asset under a temporary node_modules and returns it.
func fakeAssets(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node_modules")
	for _, a := range assets {
		p := filepath.Join(dir, filepath.FromSlash(a.file))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("/* fake "+a.name+" */"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A file next to the whitelisted ones that must never be served.
	if err := os.WriteFile(filepath.Join(dir, "graphiql", "package.json"), []byte(`{"secret":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	srcRe  = regexp.MustCompile(`<script src="([^"]+)"`)
	hrefRe = regexp.MustCompile(`<link rel="stylesheet" href="([^"]+)"`)
	cfgRe  = regexp.MustCompile(`var config = (.*);\n`)
)

// assetURLs returns the stylesheet and script URLs of page, in order.
func assetURLs(t *testing.T, page string) []string {
	t.Helper()
	var urls []string
	for _, m := range hrefRe.FindAllStringSubmatch(page, -1) {
		urls = append(urls, html.UnescapeString(m[1]))
	}
	for _, m := range srcRe.FindAllStringSubmatch(page, -1) {
		urls = append(urls, html.UnescapeString(m[1]))
	}
	if len(urls) != len(assets) {
		t.Fatalf("page refers to %d assets, want %d: %q", len(urls), len(assets), urls)
	}
	return urls
}

// pageConfigOf decodes the config object embedded in page.
func pageConfigOf(t *testing.T, page string) pageConfig {
	t.Helper()
	m := cfgRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("page has no config object")
	}
	var c pageConfig
	if err := json.Unmarshal([]byte(m[1]), &c); err != nil {
		t.Fatalf("config %s: %v", m[1], err)
	}
	return c
}

func TestPageServedWithEndpointAndHeaders(t *testing.T) {
	h := GraphiQL(GraphiQLOptions{
		Endpoint:       "/api/graphql",
		DefaultHeaders: `{"Authorization":"Bearer abc.def.ghi"}`,
		AssetsDir:      fakeAssets(t),
		Title:          "Inbox <dev>",
	})
	rec := get(t, h, http.MethodGet, "/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store (the page may carry a token)", cc)
	}
	page := rec.Body.String()
	if !strings.Contains(page, "<title>Inbox &lt;dev&gt;</title>") {
		t.Error("title missing or not escaped")
	}
	c := pageConfigOf(t, page)
	if c.Endpoint != "/api/graphql" {
		t.Errorf("endpoint = %q", c.Endpoint)
	}
	var headers map[string]string
	if err := json.Unmarshal([]byte(c.Headers), &headers); err != nil || headers["Authorization"] != "Bearer abc.def.ghi" {
		t.Errorf("headers = %q (%v)", c.Headers, err)
	}
	if !strings.Contains(c.DefaultQuery, "subscription { unreadCount }") ||
		!strings.Contains(c.DefaultQuery, "inbox(first: 10)") {
		t.Errorf("default query = %q", c.DefaultQuery)
	}
	for _, want := range []string{"GraphiQL.createFetcher(", "subscriptionUrl:", "wsClient:",
		"connectionParams:", "shouldPersistHeaders: false", "graphqlWs.createClient("} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	if rec := get(t, h, http.MethodHead, "/"); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD / = %d with %d bytes", rec.Code, rec.Body.Len())
	}
	if rec := get(t, h, http.MethodPost, "/"); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST / = %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestPageDefaults(t *testing.T) {
	h := GraphiQL(GraphiQLOptions{AssetsDir: t.TempDir()})
	page := get(t, h, http.MethodGet, "/").Body.String()
	c := pageConfigOf(t, page)
	if c.Endpoint != "/graphql" || c.Headers != "" {
		t.Errorf("config = %+v, want endpoint /graphql and no headers", c)
	}
	if !strings.Contains(page, "<title>Inbox gateway · GraphiQL</title>") {
		t.Error("default title missing")
	}
}

// TestHeadersCannotBreakOutOfScript checks the JSON-in-script escaping: whatever the
// configured headers contain, the script element is not closed early and the value
// round-trips.
func TestHeadersCannotBreakOutOfScript(t *testing.T) {
	for _, hdr := range []string{
		`{"Authorization":"Bearer </script><script>alert(1)</script>"}`,
		`{"X":"<!-- \u2028 \u2029 & ' \" \\"}`,
		`not json </script>`,
	} {
		h := GraphiQL(GraphiQLOptions{DefaultHeaders: hdr, AssetsDir: t.TempDir()})
		page := get(t, h, http.MethodGet, "/").Body.String()
		if n := strings.Count(strings.ToLower(page), "</script>"); n != len(assets) { // one per script asset, plus the inline one
			t.Errorf("headers %q: page has %d </script>, want %d", hdr, n, len(assets))
		}
		if strings.Contains(page, "<!--") || strings.Contains(page, "alert(1)</") {
			t.Errorf("headers %q leaked into the markup", hdr)
		}
		got := pageConfigOf(t, page).Headers
		if got != prettyJSON(hdr) {
			t.Errorf("headers round trip: got %q, want %q", got, prettyJSON(hdr))
		}
	}
}

func TestLocalAssetsUsedWhenPresent(t *testing.T) {
	dir := fakeAssets(t)
	h := GraphiQL(GraphiQLOptions{AssetsDir: dir})
	page := get(t, h, http.MethodGet, "/").Body.String()
	base, _ := url.Parse("http://gateway.test/")
	for i, u := range assetURLs(t, page) {
		if strings.Contains(u, "://") {
			t.Errorf("asset %s uses %q, want a local URL", assets[i].name, u)
			continue
		}
		ref, err := base.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		rec := get(t, h, http.MethodGet, ref.Path)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s = %d", ref.Path, rec.Code)
			continue
		}
		if !strings.Contains(rec.Body.String(), "fake "+pathBase(ref.Path)) {
			t.Errorf("GET %s served %q", ref.Path, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/css") && !strings.HasPrefix(ct, "text/javascript") {
			t.Errorf("GET %s: Content-Type %q", ref.Path, ct)
		}
	}
}

// pathBase is the last segment of a slash-separated path.
func pathBase(p string) string { return p[strings.LastIndex(p, "/")+1:] }

func TestCDNFallback(t *testing.T) {
	dir := fakeAssets(t)
	// Remove one asset: only it falls back to the CDN.
	if err := os.Remove(filepath.Join(dir, "graphql-ws", "umd", "graphql-ws.min.js")); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"missing dir": filepath.Join(t.TempDir(), "nope"), "one missing": dir} {
		h := GraphiQL(GraphiQLOptions{AssetsDir: d})
		urls := assetURLs(t, get(t, h, http.MethodGet, "/").Body.String())
		for i, u := range urls {
			wantCDN := name == "missing dir" || assets[i].name == "graphql-ws.min.js"
			if wantCDN != strings.HasPrefix(u, "https://") {
				t.Errorf("%s: asset %s at %q, want CDN %v", name, assets[i].name, u, wantCDN)
			}
			if wantCDN && u != assets[i].cdn {
				t.Errorf("%s: CDN URL %q, want %q", name, u, assets[i].cdn)
			}
		}
	}
	// The CDN URLs are pinned to the versions of package.json.
	for _, a := range assets {
		if !regexp.MustCompile(`@\d+\.\d+\.\d+/`).MatchString(a.cdn) {
			t.Errorf("CDN URL %q is not pinned to an exact version", a.cdn)
		}
	}
	// A missing asset is not served either.
	h := GraphiQL(GraphiQLOptions{AssetsDir: dir})
	if rec := get(t, h, http.MethodGet, AssetPrefix+"graphql-ws.min.js"); rec.Code != http.StatusNotFound {
		t.Errorf("missing asset: %d, want 404", rec.Code)
	}
}

func TestOnlyWhitelistedPathsServed(t *testing.T) {
	h := GraphiQL(GraphiQLOptions{AssetsDir: fakeAssets(t)})
	for _, p := range []string{
		"/index.html",
		"/graphql",
		"/graphiql",
		AssetPrefix,
		AssetPrefix + "package.json",
		AssetPrefix + "graphiql/package.json",
		AssetPrefix + "graphiql/graphiql.min.js",
		AssetPrefix + "../graphiql/package.json",
		AssetPrefix + "../../../../etc/passwd",
		AssetPrefix + "..%2fgraphiql%2fpackage.json",
		AssetPrefix + "graphiql.min.js/",
		AssetPrefix + "graphiql.min.js/../../../graphiql/package.json",
		"/../node_modules/graphiql/graphiql.min.js",
		"/node_modules/graphiql/graphiql.min.js",
	} {
		rec := get(t, h, http.MethodGet, p)
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %q = %d, want 404", p, rec.Code)
		}
		if strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("GET %q leaked a file", p)
		}
	}
	// Through a real server, where the client and the mux clean paths their own way.
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, p := range []string{"/graphiql/assets/../../graphiql/package.json", "/graphiql/assets/%2e%2e/graphiql/package.json",
		"/graphiql/assets/..%2Fgraphiql%2Fpackage.json"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "secret") {
			t.Errorf("GET %q = %d %q, want 404", p, resp.StatusCode, body)
		}
	}
}

// TestRealNodeModules checks, against the project's own node_modules, that every asset the
// page refers to is present and served locally, so a wrong path fails here rather than
// in a browser.
func TestRealNodeModules(t *testing.T) {
	dir := filepath.Join("..", "node_modules")
	if _, err := os.Stat(filepath.Join(dir, "graphiql", "package.json")); err != nil {
		t.Skipf("no node_modules with graphiql (run npm ci): %v", err)
	}
	// The installed versions are the pinned ones the CDN fallback uses.
	for pkg, want := range map[string]string{"graphiql": graphiqlVersion, "react": reactVersion,
		"react-dom": reactVersion, "graphql-ws": graphqlWSVersion} {
		b, err := os.ReadFile(filepath.Join(dir, pkg, "package.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Version string }
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Version != want {
			t.Errorf("node_modules/%s is %s, the page pins %s", pkg, meta.Version, want)
		}
	}

	h := GraphiQL(GraphiQLOptions{AssetsDir: dir})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	base, _ := url.Parse(srv.URL + "/")
	for _, u := range assetURLs(t, string(page)) {
		if strings.Contains(u, "://") {
			t.Errorf("asset %q is not local although node_modules exists", u)
			continue
		}
		ref, _ := base.Parse(u)
		resp, err := http.Get(ref.String())
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n < 1000 {
			t.Errorf("GET %s = %d, %d bytes", ref.Path, resp.StatusCode, n)
		}
	}
}
