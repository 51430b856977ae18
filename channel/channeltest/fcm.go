package channeltest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FCMGrantType is the OAuth2 grant type of a service account's JWT assertion (RFC 7523).
const FCMGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// FCM is a local FCM HTTP v1 server with its OAuth2 token endpoint:
//   - POST /token: Google's service-account flow. The form's assertion must be an RS256
//     JWT signed with Credentials' private key (kid = its private_key_id), iss = ClientEmail,
//     aud = the token URL, scope naming firebase.messaging, a lifetime ≤ 1 h; otherwise
//     400 {"error":"invalid_grant"}. Answers {"access_token","token_type":"Bearer","expires_in"}.
//   - POST /v1/projects/{ProjectID}/messages:send: needs "Authorization: Bearer <a token
//     it issued>" (else 401 UNAUTHENTICATED) and a JSON {"message":{"token",...}} (else 400
//     INVALID_ARGUMENT); answers 200 {"name":"projects/{ProjectID}/messages/{n}"} or the
//     next queued FCMAnswer.
//
// Every request is recorded. The server closes at the test's end.
type FCM struct {
	// URL is FCMConfig.BaseURL.
	URL string
	// TokenURL is the token endpoint (the credentials' token_uri).
	TokenURL string
	// ProjectID is the credentials' project_id.
	ProjectID string
	// ClientEmail is the service account's client_email, KeyID its private_key_id.
	ClientEmail, KeyID string
	// Credentials is a service-account key file (FCMConfig.CredentialsJSON) whose token_uri
	// points at TokenURL.
	Credentials []byte
	// TokenTTL is the expires_in of issued tokens (default 1 h); set before the first send.
	TokenTTL time.Duration

	srv    *httptest.Server
	key    *rsa.PrivateKey
	closed chan struct{}

	mu           sync.Mutex
	issued       map[string]bool
	sends        []FCMRequest
	tokenReqs    []FCMTokenRequest
	answers      []FCMAnswer
	tokenAnswers []FCMAnswer
	n            int
}

// FCMAnswer is a scripted answer. The zero value is the server's ordinary behaviour.
type FCMAnswer struct {
	// Status is the HTTP status to answer (with Google's error document when ≥ 400).
	Status int
	// ErrorCode is FCM's errorCode in the error's FcmError detail ("UNREGISTERED", ...);
	// for the token endpoint, the OAuth2 "error" ("invalid_grant", ...).
	ErrorCode string
	// RetryAfter is sent as the Retry-After header when not "".
	RetryAfter string
	// Hang: never answer; the handler waits until the client goes away.
	Hang bool
}

// FCMError returns the answer FCM documents for errorCode: UNREGISTERED 404 NOT_FOUND,
// INVALID_ARGUMENT 400, SENDER_ID_MISMATCH 403 PERMISSION_DENIED, QUOTA_EXCEEDED 429
// RESOURCE_EXHAUSTED, UNAVAILABLE 503, INTERNAL 500, THIRD_PARTY_AUTH_ERROR 401
// UNAUTHENTICATED, UNSPECIFIED_ERROR 500.
func FCMError(errorCode string) FCMAnswer {
	st := map[string]int{
		"UNREGISTERED":           http.StatusNotFound,
		"INVALID_ARGUMENT":       http.StatusBadRequest,
		"SENDER_ID_MISMATCH":     http.StatusForbidden,
		"QUOTA_EXCEEDED":         http.StatusTooManyRequests,
		"UNAVAILABLE":            http.StatusServiceUnavailable,
		"INTERNAL":               http.StatusInternalServerError,
		"THIRD_PARTY_AUTH_ERROR": http.StatusUnauthorized,
		"UNSPECIFIED_ERROR":      http.StatusInternalServerError,
	}[errorCode]
	if st == 0 {
		st = http.StatusBadRequest
	}
	return FCMAnswer{Status: st, ErrorCode: errorCode}
}

// FCMRequest is one send request as the server received it.
type FCMRequest struct {
	// Header is the request's header (Authorization, Content-Type, ...).
	Header http.Header
	// Path is the request path.
	Path string
	// Raw is the body.
	Raw []byte
	// Token, Title, Body and Data are the parsed message's.
	Token, Title, Body string
	Data               map[string]string
	// Status is what the server answered (0: it hung).
	Status int
}

