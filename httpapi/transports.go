package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/inboxgw/gateway/inbox"
)

// Request errors that gqlgen's HTTP transports answer without an extensions.code get one
// here, and the status the GraphQL-over-HTTP spec asks for
// (https://graphql.github.io/graphql-over-http/draft/).

// msgNotAGraphQLRequest answers a body that does not decode as a GraphQL request. It names
// what to send, not what the decoder saw (gqlgen's own message quotes the whole body and
// Go's type names).
const msgNotAGraphQLRequest = "the request body is not a GraphQL request: a JSON object with query (a string), " +
	"and optionally variables (an object), operationName (a string) and extensions (an object)"

// writeRequestError answers a request the gateway cannot read: status, and one error
// with message and code.
func writeRequestError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{
		"message": message, "extensions": map[string]string{"code": code}}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// getTransport is gqlgen's GET transport with coded errors: variables or extensions that
// are not JSON objects are BAD_USER_INPUT (400), and a mutation or subscription sent with
// GET is refused with 405 and "Allow: POST" as the spec asks (gqlgen answers 406 without
// a code).
type getTransport struct{ transport.GET }

// Supports takes GET requests that are not WebSocket upgrades (gqlgen's refuses any
// request with an Upgrade header, so a client offering h2c got 426 from the WebSocket
// library).
func (getTransport) Supports(r *http.Request) bool {
	return r.Method == http.MethodGet && !isWebSocketUpgrade(r)
}

// isWebSocketUpgrade reports whether r asks for a WebSocket (a handshake is a GET: a POST
// carrying the header is an ordinary request).
func isWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket")
}

func (t getTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	q := r.URL.Query()
	for _, name := range []string{"variables", "extensions"} {
		if v := q.Get(name); v != "" {
			var m map[string]any
			if json.Unmarshal([]byte(v), &m) != nil {
				writeRequestError(w, http.StatusBadRequest, inbox.CodeBadUserInput, name+" must be a JSON object")
				return
			}
		}
	}
	t.GET.Do(&getOnlyQueries{statusWriter: statusWriter{ResponseWriter: w}}, r, exec)
}

// getOnlyQueries turns the GET transport's 406 (the operation is not a query) into 405,
// and sets its other statuses as statusWriter does.
type getOnlyQueries struct {
	statusWriter
	refused bool
}

func (g *getOnlyQueries) WriteHeader(status int) {
	if status == http.StatusNotAcceptable {
		g.refused = true
		g.Header().Set("Allow", http.MethodPost)
		writeRequestError(g.ResponseWriter, http.StatusMethodNotAllowed, inbox.CodeBadRequest,
			"GET requests may only run queries: send mutations and subscriptions with POST")
		return
	}
	g.statusWriter.WriteHeader(status)
}

func (g *getOnlyQueries) Write(b []byte) (int, error) {
	if g.refused {
		return len(b), nil // gqlgen's uncoded body: already answered
	}
	return g.statusWriter.Write(b)
}

// sseTransport is gqlgen's SSE transport, with the request read first: gqlgen's logs a
// body it cannot decode, whole, through the standard logger (up to MaxBodyBytes of a
// client's data in the gateway's log, outside its structured logging). SSE requests are
// few and long-lived, so reading the body twice costs nothing that matters. Every write
// has a deadline (see withWriteDeadlines).
type sseTransport struct {
	transport.SSE
	writeTimeout time.Duration
}

