package rest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/inboxgw/gateway/internal/testgw"
	"github.com/inboxgw/gateway/rest"
)

// docValidator validates responses against the embedded document (OpenAPI 3.1, with
// pb33f/libopenapi-validator: kin-openapi's openapi3filter reads 3.0 only).
var docValidator = sync.OnceValues(func() (validator.Validator, error) {
	js, err := rest.OpenAPIJSON()
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(js)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return v, nil
})

// answer is one response of the REST API.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// problem decodes a problem details body.
func (a answer) problem(t *testing.T) rest.Problem {
	t.Helper()
	var p rest.Problem
	if err := json.Unmarshal(a.Body, &p); err != nil {
		t.Fatalf("problem body %s: %v", a.Body, err)
	}
	return p
}

// call sends one request to the gateway's /v1 and validates the answer against the
// document: the operation's declared response (status, headers, content type, schema),
// or, for a route the document does not have (unknown path, wrong method), a problem
// details body. Body is marshalled to JSON unless it is a string or []byte.
func call(t *testing.T, s *testgw.Server, method, path, token string, header map[string]string, body any) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, s.HTTP.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
	validate(t, req, resp, a)
	return a
}

// validate checks a against the document (see call).
func validate(t *testing.T, req *http.Request, resp *http.Response, a answer) {
	t.Helper()
	v, err := docValidator()
	if err != nil {
		t.Fatalf("document: %v", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(a.Body))
	ok, errs := v.ValidateHttpResponse(req, resp)
	if ok {
		if a.Status >= 400 {
			checkProblem(t, a) // the schema says so too; the status must match the body's
		}
		return
	}
	var msgs []string
	undocumented := true
	for _, e := range errs {
		msgs = append(msgs, e.Message+": "+e.Reason)
		if !strings.Contains(strings.ToLower(e.Message), "not found") && !strings.Contains(strings.ToLower(e.Message), "method") {
			undocumented = false
		}
	}
	if !undocumented || a.Status < 400 {
		t.Fatalf("%s %s answered %d %s\nnot as the document says: %s", req.Method, req.URL.Path, a.Status, a.Body, strings.Join(msgs, "; "))
	}
	checkProblem(t, a)
}

// problemCodes are the codes the document's Problem schema lists.
var problemCodes = []string{"BAD_USER_INPUT", "BAD_REQUEST", "UNAUTHENTICATED", "FORBIDDEN", "NOT_FOUND", "CONFLICT",
	"PAYLOAD_TOO_LARGE", "THROTTLED", "UNAVAILABLE", "INTERNAL_SERVER_ERROR"}

// checkProblem checks an error answer is RFC 9457 problem details with a known code and
// the answer's status.
func checkProblem(t *testing.T, a answer) {
	t.Helper()
	if ct := a.Header.Get("Content-Type"); ct != rest.ProblemContentType {
		t.Fatalf("answer %d has Content-Type %q, want %s: %s", a.Status, ct, rest.ProblemContentType, a.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(a.Body, &p); err != nil {
		t.Fatalf("problem %s: %v", a.Body, err)
	}
	for _, k := range []string{"type", "title", "status", "code"} {
		if _, ok := p[k]; !ok {
			t.Fatalf("problem %s has no %s", a.Body, k)
		}
	}
	if st, _ := p["status"].(float64); int(st) != a.Status {
		t.Fatalf("problem status %v, answer %d", p["status"], a.Status)
	}
	if c, _ := p["code"].(string); !slices.Contains(problemCodes, c) {
		t.Fatalf("problem code %q is not one of the document's", c)
	}
}

// expectProblem asserts a is a problem with status and code.
func expectProblem(t *testing.T, a answer, status int, code string) rest.Problem {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status %d, want %d: %s", a.Status, status, a.Body)
	}
	p := a.problem(t)
	if string(p.Code) != code {
		t.Fatalf("code %q, want %q: %s", p.Code, code, a.Body)
	}
	return p
}

// TestValidatorCatchesAnAnswerOffTheDocument keeps the suite's validation honest: an
// answer that breaks the document (a 202 without requestId, a problem without code) is
// reported.
func TestValidatorCatchesAnAnswerOffTheDocument(t *testing.T) {
	v, err := docValidator()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status int
		ct     string
		body   string
	}{
		{202, "application/json", `{"notificationIds": []}`},
		{400, "application/problem+json", `{"type": "about:blank", "title": "Bad Request", "status": 400}`},
		{200, "application/json", `{"items": [{"id": 1}]}`},
	} {
		method, path := http.MethodPost, "/v1/notifications"
		if c.status == 200 {
			method, path = http.MethodGet, "/v1/notifications?userId=a"
		}
		req, _ := http.NewRequest(method, "http://gw"+path, nil)
		resp := &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {c.ct}},
			Body: io.NopCloser(strings.NewReader(c.body)), Request: req}
		if ok, _ := v.ValidateHttpResponse(req, resp); ok {
			t.Errorf("%d %s passed validation", c.status, c.body)
		}
	}
}
