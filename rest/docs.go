package rest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/inboxgw/gateway/rest/gen"
)

// RedocBundlePath is where the gateway serves Redoc's standalone bundle, the script of the
// API reference at /v1/docs.
const RedocBundlePath = "/v1/docs/redoc.standalone.js"

// redocBundleGz is Redoc's standalone bundle, gzipped, vendored by scripts/vendor-redoc.sh
// (rest/redoc/: the pinned version in VERSION, its LICENSE). Never edited by hand.
//
//go:embed redoc/redoc.standalone.js.gz
var redocBundleGz []byte

// redocETag names the vendored bundle's bytes: a new version is a new tag.
var redocETag = func() string {
	sum := sha256.Sum256(redocBundleGz)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}()

// docsPage is the API reference: Redoc rendering the served document. Both URLs are
// relative to /v1/docs, so the page works behind a path prefix too; its
// Content-Security-Policy loads nothing from another origin (Redoc's attribution logo
// comes from a CDN: it is left out rather than fetched).
const docsPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'">
<link rel="icon" href="data:,">
<title>Inbox gateway: REST API reference</title>
<style>body{margin:0}</style></head>
<body><redoc spec-url="openapi.json"></redoc>
<script src="docs/redoc.standalone.js"></script>
</body></html>
`

// GetAPIDocs answers the API reference page (docsPage).
func (s *server) GetAPIDocs(context.Context, gen.GetAPIDocsRequestObject) (gen.GetAPIDocsResponseObject, error) {
	return gen.GetAPIDocs200TexthtmlResponse{Body: strings.NewReader(docsPage), ContentLength: int64(len(docsPage))}, nil
}

// GetRedocBundle answers the vendored bundle: its gzipped bytes as they are to a client
// that accepts gzip, decompressed for one that does not; 304 when If-None-Match names it.
func (s *server) GetRedocBundle(_ context.Context, req gen.GetRedocBundleRequestObject) (gen.GetRedocBundleResponseObject, error) {
	etag := redocETag
	if inm := req.Params.IfNoneMatch; inm != nil && etagMatches(*inm, etag) {
		return gen.GetRedocBundle304Response{Headers: gen.GetRedocBundle304ResponseHeaders{ETag: &etag}}, nil
	}
	cache, vary := "public, max-age=3600", "Accept-Encoding"
	h := gen.GetRedocBundle200ResponseHeaders{CacheControl: &cache, ETag: &etag, Vary: &vary}
	if ae := req.Params.AcceptEncoding; ae != nil && acceptsGzip(*ae) {
		enc := "gzip"
		h.ContentEncoding = &enc
		return gen.GetRedocBundle200TextjavascriptResponse{Body: bytes.NewReader(redocBundleGz), Headers: h, ContentLength: int64(len(redocBundleGz))}, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(redocBundleGz))
	if err != nil {
		return nil, fmt.Errorf("rest: the vendored Redoc bundle: %w", err)
	}
	return gen.GetRedocBundle200TextjavascriptResponse{Body: zr, Headers: h}, nil
}

// acceptsGzip reports whether an Accept-Encoding value accepts gzip (a "gzip" or "*"
// coding whose q is not 0).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.ToLower(params), " ", "")
		if strings.HasPrefix(q, "q=0") && strings.Trim(strings.TrimPrefix(q, "q=0"), ".0") == "" {
			continue
		}
		return true
	}
	return false
}

// etagMatches reports whether an If-None-Match value names etag (or is "*").
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
