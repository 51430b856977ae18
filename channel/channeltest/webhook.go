package channeltest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// WebhookResponse is how a WebhookReceiver answers one request.
type WebhookResponse struct {
	// Status is the HTTP status; 200 when 0.
	Status int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Body is the response body.
	Body string
	// Hold withholds the answer until the request's context ends (the client gives up)
	// or the receiver is closed: a receiver that hangs.
	Hold bool
}

// WebhookRequest is one request a WebhookReceiver got.
type WebhookRequest struct {
	Method string
	Header http.Header
	Body   []byte
	// VerifyErr is the Standard Webhooks library's verdict on the signature (Verify:
	// signature and timestamp tolerance); nil when valid.
	VerifyErr error
	At        time.Time
}

// WebhookReceiver is an http.Handler that records each request, verifies its Standard
// Webhooks signature with the reference library, and answers: 401 when the signature
// is invalid, else the next scripted response (Respond), else the default (200). Its
// methods are safe for concurrent use.
type WebhookReceiver struct {
	wh *standardwebhooks.Webhook

	mu       sync.Mutex
	queue    []WebhookResponse
	def      WebhookResponse
	reqs     []WebhookRequest
	changed  chan struct{}
	closed   chan struct{}
	isClosed bool
}

// NewWebhookReceiver returns a receiver verifying with secret, keyed as the webhook
// adapter keys it: a "whsec_" secret is base64 of the key, any other its raw bytes. It
// panics on a malformed "whsec_" secret (a test's mistake).
func NewWebhookReceiver(secret string) *WebhookReceiver {
	var wh *standardwebhooks.Webhook
	var err error
	if strings.HasPrefix(secret, "whsec_") {
		wh, err = standardwebhooks.NewWebhook(secret)
	} else {
		wh, err = standardwebhooks.NewWebhookRaw([]byte(secret))
	}
	if err != nil {
		panic(fmt.Sprintf("channeltest: webhook secret: %v", err))
	}
	return &WebhookReceiver{wh: wh, changed: make(chan struct{}), closed: make(chan struct{})}
}

// StartWebhook serves a NewWebhookReceiver(secret) on 127.0.0.1 for the test and returns
// it with its URL; both are closed when the test ends.
func StartWebhook(t testing.TB, secret string) (*WebhookReceiver, string) {
	t.Helper()
	r := NewWebhookReceiver(secret)
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		r.Close()
		srv.Close()
	})
	return r, srv.URL + "/hook"
}

// Respond queues responses for the next requests with a valid signature, in order.
func (r *WebhookReceiver) Respond(resps ...WebhookResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, resps...)
}

// SetDefault sets the answer once the queue is empty (initially 200).
func (r *WebhookReceiver) SetDefault(resp WebhookResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.def = resp
}

// Requests returns the requests received, oldest first.
func (r *WebhookReceiver) Requests() []WebhookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]WebhookRequest(nil), r.reqs...)
}

// WaitRequests waits until n requests were received and returns them, or ctx's error.
func (r *WebhookReceiver) WaitRequests(ctx context.Context, n int) ([]WebhookRequest, error) {
	for {
		r.mu.Lock()
		got, ch := len(r.reqs), r.changed
		r.mu.Unlock()
		if got >= n {
			return r.Requests(), nil
		}
		select {
		case <-ctx.Done():
			return r.Requests(), fmt.Errorf("channeltest: %d of %d webhook requests: %w", got, n, ctx.Err())
		case <-ch:
		}
	}
}

// Close ends held answers.
func (r *WebhookReceiver) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isClosed {
		r.isClosed = true
		close(r.closed)
	}
}

// ServeHTTP records, verifies and answers one request (see WebhookReceiver).
func (r *WebhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := WebhookRequest{Method: req.Method, Header: req.Header.Clone(), Body: body, At: time.Now()}
	rec.VerifyErr = r.wh.Verify(body, req.Header)
	r.mu.Lock()
	r.reqs = append(r.reqs, rec)
	close(r.changed)
	r.changed = make(chan struct{})
	resp := r.def
	if rec.VerifyErr != nil {
		resp = WebhookResponse{Status: http.StatusUnauthorized, Body: "invalid signature: " + rec.VerifyErr.Error()}
	} else if len(r.queue) > 0 {
		resp, r.queue = r.queue[0], r.queue[1:]
	}
	closed := r.closed
	r.mu.Unlock()

	if resp.Hold {
		select {
		case <-req.Context().Done():
		case <-closed:
		}
		return
	}
	if resp.RetryAfter != "" {
		w.Header().Set("Retry-After", resp.RetryAfter)
	}
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	w.WriteHeader(resp.Status)
	_, _ = io.WriteString(w, resp.Body)
}