// FCMTokenRequest is one token request as the server received it.
type FCMTokenRequest struct {
	// GrantType is the form's grant_type.
	GrantType string
	// KeyID is the assertion's kid header; Claims its claims when it verified.
	KeyID  string
	Claims jwt.MapClaims
	// Err is why the assertion was refused ("" when it verified).
	Err string
	// Status is what the server answered.
	Status int
}

// NewFCM starts an FCM server with a fresh service account (RSA 2048) for project
// "inbox-test".
func NewFCM(t testing.TB) *FCM {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("channeltest: RSA key: %v", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("channeltest: RSA key: %v", err)
	}
	s := &FCM{
		ProjectID:   "inbox-test",
		ClientEmail: "fcm-sender@inbox-test.iam.gserviceaccount.com",
		KeyID:       hexID(20),
		TokenTTL:    time.Hour,
		key:         key,
		closed:      make(chan struct{}),
		issued:      map[string]bool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /v1/projects/{project}/messages:send", s.send)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.close)
	s.URL = s.srv.URL
	s.TokenURL = s.srv.URL + "/token"
	s.Credentials, err = json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     s.ProjectID,
		"private_key_id": s.KeyID,
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   s.ClientEmail,
		"client_id":      "100000000000000000001",
		"auth_uri":       "https://accounts.google.com/o/oauth2/auth",
		"token_uri":      s.TokenURL,
	})
	if err != nil {
		t.Fatalf("channeltest: credentials: %v", err)
	}
	return s
}

func (s *FCM) close() {
	close(s.closed)
	s.srv.Close()
}

// Queue scripts the answers to the next send requests, in order; after them the server
// behaves normally again.
func (s *FCM) Queue(a ...FCMAnswer) {
	s.mu.Lock()
	s.answers = append(s.answers, a...)
	s.mu.Unlock()
}

// QueueToken scripts the answers to the next token requests.
func (s *FCM) QueueToken(a ...FCMAnswer) {
	s.mu.Lock()
	s.tokenAnswers = append(s.tokenAnswers, a...)
	s.mu.Unlock()
}

// RevokeTokens forgets every issued access token: the next send answers 401.
func (s *FCM) RevokeTokens() {
	s.mu.Lock()
	s.issued = map[string]bool{}
	s.mu.Unlock()
}

// Requests returns the send requests received so far.
func (s *FCM) Requests() []FCMRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]FCMRequest(nil), s.sends...)
}

// TokenRequests returns the token requests received so far.
func (s *FCM) TokenRequests() []FCMTokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]FCMTokenRequest(nil), s.tokenReqs...)
}

