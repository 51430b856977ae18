package web

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// GraphiQLOptions configures the GraphiQL page.
type GraphiQLOptions struct {
	// Endpoint is the GraphQL endpoint the page talks to, over HTTP for queries and
	// mutations and over WebSocket (ws: or wss:, following the page) for subscriptions.
	// "" means "/graphql".
	Endpoint string
	// DefaultHeaders is the JSON text pre-filled in the header editor, e.g.
	// {"Authorization":"Bearer …"}; "" for none. Headers are never persisted in the
	// browser's storage, so a stale token cannot override it on reload.
	DefaultHeaders string
	// AssetsDir is the node_modules directory holding the GraphiQL assets; "" looks for
	// ./node_modules in the working directory.
	AssetsDir string
	// Title is the page title; "" means "Inbox gateway · GraphiQL".
	Title string
}

// AssetPrefix is the path under which GraphiQL serves its local assets.
const AssetPrefix = "/graphiql/assets/"

// asset is one file the page loads: from node_modules when present, else from the CDN.
type asset struct {
	// name is the file's name under AssetPrefix.
	name string
	// file is its path under node_modules, slash-separated.
	file string
	// cdn is the same file of the same version on a CDN.
	cdn string
	// contentType is the type it is served with.
	contentType string
}

// Pinned versions of the page's assets; they match package.json.
const (
	graphiqlVersion  = "3.8.3"
	reactVersion     = "18.3.1"
	graphqlWSVersion = "5.16.0"
)

// assets is the whitelist of files served under AssetPrefix, in the order the page loads
// them (React before ReactDOM before GraphiQL, which reads both from globals).
var assets = []asset{
	{"graphiql.min.css", "graphiql/graphiql.min.css",
		"https://unpkg.com/graphiql@" + graphiqlVersion + "/graphiql.min.css", "text/css; charset=utf-8"},
	{"react.production.min.js", "react/umd/react.production.min.js",
		"https://unpkg.com/react@" + reactVersion + "/umd/react.production.min.js", "text/javascript; charset=utf-8"},
	{"react-dom.production.min.js", "react-dom/umd/react-dom.production.min.js",
		"https://unpkg.com/react-dom@" + reactVersion + "/umd/react-dom.production.min.js", "text/javascript; charset=utf-8"},
	{"graphql-ws.min.js", "graphql-ws/umd/graphql-ws.min.js",
		"https://unpkg.com/graphql-ws@" + graphqlWSVersion + "/umd/graphql-ws.min.js", "text/javascript; charset=utf-8"},
	{"graphiql.min.js", "graphiql/graphiql.min.js",
		"https://unpkg.com/graphiql@" + graphiqlVersion + "/graphiql.min.js", "text/javascript; charset=utf-8"},
}

// DefaultQuery is the query the editor opens with when the browser has none stored.
const DefaultQuery = `# Welcome to the inbox gateway.
#
# Your token goes in the Headers tab:
#   {"Authorization": "Bearer <token>"}
# Subscriptions use a WebSocket on the same
# endpoint and send these headers in its
# connection_init. Try the live badge count:
#
#   subscription { unreadCount }

query Inbox {
  viewer {
    unreadCount
    inbox(first: 10) {
      edges {
        cursor
        node {
          id
          type
          title
          read
          createdAt
          actor { name avatarUrl }
          target { kind title url }
        }
      }
      pageInfo { hasNextPage endCursor }
    }
  }
}
`

// pageConfig is the page's configuration, embedded as a JavaScript object literal.
type pageConfig struct {
	Endpoint     string `json:"endpoint"`
	Headers      string `json:"headers"`
	DefaultQuery string `json:"defaultQuery"`
}

// pageData is what the template renders.
type pageData struct {
	Title   string
	CSS     string
	Scripts []string
	// Config is marshalled to JSON by html/template's JavaScript escaper, which also
	// escapes "<", ">", "&" and U+2028/U+2029, so no header value can close the script.
	Config pageConfig
}

