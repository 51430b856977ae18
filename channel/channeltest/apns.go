package channeltest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// APNs is a local APNs provider API: TLS with HTTP/2 only (an HTTP/1 request is answered
// 505), POST /3/device/{token}, token auth. Checks, in APNs' order and with its reasons:
// "authorization: bearer <JWT>" present (403 MissingProviderToken), an ES256 JWT that
// verifies with the public key of KeyPEM, kid = KeyID, iss = TeamID (403
// InvalidProviderToken), iat less than an hour old (403 ExpiredProviderToken); apns-topic
// = Topic (400 MissingTopic / 400 DeviceTokenNotForTopic); apns-id, when sent, a UUID
// (400 BadMessageId); the device token hex (400 BadDeviceToken); a JSON payload with
// "aps" (400 PayloadEmpty) of at most 4 KiB (413 PayloadTooLarge). Then the next queued APNsAnswer, else 200 with the request's apns-id
// (a new UUID when it sent none).
//
// Every request is recorded. The server closes at the test's end.
type APNs struct {
	// URL is APNsConfig.BaseURL.
	URL string
	// KeyPEM is the provider's signing key (a .p8: PKCS#8 EC P-256); KeyID, TeamID and
	// Topic the values the server expects.
	KeyPEM               []byte
	KeyID, TeamID, Topic string

	srv    *httptest.Server
	key    *ecdsa.PrivateKey
	closed chan struct{}

	mu      sync.Mutex
	reqs    []APNsRequest
	answers []APNsAnswer
}

// APNsAnswer is a scripted answer. The zero value is the server's ordinary behaviour.
type APNsAnswer struct {
	// Status is the HTTP status; Reason the body's "reason".
	Status int
	Reason string
	// Hang: never answer; the handler waits until the client gives up.
	Hang bool
}

// APNsError returns the answer APNs documents for reason: BadDeviceToken, BadTopic,
// DeviceTokenNotForTopic, MissingTopic, PayloadEmpty 400; ExpiredProviderToken,
// InvalidProviderToken, MissingProviderToken 403; Unregistered, ExpiredToken 410;
// PayloadTooLarge 413; TooManyProviderTokenUpdates, TooManyRequests 429;
// InternalServerError 500; ServiceUnavailable, Shutdown 503.
func APNsError(reason string) APNsAnswer {
	st := map[string]int{
		"BadDeviceToken": 400, "BadTopic": 400, "DeviceTokenNotForTopic": 400, "MissingTopic": 400, "PayloadEmpty": 400,
		"ExpiredProviderToken": 403, "InvalidProviderToken": 403, "MissingProviderToken": 403,
		"Unregistered": 410, "ExpiredToken": 410, "PayloadTooLarge": 413,
		"TooManyProviderTokenUpdates": 429, "TooManyRequests": 429,
		"InternalServerError": 500, "ServiceUnavailable": 503, "Shutdown": 503,
	}[reason]
	if st == 0 {
		st = 400
	}
	return APNsAnswer{Status: st, Reason: reason}
}

// APNsRequest is one request as the server received it.
type APNsRequest struct {
	// Proto is the request's protocol ("HTTP/2.0").
	Proto string
	// Header is the request's header (authorization, apns-topic, apns-id, apns-push-type, ...).
	Header http.Header
	// DeviceToken is the path's token; Raw the body, Payload it decoded.
	DeviceToken string
	Raw         []byte
	Payload     map[string]any
	// Bearer is the authorization JWT; JWTHeader and Claims its header and claims when it
	// verified, TokenErr why it did not ("" when it did).
	Bearer    string
	JWTHeader map[string]any
	Claims    jwt.MapClaims
	TokenErr  string
	// Status and Reason are what the server answered (Status 0: it hung); ApnsID the
	// apns-id it answered with.
	Status int
	Reason string
	ApnsID string
}

var (
	apnsUUID  = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	apnsToken = regexp.MustCompile(`^[0-9a-fA-F]{8,200}$`)
)

// NewAPNs starts an APNs server (TLS, HTTP/2) with a fresh P-256 signing key.
func NewAPNs(t testing.TB) *APNs {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("channeltest: EC key: %v", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("channeltest: EC key: %v", err)
	}
	s := &APNs{
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		KeyID:  "ABC123DEFG",
		TeamID: "DEF123GHIJ",
		Topic:  "com.example.inbox",
		key:    key,
		closed: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serve)
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	t.Cleanup(func() {
		close(s.closed)
		s.srv.Close()
	})
	s.URL = s.srv.URL
	return s
}

// Client returns an HTTP/2 client that trusts the server's certificate (APNsConfig.Client).
func (s *APNs) Client() *http.Client { return s.srv.Client() }

