package channeltest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"
	"time"
)

// Twilio is a local Twilio Messages API: POST /2010-04-01/Accounts/{sid}/Messages.json.
// Checks, with Twilio's answers: basic auth AccountSID:AuthToken (401, code 20003), the
// path's account = AccountSID (404, 20404), a form with To (400, 21604) in E.164 (400,
// 21211), Body (400, 21602), From or MessagingServiceSid (400, 21603), a StatusCallback,
// when sent, that is an absolute http(s) URL (400, 21609). Then the next queued
// TwilioAnswer, else 201 with a message resource (sid "SM...", status "queued", or
// "accepted" with a Messaging Service).
//
// Every request is recorded. The server closes at the test's end.
type Twilio struct {
	// URL is TwilioConfig.BaseURL.
	URL string
	// AccountSID and AuthToken are the credentials the server accepts; From a sender.
	AccountSID, AuthToken, From string

	srv *httptest.Server
	*script[TwilioAnswer, TwilioRequest]
}

// TwilioAnswer is a scripted answer. The zero value is the server's ordinary behaviour.
type TwilioAnswer struct {
	// Status is the HTTP status; Code Twilio's error code in the error document.
	Status, Code int
	// RetryAfter is sent as the Retry-After header when not "".
	RetryAfter string
	// Hang: never answer; the handler waits until the client gives up.
	Hang bool
}

// twilioMessages are the error messages of the codes the server knows.
var twilioMessages = map[int]string{
	20003: "Authenticate",
	20404: "The requested resource was not found",
	20429: "Too Many Requests",
	20500: "An internal server error has occurred",
	20503: "Service unavailable",
	21211: "The 'To' number is not a valid phone number.",
	21408: "Permission to send an SMS has not been enabled for the region indicated by the 'To' number.",
	21602: "Message body is required.",
	21603: "The 'From' phone number is required.",
	21604: "A 'To' phone number is required.",
	21609: "Invalid StatusCallback url",
	21610: "Attempt to send to unsubscribed recipient",
	21614: "'To' number is not a valid mobile number",
}

// TwilioError returns the answer Twilio documents for code: 21211, 21408, 21602, 21603,
// 21604, 21609, 21610, 21614 → 400; 20003 → 401; 20404 → 404; 20429 → 429; 20500 →
// 500; 20503 → 503.
func TwilioError(code int) TwilioAnswer {
	st := map[int]int{20003: 401, 20404: 404, 20429: 429, 20500: 500, 20503: 503}[code]
	if st == 0 {
		st = 400
	}
	return TwilioAnswer{Status: st, Code: code}
}

// TwilioRequest is one request as the server received it.
type TwilioRequest struct {
	// Path and Header are the request's; User and Password its basic auth.
	Path           string
	Header         http.Header
	User, Password string
	// Form is the decoded form body (To, From, MessagingServiceSid, Body, StatusCallback).
	Form url.Values
	// Status and Code are what the server answered (Status 0: it hung); Sid the message
	// sid of a 201.
	Status, Code int
	Sid          string
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// NewTwilio starts a Twilio server with fresh credentials.
func NewTwilio(t testing.TB) *Twilio {
	t.Helper()
	s := &Twilio{
		AccountSID: "AC" + hexID(16),
		AuthToken:  hexID(16),
		From:       "+15005550006",
		script:     newScript[TwilioAnswer, TwilioRequest](),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2010-04-01/Accounts/{sid}/Messages.json", s.messages)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.script.close()
		s.srv.Close()
	})
	s.URL = s.srv.URL
	return s
}

// Queue scripts the answers to the next requests that pass the server's checks, in order.
func (s *Twilio) Queue(a ...TwilioAnswer) {
	s.queue(a...)
}

// Requests returns the requests received so far.
func (s *Twilio) Requests() []TwilioRequest {
	return s.requests()
}

func (s *Twilio) messages(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	form, ferr := url.ParseQuery(string(raw))
	rec := TwilioRequest{Path: r.URL.Path, Header: r.Header.Clone(), Form: form}
	rec.User, rec.Password, _ = r.BasicAuth()
	code := 0
	to, cb := form.Get("To"), form.Get("StatusCallback")
	switch {
	case rec.User != s.AccountSID || rec.Password != s.AuthToken:
		code = 20003
	case r.PathValue("sid") != s.AccountSID:
		code = 20404
	case ferr != nil || to == "":
		code = 21604
	case !e164.MatchString(to):
		code = 21211
	case form.Get("Body") == "":
		code = 21602
	case form.Get("From") == "" && form.Get("MessagingServiceSid") == "":
		code = 21603
	case cb != "" && !absoluteHTTP(cb):
		code = 21609
	}
	var ans TwilioAnswer
	if code != 0 {
		ans = TwilioError(code)
	} else {
		ans = s.next()
	}
	if ans.Hang {
		s.record(rec)
		s.hang(r)
		return
	}
	if ans.RetryAfter != "" {
		w.Header().Set("Retry-After", ans.RetryAfter)
	}
	if ans.Status != 0 && ans.Status/100 != 2 {
		msg := twilioMessages[ans.Code]
		if msg == "" {
			msg = http.StatusText(ans.Status)
		}
		rec.Status, rec.Code = ans.Status, ans.Code
		s.record(rec)
		answerJSON(w, ans.Status, map[string]any{
			"code": ans.Code, "message": msg, "status": ans.Status,
			"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", ans.Code),
		})
		return
	}
	rec.Status, rec.Sid = http.StatusCreated, "SM"+hexID(16)
	s.record(rec)
	status := "queued"
	if form.Get("MessagingServiceSid") != "" {
		status = "accepted"
	}
	now := time.Now().UTC().Format(time.RFC1123Z)
	answerJSON(w, http.StatusCreated, map[string]any{
		"sid": rec.Sid, "account_sid": s.AccountSID, "to": to, "from": jsonNullIfEmpty(form.Get("From")),
		"messaging_service_sid": jsonNullIfEmpty(form.Get("MessagingServiceSid")), "body": form.Get("Body"),
		"status": status, "num_segments": "1", "direction": "outbound-api", "api_version": "2010-04-01",
		"date_created": now, "date_updated": now, "date_sent": nil, "error_code": nil, "error_message": nil,
		"uri": "/2010-04-01/Accounts/" + s.AccountSID + "/Messages/" + rec.Sid + ".json",
	})
}

func absoluteHTTP(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// jsonNullIfEmpty is nil for "" (JSON null), else s.
func jsonNullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
