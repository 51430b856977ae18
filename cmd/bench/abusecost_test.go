package main

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/rest"
)

// TestTwilioPayloadsReachTheSignatureCheck: a hostile form that net/url refuses (over its
// 10,000 parameters) or a request the server refuses (over its head or body limit) would
// be answered cheaply on any gateway, and the attack would measure nothing.
func TestTwilioPayloadsReachTheSignatureCheck(t *testing.T) {
	for _, size := range []int{0, 64 << 10, callbackBodyBytes} {
		form := twilioForm(size)
		vals, err := url.ParseQuery(form)
		if err != nil {
			t.Fatalf("twilioForm(%d) does not parse: %v", size, err)
		}
		if vals.Get("MessageStatus") != "delivered" {
			t.Errorf("twilioForm(%d) lost Twilio's own fields", size)
		}
		if size == 0 {
			continue
		}
		if len(form) > size || len(form) < size*9/10 {
			t.Errorf("twilioForm(%d) is %d bytes, want just under %d", size, len(form), size)
		}
		if n := strings.Count(form, "&") + 1; size == callbackBodyBytes && n != twilioMaxFields {
			t.Errorf("twilioForm(%d) has %d fields, want %d (the most net/url parses)", size, n, twilioMaxFields)
		}
	}
	if callbackBodyBytes > rest.MaxCallbackBytes {
		t.Errorf("the hostile body (%d bytes) is over the callback routes' limit (%d): a 413, not a signature check", callbackBodyBytes, rest.MaxCallbackBytes)
	}
	for _, q := range []int{0, callbackQueryBytes} {
		u := twilioURL(q)
		if !strings.HasPrefix(u, twilioPath+"?ref=") || len(u) < q {
			t.Errorf("twilioURL(%d) = %.80q... (%d bytes)", q, u, len(u))
		}
		// The request line and a few headers must fit in net/http's limit of a head.
		if len(u)+4096 > http.DefaultMaxHeaderBytes {
			t.Errorf("twilioURL(%d) is %d bytes: over the server's head limit", q, len(u))
		}
	}
	sig := twilioSignature()["X-Twilio-Signature"]
	if b, err := base64.StdEncoding.DecodeString(sig); err != nil || len(b) != 20 {
		t.Errorf("signature %q is not base64 of an HMAC-SHA1", sig)
	}
}

