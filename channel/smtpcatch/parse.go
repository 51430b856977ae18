package smtpcatch

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// Parsed is what Parse reads out of a raw RFC 5322 message.
type Parsed struct {
	// Header is the top-level header, keys in canonical MIME form ("Message-Id").
	Header mail.Header
	// Subject is the decoded Subject (RFC 2047 words decoded).
	Subject string
	// MessageID is the Message-ID header as sent, angle brackets included.
	MessageID string
	// Text and HTML are the decoded text/plain and text/html parts (the first of each,
	// searched through nested multiparts); "" when absent.
	Text, HTML string
}

// maxParts bounds the parts Parse walks through, so a hostile message cannot make it
// loop for long.
const maxParts = 64

// Parse reads raw as an RFC 5322 message and decodes its subject and its first
// text/plain and text/html parts (quoted-printable and base64 transfer encodings,
// nested multiparts). It fails only when the header cannot be read; a body it cannot
// decode leaves Text and HTML empty.
func Parse(raw []byte) (Parsed, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Parsed{}, fmt.Errorf("smtpcatch: read message: %w", err)
	}
	p := Parsed{Header: msg.Header, MessageID: msg.Header.Get("Message-Id")}
	dec := new(mime.WordDecoder)
	if s, err := dec.DecodeHeader(msg.Header.Get("Subject")); err == nil {
		p.Subject = s
	} else {
		p.Subject = msg.Header.Get("Subject")
	}
	n := 0
	_ = walk(&p, msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, &n)
	return p, nil
}

// walk decodes one entity (its content type, transfer encoding and body) into p.
func walk(p *Parsed, ctype, cte string, body io.Reader, n *int) error {
	*n++
	if *n > maxParts {
		return errors.New("too many parts")
	}
	if ctype == "" {
		ctype = "text/plain"
	}
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return err
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := walk(p, part.Header.Get("Content-Type"), part.Header.Get("Content-Transfer-Encoding"), part, n); err != nil {
				return err
			}
		}
	}
	if mt != "text/plain" && mt != "text/html" {
		return nil
	}
	var r io.Reader = body
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, newlineStripper{body})
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	switch {
	case mt == "text/plain" && p.Text == "":
		p.Text = string(b)
	case mt == "text/html" && p.HTML == "":
		p.HTML = string(b)
	}
	return nil
}

// newlineStripper drops CR and LF so base64 bodies split into lines decode.
type newlineStripper struct{ r io.Reader }

func (s newlineStripper) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	j := 0
	for _, c := range b[:n] {
		if c != '\r' && c != '\n' {
			b[j] = c
			j++
		}
	}
	return j, err
}
