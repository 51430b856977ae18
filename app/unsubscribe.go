package app

import (
	"crypto/hmac"
	"crypto/sha256"
	"net"
	"net/http"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest"
	"github.com/inboxgw/gateway/telemetry"
	"github.com/inboxgw/gateway/unsub"
)

// unsubscribeLinks returns the signer of one-click unsubscribe links and the base URL
// they go under, or nil when emails carry none: INBOX_UNSUBSCRIBE_SECRET (at least 32
// bytes) under INBOX_PUBLIC_URL; in dev mode, without them, a secret derived from the
// dev JWT secret and http://localhost:{port} (the links a developer follows from
// /dev/mail). Outside dev mode a gateway with no secret or no public URL sends no link
// (and /v1/unsubscribe answers 404).
func unsubscribeLinks(cfg Config) (*unsub.Signer, string, error) {
	secret := []byte(cfg.UnsubscribeSecret)
	base := cfg.PublicURL
	if cfg.Dev {
		if len(secret) == 0 {
			js, err := jwtSecret(cfg)
			if err != nil {
				return nil, "", err
			}
			m := hmac.New(sha256.New, js)
			m.Write([]byte("inbox-gateway dev unsubscribe secret"))
			secret = m.Sum(nil)
		}
		if base == "" {
			host, port, err := net.SplitHostPort(cfg.Addr)
			if err != nil {
				port = "8080"
			}
			if host == "" || host == "0.0.0.0" || host == "::" {
				host = "localhost"
			}
			base = "http://" + net.JoinHostPort(host, port)
		}
	}
	if len(secret) == 0 || base == "" {
		return nil, "", nil
	}
	s, err := unsub.New(secret)
	if err != nil {
		return nil, "", err
	}
	return s, base, nil
}

// unsubscribeURL is the delivery's link maker over s and base (nil when s is nil: no
// link).
func unsubscribeURL(s *unsub.Signer, base string) func(tenantID, userID, category string) string {
	if s == nil {
		return nil
	}
	return func(tenantID, userID, category string) string {
		u, err := s.URL(base, unsub.Claims{TenantID: tenantID, UserID: userID, Category: category, Channel: inbox.ChannelEmail})
		if err != nil {
			return "" // an id the send would have refused: no link rather than a bad one
		}
		return u
	}
}

// withUnsubscribe serves rest.UnsubscribePath beside h.
func (g *Gateway) withUnsubscribe(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(rest.UnsubscribePath, telemetry.Routed(rest.NewUnsubscribe(rest.UnsubscribeOptions{
		Signer: g.Unsub, Prefs: g.Store, Log: g.Log})))
	mux.Handle("/", h)
	return mux
}
