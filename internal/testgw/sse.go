package testgw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// SSEStream is a running SSE subscription: Events carries the data of each "next" event;
// when the stream ends, Done receives nil (a "complete" event) or the error, and Events
// is closed.
type SSEStream struct {
	T      *testing.T
	Events chan json.RawMessage
	Done   chan error
}

// SubscribeSSE posts a subscription with Accept: text/event-stream (gqlgen's SSE
// transport, the graphql-sse "distinct connections" mode) and reads its events until ctx
// ends or the stream does.
func (s *Server) SubscribeSSE(ctx context.Context, token, query string) *SSEStream {
	s.T.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		s.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.T.Fatalf("SSE request: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		s.T.Fatalf("SSE: HTTP %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	st := &SSEStream{T: s.T, Events: make(chan json.RawMessage, 16), Done: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				event = ""
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
				if event == "complete" {
					st.Done <- nil
					close(st.Events)
					return
				}
			case strings.HasPrefix(line, "data:") && event == "next":
				st.Events <- json.RawMessage(strings.TrimSpace(strings.TrimPrefix(line, "data:")))
			}
		}
		err := sc.Err()
		if err == nil {
			err = errors.New("stream ended without complete")
		}
		st.Done <- err
		close(st.Events)
	}()
	return st
}

// NextCount returns the unreadCount of the next event, failing on errors, the end of the
// stream or EventTimeout.
func (st *SSEStream) NextCount() int {
	st.T.Helper()
	select {
	case raw, ok := <-st.Events:
		if !ok {
			st.T.Fatalf("SSE stream ended: %v", <-st.Done)
		}
		var r struct {
			Data struct {
				UnreadCount *int `json:"unreadCount"`
			} `json:"data"`
			Errors []GQLError `json:"errors"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || len(r.Errors) > 0 || r.Data.UnreadCount == nil {
			st.T.Fatalf("SSE event %s: %v %+v", raw, err, r.Errors)
		}
		return *r.Data.UnreadCount
	case <-time.After(EventTimeout):
		st.T.Fatalf("no SSE event within %v", EventTimeout)
	}
	return 0
}
