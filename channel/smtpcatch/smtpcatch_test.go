package smtpcatch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxgw/gateway/channel"
	"github.com/inboxgw/gateway/channel/smtpcatch"
)

func start(t *testing.T, cfg smtpcatch.Config) *smtpcatch.Catcher {
	t.Helper()
	c := smtpcatch.New(cfg)
	if err := c.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func send(t *testing.T, c *smtpcatch.Catcher, i int, html string) error {
	t.Helper()
	ch, err := channel.NewEmail(channel.EmailConfig{URL: c.URL(), From: "dev@inbox.test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.Send(context.Background(), channel.Message{
		To: fmt.Sprintf("u%d@example.org", i), IdempotencyKey: fmt.Sprintf("k%d", i),
		Subject: fmt.Sprintf("Subject %d", i), Text: fmt.Sprintf("text %d", i), HTML: html,
	})
	return err
}

func TestCatcherKeepsTheLastN(t *testing.T) {
	t.Parallel()
	c := start(t, smtpcatch.Config{MaxMessages: 3})
	if !strings.HasPrefix(c.Addr(), "127.0.0.1:") || c.URL() != "smtp://"+c.Addr() {
		t.Fatalf("addr %q url %q", c.Addr(), c.URL())
	}
	for i := 1; i <= 5; i++ {
		if err := send(t, c, i, fmt.Sprintf("<p>html %d</p>", i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitReceived(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if c.Received() != 5 {
		t.Fatalf("received %d", c.Received())
	}
	msgs := c.Messages()
	if len(msgs) != 3 {
		t.Fatalf("%d kept, want 3", len(msgs))
	}
	for j, m := range msgs {
		i := j + 3
		if m.ID != uint64(i) || m.From != "dev@inbox.test" || m.To[0] != fmt.Sprintf("u%d@example.org", i) ||
			m.Subject != fmt.Sprintf("Subject %d", i) || strings.TrimSpace(m.Text) != fmt.Sprintf("text %d", i) ||
			strings.TrimSpace(m.HTML) != fmt.Sprintf("<p>html %d</p>", i) || m.MessageID != fmt.Sprintf("<k%d@inbox.test>", i) || len(m.Raw) == 0 {
			t.Fatalf("message %d: %+v", j, m)
		}
	}
	// WaitReceived gives up with ctx
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := c.WaitReceived(short, 6); err == nil {
		t.Fatal("WaitReceived(6) returned nil")
	}
	c.Reset()
	if len(c.Messages()) != 0 || c.Received() != 5 {
		t.Fatalf("after Reset: %d kept, %d received", len(c.Messages()), c.Received())
	}
}

func TestCatcherRefusesTooLarge(t *testing.T) {
	t.Parallel()
	c := start(t, smtpcatch.Config{MaxMessageBytes: 2048})
	err := send(t, c, 1, strings.Repeat("<p>big</p>", 1000))
	var e *channel.Error
	if !errors.As(err, &e) || e.Kind != channel.Permanent || e.Status != 552 {
		t.Fatalf("err %v, want permanent 552", err)
	}
	if c.Received() != 0 {
		t.Fatalf("received %d", c.Received())
	}
	if err := send(t, c, 2, ""); err != nil {
		t.Fatal(err)
	}
	if c.Received() != 1 {
		t.Fatalf("received %d", c.Received())
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	c := start(t, smtpcatch.Config{})
	// An HTML part that tries to end the srcdoc attribute and the frame, and run a script.
	hostile := `<p class="x">hi &amp; bye</p>"></iframe><script>alert(1)</script>`
	if err := send(t, c, 1, hostile); err != nil {
		t.Fatal(err)
	}
	if err := send(t, c, 2, ""); err != nil {
		t.Fatal(err)
	}
	sends := []smtpcatch.SendOutcome{
		{NotificationID: "n2", UserID: "octocat", Channel: "EMAIL", Status: "SKIPPED", Reason: "opted_out", Explain: "email is off <in> preferences"},
		{NotificationID: "n2", UserID: "octocat", Channel: "IN_APP", Status: "SENT"},
	}
	srv := httptest.NewServer(c.Handler(func(context.Context) ([]smtpcatch.SendOutcome, error) { return sends, nil }))
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Received uint64                  `json:"received"`
		Messages []smtpcatch.Message     `json:"messages"`
		Sends    []smtpcatch.SendOutcome `json:"sends"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/json" || body.Received != 2 || len(body.Messages) != 2 ||
		body.Messages[0].Subject != "Subject 2" || body.Messages[1].Subject != "Subject 1" || body.Messages[1].Header.Get("Message-Id") != "<k1@inbox.test>" ||
		len(body.Sends) != 2 || body.Sends[0] != sends[0] {
		t.Fatalf("json %s %+v", resp.Header.Get("Content-Type"), body)
	}

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", "text/html")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := string(page)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(p, "Subject 1") || !strings.Contains(p, "Subject 2") ||
		!strings.Contains(p, "u1@example.org") || !strings.Contains(p, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(p, "<script>") {
		t.Fatalf("page %s", p)
	}
	if strings.Index(p, "Subject 2") > strings.Index(p, "Subject 1") {
		t.Fatal("page not newest first")
	}
	// The HTML part is rendered in a frame that runs nothing, its markup escaped inside
	// srcdoc: the one quote that could end the attribute is &#34;, the tags are inert.
	srcdoc := `<iframe sandbox="" title="HTML part of Subject 1" srcdoc="` + html.EscapeString(hostile) + `"></iframe>`
	if strings.Count(p, "<iframe") != 1 || !strings.Contains(strings.ReplaceAll(p, "&#39;", "'"), strings.ReplaceAll(srcdoc, "&#39;", "'")) ||
		strings.Count(p, "</iframe>") != 1 {
		t.Fatalf("page does not frame the HTML part as %s:\n%s", srcdoc, p)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("CSP %q", csp)
	}
	if !strings.Contains(p, "Recent sends") || !strings.Contains(p, "<code>opted_out</code>: email is off &lt;in&gt; preferences") ||
		!strings.Contains(p, "<td>octocat</td><td>IN_APP</td><td>SENT</td>") {
		t.Fatalf("page lists no recent sends:\n%s", p)
	}

	req, _ = http.NewRequest(http.MethodPost, srv.URL, nil)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodDelete, srv.URL, nil)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if len(c.Messages()) != 0 {
		t.Fatal("DELETE kept messages")
	}
	resp, err = http.Get(srv.URL + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"messages":[]`) {
		t.Fatalf("empty json %s", raw)
	}
	// No mail: the page says so, and that a send skipped a channel, and why below.
	if p := get(t, srv.URL); !strings.Contains(p, "No mail yet. The recent sends skipped 1 channel: see why under \"Recent sends\".") ||
		!strings.Contains(p, "opted_out") {
		t.Fatalf("empty page %s", p)
	}
	// A catcher without sends lists none; sends that fail say so, and the mail is served.
	plain := httptest.NewServer(c.Handler(nil))
	t.Cleanup(plain.Close)
	if p := get(t, plain.URL); strings.Contains(p, "Recent sends") || !strings.Contains(p, "No mail yet.</p>") {
		t.Fatalf("page without sends %s", p)
	}
	failing := httptest.NewServer(c.Handler(func(context.Context) ([]smtpcatch.SendOutcome, error) {
		return nil, errors.New("engine down")
	}))
	t.Cleanup(failing.Close)
	if p := get(t, failing.URL); !strings.Contains(p, "The recent sends could not be read: engine down") {
		t.Fatalf("page with failing sends %s", p)
	}
}

// get answers the body of a GET of url, failing the test unless it is 200.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

func TestParse(t *testing.T) {
	t.Parallel()
	raw := "From: a@example.com\r\nTo: b@example.com\r\nSubject: =?UTF-8?B?w6l0w6k=?=\r\nMessage-ID: <x@y>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=outer\r\n\r\n" +
		"--outer\r\nContent-Type: multipart/alternative; boundary=inner\r\n\r\n" +
		"--inner\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nsoft=\r\n break =C3=A9\r\n" +
		"--inner\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\nPHA+aGk8\r\nL3A+\r\n" +
		"--inner--\r\n--outer\r\nContent-Type: application/pdf\r\n\r\n%PDF\r\n--outer--\r\n"
	p, err := smtpcatch.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "été" || p.MessageID != "<x@y>" || p.Text != "soft break é" || p.HTML != "<p>hi</p>" {
		t.Fatalf("parsed %+v", p)
	}
	if _, err := smtpcatch.Parse([]byte("no header")); err == nil {
		t.Fatal("Parse of garbage succeeded")
	}
}

// A client that drops its connection with an error (a reset, mid-command or mid-DATA)
// is logged to Config.ErrorLog, discarded when nil: the zero Config (the dev catcher's)
// must not crash the process then, and the server keeps serving.
func TestCatcherSurvivesBrokenClients(t *testing.T) {
	t.Parallel()
	c := start(t, smtpcatch.Config{})
	for _, script := range []string{
		"",
		"EHLO x\r\n",
		"EHLO x\r\nMAIL FROM:<a@example.com>\r\nRCPT TO:<b@example.com>\r\nDATA\r\nSubject: cut\r\n\r\npartial",
		"EHLO x\r\nSTARTTLS\r\n",
		strings.Repeat("x", 4096) + "\r\n",
	} {
		conn, err := net.Dial("tcp", c.Addr())
		if err != nil {
			t.Fatal(err)
		}
		// The greeting: the server's session for this connection runs, so the reset
		// below fails one of its reads (whatever it has read of the script by then).
		if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte(script))
		_ = conn.(*net.TCPConn).SetLinger(0) // close with RST: the server's read fails
		_ = conn.Close()
	}
	// A crash on a broken session panics the test binary whenever it happens; a send
	// that works proves the server still serves.
	if err := send(t, c, 1, ""); err != nil {
		t.Fatal(err)
	}
	if c.Received() != 1 {
		t.Fatalf("received %d", c.Received())
	}
}

// KeepNone (the bench's sink) keeps and decodes nothing but counts every message and
// hands OnMessage the envelope, the raw message and its header, before the DATA reply.
func TestCatcherKeepNoneCountsAndReports(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []smtpcatch.Message
	c := start(t, smtpcatch.Config{MaxMessages: smtpcatch.KeepNone, OnMessage: func(m smtpcatch.Message) {
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}})
	for i := 1; i <= 3; i++ {
		if err := send(t, c, i, "<p>x</p>"); err != nil {
			t.Fatal(err)
		}
		// OnMessage ran before the reply, so before Send returned.
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n != i {
			t.Fatalf("after send %d: OnMessage called %d times", i, n)
		}
	}
	if c.Received() != 3 || len(c.Messages()) != 0 {
		t.Fatalf("received %d, kept %d", c.Received(), len(c.Messages()))
	}
	for i, m := range got {
		if m.ID != uint64(i+1) || m.From != "dev@inbox.test" || m.Header.Get("Subject") != fmt.Sprintf("Subject %d", i+1) ||
			len(m.Raw) == 0 || m.Text != "" || m.HTML != "" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
}

func TestCatcherImplicitTLSNeedsAConfig(t *testing.T) {
	t.Parallel()
	c := smtpcatch.New(smtpcatch.Config{ImplicitTLS: true})
	if err := c.Listen("127.0.0.1:0"); err == nil {
		_ = c.Close()
		t.Fatal("Listen with ImplicitTLS and no TLSConfig succeeded")
	}
}

// Close right after Listen (a gateway whose start failed after its catcher listened)
// frees the address: it used to race the serving goroutine, which registered the
// listener with the server only once it ran, so a Close before that closed nothing and
// the catcher went on accepting on the address. Serve on a caller's listener likewise
// returns after Close, whenever Close came.
func TestCloseRightAfterListenFreesTheAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for i := range 200 {
		c := smtpcatch.New(smtpcatch.Config{})
		if err := c.Listen(addr); err != nil {
			t.Fatalf("listen %d on the address the catcher before it closed: %v", i, err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	for i := range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c := smtpcatch.New(smtpcatch.Config{})
		done := make(chan error, 1)
		if i%2 == 0 {
			_ = c.Close()
		}
		go func() { done <- c.Serve(l) }()
		if i%2 == 1 {
			_ = c.Close()
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Serve %d did not return after Close", i)
		}
	}
}