func (t sseTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		writeRequestError(w, http.StatusBadRequest, inbox.CodeBadUserInput, "the request body could not be read")
		return
	}
	var params graphql.RawParams
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&params); err != nil {
		writeRequestError(w, http.StatusBadRequest, inbox.CodeBadUserInput, msgNotAGraphQLRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	w, r, done := withWriteDeadlines(w, r, t.writeTimeout)
	defer done()
	t.SSE.Do(w, r, exec)
}

// postTransport is gqlgen's POST transport with the statuses of statusWriter.
type postTransport struct{ transport.POST }

// Supports takes POST requests with an application/json body that are not WebSocket
// upgrades (see getTransport.Supports).
func (postTransport) Supports(r *http.Request) bool {
	if r.Method != http.MethodPost || isWebSocketUpgrade(r) {
		return false
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mediaType == "application/json"
}

func (t postTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	t.POST.Do(&statusWriter{ResponseWriter: w}, r, exec)
}

// statusWriter sets the status of gqlgen's 422 responses as the GraphQL-over-HTTP spec
// asks: 400 for a request that is not well-formed (no query), and, for application/json
// responses, 200 for a document that does not parse or validate or variables that do not
// coerce (clients of that media type read errors from the body and may take any 4xx for
// a transport failure). application/graphql-response+json responses keep their 4xx.
// The 422 is held until the body's first write shows which case it is. A request error
// in application/graphql-response+json (400) has no "data" entry, as the spec asks of a
// response whose execution did not start.
type statusWriter struct {
	http.ResponseWriter
	held      bool // a 422 waits for the body
	dropsData bool // a 400 whose body loses "data":null
}

func (s *statusWriter) WriteHeader(status int) {
	switch {
	case status == http.StatusUnprocessableEntity:
		s.held = true
		return
	case status == http.StatusBadRequest && strings.HasPrefix(s.Header().Get("Content-Type"), "application/graphql-response+json"):
		s.dropsData = true
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.dropsData {
		s.dropsData = false
		if trimmed, ok := bytes.CutSuffix(b, []byte(`,"data":null}`)); ok {
			n := len(b)
			_, err := s.ResponseWriter.Write(append(trimmed, '}'))
			return n, err
		}
	}
	if s.held {
		s.held = false
		switch {
		case bytes.Contains(b, []byte(`"no operation provided"`)):
			s.ResponseWriter.WriteHeader(http.StatusBadRequest)
		case strings.HasPrefix(s.Header().Get("Content-Type"), "application/graphql-response+json"):
			s.ResponseWriter.WriteHeader(http.StatusUnprocessableEntity)
		default:
			s.ResponseWriter.WriteHeader(http.StatusOK)
		}
	}
	return s.ResponseWriter.Write(b)
}

// allowedMethods is the Allow header of /graphql.
var allowedMethods = strings.Join([]string{http.MethodGet, http.MethodPost, http.MethodOptions}, ", ")

// optionsTransport answers OPTIONS with the allowed methods. gqlgen's also takes HEAD and
// answers it 405 without the Allow header RFC 9110 requires; HEAD now reaches
// unsupportedTransport.
type optionsTransport struct{}

func (optionsTransport) Supports(r *http.Request) bool { return r.Method == http.MethodOptions }

func (optionsTransport) Do(w http.ResponseWriter, _ *http.Request, _ graphql.GraphExecutor) {
	w.Header().Set("Allow", allowedMethods)
	w.WriteHeader(http.StatusOK)
}

// unsupportedTransport is the last transport: it answers every request no other
// transport took, instead of gqlgen's uncoded "transport not supported" (400). A method
// other than GET, POST and OPTIONS gets 405 with Allow; a POST whose body is not
// application/json gets 415.
type unsupportedTransport struct{}

func (unsupportedTransport) Supports(*http.Request) bool { return true }

func (unsupportedTransport) Do(w http.ResponseWriter, r *http.Request, _ graphql.GraphExecutor) {
	switch r.Method {
	case http.MethodPost:
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "none"
		}
		writeRequestError(w, http.StatusUnsupportedMediaType, inbox.CodeBadRequest,
			"unsupported Content-Type "+ct+": send application/json")
	case http.MethodGet:
		writeRequestError(w, http.StatusBadRequest, inbox.CodeBadRequest,
			"a GET request needs a query parameter, or a WebSocket upgrade")
	default:
		w.Header().Set("Allow", allowedMethods)
		writeRequestError(w, http.StatusMethodNotAllowed, inbox.CodeBadRequest,
			"method "+r.Method+" not allowed: use GET or POST")
	}
}
