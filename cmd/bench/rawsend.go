package main

// The raw client loops of scenario 16: the same sends as the delivery path makes, with
// the client libraries alone (no records, no adapter): go-mail's DialAndSend of a text
// message (one connection a message, as the email adapter makes), and net/http's POST of
// a webhook body signed the Standard Webhooks way by hand (HMAC-SHA256 over
// "id.timestamp.body").

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	mail "github.com/wneessen/go-mail"
)

// rawMail is one email as both sides send it.
type rawMail struct {
	From, To, Subject, Text string
}

// rawMailer sends with go-mail to a plain SMTP server (no TLS, no auth).
type rawMailer struct {
	host string
	port int
}

func newRawMailer(addr string) (*rawMailer, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	return &rawMailer{host: host, port: p}, nil
}

// send makes one go-mail client, dials, sends m and quits: what a stateless adapter
// does per message.
func (r *rawMailer) send(ctx context.Context, m rawMail) error {
	c, err := mail.NewClient(r.host, mail.WithPort(r.port), mail.WithTLSPolicy(mail.NoTLS), mail.WithTimeout(15*time.Second),
		mail.WithHELO("localhost"))
	if err != nil {
		return err
	}
	msg := mail.NewMsg()
	if err := msg.From(m.From); err != nil {
		return err
	}
	if err := msg.To(m.To); err != nil {
		return err
	}
	msg.Subject(m.Subject)
	msg.SetMessageID()
	msg.SetBodyString(mail.TypeTextPlain, m.Text)
	return c.DialAndSendWithContext(ctx, msg)
}

// rawHooker POSTs signed webhook bodies with one shared net/http client.
type rawHooker struct {
	client *http.Client
	url    string
	key    []byte // the HMAC key (the secret's bytes)
}

func newRawHooker(url string, key []byte, conc int) *rawHooker {
	return &rawHooker{url: url, key: key, client: &http.Client{Timeout: 15 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 4 * conc, MaxIdleConnsPerHost: 4 * conc}}}
}

// send POSTs body with webhook-id id, the current timestamp and its v1 signature.
func (r *rawHooker) send(ctx context.Context, id string, body []byte) error {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, r.key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook: status %d", resp.StatusCode)
	}
	return nil
}