var pageTemplate = template.Must(template.New("graphiql").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>{{.Title}}</title>
<link rel="stylesheet" href="{{.CSS}}">
<style>
html, body { height: 100%; margin: 0; }
#graphiql { height: 100vh; }
#graphiql > .loading { font: 14px system-ui, sans-serif; padding: 2em; color: #555; }
</style>
</head>
<body>
<div id="graphiql"><div class="loading">Loading GraphiQL…</div></div>
{{range .Scripts}}<script src="{{.}}"></script>
{{end}}<script>
(function () {
  "use strict";
  var config = {{.Config}};
  var root = document.getElementById("graphiql");
  if (!window.React || !window.ReactDOM || !window.GraphiQL) {
    root.firstChild.textContent = "GraphiQL could not be loaded: its scripts are neither in node_modules nor reachable on the CDN.";
    return;
  }

  // The endpoint, and the same path over ws: or wss: for subscriptions.
  var httpUrl = new URL(config.endpoint, window.location.href);
  var wsUrl = new URL(httpUrl.href);
  wsUrl.protocol = httpUrl.protocol === "https:" ? "wss:" : "ws:";

  function parseHeaders(text) {
    if (!text || !text.trim()) { return {}; }
    try {
      var v = JSON.parse(text);
      return v && typeof v === "object" && !Array.isArray(v) ? v : {};
    } catch (e) {
      return {};
    }
  }

  // GraphiQL hands the header editor's content to the fetcher with every operation
  // (including the subscription itself), so currentHeaders is always what the user sees.
  var currentHeaders = parseHeaders(config.headers);

  // The graphql-ws client: its connection_init payload is the current headers, so the
  // gateway authenticates the socket with {"Authorization": "Bearer ..."}. A client is
  // bound to the headers it connected with; when they change, the next subscription
  // opens a new socket with the new ones.
  var client = null;
  var clientKey = null;
  function clientFor(headers) {
    var key = JSON.stringify(headers);
    if (client && key === clientKey) { return client; }
    if (client) { client.dispose(); }
    clientKey = key;
    client = window.graphqlWs.createClient({
      url: wsUrl.href,
      connectionParams: function () { return headers; },
      // A rejected token (4401/4403) will not get better by retrying: report it at once.
      shouldRetry: function (e) { return !(e && (e.code === 4401 || e.code === 4403)); }
    });
    return client;
  }
  // toErrors turns what graphql-ws reports as a failure into GraphQL errors: the
  // server's errors as they are, a close event or a network failure as one message.
  function toErrors(e) {
    if (Array.isArray(e)) { return e; }
    if (e && typeof e.code === "number" && "reason" in e) {
      return [{ message: "WebSocket closed with code " + e.code + (e.reason ? ": " + e.reason : "") }];
    }
    if (e instanceof Error) { return [{ message: e.message }]; }
    return [{ message: "WebSocket connection to " + wsUrl.href + " failed" }];
  }
  // A failure is delivered as a result with errors, then completion: GraphiQL shows it
  // in the result pane (its own sink.error would also leave an unhandled rejection).
  var wsClient = window.graphqlWs ? {
    subscribe: function (payload, sink) {
      return clientFor(currentHeaders).subscribe(payload, {
        next: function (value) { sink.next(value); },
        complete: function () { sink.complete(); },
        error: function (e) { sink.next({ errors: toErrors(e) }); sink.complete(); }
      });
    },
    dispose: function () { if (client) { client.dispose(); client = null; } }
  } : undefined;

  // Without the graphql-ws script, GraphiQL's bundled client serves subscriptionUrl and
  // also sends the operation's headers as connection_init payload (one socket each).
  var baseFetcher = GraphiQL.createFetcher({
    url: httpUrl.href,
    subscriptionUrl: wsUrl.href,
    wsClient: wsClient
  });
  function fetcher(params, opts) {
    if (opts) { currentHeaders = opts.headers || {}; }
    return baseFetcher(params, opts);
  }

  var props = {
    fetcher: fetcher,
    defaultQuery: config.defaultQuery,
    shouldPersistHeaders: false,
    isHeadersEditorEnabled: true
  };
  if (config.headers) {
    props.headers = config.headers;
    props.defaultHeaders = config.headers;
    props.defaultEditorToolsVisibility = "headers";
  }
  ReactDOM.createRoot(root).render(React.createElement(GraphiQL, props));
})();
</script>
</body>
</html>
`))

// graphiqlHandler serves the page and its local assets.
type graphiqlHandler struct {
	page []byte
	// renderErr is true when the page failed to render.
	renderErr bool
	// files maps a path under AssetPrefix to its whitelisted asset, for the assets found
	// in node_modules when the handler was built.
	files map[string]localAsset
}

// localAsset is a whitelisted asset present on disk.
type localAsset struct {
	path        string
	contentType string
}

// GraphiQL returns the handler of the GraphiQL page. It serves the page at "/" and, for
// the assets present under opts.AssetsDir when it is called, those files under
// AssetPrefix; every other path is 404. The page uses the local copy of each asset that
// exists and the pinned CDN copy of each one that does not. Only GET and HEAD are allowed.
// Mount it at the root of the server's mux (or below a prefix with http.StripPrefix: the
// page refers to its assets by relative URLs).
func GraphiQL(opts GraphiQLOptions) http.Handler {
	if opts.Endpoint == "" {
		opts.Endpoint = "/graphql"
	}
	if opts.Title == "" {
		opts.Title = "Inbox gateway · GraphiQL"
	}
	dir := opts.AssetsDir
	if dir == "" {
		dir = "node_modules"
	}
	h := &graphiqlHandler{files: make(map[string]localAsset)}
	data := pageData{Title: opts.Title, Config: pageConfig{
		Endpoint:     opts.Endpoint,
		Headers:      prettyJSON(opts.DefaultHeaders),
		DefaultQuery: DefaultQuery,
	}}
	for _, a := range assets {
		url := a.cdn
		p := filepath.Join(dir, filepath.FromSlash(a.file))
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			h.files[AssetPrefix+a.name] = localAsset{path: p, contentType: a.contentType}
			// Relative, so that the page also works below a prefix.
			url = "." + AssetPrefix + a.name
		}
		if strings.HasSuffix(a.name, ".css") {
			data.CSS = url
		} else {
			data.Scripts = append(data.Scripts, url)
		}
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, data); err != nil {
		// The template and its data are fixed in this package, so this cannot happen;
		// should it, the page answers 500 rather than the process panicking.
		h.renderErr = true
	}
	h.page = buf.Bytes()
	return h
}

// prettyJSON indents s when it is valid JSON, and returns it unchanged otherwise (the
// header editor then shows the user what was configured, with GraphiQL's own error).
func prettyJSON(s string) string {
	s = strings.TrimSpace(s)
	var buf bytes.Buffer
	if s == "" || json.Indent(&buf, []byte(s), "", "  ") != nil {
		return s
	}
	return buf.String()
}

// ServeHTTP serves the page at "/" and the local assets under AssetPrefix.
func (h *graphiqlHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, isAsset := h.files[r.URL.Path]
	if r.URL.Path != "/" && !isAsset {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	if isAsset {
		serveAsset(w, r, a)
		return
	}
	if h.renderErr {
		http.Error(w, "GraphiQL page unavailable", http.StatusInternalServerError)
		return
	}
	// The page may carry a development token in its pre-filled headers.
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(h.page)
}

// serveAsset serves one whitelisted file, with conditional requests and ranges handled by
// http.ServeContent.
func serveAsset(w http.ResponseWriter, r *http.Request, a localAsset) {
	f, err := os.Open(a.path)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, filepath.Base(a.path), fi.ModTime(), f)
}
