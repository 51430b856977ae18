package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Once an SSE stream's handler returned (done), its writer takes no write or flush: a
// keep-alive goroutine still ticking then (gqlgen's does not wait for it) must not reach
// the response net/http is finishing. Every write and flush after done is refused,
// before and after the server finished the response.
func TestSSEWriterRefusesWritesAfterDone(t *testing.T) {
	late := make(chan func(), 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw, _, done := withWriteDeadlines(w, r, time.Second)
		if _, ok := dw.(*deadlineWriter); !ok {
			t.Error("a server's writer got no deadlines")
		}
		_, _ = dw.Write([]byte("data: 1\n\n"))
		done()
		if n, err := dw.Write([]byte("data: late\n\n")); err == nil || n != 0 {
			t.Errorf("a write after done: %d, %v", n, err)
		}
		dw.(http.Flusher).Flush() // refused: nothing reaches the response
		late <- func() {
			// The response is finished: a flush here is what panicked.
			dw.(http.Flusher).Flush()
			if _, err := dw.Write([]byte("x")); err == nil {
				t.Error("a write after the response finished")
			}
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "data: 1\n\n" {
		t.Fatalf("body %q, %v", b, err)
	}
	(<-late)()
}