// Queue scripts the answers to the next requests that pass the server's checks, in order.
func (s *APNs) Queue(a ...APNsAnswer) {
	s.mu.Lock()
	s.answers = append(s.answers, a...)
	s.mu.Unlock()
}

// Requests returns the requests received so far.
func (s *APNs) Requests() []APNsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]APNsRequest(nil), s.reqs...)
}

// verify checks a provider token: ES256 with the server's key, kid, iss, iat ≤ 1 h old.
func (s *APNs) verify(bearer string) (*jwt.Token, jwt.MapClaims, string, error) {
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(bearer, claims, func(t *jwt.Token) (any, error) {
		return &s.key.PublicKey, nil
	}, jwt.WithValidMethods([]string{"ES256"}), jwt.WithIssuer(s.TeamID), jwt.WithIssuedAt())
	if err != nil {
		return tok, claims, "InvalidProviderToken", err
	}
	if kid := tok.Header["kid"]; kid != s.KeyID {
		return tok, claims, "InvalidProviderToken", fmt.Errorf("kid %v", kid)
	}
	iat, err := claims.GetIssuedAt()
	if err != nil || iat == nil {
		return tok, claims, "InvalidProviderToken", fmt.Errorf("no iat")
	}
	if time.Since(iat.Time) > time.Hour {
		return tok, claims, "ExpiredProviderToken", fmt.Errorf("issued %v ago", time.Since(iat.Time))
	}
	return tok, claims, "", nil
}

func (s *APNs) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := APNsRequest{Proto: r.Proto, Header: r.Header.Clone(), Raw: raw}
	rec.DeviceToken, _ = strings.CutPrefix(r.URL.Path, "/3/device/")
	_ = json.Unmarshal(raw, &rec.Payload)

	reason, status := "", 0
	bearer, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
	if !hasBearer {
		bearer, hasBearer = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	rec.Bearer = bearer
	switch {
	case r.ProtoMajor != 2:
		status, reason = http.StatusHTTPVersionNotSupported, "HTTP/2 required"
	case r.Method != http.MethodPost:
		status, reason = http.StatusMethodNotAllowed, "MethodNotAllowed"
	case !strings.HasPrefix(r.URL.Path, "/3/device/"):
		status, reason = http.StatusNotFound, "BadPath"
	case !hasBearer || bearer == "":
		status, reason = http.StatusForbidden, "MissingProviderToken"
	}
	if status == 0 {
		tok, claims, bad, err := s.verify(bearer)
		if tok != nil {
			rec.JWTHeader = tok.Header
		}
		if err != nil {
			rec.TokenErr = err.Error()
			status, reason = http.StatusForbidden, bad
		} else {
			rec.Claims = claims
		}
	}
	id := r.Header.Get("apns-id")
	if status == 0 {
		topic := r.Header.Get("apns-topic")
		switch {
		case topic == "":
			status, reason = http.StatusBadRequest, "MissingTopic"
		case topic != s.Topic:
			status, reason = http.StatusBadRequest, "DeviceTokenNotForTopic"
		case id != "" && !apnsUUID.MatchString(id):
			status, reason = http.StatusBadRequest, "BadMessageId"
		case rec.DeviceToken == "":
			status, reason = http.StatusBadRequest, "MissingDeviceToken"
		case !apnsToken.MatchString(rec.DeviceToken):
			status, reason = http.StatusBadRequest, "BadDeviceToken"
		case len(raw) > 4096:
			status, reason = http.StatusRequestEntityTooLarge, "PayloadTooLarge"
		case rec.Payload == nil || rec.Payload["aps"] == nil:
			status, reason = http.StatusBadRequest, "PayloadEmpty"
		}
	}
	if status == 0 {
		s.mu.Lock()
		var ans APNsAnswer
		if len(s.answers) > 0 {
			ans, s.answers = s.answers[0], s.answers[1:]
		}
		s.mu.Unlock()
		if ans.Hang {
			s.mu.Lock()
			s.reqs = append(s.reqs, rec)
			s.mu.Unlock()
			select {
			case <-r.Context().Done():
			case <-s.closed:
			}
			return
		}
		status, reason = ans.Status, ans.Reason
	}
	if id == "" || !apnsUUID.MatchString(id) {
		id = uuid.NewString()
	}
	w.Header().Set("apns-id", id)
	rec.ApnsID = id
	if status == 0 || status == http.StatusOK {
		rec.Status = http.StatusOK
		w.WriteHeader(http.StatusOK)
	} else {
		rec.Status, rec.Reason = status, reason
		body := map[string]any{"reason": reason}
		if status == http.StatusGone {
			body["timestamp"] = time.Now().UnixMilli()
		}
		answerJSON(w, status, body)
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
}