// TestSendgridForgeryIsCheckedInFull: the forged batch is valid JSON under the body limit,
// its signature is well-formed (it verifies with the forger's key) and does not verify
// with the key the gateway is given.
func TestSendgridForgeryIsCheckedInFull(t *testing.T) {
	k, err := newCallbackSecrets()
	if err != nil {
		t.Fatal(err)
	}
	body := sendgridBatch(callbackBodyBytes)
	if !json.Valid([]byte(body)) || len(body) > callbackBodyBytes || len(body) < callbackBodyBytes*9/10 {
		t.Fatalf("batch: valid %v, %d bytes", json.Valid([]byte(body)), len(body))
	}
	h := k.sendgridSignature(body)()
	sig, ts := h[eventwebhook.VerificationHTTPHeader], h[eventwebhook.TimestampHTTPHeader]
	if ok, err := eventwebhook.VerifySignature(&k.forger.PublicKey, []byte(body), sig, ts); err != nil || !ok {
		t.Errorf("the forged signature is not well-formed: %v %v", ok, err)
	}
	der, err := base64.StdEncoding.DecodeString(k.sendgridKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := eventwebhook.VerifySignature(pub.(*ecdsa.PublicKey), []byte(body), sig, ts); ok {
		t.Error("the forged signature verifies with the gateway's key")
	}
	var env []string
	for _, kv := range k.env() {
		env = append(env, strings.SplitN(kv, "=", 2)[0])
	}
	if strings.Join(env, ",") != "INBOX_TWILIO_AUTH_TOKEN,INBOX_PUBLIC_URL,INBOX_SENDGRID_WEBHOOK_KEY" {
		t.Errorf("env sets %v", env)
	}
}

// TestTemplatePayloadsAreStored: the locale attack's template, the range bombs and the
// sends are within every size limit the gateway has for them, so the attacks reach the
// parser and the renderer rather than a 413.
func TestTemplatePayloadsAreStored(t *testing.T) {
	part := localePart()
	if len(part) > inbox.MaxTemplatePartBytes || len(part) < inbox.MaxTemplatePartBytes*9/10 {
		t.Errorf("locale part: %d bytes, want just under %d", len(part), inbox.MaxTemplatePartBytes)
	}
	if 2*len(part) > inbox.MaxTemplateBytes {
		t.Errorf("locale template: two parts of %d bytes are over a version's %d", len(part), inbox.MaxTemplateBytes)
	}
	for _, body := range []string{templateBody("en", part, part), templateBody("de", part, part), templateBody("en", rangeInt64, ""),
		templateBody("en", range20M, ""), templateBody("en", rangeData, "")} {
		if len(body) > rest.MaxTemplateBytes {
			t.Errorf("PUT body of %d bytes is over %d", len(body), rest.MaxTemplateBytes)
		}
		var in struct {
			Locale, Title, Body string
			Email               *struct{ Subject, Text string }
		}
		if err := json.Unmarshal([]byte(body), &in); err != nil || in.Locale == "" || in.Title == "" || in.Body == "" {
			t.Errorf("PUT body %.80q: %v", body, err)
		}
	}
	send := sendBody(tplLocales, localeUsers(), `{"e":""}`)
	var req struct {
		Recipients []string
		Template   string
		Data       map[string]any
	}
	if err := json.Unmarshal([]byte(send), &req); err != nil || len(req.Recipients) != localeRecipients || req.Template != tplLocales || req.Data["e"] != "" {
		t.Errorf("send body %.200q: %v", send, err)
	}
	if len(send) > rest.MaxSendBytes {
		t.Errorf("send body of %d bytes is over %d", len(send), rest.MaxSendBytes)
	}
}

// TestJudgeCost: issue 16's goals fail for a request over a CPU-second, one still busy at
// the bound, one killed at the cap, growth over 64 MiB with a token, and (refusals) any
// answer that is not a 4xx with a code.
func TestJudgeCost(t *testing.T) {
	outcomes := func(m map[string]int) abuseOutcome {
		n := 0
		for _, v := range m {
			n += v
		}
		return abuseOutcome{Requests: n, Outcomes: m}
	}
	refused := outcomes(map[string]int{"401 UNAUTHENTICATED": 1})
	for _, c := range []struct {
		name                         string
		r                            AttackResult
		tokenless                    bool
		wantCPU, wantGrowth, want4xx *bool
	}{
		{name: "cheap refusal", r: AttackResult{CPUOneSeconds: 0.2, GrowthOneMiB: 3, One: refused}, tokenless: true, wantCPU: ptr(true), want4xx: ptr(true)},
		{name: "over a CPU-second", r: AttackResult{CPUOneSeconds: 1.5, One: refused}, tokenless: true, wantCPU: ptr(false), want4xx: ptr(true)},
		{name: "still busy", r: AttackResult{CPUOneSeconds: 0.5, CPUBusy: true, One: refused}, tokenless: true, wantCPU: ptr(false), want4xx: ptr(true)},
		{name: "killed", r: AttackResult{CPUOneSeconds: 0.5, Capped: true, GrowthOneMiB: 2000, One: outcomes(map[string]int{"error: EOF": 1})},
			wantCPU: ptr(false), wantGrowth: ptr(false), want4xx: ptr(false)},
		{name: "accepted", r: AttackResult{CPUOneSeconds: 0.1, GrowthOneMiB: 10, One: outcomes(map[string]int{"200 ok": 1})}, wantCPU: ptr(true), wantGrowth: ptr(true), want4xx: ptr(false)},
		{name: "no code", r: AttackResult{One: outcomes(map[string]int{"400 ?": 1})}, wantCPU: ptr(true), wantGrowth: ptr(true), want4xx: ptr(false)},
		{name: "timeout", r: AttackResult{One: outcomes(map[string]int{"error: timeout": 1})}, wantCPU: ptr(true), wantGrowth: ptr(true), want4xx: ptr(false)},
		{name: "growth over 64 MiB", r: AttackResult{GrowthOneMiB: 65, One: refused}, wantCPU: ptr(true), wantGrowth: ptr(false), want4xx: ptr(true)},
	} {
		r := c.r
		judgeCost(&r, abuseCase{tokenless: c.tokenless, refuse: true})
		for _, g := range []struct {
			what      string
			got, want *bool
		}{{"CPU", r.GoalCPU, c.wantCPU}, {"growth", r.GoalGrowth64, c.wantGrowth}, {"4xx", r.GoalRefused, c.want4xx}} {
			if (g.got == nil) != (g.want == nil) || (g.got != nil && *g.got != *g.want) {
				t.Errorf("%s: goal %s = %v, want %v", c.name, g.what, show(g.got), show(g.want))
			}
		}
	}
}

func ptr(b bool) *bool { return &b }

func show(b *bool) string {
	if b == nil {
		return "not judged"
	}
	return yes(*b)
}