func (s *FCM) token(w http.ResponseWriter, r *http.Request) {
	rec := FCMTokenRequest{GrantType: r.PostFormValue("grant_type")}
	s.mu.Lock()
	var ans FCMAnswer
	if len(s.tokenAnswers) > 0 {
		ans, s.tokenAnswers = s.tokenAnswers[0], s.tokenAnswers[1:]
	}
	s.mu.Unlock()
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(r.PostFormValue("assertion"), claims, func(t *jwt.Token) (any, error) {
		return &s.key.PublicKey, nil
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(s.ClientEmail), jwt.WithAudience(s.TokenURL),
		jwt.WithIssuedAt(), jwt.WithExpirationRequired(), jwt.WithLeeway(time.Minute))
	switch {
	case rec.GrantType != FCMGrantType:
		err = fmt.Errorf("grant_type %q", rec.GrantType)
	case err != nil:
	case tok.Header["kid"] != s.KeyID:
		err = fmt.Errorf("kid %v", tok.Header["kid"])
	case !strings.Contains(" "+fmt.Sprint(claims["scope"])+" ", " https://www.googleapis.com/auth/firebase.messaging "):
		err = fmt.Errorf("scope %v", claims["scope"])
	default:
		iat, _ := claims.GetIssuedAt()
		exp, _ := claims.GetExpirationTime()
		if exp.Sub(iat.Time) > time.Hour {
			err = fmt.Errorf("lifetime %v", exp.Sub(iat.Time))
		}
	}
	if tok != nil {
		rec.KeyID, _ = tok.Header["kid"].(string)
	}
	if err != nil {
		rec.Err = err.Error()
	} else {
		rec.Claims = claims
	}
	status, body := http.StatusOK, map[string]any{}
	switch {
	case ans.Hang:
		s.record(func() { s.tokenReqs = append(s.tokenReqs, rec) })
		s.hang(r)
		return
	case ans.Status != 0:
		status = ans.Status
		body["error"] = ans.ErrorCode
		body["error_description"] = http.StatusText(ans.Status)
	case err != nil:
		status = http.StatusBadRequest
		body["error"] = "invalid_grant"
		body["error_description"] = "Invalid JWT Signature: " + err.Error()
	default:
		access := "ya29." + hexID(24)
		s.record(func() { s.issued[access] = true })
		body["access_token"] = access
		body["token_type"] = "Bearer"
		body["expires_in"] = int(s.TokenTTL / time.Second)
	}
	rec.Status = status
	s.record(func() { s.tokenReqs = append(s.tokenReqs, rec) })
	if ans.RetryAfter != "" {
		w.Header().Set("Retry-After", ans.RetryAfter)
	}
	answerJSON(w, status, body)
}

func (s *FCM) send(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := FCMRequest{Header: r.Header.Clone(), Path: r.URL.Path, Raw: raw}
	var msg struct {
		Message struct {
			Token        string `json:"token"`
			Notification struct {
				Title string `json:"title"`
				Body  string `json:"body"`
			} `json:"notification"`
			Data map[string]string `json:"data"`
		} `json:"message"`
	}
	jerr := json.Unmarshal(raw, &msg)
	rec.Token, rec.Data = msg.Message.Token, msg.Message.Data
	rec.Title, rec.Body = msg.Message.Notification.Title, msg.Message.Notification.Body

	s.mu.Lock()
	var ans FCMAnswer
	if len(s.answers) > 0 {
		ans, s.answers = s.answers[0], s.answers[1:]
	}
	bearer, isBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	authorized := isBearer && s.issued[bearer]
	s.n++
	name := fmt.Sprintf("projects/%s/messages/0:%d%%%s", s.ProjectID, 1700000000000000+s.n, hexID(8))
	s.mu.Unlock()

	switch {
	case ans.Hang:
		s.record(func() { s.sends = append(s.sends, rec) })
		s.hang(r)
		return
	case r.PathValue("project") != s.ProjectID:
		rec.Status = fcmFail(w, http.StatusNotFound, "", "Requested entity was not found.")
	case !authorized:
		rec.Status = fcmFail(w, http.StatusUnauthorized, "",
			"Request had invalid authentication credentials. Expected OAuth 2 access token.")
	case jerr != nil || msg.Message.Token == "":
		rec.Status = fcmFail(w, http.StatusBadRequest, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token")
	case ans.Status != 0:
		if ans.RetryAfter != "" {
			w.Header().Set("Retry-After", ans.RetryAfter)
		}
		rec.Status = fcmFail(w, ans.Status, ans.ErrorCode, "scripted "+ans.ErrorCode)
	default:
		rec.Status = http.StatusOK
		answerJSON(w, http.StatusOK, map[string]string{"name": name})
	}
	s.record(func() { s.sends = append(s.sends, rec) })
}

// fcmFail writes Google's error document with FCM's FcmError detail and returns status.
func fcmFail(w http.ResponseWriter, status int, errorCode, msg string) int {
	e := map[string]any{"code": status, "message": msg, "status": googleStatus(status)}
	if errorCode != "" {
		e["details"] = []map[string]string{{
			"@type":     "type.googleapis.com/google.firebase.fcm.v1.FcmError",
			"errorCode": errorCode,
		}}
	}
	answerJSON(w, status, map[string]any{"error": e})
	return status
}

// googleStatus is the canonical status name Google APIs put beside an HTTP status.
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusInternalServerError:
		return "INTERNAL"
	}
	return "UNKNOWN"
}

func (s *FCM) record(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
}

// hang blocks until the client goes away or the server closes.
func (s *FCM) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closed:
	}
}

func answerJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func hexID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
